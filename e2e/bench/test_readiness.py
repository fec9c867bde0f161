"""Benchmark: apply to "all brokers Ready and a first acks=all write acknowledged",
through the operator against a hand-written StatefulSet with the same image and config.

The baseline's manifests are the operator's own rendering of the same spec (ConfigMap, Services,
StatefulSet), applied once with kubectl into a namespace the operator does not watch, so the
difference is what the operator adds: its passes, identity, quorum formation, readiness gating.
"""

from __future__ import annotations

import time

import pytest
from raw import RAW, fresh_namespace, raw_manifests

from krafty_testkit.k8s_kafka import (
    ClientPod,
    KafkaClusterHandle,
    cluster_spec,
    delete_topics,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

pytestmark = pytest.mark.bench


def first_write(client: ClientPod, bootstrap: str, topic: str) -> None:
    wait_for(lambda: client.cli("produce", bootstrap, topic, "--count", "1", "--acked", f"/tmp/acked-{topic}.json"),
             lambda r: r["acked"] == 1, 300, f"a first acks=all write to {topic}", interval=1)


def test_time_to_ready_and_first_write(operator: KubeCluster, client: ClientPod):
    spec = cluster_spec("combined")
    # Through the operator: KafkaCluster and Topic applied together
    began = time.monotonic()
    handle = KafkaClusterHandle(operator, "bench-ready")
    handle.apply(spec)
    operator.apply([topic_resource("first-write", "bench-ready", partitions=3, replicas=3)])
    handle.wait_ready(900)
    ready_operator = time.monotonic() - began
    wait_topic_ready(operator, "first-write", timeout=300)
    first_write(client, handle.bootstrap, "first-write")
    write_operator = time.monotonic() - began
    delete_topics(operator, "first-write")
    handle.delete()
    # Hand-written: the same manifests applied directly, the topic made with Kafka's tool
    fresh_namespace(operator)
    try:
        began = time.monotonic()
        operator.apply(raw_manifests(spec))
        # The StatefulSet rolls OnDelete (the operator restarts pods itself), so `rollout status` cannot wait on it.
        operator.kubectl("wait", f"--for=jsonpath={{.status.readyReplicas}}={spec['brokers']['replicas']}",
                         "statefulset/raw-broker", "-n", RAW, "--timeout=900s", timeout=960)
        ready_raw = time.monotonic() - began
        operator.kubectl("exec", "-n", RAW, "raw-broker-0", "--", "kafka-topics.sh", "--bootstrap-server",
                         "localhost:9092", "--create", "--topic", "first-write", "--partitions", "3",
                         "--replication-factor", "3", timeout=120)
        first_write(client, f"raw-kafka-bootstrap.{RAW}.svc.cluster.local:9092", "first-write")
        write_raw = time.monotonic() - began
    finally:
        operator.kubectl("delete", "namespace", RAW, "--wait=false")
    report_table("Apply to ready (3 combined nodes, same image and config)",
                 ["path", "all brokers Ready (s)", "first acks=all write (s)"],
                 [["KafkaCluster through the operator", f"{ready_operator:.1f}", f"{write_operator:.1f}"],
                  ["hand-written StatefulSet (kubectl apply)", f"{ready_raw:.1f}", f"{write_raw:.1f}"]])
