"""Topic resources on real pods: kubectl apply to Kafka, config changes, growth, drift, Retain."""

from __future__ import annotations

from krafty import naming
from krafty_testkit.k8s_kafka import NAMESPACE, ClientPod, KafkaClusterHandle, topic_resource, wait_topic_ready
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for


def describe_config(small: KafkaClusterHandle, topic: str) -> str:
    return small.kafka_tool("kafka-configs.sh", "--entity-type", "topics", "--entity-name", topic, "--describe")


def test_topic_lifecycle_through_kubectl(small: KafkaClusterHandle, client: ClientPod, operator: KubeCluster):
    # Given a Topic applied with kubectl, Then it is a real topic
    operator.apply([topic_resource("orders", "small", partitions=2, replicas=3,
                                   config={"min.insync.replicas": 2, "retention.ms": 86400000})])
    status = wait_topic_ready(operator, "orders")
    assert (status["partitions"], status["replicationFactor"]) == (2, 3)
    described = small.kafka_tool("kafka-topics.sh", "--describe", "--topic", "orders")
    assert "PartitionCount: 2" in described
    assert "ReplicationFactor: 3" in described
    # And it holds the operator's own finalizer, not kopf's default that every kopf operator shares
    wait_for(lambda: operator.kubectl_json("get", "topic", "orders", "-n", NAMESPACE)["metadata"].get("finalizers"),
             lambda found: found == [naming.TOPIC_FINALIZER], 30, "the Topic's finalizer")
    # And kopf, which only watches, wrote nothing on it (no diff-base or progress annotations)
    annotations = operator.kubectl_json("get", "topic", "orders", "-n", NAMESPACE)["metadata"].get("annotations")
    assert [key for key in annotations or {} if key.startswith(naming.GROUP) or "kopf" in key] == []
    # When its config changes, Then kafka-configs --describe shows it
    operator.apply([topic_resource("orders", "small", partitions=2, replicas=3,
                                   config={"min.insync.replicas": 2, "retention.ms": 3600000})])
    wait_for(lambda: describe_config(small, "orders"), lambda out: "retention.ms=3600000" in out, 120,
             "the new retention in kafka-configs")
    # When partitions grow, Then a consumer sees them
    operator.apply([topic_resource("orders", "small", partitions=5, replicas=3,
                                   config={"min.insync.replicas": 2, "retention.ms": 3600000})])
    wait_for(lambda: client.cli("partitions", small.bootstrap, "orders"), lambda r: r["partitions"] == 5, 120,
             "a consumer to see 5 partitions")


def test_drift_made_with_the_kafka_cli_is_reverted(small: KafkaClusterHandle, operator: KubeCluster):
    operator.apply([topic_resource("drifty", "small", partitions=1, replicas=3, config={"retention.ms": 86400000})])
    wait_topic_ready(operator, "drifty")
    small.kafka_tool("kafka-configs.sh", "--entity-type", "topics", "--entity-name", "drifty", "--alter",
                     "--add-config", "retention.ms=1000")
    # Within one check interval (30 s) the operator notices, reports and reverts it
    wait_for(lambda: describe_config(small, "drifty"), lambda out: "retention.ms=86400000" in out, 120,
             "the drift reverted")
    reasons = [e["reason"] for e in operator.kubectl_json("get", "events", "-n", NAMESPACE, "--field-selector",
                                                           "involvedObject.name=drifty")["items"]]
    assert "DriftReverted" in reasons


def test_retain_keeps_the_topic_and_its_data(small: KafkaClusterHandle, client: ClientPod, operator: KubeCluster):
    operator.apply([topic_resource("kept", "small", partitions=1, replicas=3, deletionPolicy="Retain")])
    wait_topic_ready(operator, "kept")
    report = client.cli("produce", small.bootstrap, "kept", "--count", "500", "--acked", "/tmp/acked-kept.json")
    assert report["acked"] == 500
    operator.kubectl("delete", "topic", "kept", "-n", NAMESPACE, "--wait=true", timeout=120)
    assert "kept" in small.kafka_tool("kafka-topics.sh", "--list").split()
    verified = client.verify(small.bootstrap, "kept")
    assert (verified["consumed"], verified["lost"]) == (500, 0)


def test_delete_policy_removes_the_topic(small: KafkaClusterHandle, operator: KubeCluster):
    operator.apply([topic_resource("transient", "small", partitions=1, replicas=3)])
    wait_topic_ready(operator, "transient")
    operator.kubectl("delete", "topic", "transient", "-n", NAMESPACE, "--wait=true", timeout=120)
    wait_for(lambda: small.kafka_tool("kafka-topics.sh", "--list").split(), lambda t: "transient" not in t, 60,
             "the Kafka topic deleted")
