"""Benchmark: a roll that restarts a zone's brokers at once (restarts.parallelism: zone) against one broker at a
time, on the same cluster, under the same load.

One rack-aware cluster (3 dedicated controllers, 6 brokers: two in each of the three zones) and 300 partitions
(RF 3, min ISR 2, one replica in each zone, as Kafka places them on a rack-aware cluster). A producer in a client
pod writes 2,000 records/s of 1 KiB with acks=all and idempotence; a watcher samples the topic's partitions every
250 ms. Each run: 60 s of load, a static broker setting changed (the six brokers restart), 30 s after it; the arms
alternate (one at a time, zone, zone, one at a time). A second case adds a topic whose partition has two replicas
in one zone: the brokers holding it go alone (status.roll.alone says why) and nothing goes under min ISR.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from rolls import (
    Load,
    Run,
    by_operator,
    latencies,
    load_client,
    loaded_cluster,
    percentile,
    plot_run,
    pyplot,
    seconds_with,
    under_load,
    warm_up,
)

from krafty_testkit.k8s_kafka import ClientPod, KafkaClusterHandle, cluster_spec, repo_path
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

pytestmark = [pytest.mark.bench, pytest.mark.timeout(7200)]

CLUSTER, TOPIC = "zoned", "zoned-load"
PARTITIONS, MIN_ISR = 300, 2
RATE, SIZE, KEYS = 2000, 1024, 120
WARM_UP_S, STEADY_S = 60, 45
LOAD = Load(TOPIC, MIN_ISR, RATE, SIZE, KEYS, before_s=60, after_s=30)
BROKERS = [f"{CLUSTER}-broker-{i}" for i in range(6)]
PICTURE = repo_path("docs", "zone-roll.png")
SKEWED = "zoned-skewed"


@pytest.fixture(scope="module")
def cluster(operator: KubeCluster) -> Iterator[KafkaClusterHandle]:
    spec = cluster_spec("dedicated", brokers=6, rack={"topologyKey": "topology.kubernetes.io/zone"})
    with loaded_cluster(operator, CLUSTER, spec, LOAD, PARTITIONS) as handle:
        yield handle


@pytest.fixture(scope="module")
def loader(operator: KubeCluster) -> Iterator[ClientPod]:
    with load_client(operator, f"{CLUSTER}-client") as pod:
        yield pod


def rolled(cluster: KafkaClusterHandle, loader: ClientPod, parallelism: int | str, step: int) -> Run:
    """The six brokers rolled for a static setting (a new value each time), with `parallelism`."""
    cluster.patch_spec({"restarts": {"parallelism": parallelism}})
    cluster.wait_ready(900)
    change = {"brokers": {"config": {"socket.send.buffer.bytes": 102400 + step}}}
    run = under_load(cluster, loader, LOAD, f"parallelism {parallelism}", by_operator(cluster, BROKERS, change))
    cluster.wait_ready(900)
    return run


def row(case: str, run: Run) -> list[object]:
    steady = latencies(run, run.began - STEADY_S, run.began)
    rolling = latencies(run, *run.restarting)
    failed = sum(1 for _, _, ok in run.outcomes if not ok)
    ms = [round(1000 * percentile(values, q), 1) for values, q in ((steady, 0.5), (steady, 0.99),
                                                                     (rolling, 0.5), (rolling, 0.99))]
    return [case, run.name, f"{run.ended - run.began:.0f}", run.verified["acked"], failed, run.verified["lost"],
            run.verified["duplicated"], *ms, f"{1000 * max(rolling, default=0):.0f}", f"{seconds_with(run, 2):.1f}",
            f"{seconds_with(run, 1):.1f}"]


def test_a_zone_at_a_time_against_one_broker_at_a_time(cluster: KafkaClusterHandle, loader: ClientPod):
    warm_up(cluster, loader, LOAD, WARM_UP_S)
    runs = [rolled(cluster, loader, parallelism, step)
            for step, parallelism in enumerate((1, "zone", "zone", 1), 1)]
    # The second case: a partition with two replicas in one zone (brokers 0 and 3 run in one zone: the spread
    # puts brokers i and i + 3 together), made with Kafka's own tool
    racks = racks_of(cluster)
    pair = next((a, b) for a in racks for b in racks if a < b and racks[a] == racks[b])
    third = next(b for b in racks if racks[b] != racks[pair[0]])
    cluster.kafka_tool("kafka-topics.sh", "--create", "--topic", SKEWED, "--replica-assignment",
                       f"{pair[0]}:{pair[1]}:{third}", "--config", f"min.insync.replicas={MIN_ISR}")
    skewed = rolled(cluster, loader, "zone", 5)
    rows = [row("300 partitions spread over 3 zones", run) for run in runs]
    ones = [r for r in runs if r.name == "parallelism 1"]
    zones = [r for r in runs if r.name == "parallelism zone"]
    took = [sum(r.ended - r.began for r in arm) / len(arm) for arm in (ones, zones)]
    p99 = [percentile([t for r in arm for t in latencies(r, *r.restarting)], 0.99) for arm in (ones, zones)]
    rows.append(["", "zone / one at a time", f"{took[1] / took[0]:.2f}x", *[""] * 6, "", f"{p99[1] / p99[0]:.2f}x",
                 "", "", ""])
    rows.append(row(f"+ {SKEWED}: replicas {pair} in one zone", skewed))
    report_table(f"A roll of 6 brokers (3 zones, 3 dedicated controllers) under {RATE:,} records/s of {SIZE} B, "
                 f"acks=all, idempotent ({PARTITIONS} partitions, RF 3, min ISR {MIN_ISR}); latency in ms",
                 ["case", "roll", "took (s)", "acked", "failed", "lost", "duplicated", "p50 steady", "p99 steady",
                  "p50 roll", "p99 roll", "max roll", "s under min ISR", "s offline"], rows)
    report_table("What status.roll said", ["roll", "said"], [[run.name, said] for run in [*runs, skewed]
                                                             for said in run.said])
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
    for run, ax in zip((ones[0], zones[0]), axes, strict=True):
        plot_run(ax, run, f"6 brokers in 3 zones: {run.name}", CLUSTER)
    fig.tight_layout()
    fig.savefig(PICTURE, dpi=90)
    plt.close(fig)
    for run in [*runs, skewed]:
        assert (run.verified["lost"], run.verified["duplicated"]) == (0, 0), run.verified
        assert (seconds_with(run, 1), seconds_with(run, 2)) == (0, 0), run.name
    assert any(f"{SKEWED}-0 has replicas" in said for said in skewed.said), skewed.said


def racks_of(cluster: KafkaClusterHandle) -> dict[int, str]:
    """Each broker's rack, as Kafka knows it."""
    text = wait_for(lambda: cluster.kafka_tool("kafka-broker-api-versions.sh"),
                    lambda out: len(re.findall(r"rack: \S+", out)) >= 6, 120, "every broker's rack")
    return {int(broker): rack for broker, rack in re.findall(r"\(id: (\d+) rack: (\S+) ", text)}
