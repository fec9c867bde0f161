"""Benchmark: a roll paced by what clients feel (spec.restarts.canaryGate) against the same roll without the gate,
while a broker is starved of CPU, under the same load.

One dedicated cluster (3 controllers + 3 brokers) with the canary on as it comes (a record to each partition every
200 ms, figures of the last 30 s) and one topic (12 partitions, RF 3, min ISR 2). A producer in a client pod
writes 2,000 records/s of 1 KiB with acks=all and idempotence, keeping each record's outcome. After a minute of
load that is not counted, broker 1's CPU use is measured; then each run: 15 s of load, broker 1 capped at a
quarter of that use (its cgroup's CFS quota, as a CPU limit it outgrew or a noisy neighbour would: it runs, stays
registered and in every ISR, and is slow; a restarted broker 1 gets the cap again, as it would on the same node),
15 s later a change that restarts the three brokers, the cap lifted two minutes after it began, the run's end 30 s
after the roll's. The gated roll restarts a node once the canary's acks=all write p99 has been at most 250 ms for
a whole window; the ungated one restarts as soon as Kafka is safe (every replica back in sync, leaders restored).
Two rounds, the gated roll first in one and second in the other.

The clients' objective: every record acknowledged within 5 s (an application that writes inside a request
with a 5 s deadline). Figures are of records sent from the cap to the end of the run (the same disturbance in
both runs, whose own share shows in the gated run); beside it, the 10 s windows whose p99 was above 2 s.
The picture: docs/canary-gate.png.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

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
)

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    cluster_spec,
    repo_path,
)
from krafty_testkit.kube import KubeCluster, KubeError
from krafty_testkit.plugin import report_table

pytestmark = [pytest.mark.bench, pytest.mark.timeout(5400)]

CLUSTER, TOPIC = "gate", "gate-load"
LOAD = Load(TOPIC, min_isr=2, rate=2000, size=1024, keys=120, before_s=15, after_s=30)
WARM_UP_S, MEASURE_S = 60, 30
STARVED, CAP_OF_USE, STARVED_S, ROLL_AFTER_S = f"{CLUSTER}-broker-1", 0.25, 120, 15
GATE_MS, DEADLINE_MS, WINDOW_P99_MS, WINDOW_S = 250, 5000, 2000, 10
BROKERS = [f"{CLUSTER}-broker-{i}" for i in range(3)]
ROUNDS = 2  # gated then ungated, then the other way round: neither always rolls the cluster the other left
PICTURE = repo_path("docs", "canary-gate.png")


@pytest.fixture(scope="module")
def cluster(operator: KubeCluster) -> Iterator[KafkaClusterHandle]:
    spec = cluster_spec("dedicated", canary={"enabled": True})  # its defaults: every 200 ms, a window of 30 s
    with loaded_cluster(operator, CLUSTER, spec, LOAD, 12) as handle:
        yield handle


@pytest.fixture(scope="module")
def loader(operator: KubeCluster) -> Iterator[ClientPod]:
    with load_client(operator, f"{CLUSTER}-client") as pod:
        yield pod


class Starver(threading.Thread):
    """Keeps broker 1 capped at `percent` of a CPU for STARVED_S (a new container of it too), then lifts the cap."""

    def __init__(self, kube: KubeCluster, percent: int) -> None:
        super().__init__(daemon=True)
        self.kube, self.percent = kube, percent
        self.began = self.lifted = 0.0

    def run(self) -> None:
        self.began = time.time()
        while time.time() < self.began + STARVED_S:
            with contextlib.suppress(KubeError, KeyError):  # restarting: capped again once its new container runs
                self.kube.limit_cpu(NAMESPACE, STARVED, self.percent)
            time.sleep(2)
        with contextlib.suppress(KubeError, KeyError):  # (a container starting now was never capped)
            self.kube.limit_cpu(NAMESPACE, STARVED, None)
        self.lifted = time.time()


def starved_then(handle: KafkaClusterHandle, percent: int, roll: Callable[[Run], None],
                 marks: dict[str, float]) -> Callable[[Run], None]:
    """Caps broker 1, then rolls ROLL_AFTER_S later; the cap is lifted STARVED_S after it began, whatever the roll
    does."""
    def run_it(run: Run) -> None:
        starver = Starver(handle.kube, percent)
        starver.start()
        try:
            time.sleep(ROLL_AFTER_S)
            roll(run)
        finally:
            starver.join()
            marks.update(starved=starver.began, lifted=starver.lifted)
    return run_it


def windows_over(run: Run, start: float, end: float) -> tuple[int, int]:
    """(10 s windows whose p99 is above 2 s, windows) from `start` to `end`."""
    count = int((end - start) // WINDOW_S)
    over = sum(1 for i in range(count)
               if percentile(latencies(run, start + i * WINDOW_S, start + (i + 1) * WINDOW_S), 0.99) * 1000
               > WINDOW_P99_MS)
    return over, count


def late(run: Run, start: float) -> int:
    """Records sent from `start` on and acknowledged after the deadline (or never)."""
    return sum(1 for sent, took, ok in run.outcomes if sent >= start and (not ok or took * 1000 > DEADLINE_MS))


def restarts_while_starved(run: Run, marks: dict[str, float]) -> int:
    return sum(1 for at, _, what in run.pods if what == "stopping" and marks["starved"] <= at < marks["lifted"])


def row(name: str, run: Run, marks: dict[str, float]) -> list[Any]:
    starved = latencies(run, marks["starved"], marks["lifted"])
    whole = latencies(run, marks["starved"], run.isr_until)
    over, count = windows_over(run, marks["starved"], run.isr_until)
    return [name, f"{run.ended - run.began - ROLL_AFTER_S:.0f}", restarts_while_starved(run, marks),
            f"{late(run, marks['starved']):,}", f"{over} of {count}", f"{1000 * percentile(starved, 0.99):,.0f}",
            f"{1000 * max(starved):,.0f}",
            f"{1000 * percentile(whole, 0.5):.0f}", f"{1000 * percentile(whole, 0.99):,.0f}",
            f"{1000 * max(whole):,.0f}", run.failed, run.verified["lost"], run.verified["duplicated"],
            f"{seconds_with(run, 2, marks['starved']):.1f}"]


def draw(runs: list[tuple[str, Run, dict[str, float]]]) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(runs), figsize=(14, 4.6), sharey=True, squeeze=False)
    for (name, run, marks), ax in zip(runs, axes[0], strict=True):
        plot_run(ax, run, f"{name} (grey: {STARVED} capped)", CLUSTER, (marks["starved"], marks["lifted"]),
                 origin="the cap")
    fig.tight_layout()
    fig.savefig(PICTURE, dpi=90)
    plt.close(fig)


def test_a_roll_gated_by_the_canary_against_the_same_roll_ungated_with_a_broker_starved(
        cluster: KafkaClusterHandle, loader: ClientPod):
    with loader.steady_producer(cluster.bootstrap, TOPIC, rate=LOAD.rate, keys=LOAD.keys, size=LOAD.size):
        time.sleep(WARM_UP_S)  # a fresh JVM's first minute is slower: neither run gets it
        used = cluster.kube.cpu_seconds(NAMESPACE, STARVED)  # then the CPU broker 1 uses under the load
        time.sleep(MEASURE_S)
        used = (cluster.kube.cpu_seconds(NAMESPACE, STARVED) - used) / MEASURE_S
    percent = max(1, round(100 * used * CAP_OF_USE))
    buffer = 102400
    runs: list[tuple[str, Run, dict[str, float]]] = []
    arms: list[tuple[str, dict[str, int] | None]] = [("gated", {"produceP99Milliseconds": GATE_MS}),
                                                     ("ungated", None)]
    for round_ in range(ROUNDS):
        for name, gate in arms if round_ % 2 == 0 else arms[::-1]:
            cluster.patch_spec({"restarts": {"canaryGate": gate}})
            buffer += 1
            marks: dict[str, float] = {}
            roll = by_operator(cluster, BROKERS, {"brokers": {"config": {"socket.send.buffer.bytes": buffer}}})
            runs.append((f"{name} ({round_ + 1})",
                         under_load(cluster, loader, LOAD, name, starved_then(cluster, percent, roll, marks)), marks))
            cluster.wait_ready(900)
    rows = [row(name, run, marks) for name, run, marks in runs]
    p99 = {arm: statistics.median(percentile(latencies(run, marks["starved"], run.isr_until), 0.99)
                                  for name, run, marks in runs if name.startswith(f"{arm} "))
           for arm, _ in arms}
    rows.append(["gated / ungated (medians)", "", "", "", "", "", "", "", f"{p99['gated'] / p99['ungated']:.2f}x",
                 "", "", "", "", ""])
    report_table(f"A roll of three brokers, {STARVED} capped for {STARVED_S} s at {percent}% of a CPU (a quarter of "
                 f"the {100 * used:.0f}% it used), under {LOAD.rate:,} records/s of {LOAD.size} B, acks=all (RF 3, "
                 f"min ISR {LOAD.min_isr}); gate: canary write p99 <= {GATE_MS} ms; objective: every record "
                 f"acknowledged within {DEADLINE_MS / 1000:.0f} s; latency in ms", [
                     "roll", "took (s)", "restarts while capped", f"records over {DEADLINE_MS / 1000:.0f} s",
                     f"{WINDOW_S} s windows with p99 over {WINDOW_P99_MS / 1000:.0f} s",
                     "p99 while capped", "max while capped", "p50 cap to end", "p99 cap to end", "max cap to end",
                     "failed", "lost", "duplicated", "s under min ISR"], rows)
    gated = [(run, marks) for name, run, marks in runs if name.startswith("gated ")]
    report_table("What status.roll said while the gated rolls waited", ["blockedBy"],
                 [[said] for run, _ in gated for said in run.said])
    draw(runs)
    assert all(run.verified["lost"] == 0 for _, run, _ in runs)
    for run, marks in gated:
        assert restarts_while_starved(run, marks) == 0, "the gate let a broker restart while one was starved"
        assert any("canary" in said for said in run.said), "the gated roll never said the canary held it"
        assert run.failed == 0
    # (what the baseline did is printed, not asserted: an ungated roll may happen to miss the starved broker)
    for name, run, marks in runs:
        if name.startswith("ungated "):
            print(f"\nthe {name} roll restarted {restarts_while_starved(run, marks)} node(s) while a broker was "
                  "starved")
