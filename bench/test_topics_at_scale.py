"""Benchmark: the operator with 500, 2,000 and 5,000 Topic resources (4 partitions each: 20,000 at the top).

The real operator process (kopf, the scheduler, batched Admin calls, a status and an Event per resource) runs
against a real kube-apiserver and three real brokers; it reaches Kafka through KRAFTY_KAFKA_BOOTSTRAP because pod
DNS names do not resolve outside a cluster. Each step applies the Topic resources that bring the count to its size,
all at once, and ends when every one of them exists in Kafka with its own configuration; the baseline, in the same
run and on the same Kafka, is as many other topics with the same settings sent at once with Admin create_topics, in
as few requests as Kafka accepts (10,000 metadata records each, the split the operator makes too), checked the same
way (then deleted). Once every resource is Ready and nothing changes: the topic pass's mean duration (the operator's
own histogram over three passes), its RSS and its CPU while idle. The operator's own writes to the API server
(Topics and Events, from its request counter) are counted per Topic added (until all are Ready) and while calm.
Last, 1,000 consumer groups (each with an offset committed, none running) beside the largest step: the lag pass's
mean duration (it reads lag.maxGroups of them, 200), the topic pass's, RSS and idle CPU again.
KRAFTY_BENCH_TOPIC_STEPS changes the sizes (e.g. "500" for a quick run).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import NewTopic

from krafty.clients.connection import Connection
from krafty.clients.kafka_admin import KafkaAdmin
from krafty.decide.topics import by_request
from krafty_testkit import procfs
from krafty_testkit.apiserver import LocalApiServer, free_port
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

STEPS = [int(n) for n in os.environ.get("KRAFTY_BENCH_TOPIC_STEPS", "500,2000,5000").split(",")]
PARTITIONS = 4
REPLICAS = 1  # the operator's work grows with topics and partitions; replicas only load the brokers of one machine
RECORDS_EACH = 1 + PARTITIONS + 1  # Kafka's metadata records to create one (the topic, its partitions, retention.ms)
APPLY_CHUNK = 500  # Topic resources per kubectl apply
CALM_SECONDS = 95  # three topic passes (one every 30 s when nothing changes)
GROUPS = 1000  # consumer groups committed beside the largest step
NAMESPACE = "bench"
CRDS = Path(__file__).resolve().parents[1] / "crds"

pytestmark = pytest.mark.bench


def retention(i: int) -> str:
    return str(3_600_000 + i)


def configured(admin: KafkaAdmin, names: dict[str, str]) -> int:
    """How many of the topics (name -> its retention.ms) exist with that override."""
    existing = set(admin.client.list_topics(timeout=60).topics)
    present = [n for n in names if n in existing]
    overrides = admin.topic_overrides(present) if present else {}
    return sum(1 for n in present if overrides.get(n, {}).get("retention.ms") == names[n])


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(3), heap="1g")


class Operator:
    """The operator as a process: its metrics endpoint and its own CPU time and RSS from /proc."""

    def __init__(self, proc: subprocess.Popen[bytes], metrics_port: int) -> None:
        self.proc = proc
        self.metrics_port = metrics_port

    def cpu_seconds(self) -> float:
        return procfs.cpu_seconds(Path(f"/proc/{self.proc.pid}/stat").read_text())

    def rss_mib(self) -> float:
        return procfs.rss_mib(Path(f"/proc/{self.proc.pid}/status").read_text())

    def _metrics(self) -> str:
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()

    def passes(self, kind: str = "topics") -> tuple[float, float]:
        """(seconds in passes of this kind, passes) since the start, from the operator's own histogram."""
        found = dict(re.findall(rf'^krafty_reconcile_duration_seconds_(sum|count)\{{kind="{kind}"\}} (\S+)$',
                                self._metrics(), re.M))
        return float(found.get("sum", 0)), float(found.get("count", 0))

    def writes(self) -> float:
        """API writes (not reads) to Topics and Events since the start, from the operator's own counter."""
        return sum(float(n) for verb, n in re.findall(
            r'^krafty_kube_requests_total\{kind="(?:Topic|Event)",verb="([^"]+)"\} (\S+)$', self._metrics(), re.M)
            if verb not in ("get", "list"))


@pytest.fixture(scope="module")
def operator(apiserver: LocalApiServer, kafka: LocalKafkaCluster, tmp_path_factory) -> Iterator[Operator]:
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", NAMESPACE)
    apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
                     "metadata": {"name": "bench", "namespace": NAMESPACE},
                     "spec": {"brokers": {"replicas": 3}, "topicDefaults": {"minInsyncReplicas": 1}}})
    log = (tmp_path_factory.mktemp("operator") / "operator.log").open("w")
    port = free_port()
    env = {**os.environ, "KUBECONFIG": str(apiserver.kubeconfig), "KRAFTY_KAFKA_BOOTSTRAP": kafka.bootstrap_servers}
    proc = subprocess.Popen([sys.executable, "-m", "krafty.main", "--namespace", NAMESPACE, "--metrics-port",
                             str(port), "--health-port", "0"], env=env, stdout=log, stderr=subprocess.STDOUT)
    running = Operator(proc, port)
    wait_for(running.writes, lambda _: True, 60, "the operator's metrics endpoint", interval=1)
    yield running
    proc.terminate()
    proc.wait(30)


def apply_topics(apiserver: LocalApiServer, first: int, last: int) -> dict[str, str]:
    names = {f"managed-{i:05d}": retention(i) for i in range(first, last)}
    docs = [{"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "Topic",
             "metadata": {"name": name, "namespace": NAMESPACE},
             "spec": {"clusterRef": {"name": "bench"}, "partitions": PARTITIONS, "replicas": REPLICAS,
                      "config": {"retention.ms": int(value)}}} for name, value in names.items()]
    for start in range(0, len(docs), APPLY_CHUNK):
        apiserver.kubectl("apply", "--server-side", "-f", "-",
                          input="\n---\n".join(json.dumps(d) for d in docs[start:start + APPLY_CHUNK]))
    return names


def direct_batch(admin: KafkaAdmin, first: int, last: int) -> float:
    """Seconds for one create_topics batch of these topics until all are configured; they are deleted after."""
    names = {f"direct-{i:05d}": retention(i) for i in range(first, last)}
    began = time.monotonic()
    futures = [future for request in by_request(dict.fromkeys(names, RECORDS_EACH))
               for future in admin.client.create_topics(
                   [NewTopic(n, PARTITIONS, REPLICAS, config={"retention.ms": names[n]}) for n in request],
                   operation_timeout=300, request_timeout=300).values()]
    for future in futures:
        future.result(timeout=600)
    wait_for(lambda: configured(admin, names), lambda n: n == len(names), 900, "all direct topics configured",
             interval=1)
    seconds = time.monotonic() - began
    for request in by_request(dict.fromkeys(names, RECORDS_EACH)):  # (deletions have a limit too)
        for future in admin.client.delete_topics(request, operation_timeout=300, request_timeout=300).values():
            future.result(timeout=600)
    wait_for(lambda: set(names) & set(admin.client.list_topics(timeout=60).topics), lambda left: not left, 600,
             "the direct topics gone")
    return seconds


def ready_resources(apiserver: LocalApiServer) -> int:
    out = apiserver.kubectl("get", "topics", "-n", NAMESPACE, "-o",
                            'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}')
    return out.stdout.split().count("True")


def calm(operator: Operator, kind: str = "topics") -> tuple[float, float, float]:
    """(mean seconds of a pass of this kind, idle millicores, RSS MiB) over CALM_SECONDS with nothing changing."""
    spent, passes = operator.passes(kind)
    cpu, began = operator.cpu_seconds(), time.monotonic()
    time.sleep(CALM_SECONDS)
    spent_after, passes_after = operator.passes(kind)
    millicores = 1000 * (operator.cpu_seconds() - cpu) / (time.monotonic() - began)
    assert passes_after > passes, f"no {kind} pass ran while calm"
    return (spent_after - spent) / (passes_after - passes), millicores, operator.rss_mib()


def commit_groups(admin: KafkaAdmin, topics: list[str]) -> None:
    """GROUPS consumer groups, each with a committed offset on one partition of one of these topics (none running)."""
    for i in range(GROUPS):
        offsets = [TopicPartition(topics[i % len(topics)], i % PARTITIONS, 0)]
        for future in admin.client.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(f"bench-group-{i:04d}", offsets)]).values():
            future.result(timeout=60)


def test_the_operator_with_500_2000_and_5000_topics_against_direct_create_topics_batches(apiserver, kafka,
                                                                                           operator):
    admin = KafkaAdmin(Connection(kafka.bootstrap_servers))
    rows, before = [], 0
    for count in STEPS:
        # The operator: the Topic resources that bring the count to `count`, applied at once
        began, writes = time.monotonic(), operator.writes()
        names = apply_topics(apiserver, before, count)
        wait_for(lambda names=names: configured(admin, names), lambda n, names=names: n == len(names), 1800,
                 f"{len(names)} managed topics configured", interval=2)
        through_operator = time.monotonic() - began
        # The baseline: as many other topics in one create_topics batch, on the same Kafka
        direct = direct_batch(admin, before, count)
        wait_for(lambda: ready_resources(apiserver), lambda n, count=count: n == count, 900,
                 f"{count} Topic resources Ready", interval=5)
        added = count - before
        writes_each = (operator.writes() - writes) / added
        calm_writes = operator.writes()
        pass_seconds, millicores, rss = calm(operator)
        calm_writes = operator.writes() - calm_writes
        rows.append([str(count), str(count * PARTITIONS), str(added), f"{through_operator:.1f}",
                     f"{added / through_operator:.1f}", f"{direct:.1f}", f"{added / direct:.1f}",
                     f"{direct / through_operator:.2f}", f"{writes_each:.1f}", f"{pass_seconds:.2f}",
                     f"{calm_writes:.0f}", f"{rss:.0f}", f"{millicores:.1f}"])
        before = count
    # Then consumer groups beside the topics: the lag pass reads them (lag.maxGroups of them), the rest go on
    commit_groups(admin, sorted(names))
    lag_seconds, millicores, rss = calm(operator, "lag")
    pass_seconds, _, _ = calm(operator)
    groups = [f"{before} + {GROUPS:,} groups", str(before * PARTITIONS), "", "", "", "", "", "", "",
              f"{pass_seconds:.2f} (lag {lag_seconds:.2f})", "", f"{rss:.0f}", f"{millicores:.1f}"]
    rows.append(groups)
    assert operator.proc.poll() is None, "the operator died during the benchmark"
    report_table(f"Topic resources through the operator against direct create_topics requests each step (3 brokers, "
                 f"{PARTITIONS} partitions, RF {REPLICAS}); then calm for {CALM_SECONDS} s",
                 ["topics", "partitions", "added", "operator (s)", "topics/s", "direct (s)", "topics/s",
                  "ratio", "API writes/Topic", "calm pass (s)", "calm writes", "RSS (MiB)", "idle CPU (mc)"], rows)
