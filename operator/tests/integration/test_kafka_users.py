"""The user pass's Kafka client against a real broker with Kafka's StandardAuthorizer, checked against
Kafka's own tools (kafka-acls.sh, kafka-configs.sh)."""

from __future__ import annotations

import pytest

from krafty import naming
from krafty.clients.connection import Connection
from krafty.clients.kafka_users import UserAdmin
from krafty.facts.observed import Acl
from krafty.model.user import AclEffect, AclOperation, AclPatternType, AclResourceType
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.waiting import wait_for


@pytest.fixture(scope="module")
def cluster(local_kafka_module) -> LocalKafkaCluster:
    # (plaintext: every client is User:ANONYMOUS, made a super user so that the tools may change ACLs)
    return local_kafka_module(Layout.combined(1), config={"authorizer.class.name": naming.STANDARD_AUTHORIZER,
                                                          "super.users": "User:ANONYMOUS"})


@pytest.fixture
def admin(cluster: LocalKafkaCluster) -> UserAdmin:
    return UserAdmin(Connection(cluster.bootstrap_servers))


def test_acls_made_by_us_are_what_kafka_acls_lists_and_theirs_are_read_back(cluster, admin):
    # Given two ACLs of alice made through the client, and one of bob made with kafka-acls.sh
    ours = {Acl("User:alice", AclResourceType.TOPIC, "orders", AclPatternType.PREFIX, AclOperation.WRITE,
                AclEffect.ALLOW, "*"),
            Acl("User:alice", AclResourceType.CLUSTER, "kafka-cluster", AclPatternType.LITERAL,
                AclOperation.IDEMPOTENT_WRITE, AclEffect.DENY, "10.0.0.1")}
    assert admin.create_acls(ours) == {}
    cluster.tool("kafka-acls.sh", "--bootstrap-server", cluster.bootstrap_servers, "--add", "--allow-principal",
                 "User:bob", "--operation", "Read", "--group", "billing")
    # When Kafka's tool lists alice's, Then it shows exactly ours
    listed = cluster.tool("kafka-acls.sh", "--bootstrap-server", cluster.bootstrap_servers, "--list",
                          "--principal", "User:alice").stdout
    assert "name=orders, patternType=PREFIXED" in listed
    assert "operation=WRITE, permissionType=ALLOW" in listed
    assert "operation=IDEMPOTENT_WRITE, permissionType=DENY" in listed
    assert "host=10.0.0.1" in listed
    # And the client reads back all three, bob's as Kafka holds it
    bob = Acl("User:bob", AclResourceType.GROUP, "billing", AclPatternType.LITERAL, AclOperation.READ,
              AclEffect.ALLOW, "*")
    assert wait_for(admin.acls, lambda found: found >= ours | {bob}, 30, "the three ACLs") >= ours | {bob}
    # When alice's are deleted, Then bob's stays
    assert admin.delete_acls(ours) == {}
    remaining = wait_for(admin.acls, lambda found: not found & ours, 30, "alice's ACLs gone")
    assert bob in remaining


def test_scram_credentials_are_set_read_and_removed(cluster, admin):
    # Given a credential set through the client
    assert admin.alter_scram({"carol": "first-password"}, []) == {}
    # Then Kafka's tool describes it, and the client sees it
    described = cluster.tool("kafka-configs.sh", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                             "--entity-type", "users", "--entity-name", "carol").stdout
    assert "SCRAM-SHA-512=iterations=8192" in described
    assert "carol" in admin.scram_users()
    # When it is removed, Then it is gone
    assert admin.alter_scram({}, ["carol"]) == {}
    assert "carol" not in wait_for(admin.scram_users, lambda users: "carol" not in users, 30, "carol gone")


def test_quotas_round_trip_through_the_wire_client_and_kafka_refuses_bad_ones(cluster, admin):
    # Given quotas set for dave, validated first
    changes = {"dave": {"producer_byte_rate": 1048576.0, "request_percentage": 50.0}}
    assert admin.alter_quotas(changes, validate_only=True) == {}
    assert "dave" not in admin.quotas()  # validating changed nothing
    assert admin.alter_quotas(changes, validate_only=False) == {}
    # Then Kafka's tool describes them and the client reads them back
    described = cluster.tool("kafka-configs.sh", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                             "--entity-type", "users", "--entity-name", "dave").stdout
    assert "producer_byte_rate=1048576.0" in described
    assert "request_percentage=50.0" in described
    assert wait_for(admin.quotas, lambda q: q.get("dave") == changes["dave"], 30, "dave's quotas")
    # And a quota set with the tool for a user and client id pair is not taken for the user's own
    cluster.tool("kafka-configs.sh", "--bootstrap-server", cluster.bootstrap_servers, "--alter", "--entity-type",
                 "users", "--entity-name", "dave", "--entity-type", "clients", "--entity-name", "app",
                 "--add-config", "consumer_byte_rate=2048")
    assert admin.quotas()["dave"] == changes["dave"]
    # When one is removed, Then only the other is left
    assert admin.alter_quotas({"dave": {"request_percentage": None}}, validate_only=False) == {}
    assert wait_for(admin.quotas, lambda q: q.get("dave") == {"producer_byte_rate": 1048576.0}, 30, "one left")
    # And a key Kafka does not know is refused, by user
    refused = admin.alter_quotas({"erin": {"no_such_quota": 1.0}}, validate_only=True)
    assert set(refused) == {"erin"}
    assert "no_such_quota" in refused["erin"]


def test_a_broker_without_an_authorizer_holds_no_acls_and_refuses_new_ones(local_kafka):
    # Given a broker without an authorizer (why the user pass leaves ACLs alone on such a cluster)
    plain = UserAdmin(Connection(local_kafka(Layout.combined(1)).bootstrap_servers))
    acl = Acl("User:alice", AclResourceType.TOPIC, "orders", AclPatternType.LITERAL, AclOperation.READ,
              AclEffect.ALLOW, "*")
    # When ACLs are listed and one is created, Then none are listed and the creation is refused
    assert plain.acls() == frozenset()
    assert "No Authorizer is configured" in plain.create_acls([acl])[acl]
