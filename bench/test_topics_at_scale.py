"""Benchmark: the operator with 500, 2,000 and 5,000 Topic resources (4 partitions each: 20,000 at the top).

The real operator process (kopf, the scheduler, batched Admin calls, a status and an Event per resource) runs
against a real kube-apiserver and three real brokers; it reaches Kafka through KRAFTY_KAFKA_BOOTSTRAP because pod
DNS names do not resolve outside a cluster. Each step applies the Topic resources that bring the count to its size,
all at once, and ends when every one of them exists in Kafka with its own configuration; the baseline, in the same
run and on the same Kafka, is as many other topics with the same settings sent at once with Admin create_topics, in
as few requests as Kafka accepts (10,000 metadata records each, the split the operator makes too), checked the same
way (then deleted). A second baseline is the least any operator of Topic resources does: as many other Topics
applied the same way into a namespace no operator watches, and a watch that creates the topics of those arrived so
far, at once, as the apply goes on, with nothing validated first and nothing written back (no finalizer, status or
Event): on two cores the apply, the API server and Kafka's own work for the new topics share the CPU, which a batch
sent after the fact does not show. "apply (s)" is how long kubectl apply itself took, the operator running. Once
every resource is Ready and nothing changes: the topic pass's mean duration (the operator's own histogram over three
passes), its RSS and its CPU while idle; then one more Topic applied, timed until its topic exists with its config,
against one direct create_topics of one other topic. The operator's own writes to the API server (Topics and Events,
from its request counter) are counted per Topic added (until all are Ready) and while calm. Last, 1,000 consumer
groups (each with an offset committed, none running) beside the largest step: the lag pass's mean duration (it reads
lag.maxGroups of them, 200), the topic pass's, RSS and idle CPU again.
The cluster pass finds no pod (no kubelet runs them here) and looks again every 5 s: idle CPU includes it.
KRAFTY_BENCH_TOPIC_STEPS changes the sizes (e.g. "500" for a quick run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from operator_process import (
    CALM_SECONDS,
    PARTITIONS,
    REPLICAS,
    Operator,
    apply_topics,
    calm,
    configured,
    direct_batch,
    ready_resources,
    running_operator,
    topics,
    watched_and_created,
)

from krafty.clients.connection import Connection
from krafty.clients.kafka_admin import KafkaAdmin
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.bench_size import sized
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

STEPS = [int(n) for n in os.environ.get("KRAFTY_BENCH_TOPIC_STEPS", sized("500,2000,5000", "20")).split(",")]
GROUPS = sized(1000, 10)  # consumer groups committed beside the largest step
NAMESPACE = "bench"

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(3), heap="1g")


@pytest.fixture(scope="module")
def operator(apiserver: LocalApiServer, kafka: LocalKafkaCluster, tmp_path_factory) -> Iterator[Operator]:
    with running_operator(apiserver, NAMESPACE, kafka.bootstrap_servers,
                          tmp_path_factory.mktemp("operator") / "operator.log") as running:
        apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
                         "metadata": {"name": "bench", "namespace": NAMESPACE},
                         "spec": {"brokers": {"replicas": 3}, "topicDefaults": {"minInsyncReplicas": 1}}})
        yield running


def commit_groups(admin: KafkaAdmin, names: list[str]) -> None:
    """GROUPS consumer groups, each with a committed offset on one partition of one of these topics (none running)."""
    for i in range(GROUPS):
        offsets = [TopicPartition(names[i % len(names)], i % PARTITIONS, 0)]
        for future in admin.client.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(f"bench-group-{i:04d}", offsets)]).values():
            future.result(timeout=60)


def one_more(apiserver: LocalApiServer, admin: KafkaAdmin, count: int) -> tuple[float, float]:
    """Seconds for one more Topic resource until its topic exists with its config, and for one direct create."""
    name = topics("single", count, count + 1)
    began = time.monotonic()
    apply_topics(apiserver, NAMESPACE, "bench", name)
    wait_for(lambda: configured(admin, name), lambda n: n == 1, 120, "one more topic configured", interval=0.05)
    return time.monotonic() - began, direct_batch(admin, topics("single-direct", count, count + 1), interval=0.05)


def test_the_operator_with_500_2000_and_5000_topics_against_direct_create_topics_batches(apiserver, kafka,
                                                                                           operator):
    admin = KafkaAdmin(Connection(kafka.bootstrap_servers))
    rows, before = [], 0
    for count in STEPS:
        # The operator: the Topic resources that bring the count to `count`, applied at once
        began, writes = time.monotonic(), operator.writes()
        names = topics("managed", before, count)
        apply_topics(apiserver, NAMESPACE, "bench", names)
        applied = time.monotonic() - began
        wait_for(lambda names=names: configured(admin, names), lambda n, names=names: n == len(names), 1800,
                 f"{len(names)} managed topics configured", interval=2)
        through_operator = time.monotonic() - began
        # The baseline: as many other topics in one create_topics batch, on the same Kafka
        direct = direct_batch(admin, topics("direct", before, count))
        # The least any operator does: a watch creating the topics of the Topics arrived so far (see the module's doc)
        least = watched_and_created(apiserver, admin, topics("watched", before, count))
        want = count + len(rows)  # (and the one more Topic of each step before)
        wait_for(lambda: ready_resources(apiserver, NAMESPACE), lambda n, want=want: n == want, 900,
                 f"{count} Topic resources Ready", interval=5)
        added = count - before
        writes_each = (operator.writes() - writes) / added
        calm_writes = operator.writes()
        pass_seconds, millicores, rss = calm(operator)
        calm_writes = operator.writes() - calm_writes
        one, one_direct = one_more(apiserver, admin, count)
        rows.append([str(count), str(count * PARTITIONS), str(added), f"{applied:.1f}", f"{through_operator:.1f}",
                     f"{added / through_operator:.1f}", f"{direct:.1f}", f"{added / direct:.1f}",
                     f"{direct / through_operator:.2f}", f"{least:.1f}", f"{added / least:.1f}",
                     f"{least / through_operator:.2f}", f"{writes_each:.1f}", f"{pass_seconds:.2f}",
                     f"{calm_writes:.0f}", f"{rss:.0f}", f"{millicores:.1f}", f"{one:.2f}", f"{one_direct:.2f}"])
        before = count
    # Then consumer groups beside the topics: the lag pass reads them (lag.maxGroups of them), the rest go on
    commit_groups(admin, sorted(names))
    lag_seconds, millicores, rss = calm(operator, "lag")
    pass_seconds, _, _ = calm(operator)
    groups = [f"{before} + {GROUPS:,} groups", str(before * PARTITIONS), *[""] * 11,
              f"{pass_seconds:.2f} (lag {lag_seconds:.2f})", "", f"{rss:.0f}", f"{millicores:.1f}", "", ""]
    rows.append(groups)
    assert operator.proc.poll() is None, "the operator died during the benchmark"
    report_table(f"Topic resources through the operator against direct create_topics requests each step (3 brokers, "
                 f"{PARTITIONS} partitions, RF {REPLICAS}); then calm for {CALM_SECONDS} s",
                 ["topics", "partitions", "added", "apply (s)", "operator (s)", "topics/s", "direct (s)", "topics/s",
                  "ratio", "watch+create (s)", "topics/s", "ratio", "API writes/Topic", "calm pass (s)",
                  "calm writes", "RSS (MiB)", "idle CPU (mc)", "one more (s)", "direct (s)"], rows)
