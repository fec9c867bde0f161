"""Benchmark: one operator running ten Kafka clusters, against one cluster.

Ten single-node Kafka clusters run as local processes; each is a KafkaCluster resource in one namespace, and the
operator (a real process beside a real kube-apiserver) reaches each through its own address. First one
KafkaCluster is applied with TOPICS_EACH Topic resources (4 partitions each), then the nine others with as many
each, all at once; a step ends when every topic exists in its own cluster with its own configuration. The
baseline, in the same run and on the same brokers: as many other topics in each cluster sent with create_topics,
every cluster at once (one thread each), checked the same way (then deleted). Once every Topic is Ready and
nothing changes: the topic pass's mean duration (the operator's histogram, every cluster's passes), RSS, idle CPU
and the operator's API writes (Topics and Events), as in test_topics_at_scale.py.
Each cluster pass finds no pod (no kubelet runs them here) and looks again every 5 s: idle CPU includes
them (e2e/bench/test_clusters.py measures ten clusters on real pods).
KRAFTY_BENCH_TOPICS_EACH changes the Topics per cluster (500: 5,000 Topics and 20,000 partitions at ten).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from operator_process import (
    CALM_SECONDS,
    PARTITIONS,
    Operator,
    apply_topics,
    calm,
    configured,
    direct_batch,
    ready_resources,
    running_operator,
    topics,
)

from krafty.clients.connection import Connection
from krafty.clients.kafka_admin import KafkaAdmin
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.bench_size import sized
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

CLUSTERS = sized(10, 2)
TOPICS_EACH = int(os.environ.get("KRAFTY_BENCH_TOPICS_EACH", sized("500", "10")))
NAMESPACE = "clusters"

pytestmark = pytest.mark.bench


def cluster_name(i: int) -> str:
    return f"kafka-{i}"


@pytest.fixture(scope="module")
def kafkas(local_kafka_module) -> list[LocalKafkaCluster]:
    return [local_kafka_module(Layout.combined(1), heap="384m") for _ in range(CLUSTERS)]


@pytest.fixture(scope="module")
def operator(apiserver: LocalApiServer, kafkas: list[LocalKafkaCluster], tmp_path_factory) -> Iterator[Operator]:
    addresses = {f"{NAMESPACE}/{cluster_name(i)}": kafka.bootstrap_servers for i, kafka in enumerate(kafkas)}
    with running_operator(apiserver, NAMESPACE, addresses,
                          tmp_path_factory.mktemp("operator") / "operator.log") as running:
        yield running


def apply_clusters(apiserver: LocalApiServer, clusters: range) -> dict[int, dict[str, str]]:
    """Each of these KafkaClusters and its TOPICS_EACH Topic resources, applied at once; their topics by cluster."""
    for i in clusters:
        apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
                         "metadata": {"name": cluster_name(i), "namespace": NAMESPACE},
                         "spec": {"brokers": {"replicas": 1}, "controllers": {"replicas": 1},
                                  "topicDefaults": {"replicationFactor": 1, "minInsyncReplicas": 1}}})
    wanted = {i: topics(f"managed-{i}", 0, TOPICS_EACH) for i in clusters}
    for i, names in wanted.items():
        apply_topics(apiserver, NAMESPACE, cluster_name(i), names)
    return wanted


def all_configured(admins: dict[int, KafkaAdmin], wanted: dict[int, dict[str, str]]) -> int:
    return sum(configured(admins[i], names) for i, names in wanted.items())


def test_one_operator_with_ten_clusters_against_direct_create_topics_batches_on_each(apiserver, kafkas, operator):
    admins = {i: KafkaAdmin(Connection(kafka.bootstrap_servers)) for i, kafka in enumerate(kafkas)}
    rows = []
    for clusters in (range(1), range(1, CLUSTERS)):
        added = len(clusters) * TOPICS_EACH
        # The operator: the KafkaClusters of this step and their Topic resources, applied at once
        began, writes = time.monotonic(), operator.writes()
        wanted = apply_clusters(apiserver, clusters)
        wait_for(lambda wanted=wanted: all_configured(admins, wanted), lambda n, added=added: n == added, 1800,
                 f"{added} managed topics configured", interval=2)
        through_operator = time.monotonic() - began
        # The baseline: as many other topics in each of these clusters, every cluster's batch at once
        with ThreadPoolExecutor(len(clusters)) as pool:
            direct = max(pool.map(lambda i: direct_batch(admins[i], topics(f"direct-{i}", 0, TOPICS_EACH)),
                                  clusters))
        total = clusters.stop * TOPICS_EACH
        wait_for(lambda: ready_resources(apiserver, NAMESPACE), lambda n, total=total: n == total, 900,
                 f"{total} Topic resources Ready", interval=5)
        writes_each = (operator.writes() - writes) / added
        calm_writes = operator.writes()
        pass_seconds, millicores, rss = calm(operator)
        calm_writes = operator.writes() - calm_writes
        rows.append([str(clusters.stop), str(total), str(total * PARTITIONS), str(added), f"{through_operator:.1f}",
                     f"{added / through_operator:.1f}", f"{direct:.1f}", f"{added / direct:.1f}",
                     f"{direct / through_operator:.2f}", f"{writes_each:.1f}", f"{pass_seconds:.2f}",
                     f"{calm_writes:.0f}", f"{rss:.0f}", f"{millicores:.1f}"])
    assert operator.proc.poll() is None, "the operator died during the benchmark"
    report_table(f"One operator, one then {CLUSTERS} single-node clusters of {TOPICS_EACH} Topics each "
                 f"({PARTITIONS} partitions), against direct create_topics batches on each cluster at once; "
                 f"then calm for {CALM_SECONDS} s",
                 ["clusters", "topics", "partitions", "added", "operator (s)", "topics/s", "direct (s)", "topics/s",
                  "ratio", "API writes/Topic", "calm pass (s)", "calm writes", "RSS (MiB)", "idle CPU (mc)"], rows)
