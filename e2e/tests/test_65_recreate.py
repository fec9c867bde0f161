"""A KafkaCluster deleted and created again with the same name, on real pods: with its volumes it finds its
data and its id together; with its volumes deleted (the id's ConfigMap left behind) it starts clean."""

from __future__ import annotations

import pytest

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    cluster_spec,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for

NAME = "reborn"
SELECTOR = f"kafka.krafty.io/cluster={NAME}"


def gone(handle: KafkaClusterHandle, kube: KubeCluster) -> None:
    """Deletes the KafkaCluster and waits until its pods are gone (volumes and the id's ConfigMap stay)."""
    handle.delete()
    wait_for(lambda: kube.kubectl("get", "pods", "-n", NAMESPACE, "-l", SELECTOR, "-o", "name"),
             lambda out: not out.strip(), 300, f"the pods of {NAME} gone")


# About two minutes: in the full set since the Spark operator's stream joined CI, to keep CI within the hour
@pytest.mark.full
def test_a_cluster_created_again_finds_its_data_or_starts_clean(small: KafkaClusterHandle, client: ClientPod,
                                                                operator: KubeCluster):
    small.delete()  # its CPU goes to this cluster (the Helm test after this one deletes it too)
    handle = KafkaClusterHandle(operator, NAME)
    spec = cluster_spec("combined", restarts={"gracePeriodSeconds": 30})
    try:
        handle.apply(spec)
        handle.wait_ready(900)
        first_id = handle.status()["clusterId"]
        # Given records in a topic the Topic resource leaves in Kafka when it goes
        operator.apply([topic_resource("kept", NAME, partitions=1, replicas=3, deletionPolicy="Retain")])
        wait_topic_ready(operator, "kept")
        assert client.cli("produce", handle.bootstrap, "kept", "--count", "200",
                          "--acked", "/tmp/acked-kept.json")["acked"] == 200
        operator.kubectl("delete", "topic", "kept", "-n", NAMESPACE, "--wait=true", timeout=120)
        # When the KafkaCluster is deleted (its volumes stay) and created again with the same name
        gone(handle, operator)
        handle.apply(spec)
        handle.wait_ready(900)
        # Then it runs with its id and its data
        assert handle.status()["clusterId"] == first_id
        verified = client.verify(handle.bootstrap, "kept")
        assert (verified["consumed"], verified["lost"]) == (200, 0)
        # When it is deleted again with its volumes (the ConfigMap with the old id is left behind)
        gone(handle, operator)
        operator.kubectl("delete", "pvc", "-n", NAMESPACE, "-l", SELECTOR, "--wait=true", timeout=300)
        handle.apply(spec)
        # Then it starts clean: a new id, a new quorum, no old topic
        handle.wait_ready(900)
        assert handle.status()["clusterId"] != first_id
        assert any(first_id in e["message"] for e in handle.events("ClusterIdRenewed"))
        assert "kept" not in handle.kafka_tool("kafka-topics.sh", "--list").split()
    finally:
        handle.delete()
        operator.kubectl("delete", "pvc,configmap", "-n", NAMESPACE, "-l", SELECTOR, "--ignore-not-found",
                         "--wait=false")
