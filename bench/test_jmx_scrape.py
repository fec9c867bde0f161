"""Benchmark: what a scrape of a Kafka node's JMX exporter costs the node (the readiness probe scrapes every 5 s,
Prometheus at its own interval), with the broker image's rules against the rules as they were: every request type's
latency histogram read (the rules export five) and each MBean's attributes matched against the rules on every
scrape (no rule cached).

Two single combined nodes as local processes at once, the exporter agent attached as in a pod, each with one topic of
12 partitions written by Kafka's producer perf test and read by a consumer group, warmed by WARM scrapes; then
ROUNDS rounds of SCRAPES scrapes, alternating between the nodes. Per scrape: the node's CPU time (its process, from
/proc) and the wall time. Medians of the rounds. Both must serve the same series.
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

import pytest

from krafty_testkit import procfs
from krafty_testkit.bench_size import sized
from krafty_testkit.kafka_dist import kafka_home
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster, running_cluster
from krafty_testkit.plugin import report_table

pytestmark = pytest.mark.bench
WARM, ROUNDS, SCRAPES = sized((200, 5, 50), (10, 1, 3))
NODE = 0  # the one node of each cluster (combined nodes are numbered from 0)
WAYS = ("the image's rules (now)", "every request histogram, no rule cached (before)")


def rules_before(shipped: str) -> str:
    """The shipped rules as they were: one include for every request type's histogram, no match kept."""
    requests = re.compile(r'  - "kafka\.network:type=RequestMetrics,name=TotalTimeMs,request=\w+"\n')
    wide = '  - "kafka.network:type=RequestMetrics,name=TotalTimeMs,*"\n'
    before = requests.sub("", shipped.replace(requests.search(shipped).group(0), wide, 1))  # type: ignore[union-attr]
    return before.replace("    cache: true\n", "")


def series(text: str) -> set[str]:
    """The series a scrape serves, without their values (the exporter's own scrape figures left out)."""
    return {line.rsplit(" ", 1)[0] for line in text.splitlines()
            if line and not line.startswith(("#", "jmx_scrape_"))}


def load(cluster: LocalKafkaCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    cluster.tool("kafka-topics.sh", "--bootstrap-server", bootstrap, "--create", "--topic", "scraped",
                 "--partitions", "12", "--replication-factor", "1")
    cluster.tool("kafka-producer-perf-test.sh", "--topic", "scraped", "--num-records", "20000", "--record-size", "100",
                 "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all")
    cluster.tool("kafka-console-consumer.sh", "--bootstrap-server", bootstrap, "--topic", "scraped", "--group", "read",
                 "--from-beginning", "--max-messages", "100")


def test_a_scrape_with_the_image_rules_against_every_histogram_read_and_no_match_kept(tmp_path: Path) -> None:
    shipped = kafka_home() / "config" / "jmx-exporter.yaml"
    before = tmp_path / "jmx-exporter-before.yaml"
    before.write_text(rules_before(shipped.read_text()))
    figures: dict[str, dict[str, list[float]]] = {way: {"cpu": [], "wall": []} for way in WAYS}
    with (running_cluster(Layout.combined(1), tmp_path / "now", jmx_exporter=shipped) as now,
          running_cluster(Layout.combined(1), tmp_path / "before", jmx_exporter=before) as then):
        nodes = {WAYS[0]: now, WAYS[1]: then}
        for cluster in nodes.values():
            load(cluster)
            for _ in range(WARM):
                cluster.exporter_text(NODE)
        served = {way: series(cluster.exporter_text(NODE)) for way, cluster in nodes.items()}
        assert served[WAYS[0]] == served[WAYS[1]], served[WAYS[0]] ^ served[WAYS[1]]
        for _ in range(ROUNDS):
            for way, cluster in nodes.items():
                (pid,) = cluster.pids()
                stat = Path(f"/proc/{pid}/stat")
                cpu, wall = procfs.cpu_seconds(stat.read_text()), time.monotonic()
                for _ in range(SCRAPES):
                    cluster.exporter_text(NODE)
                figures[way]["wall"].append((time.monotonic() - wall) / SCRAPES)
                figures[way]["cpu"].append((procfs.cpu_seconds(stat.read_text()) - cpu) / SCRAPES)
    median = {way: {key: statistics.median(values) * 1000 for key, values in figures[way].items()} for way in WAYS}
    baseline = median[WAYS[1]]
    report_table(f"A scrape of a node's JMX exporter ({len(served[WAYS[0]])} series either way; 1 combined node each, "
                 f"{ROUNDS} rounds of {SCRAPES} scrapes, alternating; medians)",
                 ["rules", "node CPU per scrape (ms)", "wall per scrape (ms)", "CPU ratio"],
                 [[way, f"{median[way]['cpu']:.1f}", f"{median[way]['wall']:.1f}",
                   f"{median[way]['cpu'] / baseline['cpu']:.2f}x"] for way in WAYS])
