"""Groups of Kafka 4's protocols on real pods: a share group (KIP-932), a consumer group of the consumer protocol
(KIP-848) and a Kafka Streams application of the Streams protocol (KIP-1071) read a topic; the operator's lag for
each is what Kafka's own tools show, with the group's type, and the Topic's deletion waits while one still reads
it."""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Iterator

import pytest

from krafty_testkit import streams_app
from krafty_testkit.k8s_kafka import (
    BROKER_IMAGE,
    NAMESPACE,
    KafkaClusterHandle,
    leader_metrics_text,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

TOPIC, RECORDS = "readings", 300
SHARE, NEXT_GEN = "pickers", "next-gen"


def operator_lag(kube: KubeCluster, group: str, topic: str = TOPIC) -> tuple[dict[int, float], str | None]:
    """The operator's lag of the group on each partition of the topic, and the type it gives the group."""
    text = leader_metrics_text(kube)
    lag: dict[int, float] = {}
    for line in text.splitlines():
        if line.startswith("krafty_consumergroup_lag{") and f'group="{group}"' in line and f'topic="{topic}"' in line \
                and 'cluster="small"' in line:
            partition = re.search(r'partition="(\d+)"', line)
            assert partition is not None, line
            lag[int(partition[1])] = float(line.rsplit(" ", 1)[1])
    kind = re.search(rf'^krafty_consumergroup_info\{{[^}}]*group="{re.escape(group)}"[^}}]*type="([^"]+)"', text, re.M)
    return lag, kind[1] if kind else None


def tool_lag(small: KafkaClusterHandle, tool: str, group: str, topic: str = TOPIC) -> dict[int, float]:
    """Each partition's lag as Kafka's own describe shows it (kafka-share-groups.sh, kafka-consumer-groups.sh or
    kafka-streams-groups.sh)."""
    offsets = ["--offsets"] if "share" in tool or "streams" in tool else []
    out = small.kafka_tool(tool, "--describe", "--group", group, *offsets)
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    header = next(line.split() for line in out.splitlines() if "PARTITION" in line and "LAG" in line)
    where = {name: header.index(name) for name in ("TOPIC", "PARTITION")}
    where["LAG"] = header.index("LAG" if "LAG" in header else "OFFSET-LAG")  # (kafka-streams-groups.sh's name)
    return {int(row[where["PARTITION"]]): float(row[where["LAG"]]) for row in rows
            if len(row) == len(header) and row[where["TOPIC"]] == topic and row[where["LAG"]] != "-"}


@contextlib.contextmanager
def reading(small: KafkaClusterHandle, name: str, command: str) -> Iterator[None]:
    """A consumer running in broker 1 while the block runs (its process id kept in the pod, and killed after)."""
    pidfile = f"/tmp/{name}.pid"
    small.kube.kubectl("exec", "-n", NAMESPACE, f"{small.name}-broker-1", "-c", "kafka", "--", "sh", "-c",
                       f"nohup {command} >/tmp/{name}.log 2>&1 & echo $! > {pidfile}")
    try:
        yield
    finally:
        small.kube.kubectl("exec", "-n", NAMESPACE, f"{small.name}-broker-1", "-c", "kafka", "--", "sh", "-c",
                           f"kill $(cat {pidfile}) 2>/dev/null; true")


def assigned(small: KafkaClusterHandle, tool: str, group: str) -> bool:
    """A live member of the group holds partitions, as Kafka's tool describes its members (the last column: a
    consumer group's #PARTITIONS, a share group's ASSIGNMENT)."""
    out = small.kafka_tool(tool, "--describe", "--group", group, "--members")
    return any(line.split()[-1] not in ("0", "-") for line in out.splitlines() if line.startswith(f"{group} "))


def deletion_condition(kube: KubeCluster, topic: str = TOPIC) -> dict[str, str]:
    """The Topic's Ready condition ({} once it is gone)."""
    text = kube.kubectl("get", "topic", topic, "-n", NAMESPACE, "--ignore-not-found", "-o", "json")
    found = json.loads(text) if text.strip() else {}
    return next((c for c in (found.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})


def test_share_and_consumer_protocol_groups_are_read_like_kafkas_tools_and_hold_their_topics_deletion(
        small: KafkaClusterHandle, operator: KubeCluster):
    # Given a topic with 300 records, a share group that took 100 of them, and a group of the consumer protocol
    # that read and committed 150
    operator.apply([topic_resource(TOPIC, "small", partitions=3, replicas=3)])
    wait_topic_ready(operator, TOPIC)
    small.kafka_tool("kafka-producer-perf-test.sh", "--topic", TOPIC, "--num-records", str(RECORDS), "--record-size",
                     "100", "--throughput", "-1", "--producer-props", "bootstrap.servers=localhost:9092", "acks=all")
    small.kafka_tool("kafka-configs.sh", "--alter", "--entity-type", "groups", "--entity-name", SHARE, "--add-config",
                     "share.auto.offset.reset=earliest")
    small.kafka_tool("kafka-console-share-consumer.sh", "--topic", TOPIC, "--group", SHARE, "--max-messages", "100",
                     "--timeout-ms", "60000", timeout=180)
    small.kafka_tool("kafka-console-consumer.sh", "--topic", TOPIC, "--group", NEXT_GEN, "--from-beginning",
                     "--max-messages", "150", "--timeout-ms", "60000", "--consumer-property", "group.protocol=consumer",
                     timeout=180)
    rows = []
    for group, tool, kind in ((SHARE, "kafka-share-groups.sh", "share"),
                              (NEXT_GEN, "kafka-consumer-groups.sh", "consumer")):
        # When the operator's lag pass reads them, Then each partition's lag is what Kafka's tool describes
        shown = wait_for(lambda g=group, t=tool: (operator_lag(operator, g), tool_lag(small, t, g)),
                         lambda seen: seen[0][0] and seen[0][0] == seen[1], 180, f"{group}'s lag as {tool} shows it")
        (lag, typed), described = shown
        # And the group is named with its type
        assert typed == kind, typed
        assert 0 < sum(lag.values()) < RECORDS, lag
        rows.append([group, typed, f"{sum(lag.values()):.0f}", f"{sum(described.values()):.0f}"])
    report_table(f"Lag on {TOPIC} ({RECORDS} records): the operator's beside Kafka's tools",
                 ["group", "type", "operator", "Kafka's tool"], rows)

    # Given both groups reading the topic again, live
    share_reader = (f"kafka-console-share-consumer.sh --bootstrap-server localhost:9092 --topic {TOPIC} --group "
                    f"{SHARE} --timeout-ms 600000")
    next_gen_reader = (f"kafka-console-consumer.sh --bootstrap-server localhost:9092 --topic {TOPIC} --group "
                       f"{NEXT_GEN} --timeout-ms 600000 --consumer-property group.protocol=consumer")
    with reading(small, "next-gen", next_gen_reader):
        with reading(small, "share", share_reader):
            for group, tool in ((NEXT_GEN, "kafka-consumer-groups.sh"), (SHARE, "kafka-share-groups.sh")):
                wait_for(lambda g=group, t=tool: assigned(small, t, g), bool, 180, f"{group} reading, live")
            # When the Topic is deleted, Then its deletion waits, naming both groups
            operator.kubectl("delete", "topic", TOPIC, "-n", NAMESPACE, "--wait=false")
            held = wait_for(lambda: deletion_condition(operator),
                            lambda c: c.get("reason") == "DeletionBlocked" and SHARE in c.get("message", "")
                            and NEXT_GEN in c.get("message", ""), 180, "the deletion held by both groups")
            assert TOPIC in small.kafka_tool("kafka-topics.sh", "--list").split()
        # And once the share group's reader stops, it still waits for the other
        wait_for(lambda: deletion_condition(operator),
                 lambda c: c.get("reason") == "DeletionBlocked" and SHARE not in c.get("message", ""), 180,
                 "the deletion held by the consumer group only")
    # And once neither reads, the topic goes
    wait_for(lambda: small.kafka_tool("kafka-topics.sh", "--list").split(), lambda t: TOPIC not in t, 180,
             "the Kafka topic deleted")
    print(f"\nthe deletion was held: {held['message']}")


CLICKS, COPIER = "clicks", "copier"


@contextlib.contextmanager
def streams_pod(small: KafkaClusterHandle, kube: KubeCluster, hold_after: int) -> Iterator[None]:
    """The Streams application in a pod of the broker image (its jar and properties from a ConfigMap), copying
    clicks to clicks-copied and holding after `hold_after` records, while the block runs; deleted after (SIGTERM:
    a clean close)."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": COPIER, "namespace": NAMESPACE},
              "binaryData": {"streams-pipe.jar": base64.b64encode(streams_app.jar().read_bytes()).decode()},
              "data": {"streams.properties": streams_app.properties(COPIER, small.bootstrap,
                                                                    **{"state.dir": "/tmp/state"})}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": COPIER, "namespace": NAMESPACE},
           "spec": {"containers": [{"name": "app", "image": BROKER_IMAGE, "imagePullPolicy": "IfNotPresent",
                                    "command": ["java", "-Xmx128m", "-cp", "/opt/kafka/libs/*:/app/streams-pipe.jar",
                                                streams_app.MAIN, "/app/streams.properties", CLICKS,
                                                f"{CLICKS}-copied", str(hold_after)],
                                    "resources": {"requests": {"cpu": "50m", "memory": "256Mi"}},
                                    "volumeMounts": [{"name": "app", "mountPath": "/app"}]}],
                    "volumes": [{"name": "app", "configMap": {"name": COPIER}}],
                    "terminationGracePeriodSeconds": 60}}
    kube.apply([config, pod])
    kube.kubectl("wait", "--for=condition=Ready", f"pod/{COPIER}", "-n", NAMESPACE, "--timeout=180s", timeout=200)
    try:
        yield
    finally:
        kube.kubectl("delete", "pod", COPIER, "-n", NAMESPACE, "--wait=true", timeout=120)
        kube.kubectl("delete", "configmap", COPIER, "-n", NAMESPACE)


def produce(small: KafkaClusterHandle, topic: str, records: int) -> None:
    """Records spread over every partition in turn (so that the group has committed on each of them)."""
    small.kafka_tool("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", str(records), "--record-size",
                     "100", "--throughput", "-1", "--producer-props", "bootstrap.servers=localhost:9092", "acks=all",
                     "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner")


@pytest.mark.full  # about 100 s: CI reads a Streams application's group on real Kafka in test_kafka_clients.py
def test_a_streams_application_is_read_like_kafkas_tool_and_holds_its_topics_deletion(
        small: KafkaClusterHandle, operator: KubeCluster):
    # Given a Kafka Streams application (the Streams protocol, KIP-1071) in a pod that copied a topic's 100 records
    # and holds on the next one, a live member (stuck on a record), when 200 more arrive
    operator.apply([topic_resource(name, "small", partitions=3, replicas=3) for name in (CLICKS, f"{CLICKS}-copied")])
    for name in (CLICKS, f"{CLICKS}-copied"):
        wait_topic_ready(operator, name)
    produce(small, CLICKS, 100)
    with streams_pod(small, operator, hold_after=100):
        wait_for(lambda: tool_lag(small, "kafka-streams-groups.sh", COPIER, CLICKS),
                 lambda lag: len(lag) == 3 and sum(lag.values()) == 0, 240, "the first 100 records copied")
        produce(small, CLICKS, 200)
        # Then the operator's lag of its group is the 200 records, partition by partition as
        # kafka-streams-groups.sh shows it, and the group has the streams type
        (lag, typed), described = wait_for(
            lambda: (operator_lag(operator, COPIER, CLICKS),
                     tool_lag(small, "kafka-streams-groups.sh", COPIER, CLICKS)),
            lambda seen: sum(seen[0][0].values()) == 200 and seen[0][0] == seen[1], 180,
            "the Streams group's lag as its tool shows it")
        assert typed == "streams", typed
        report_table(f"Lag on {CLICKS}: the operator's beside kafka-streams-groups.sh",
                     ["group", "type", "operator", "Kafka's tool"],
                     [[COPIER, typed, f"{sum(lag.values()):.0f}", f"{sum(described.values()):.0f}"]])
        # When the Topic is deleted, Then its deletion waits, naming the group
        operator.kubectl("delete", "topic", CLICKS, "-n", NAMESPACE, "--wait=false")
        held = wait_for(lambda: deletion_condition(operator, CLICKS),
                        lambda c: c.get("reason") == "DeletionBlocked" and COPIER in c.get("message", ""), 180,
                        "the deletion held by the Streams group")
        assert CLICKS in small.kafka_tool("kafka-topics.sh", "--list").split()
    # And once it stops, the topic goes
    wait_for(lambda: small.kafka_tool("kafka-topics.sh", "--list").split(), lambda t: CLICKS not in t, 180,
             "the Kafka topic deleted")
    operator.kubectl("delete", "topic", f"{CLICKS}-copied", "-n", NAMESPACE, "--wait=false")
    print(f"\nthe deletion was held: {held['message']}")
