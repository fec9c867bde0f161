"""The operator's own clients over mutual TLS, against real Kafka whose every listener demands a client
certificate (as the controller and replication listeners of a krafty cluster do): the Admin client, the lag
reader and the KRaft wire client, each with the same Connection; and each turned away without the right
certificate or trust."""

from __future__ import annotations

import datetime
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from krafty.clients import kraft
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kafka_admin import KafkaAdmin
from krafty.clients.lag import LagReader
from krafty.pki import signing
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.traffic import client_config
from krafty_testkit.waiting import wait_for


@pytest.fixture(scope="module")
def cluster(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(3), tls=True)


def test_admin_lag_and_wire_clients_work_over_mutual_tls(cluster: LocalKafkaCluster):
    connection = cluster.connection
    assert connection.tls is not None
    # The Admin client: brokers, a topic, its partitions
    admin = KafkaAdmin(connection)
    assert admin.registered_brokers() == {0, 1, 2}
    assert admin.create_topics([("tls-topic", 3, 3, {})]) == {"tls-topic": None}
    assert admin.groups_reading({"tls-topic"}) == {"tls-topic": []}  # (librdkafka's handle)
    # The KRaft wire client: the quorum from the controllers, every broker from the brokers
    assert {v.node_id for v in kraft.describe_quorum(connection.to(cluster.controller_bootstrap_servers)).voters} == {
        0, 1, 2}
    assert {b.node_id for b in kraft.describe_brokers(connection)} == {0, 1, 2}
    # The lag reader: a group's committed offsets against the log end
    producer = Producer(client_config(cluster.bootstrap_servers, **connection.librdkafka()))
    for i in range(30):
        producer.produce("tls-topic", key=str(i).encode(), value=b"v")
    assert producer.flush(30) == 0
    reader = Consumer(client_config(cluster.bootstrap_servers, **{"group.id": "tls-readers"},
                                    **connection.librdkafka()))
    # (retried: right after start the group coordinator may still be loading the offsets topic)
    wait_for(lambda: reader.commit(offsets=[TopicPartition("tls-topic", 0, 4)], asynchronous=False),
             lambda _: True, 60, "offsets committed")
    reader.close()
    read = wait_for(LagReader(connection).read, lambda r: "tls-readers" in r.committed, 30, "the group listed")
    assert read.committed["tls-readers"][("tls-topic", 0)] == 4
    log = read.logs[("tls-topic", 0)]
    assert log is not None
    assert log.end > 0


@pytest.mark.parametrize("wrong", ["a client certificate of another CA", "trust in another CA"])
def test_clients_without_the_right_certificate_or_trust_are_turned_away(cluster: LocalKafkaCluster, wrong: str):
    good = cluster.connection
    assert good.tls is not None
    now, day = datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1)
    other = signing.new_ca("another CA", now, day)
    if wrong == "trust in another CA":
        bad = Connection(good.servers, replace(good.tls, ca=other.cert))
    else:
        stranger = signing.issue(other, "krafty-operator", [], now, day)
        bad = Connection(good.servers, replace(good.tls, cert=stranger.cert, key=stranger.key))
    with pytest.raises(KafkaUnavailable):
        kraft.describe_quorum(bad.to(cluster.controller_bootstrap_servers), timeout=5)
    with pytest.raises(KafkaUnavailable):
        KafkaAdmin(bad).registered_brokers()
    with pytest.raises(KafkaUnavailable):
        KafkaAdmin(bad).create_topics([("refused", 1, 1, {})])
    with pytest.raises(KafkaUnavailable):  # (librdkafka's handle)
        KafkaAdmin(bad).groups_reading({"refused"})
