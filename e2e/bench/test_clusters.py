"""Benchmark: one operator running ten Kafka clusters on real pods, against the same operator running one.

Each cluster is one combined node (a small broker that is its own controller) with TOPICS_EACH Topics. First one
cluster, then nine more, each applied with its Topics at once: the time until every cluster is Ready and settled
and every Topic Ready; then, after SETTLE_SECONDS, the leading replica's RSS and its CPU over WINDOW_SECONDS with
nothing changing (read from /proc in its pod, as in test_footprint.py), and the mean duration of each kind of pass
over that window (its own histogram). The one-cluster row is the baseline: the ratio is the idle CPU per cluster
against it.
"""

from __future__ import annotations

import os
import re
import time

import pytest
from footprint import operator_pods, proc_stats

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    OPERATOR_NAMESPACE,
    KafkaClusterHandle,
    cluster_spec,
    leader_metrics_text,
    topic_resource,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

pytestmark = [pytest.mark.bench, pytest.mark.timeout(3600)]
CLUSTERS = 10
TOPICS_EACH = 20
SETTLE_SECONDS = float(os.environ.get("KRAFTY_BENCH_SETTLE", "180"))
WINDOW_SECONDS = 120.0
PASSES = ("cluster", "topics", "lag")


def handle(kube: KubeCluster, i: int) -> KafkaClusterHandle:
    return KafkaClusterHandle(kube, f"many-{i}")


def apply_clusters(kube: KubeCluster, clusters: range) -> None:
    """These clusters, each with its Topics, applied at once (KafkaCluster and Topics together)."""
    for i in clusters:
        handle(kube, i).apply(cluster_spec("combined", brokers=1, controllers=1,
                                           topicDefaults={"replicationFactor": 1, "minInsyncReplicas": 1}))
        kube.apply([topic_resource(f"many-{i}-{t:02d}", f"many-{i}", partitions=1, replicas=1)
                    for t in range(TOPICS_EACH)])


def ready_topics(kube: KubeCluster) -> int:
    return sum(1 for t in kube.kubectl_json("get", "topics", "-n", NAMESPACE)["items"]
               if t["metadata"]["name"].startswith("many-") and any(
                   c["type"] == "Ready" and c["status"] == "True"
                   for c in (t.get("status") or {}).get("conditions", [])))


def pass_seconds(kube: KubeCluster) -> dict[str, tuple[float, float]]:
    """(seconds in passes, passes) so far of each kind, from the leader's histogram."""
    text = leader_metrics_text(kube)
    found = {}
    for kind in PASSES:
        pairs = dict(re.findall(rf'^krafty_reconcile_duration_seconds_(sum|count)\{{kind="{kind}"\}} (\S+)$', text,
                                re.M))
        found[kind] = (float(pairs.get("sum", 0)), float(pairs.get("count", 0)))
    return found


def test_one_operator_with_ten_clusters_against_one(operator: KubeCluster):
    rows, baseline = [], None
    try:
        for clusters in (range(1), range(1, CLUSTERS)):
            began = time.monotonic()
            apply_clusters(operator, clusters)
            for i in clusters:
                handle(operator, i).wait_ready(900)
            total = clusters.stop * TOPICS_EACH
            wait_for(lambda: ready_topics(operator), lambda n, total=total: n == total, 600,
                     f"{total} Topics Ready", interval=5)
            converged = time.monotonic() - began
            time.sleep(SETTLE_SECONDS)
            leader, _ = operator_pods(operator)
            target = ["-n", OPERATOR_NAMESPACE, leader]
            (_, cpu), passes = proc_stats(operator, target), pass_seconds(operator)
            time.sleep(WINDOW_SECONDS)
            (rss, cpu_after), passes_after = proc_stats(operator, target), pass_seconds(operator)
            assert operator_pods(operator)[0] == leader, "the leader changed while measuring"
            millicores = 1000 * (cpu_after - cpu) / WINDOW_SECONDS
            each = millicores / clusters.stop
            baseline = baseline or each
            means = [(passes_after[k][0] - passes[k][0]) / max(1.0, passes_after[k][1] - passes[k][1])
                     for k in PASSES]
            rows.append([str(clusters.stop), str(total), f"{converged:.0f}", f"{rss:.0f}", f"{millicores:.1f}",
                         f"{each:.1f}", f"{each / baseline:.2f}", *(f"{m:.3f}" for m in means)])
    finally:
        operator.kubectl("delete", "topics", "-n", NAMESPACE, "--wait=false", "--ignore-not-found",
                         *[f"many-{i}-{t:02d}" for i in range(CLUSTERS) for t in range(TOPICS_EACH)])
        operator.kubectl("delete", "kafkaclusters", "-n", NAMESPACE, "--wait=false", "--ignore-not-found",
                         *[f"many-{i}" for i in range(CLUSTERS)])
    report_table(f"One operator, one then {CLUSTERS} clusters (one combined node and {TOPICS_EACH} Topics each) on "
                 f"real pods; idle over {WINDOW_SECONDS:.0f} s after {SETTLE_SECONDS:.0f} s",
                 ["clusters", "Topics", "apply → all Ready (s)", "leader RSS (MiB)", "idle CPU (mc)",
                  "mc per cluster", "ratio", *(f"{k} pass (s)" for k in PASSES)], rows)
