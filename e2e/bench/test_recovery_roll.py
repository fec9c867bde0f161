"""Benchmark: a roll of brokers that hold 1,000 partitions each, with their data, and each node's restart phases
as status.nodes[].restartPhase told them (Stopping, Starting, Recovering, CatchingUp).

One cluster of 3 dedicated controllers and 3 brokers, restarts.nodeReadyTimeoutSeconds at its floor (60 s), and a
topic of 1,000 partitions (RF 3, min ISR 2: every broker holds 1,000 replicas) filled with 600 MB of 1 KiB records.
Two rolls follow: a static setting changed (the brokers restart as they are), then the brokers' CPU limit lowered
to 150m (each new broker loads its 1,000 logs and rejoins 1,000 ISRs on a sixth of a core: minutes, well past the
60 s a node may take to be Ready). The second roll waits for each slow broker while Kafka holds it registered and
fenced (Recovering) and then rejoining its ISRs (CatchingUp), rather than calling it stuck. Every record written
is read back after both.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from rolls import Load, Run, by_operator, loaded_cluster

from krafty_testkit.k8s_kafka import KafkaClusterHandle, cluster_spec
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table

pytestmark = [pytest.mark.bench, pytest.mark.timeout(7200)]

CLUSTER, TOPIC = "heavy", "heavy-logs"
PARTITIONS, RECORDS, SIZE = 1000, 600_000, 1024
READY_TIMEOUT_S = 60
SLOW_CPU = "150m"
BROKERS = [f"{CLUSTER}-broker-{i}" for i in range(3)]
NODE = {
    "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
    "jvm": {"heap": "512Mi"},
    "storage": {"size": "4Gi"},
}


@pytest.fixture(scope="module")
def cluster(operator: KubeCluster) -> Iterator[KafkaClusterHandle]:
    spec = cluster_spec("dedicated", brokers=3)
    spec["brokers"].update(NODE)
    spec["restarts"]["nodeReadyTimeoutSeconds"] = READY_TIMEOUT_S
    with loaded_cluster(operator, CLUSTER, spec, Load(TOPIC, 2, 0, SIZE, 0, 0, 0), PARTITIONS) as handle:
        yield handle


class PhaseWatch(threading.Thread):
    """Each second: every node's restart phase in the cluster's status, kept as each phase's span per pod."""

    def __init__(self, handle: KafkaClusterHandle) -> None:
        super().__init__(daemon=True)
        self.handle, self.stop_event = handle, threading.Event()
        self.seen: list[tuple[float, str, str | None]] = []  # (epoch, pod, phase or None once back)

    def run(self) -> None:
        last: dict[str, str | None] = {}
        while not self.stop_event.is_set():
            for node in self.handle.status().get("nodes", []):
                phase = node.get("restartPhase")
                if last.get(node["pod"]) != phase:
                    last[node["pod"]] = phase
                    self.seen.append((time.time(), node["pod"], phase))
            time.sleep(1)

    def spans(self) -> dict[str, list[tuple[str, float]]]:
        """By pod: each phase it went through and its seconds, in order."""
        self.stop_event.set()
        self.join(30)
        out: dict[str, list[tuple[str, float]]] = {}
        for pod in sorted({pod for _, pod, _ in self.seen}):
            mine = [(at, phase) for at, who, phase in self.seen if who == pod]
            out[pod] = [
                (phase, after - at) for (at, phase), (after, _) in itertools.pairwise(mine) if phase is not None
            ]
        return out


def rolled(cluster: KafkaClusterHandle, name: str, change: dict[str, Any]) -> tuple[Run, dict[str, Any]]:
    """The three brokers rolled by the operator for `change`, with each node's phases."""
    run, watch = Run(name), PhaseWatch(cluster)
    watch.start()
    run.began = time.time()
    by_operator(cluster, BROKERS, change)(run)
    run.ended = time.time()
    return run, watch.spans()


def end_offsets(cluster: KafkaClusterHandle) -> int:
    out = cluster.kafka_tool("kafka-get-offsets.sh", "--topic", TOPIC, "--time", "-1", timeout=300)
    return sum(int(line.rsplit(":", 1)[1]) for line in out.splitlines() if line.startswith(f"{TOPIC}:"))


def test_a_roll_of_brokers_with_1000_partitions_each_waits_for_their_slow_recovery(cluster: KafkaClusterHandle):
    began = time.monotonic()
    cluster.kafka_tool(
        "kafka-producer-perf-test.sh",
        "--topic",
        TOPIC,
        "--num-records",
        str(RECORDS),
        "--record-size",
        str(SIZE),
        "--throughput",
        "-1",
        "--producer-props",
        "acks=all",
        "bootstrap.servers=localhost:9092",
        timeout=1800,
    )
    wrote = time.monotonic() - began
    assert end_offsets(cluster) == RECORDS
    runs = [
        rolled(cluster, "a static setting", {"brokers": {"config": {"socket.send.buffer.bytes": 102401}}}),
        rolled(
            cluster,
            f"CPU limit {SLOW_CPU}",
            {
                "brokers": {
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "1Gi"},
                        "limits": {"cpu": SLOW_CPU, "memory": "1Gi"},
                    }
                }
            },
        ),
    ]
    rows = []
    for run, spans in runs:
        for pod in BROKERS:
            took = dict.fromkeys(("Stopping", "Starting", "Recovering", "CatchingUp"), 0.0)
            for phase, seconds in spans.get(pod, []):
                took[phase] += seconds
            rows.append(
                [
                    run.name,
                    f"{run.ended - run.began:.0f}",
                    pod,
                    *(f"{s:.0f}" for s in took.values()),
                    f"{took['Starting'] + took['Recovering']:.0f}",
                ]
            )
    report_table(
        f"A roll of 3 brokers holding {PARTITIONS:,} partitions each ({RECORDS * SIZE / 1e6:,.0f} MB "
        f"written in {wrote:.0f} s, RF 3), nodeReadyTimeoutSeconds {READY_TIMEOUT_S}: each node's restart "
        "phases from status.nodes[].restartPhase, in seconds",
        ["roll", "took (s)", "node", "Stopping", "Starting", "Recovering", "CatchingUp", "not Ready (s)"],
        rows,
    )
    report_table("What status.roll said", ["roll", "said"], [[run.name, said] for run, _ in runs for said in run.said])
    assert end_offsets(cluster) == RECORDS
    slow = runs[1][1]
    longest = max(sum(s for phase, s in slow.get(pod, []) if phase in ("Starting", "Recovering")) for pod in BROKERS)
    assert longest > READY_TIMEOUT_S, f"no broker took longer than {READY_TIMEOUT_S} s to come back: {slow}"
    assert all(any(phase == "Recovering" for phase, _ in slow.get(pod, [])) for pod in BROKERS), slow
    assert not [said for run, _ in runs for said in run.said if "is not back" in said]
