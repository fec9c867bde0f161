"""The committed offsets behind the lag metrics, against real brokers that restart."""

from __future__ import annotations

import re
import threading

from confluent_kafka import Consumer, Producer

from krafty.clients.kafka_admin import KafkaAdmin
from krafty_testkit import kafka_admin
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster


def consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    while seen < count:
        message = consumer.poll(1.0)
        seen += message is not None and not message.error()
    consumer.commit(asynchronous=False)
    consumer.close()


def tool_offsets(cluster: LocalKafkaCluster, group: str) -> dict[tuple[str, int], int]:
    out = cluster.tool("kafka-consumer-groups.sh", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                       "--group", group).stdout
    return {(m[0], int(m[1])): int(m[2]) for m in re.findall(rf"^{group}\s+(\S+)\s+(\d+)\s+(\d+)", out, re.M)}


def test_committed_offsets_match_kafka_and_survive_coordinators_restarting(local_kafka):
    cluster = local_kafka(Layout.dedicated(1, 3))
    kafka_admin.create_topic(cluster.admin(), "lagged", 3, 2)
    kafka_admin.wait_fully_in_sync(cluster.admin(), "lagged")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(300):
        producer.produce("lagged", key=str(i).encode(), value=b"v")
    assert producer.flush(30) == 0
    for group in ("g1", "g2", "g3"):
        consume_and_commit(cluster.bootstrap_servers, group, "lagged", 100)
    admin = KafkaAdmin(cluster.bootstrap_servers)
    # Then the offsets are the ones Kafka's own tool shows
    before = admin.committed_offsets()
    assert {g: before[g] for g in ("g1", "g2", "g3")} == {g: tool_offsets(cluster, g) for g in ("g1", "g2", "g3")}
    # And asking while each broker (so each group coordinator) restarts neither crashes nor loses offsets
    # (librdkafka's ListConsumerGroupOffsets killed the process with SIGSEGV here)
    stop = threading.Event()
    asked = []

    def ask() -> None:
        while not stop.is_set():
            try:
                asked.append(admin.committed_offsets())
            except Exception:  # noqa: BLE001 - a broker being down may fail a call; a crash would end the test
                asked.append({})

    threads = [threading.Thread(target=ask, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for broker in (0, 1, 2):
        cluster.kill_node(broker) if broker == 1 else cluster.stop_node(broker)
        cluster.start_node(broker)
        kafka_admin.wait_fully_in_sync(cluster.admin(), "lagged")
    stop.set()
    for thread in threads:
        thread.join(60)
    assert len(asked) > 3
    assert {g: admin.committed_offsets()[g] for g in ("g1", "g2", "g3")} == {g: before[g] for g in ("g1", "g2", "g3")}
    admin.close()
