"""server.properties rendering and the restart hash."""

from __future__ import annotations

from dataclasses import replace

from krafty.model.context import ClusterContext
from krafty.model.kafka_configs import catalog
from krafty.naming import Pool
from krafty.render.kafka_config import dynamic_broker_config, node_properties, restart_hash
from krafty.render.workloads import statefulset

from ...conftest import context, example


def spec_with(**changes):
    spec = example("kafkacluster-dedicated.yaml")["spec"]
    for path, value in changes.items():
        target = spec
        *parents, leaf = path.split("__")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return spec


def test_combined_voter_is_broker_and_controller(combined_ctx: ClusterContext):
    props = node_properties(combined_ctx, Pool.BROKER, 1)
    assert props["node.id"] == "1"
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAIN://:9092,REPLICATION://:9091,CONTROLLER://:9093"
    host = "small-broker-1.small-brokers.kafka.svc.cluster.local"
    assert props["advertised.listeners"] == f"PLAIN://{host}:9092,REPLICATION://{host}:9091,CONTROLLER://{host}:9093"
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert props["controller.quorum.bootstrap.servers"] == ",".join(
        f"small-broker-{i}.small-brokers.kafka.svc.cluster.local:9093" for i in range(3))
    assert props["log.dirs"] == "/var/lib/kafka/data/kafka-logs"


def test_combined_non_voter_is_only_a_broker():
    ctx = context({"brokers": {"replicas": 5}, "controllers": {"mode": "combined", "replicas": 3}})
    props = node_properties(ctx, Pool.BROKER, 4)
    assert props["process.roles"] == "broker"
    assert "CONTROLLER://" not in props["listeners"]
    assert props["controller.quorum.bootstrap.servers"].count(":9093") == 3


def test_dedicated_controller_has_no_broker_settings(dedicated_ctx: ClusterContext):
    props = node_properties(dedicated_ctx, Pool.CONTROLLER, 2)
    assert props["node.id"] == "1002"
    assert props["process.roles"] == "controller"
    assert props["listeners"] == "CONTROLLER://:9093"
    assert "controller.quorum.auto.join.enable" not in props  # the operator adds voters itself
    assert "inter.broker.listener.name" not in props
    assert "num.io.threads" not in props  # broker overrides are for brokers


def test_broker_gets_defaults_and_overrides(dedicated_ctx: ClusterContext):
    props = node_properties(dedicated_ctx, Pool.BROKER, 0)
    assert props["process.roles"] == "broker"
    assert props["default.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"
    assert props["num.partitions"] == "6"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["log.retention.ms"] == "259200000"
    assert props["auto.leader.rebalance.enable"] == "false"  # leaderBalance.mode Operator


def test_kafka_leader_balance_mode_configures_kafka():
    ctx = context(spec_with(leaderBalance__mode="Kafka", leaderBalance__checkIntervalSeconds=20))
    props = node_properties(ctx, Pool.BROKER, 0)
    assert props["auto.leader.rebalance.enable"] == "true"
    assert props["leader.imbalance.check.interval.seconds"] == "20"


def test_dynamic_config_lists_only_runtime_keys(dedicated_ctx: ClusterContext):
    dynamic = dynamic_broker_config(dedicated_ctx)
    assert dynamic["log.retention.ms"] == "259200000"
    assert dynamic["num.io.threads"] == "8"
    assert "node.id" not in dynamic
    assert "auto.create.topics.enable" not in dynamic  # read-only in Kafka


def test_restart_hash_ignores_scaling_and_runtime_changes(dedicated_ctx: ClusterContext):
    base = restart_hash(dedicated_ctx, Pool.BROKER)
    assert restart_hash(context(spec_with(brokers__replicas=5)), Pool.BROKER) == base
    assert restart_hash(context(spec_with(brokers__config={"log.retention.ms": 1000, "num.io.threads": 8,
                                                            "compression.type": "producer"})), Pool.BROKER) == base
    # Growing the dedicated quorum changes only the discovery list: no broker restart.
    assert restart_hash(context(spec_with(controllers__replicas=5)), Pool.BROKER) == base


def test_restart_hash_changes_with_static_config(dedicated_ctx: ClusterContext):
    base = restart_hash(dedicated_ctx, Pool.BROKER)
    changed = spec_with(brokers__config={"log.retention.ms": 259200000, "num.io.threads": 8,
                                         "compression.type": "producer", "socket.send.buffer.bytes": 1048576})
    assert restart_hash(context(changed), Pool.BROKER) != base
    assert restart_hash(context(changed), Pool.CONTROLLER) == restart_hash(dedicated_ctx, Pool.CONTROLLER)


def test_every_rendered_key_is_a_kafka_config(dedicated_ctx: ClusterContext, combined_ctx: ClusterContext):
    # The catalog comes from the pinned Kafka: a key it does not know would be ignored (or refused) by Kafka.
    # Two shapes of key are Kafka's by construction: listener.name.<listener>.<key> (a key for one listener)
    # and config.providers.<provider>.class (the class of a provider config.providers names).
    # A SASL mechanism's own keys are listener.name.<listener>.<mechanism>.<key>. The authorizer's own keys are
    # read by the authorizer, which Kafka hands the whole configuration.
    brokers = {*catalog().broker, "super.users", "allow.everyone.if.no.acl.found"}
    for ctx in (dedicated_ctx, combined_ctx, context(spec_with(leaderBalance__mode="Kafka")),
                context(spec_with(listeners=AUTHENTICATED, authorization={"enabled": True}))):
        for pool in ctx.pools():
            props = node_properties(ctx, pool, 0)
            listeners = {item.split("://")[0].lower() for item in props["listeners"].split(",")}
            providers = set(props.get("config.providers", "").split(","))
            mechanisms = {m.lower() for key, value in props.items() if key.endswith(".sasl.enabled.mechanisms")
                          for m in value.split(",")}
            unknown = {key for key in props if key not in brokers
                       and not (key.startswith("listener.name.") and _listener_key(key, listeners, mechanisms))
                       and not (key.startswith("config.providers.") and key.split(".")[2] in providers
                                and key.endswith(".class"))}
            assert not unknown, f"{pool}: {unknown}"


def _listener_key(key: str, listeners: set[str], mechanisms: set[str]) -> bool:
    parts = key.split(".")
    rest = parts[4:] if parts[3] in mechanisms else parts[3:]
    return parts[2] in listeners and ".".join(rest) in catalog().broker


AUTHENTICATED = [{"name": "plain", "port": 9092}, {"name": "mtls", "port": 9094, "tls": True, "authentication": "tls"},
                 {"name": "scram", "port": 9095, "tls": True, "authentication": "scram-sha-512"},
                 {"name": "scramplain", "port": 9096, "authentication": "scram-sha-512"}]


def test_each_client_listener_gets_its_protocol_and_authentication(dedicated_ctx: ClusterContext):
    ctx = replace(context(spec_with(listeners=AUTHENTICATED)), clients_ca="digest-1")
    props = node_properties(ctx, Pool.BROKER, 0)
    assert props["listener.security.protocol.map"] == (
        "PLAIN:PLAINTEXT,MTLS:SSL,SCRAM:SASL_SSL,SCRAMPLAIN:SASL_PLAINTEXT,REPLICATION:SSL,CONTROLLER:SSL")
    # A certificate of the clients CA (and only of it) on the tls-authenticated listener; its CN is the principal
    assert props["listener.name.mtls.ssl.client.auth"] == "required"
    assert props["listener.name.mtls.ssl.truststore.certificates"] == "${dir:/etc/kafka/tls/clients-trust:ca.crt}"
    assert props["listener.name.mtls.ssl.principal.mapping.rules"] == "RULE:^CN=([^,]+).*$/$1/,DEFAULT"
    # SCRAM-SHA-512 on both SASL listeners, with or without TLS
    for name in ("scram", "scramplain"):
        assert props[f"listener.name.{name}.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
        assert props[f"listener.name.{name}.scram-sha-512.sasl.jaas.config"] == (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    # Nothing of it on a listener without authentication, nor on controllers, nor any change to replication
    assert not [key for key in props if key.startswith("listener.name.plain.")]
    assert not [key for key in node_properties(ctx, Pool.CONTROLLER, 0) if "mtls" in key or "scram" in key]
    assert props["listener.name.replication.ssl.client.auth"] == "required"
    assert "listener.name.replication.ssl.truststore.certificates" not in props
    # The brokers mount the clients CA bundle and carry its digest (a renewal rolls them); controllers do not
    broker = statefulset(ctx, Pool.BROKER)["spec"]["template"]
    assert {"name": "clients-trust", "secret": {"secretName": "demo-clients-ca-cert", "defaultMode": 0o440}} in (
        broker["spec"]["volumes"])
    assert {"name": "clients-trust", "mountPath": "/etc/kafka/tls/clients-trust", "readOnly": True} in (
        broker["spec"]["containers"][0]["volumeMounts"])
    assert broker["metadata"]["annotations"]["kafka.krafty.io/clients-ca"] == "digest-1"
    controller = statefulset(ctx, Pool.CONTROLLER)["spec"]["template"]
    assert "clients-trust" not in {v["name"] for v in controller["spec"]["volumes"]}
    assert "kafka.krafty.io/clients-ca" not in controller["metadata"]["annotations"]


def test_without_a_tls_authenticated_listener_the_brokers_neither_mount_nor_roll_for_the_clients_ca(
        dedicated_ctx: ClusterContext):
    before = statefulset(dedicated_ctx, Pool.BROKER)
    assert statefulset(replace(dedicated_ctx, clients_ca="renewed"), Pool.BROKER) == before
    assert "clients-trust" not in {v["name"] for v in before["spec"]["template"]["spec"]["volumes"]}


def test_a_setting_from_a_secret_names_its_file_and_the_brokers_mount_the_secret():
    # Given a broker setting taken from a Secret
    ctx = replace(context(spec_with(brokers__configFromSecrets={"sasl.jaas.config": {"name": "jaas", "key": "cfg"}})),
                  config_secrets="digest-1")
    # Then server.properties names the mounted file, never the value, and Kafka reads it at start only
    props = node_properties(ctx, Pool.BROKER, 0)
    assert props["sasl.jaas.config"] == "${dir:/etc/kafka/secrets/jaas:cfg}"
    assert "sasl.jaas.config" not in dynamic_broker_config(ctx)
    # And the brokers' pods mount that Secret, and carry the digest of what it held (a change rolls them)
    pod = statefulset(ctx, Pool.BROKER)["spec"]["template"]
    assert {"name": "config-secret-0", "secret": {"secretName": "jaas", "defaultMode": 0o440}} in pod["spec"]["volumes"]
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "config-secret-0", "mountPath": "/etc/kafka/secrets/jaas", "readOnly": True} in mounts
    assert pod["metadata"]["annotations"]["kafka.krafty.io/config-secrets"] == "digest-1"


def test_authorization_makes_the_nodes_and_the_operator_super_users_on_every_node():
    # Given authorization on, with one more super user
    ctx = context(spec_with(authorization={"enabled": True, "superUsers": ["admin"]}), name="prod")
    for pool in ctx.pools():
        props = node_properties(ctx, pool, 0)
        # Then every node (controllers too) runs the StandardAuthorizer, denying what no ACL allows
        assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        assert props["allow.everyone.if.no.acl.found"] == "false"
        # And the nodes and the operator are super users by their certificates' subjects, beside the user named
        assert props["super.users"] == "User:CN=prod-kafka;User:CN=krafty-operator;User:admin"
    # And turning it on is a restart-only change (it rolls the nodes)
    plain = context(spec_with(), name="prod")
    assert "authorizer.class.name" not in node_properties(plain, Pool.BROKER, 0)
    assert restart_hash(plain, Pool.BROKER) != restart_hash(ctx, Pool.BROKER)
