"""Benchmark: what TLS costs producers. kafka-producer-perf-test writes the same records to the same topic of
one cluster through its plaintext listener and through its TLS listener, alternating, three runs each after a
warm-up round on both sides: as fast as it can (throughput, and the latency of a saturated cluster), and at a
steady 2,000 records/s (the latency an application at a moderate rate sees)."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from krafty_testkit.k8s_kafka import (
    BROKER_IMAGE,
    NAMESPACE,
    KafkaClusterHandle,
    cluster_spec,
    delete_topics,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table

pytestmark = pytest.mark.bench
RUNS = 3
RECORDS = 200_000
STEADY_RATE = 2_000
STEADY_RECORDS = 30_000
POD = "perf-client"
# The perf tool's summary: "N records sent, R records/sec (M MB/sec), A ms avg latency, ..., P ms 99th, ..."
SUMMARY = re.compile(r"records sent, ([\d.]+) records/sec .* ([\d.]+) ms 99th")


def perf_pod(kube: KubeCluster) -> list[str]:
    """A pod with Kafka's tools (the broker image, idle); returns the kubectl exec prefix into it."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": NAMESPACE},
           "spec": {"containers": [{"name": "tools", "image": BROKER_IMAGE, "imagePullPolicy": "IfNotPresent",
                                    "command": ["sleep", "infinity"]}],
                    "terminationGracePeriodSeconds": 1}}
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    kube.kubectl("wait", "--for=condition=Ready", f"pod/{POD}", "-n", NAMESPACE, "--timeout=180s", timeout=200)
    return ["exec", "-i", "-n", NAMESPACE, POD, "--"]


def produce(kube: KubeCluster, into: list[str], address: str, properties: str, rate: int = -1) -> tuple[float, float]:
    """One run, as fast as it can (rate -1) or at a steady rate: (records/s, p99 latency in ms)."""
    records = RECORDS if rate < 0 else STEADY_RECORDS
    out = kube.kubectl(*into, "kafka-producer-perf-test.sh", "--topic", "perf", "--num-records", str(records),
                       "--record-size", "512", "--throughput", str(rate), "--command-config", properties,
                       "--producer-props", f"bootstrap.servers={address}", "acks=all", "linger.ms=5", timeout=600)
    found = SUMMARY.search(out.strip().splitlines()[-1])
    assert found, out[-500:]
    return float(found.group(1)), float(found.group(2))


def test_producer_throughput_and_latency_through_tls_against_plaintext(operator: KubeCluster):
    handle = KafkaClusterHandle(operator, "bench-tls")
    handle.apply(cluster_spec("combined", listeners=[{"name": "plain", "port": 9092},
                                                     {"name": "tls", "port": 9094, "tls": True}]))
    try:
        handle.wait_ready(900)
        operator.apply([topic_resource("perf", "bench-tls", partitions=6, replicas=3,
                                       config={"min.insync.replicas": "2"})])
        wait_topic_ready(operator, "perf")
        into = perf_pod(operator)
        ca = json.loads(operator.kubectl("get", "secret", "bench-tls-cluster-ca-cert", "-n", NAMESPACE, "-o", "json"))
        operator.kubectl(*into, "sh", "-c", "base64 -d > /tmp/ca.crt", stdin=ca["data"]["ca.crt"])
        operator.kubectl(*into, "sh", "-c", "cat > /tmp/tls.properties",
                         stdin="security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/tmp/ca.crt\n")
        operator.kubectl(*into, "sh", "-c", "cat > /tmp/plain.properties", stdin="security.protocol=PLAINTEXT\n")
        sides = {"plaintext (9092)": (f"{handle.name}-kafka-bootstrap:9092", "/tmp/plain.properties"),
                 "TLS (9094)": (f"{handle.name}-kafka-bootstrap:9094", "/tmp/tls.properties")}
        results: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        steady: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        for round_ in range(RUNS + 1):  # alternating, so that both sides meet the same machine
            for side, (address, properties) in sides.items():
                measured = produce(operator, into, address, properties)
                at_rate = produce(operator, into, address, properties, STEADY_RATE)
                if round_:  # the first round warms the brokers' JIT up on both sides and is not counted
                    results[side].append(measured)
                    steady[side].append(at_rate)
    finally:
        operator.kubectl("delete", "pod", POD, "-n", NAMESPACE, "--ignore-not-found", "--wait=false")
        delete_topics(operator, "perf")
        handle.delete(timeout=600)
    rate = {side: statistics.median(r for r, _ in runs) for side, runs in results.items()}
    p99 = {side: statistics.median(p for _, p in runs) for side, runs in results.items()}
    steady_p99 = {side: statistics.median(p for _, p in runs) for side, runs in steady.items()}
    plain, tls = sides
    report_table(f"Producer through TLS and plaintext, one cluster (512 B records, acks=all, median of {RUNS} "
                 f"alternating runs after a warm-up round)",
                 ["listener", f"records/s ({RECORDS:,} as fast as it can)", "p99 (ms) saturated",
                  f"p99 (ms) at {STEADY_RATE:,}/s", "runs (records/s)"],
                 [[side, f"{rate[side]:,.0f}", f"{p99[side]:.0f}", f"{steady_p99[side]:.0f}",
                   ", ".join(f"{r:,.0f}" for r, _ in results[side])] for side in sides]
                 + [["TLS / plaintext", f"{rate[tls] / rate[plain]:.2f}", f"{p99[tls] / p99[plain]:.2f}",
                     f"{steady_p99[tls] / steady_p99[plain]:.2f}", ""]])
    assert all(r > 0 for runs in (*results.values(), *steady.values()) for r, _ in runs)
