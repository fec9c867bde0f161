"""Benchmark: apply to "all brokers Ready and a first acks=all write acknowledged",
through the operator against a hand-written StatefulSet with the same image and config.

The baseline's manifests are the operator's own rendering of the same spec (ConfigMap, Services,
StatefulSet), applied once with kubectl into a namespace the operator does not watch, so the
difference is what the operator adds: its passes, identity, quorum formation, readiness gating.
The two paths run in ROUNDS rounds, their order alternating.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

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


ROUNDS = 2  # each path once first, once second: neither always meets the cluster the other just left


def through_operator(operator: KubeCluster, client: ClientPod, spec: dict[str, Any]) -> tuple[float, float]:
    """KafkaCluster and Topic applied together: seconds to every broker Ready, and to a first acks=all write."""
    began = time.monotonic()
    handle = KafkaClusterHandle(operator, "bench-ready")
    handle.apply(spec)
    operator.apply([topic_resource("first-write", "bench-ready", partitions=3, replicas=3)])
    handle.wait_ready(900)
    ready = time.monotonic() - began
    wait_topic_ready(operator, "first-write", timeout=300)
    first_write(client, handle.bootstrap, "first-write")
    written = time.monotonic() - began
    delete_topics(operator, "first-write")
    handle.delete()
    return ready, written


def hand_written(operator: KubeCluster, client: ClientPod, spec: dict[str, Any]) -> tuple[float, float]:
    """The same manifests applied directly, the topic made with Kafka's tool: the same two figures."""
    fresh_namespace(operator)
    try:
        began = time.monotonic()
        operator.apply(raw_manifests(spec))
        # The StatefulSet rolls OnDelete (the operator restarts pods itself), so `rollout status` cannot wait on it.
        operator.kubectl("wait", f"--for=jsonpath={{.status.readyReplicas}}={spec['brokers']['replicas']}",
                         "statefulset/raw-broker", "-n", RAW, "--timeout=900s", timeout=960)
        ready = time.monotonic() - began
        operator.kubectl("exec", "-n", RAW, "raw-broker-0", "--", "kafka-topics.sh", "--bootstrap-server",
                         "localhost:9092", "--create", "--topic", "first-write", "--partitions", "3",
                         "--replication-factor", "3", timeout=120)
        first_write(client, f"raw-kafka-bootstrap.{RAW}.svc.cluster.local:9092", "first-write")
        return ready, time.monotonic() - began
    finally:
        operator.kubectl("delete", "namespace", RAW, "--wait=false")


def test_time_to_ready_and_first_write(operator: KubeCluster, client: ClientPod):
    spec = cluster_spec("combined")
    paths = [("KafkaCluster through the operator", through_operator),
             ("hand-written StatefulSet (kubectl apply)", hand_written)]
    taken: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in paths}
    for round_ in range(ROUNDS):
        for name, path in paths if round_ % 2 == 0 else paths[::-1]:
            taken[name].append(path(operator, client, spec))
    rows = [[name, f"{statistics.median(r for r, _ in runs):.1f}", f"{statistics.median(w for _, w in runs):.1f}",
             " / ".join(f"{r:.1f}, {w:.1f}" for r, w in runs)] for name, runs in taken.items()]
    ours, theirs = (taken[name] for name, _ in paths)
    rows.append(["operator / hand-written",
                 f"{statistics.median(r for r, _ in ours) / statistics.median(r for r, _ in theirs):.2f}x",
                 f"{statistics.median(w for _, w in ours) / statistics.median(w for _, w in theirs):.2f}x", ""])
    report_table(f"Apply to ready (3 combined nodes, same image and config; {ROUNDS} rounds, the paths' order "
                 "alternating; medians)",
                 ["path", "all brokers Ready (s)", "first acks=all write (s)", "each round (Ready, write)"], rows)
