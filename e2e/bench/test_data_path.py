"""Benchmark: the data path. Kafka's own kafka-producer-perf-test and kafka-consumer-perf-test against the same Kafka
three ways on this machine:

  krafty        a KafkaCluster run by the operator (which keeps running its passes meanwhile)
  StatefulSet   the same pods from a hand-written StatefulSet: the operator's rendering of the same spec applied
                with kubectl into a namespace the operator does not watch (raw.py)
  processes     the same Kafka release as bare local processes (the testkit's), the same heap

Each is 3 combined nodes without TLS between them, one topic of 6 partitions (RF 3, min ISR 2). A round writes
1,000,000 records of 100 B (the size of Kafka's own 2014 benchmark) as fast as the tool can, acks=all, then reads
everything the topic holds back with a new consumer group (a million more each round: 2 to 6 million in the counted
rounds, so that a read lasts seconds, not one). The tools run beside the cluster: in a pod of the broker image on the
pod network, weighted like a broker (CPU request 50m, as the broker pods'), or as a host process beside the
processes; the same JVM options on both sides. A first round on every target warms the JVMs and is not counted;
then five rounds alternate between the targets, so that each meets the same machine, each round starting with
another target (the one that runs after another meets the disk writing back the other's records). The consumer's
figures are its fetch phase (the group join waits group.initial.rebalance.delay.ms, which differs: the machines'
notes). Figures are medians of the rounds; each ratio is given twice: of those medians, and the median of each
round's own ratio (the targets of one round run within two minutes, so a slow spell of the machine weighs on all
three alike).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from raw import RAW, fresh_namespace, raw_manifests

from krafty_testkit import kafka_admin, kafka_dist
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
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.plugin import report_table

pytestmark = [pytest.mark.bench, pytest.mark.timeout(3600)]
ROUNDS, RECORDS, SIZE = 5, 1_000_000, 100
CORES = 2
POD = "path-tools"
# "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, a ms 50th, b ms 95th, P ms 99th"
PRODUCED = re.compile(r"records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\).* ([\d.]+) ms 99th")
# The tools' JVM, the same on both sides: Kafka's own defaults, a 512 MiB heap
TOOL_ENV = {"KAFKA_HEAP_OPTS": "-Xmx512m",
            "KAFKA_JVM_PERFORMANCE_OPTS": "-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 "
                                          "-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent "
                                          "-Djava.awt.headless=true"}
# Kafka's 2014 benchmark (Jay Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three Cheap
# Machines)"): three producers, 3x asynchronous replication, 100-byte records, three brokers of six cores
FAMOUS = (2_024_032, 3 * 6)


@dataclass(frozen=True)
class Target:
    name: str
    bootstrap: str
    tool: Callable[..., str]  # runs one of Kafka's tools beside the cluster; returns its output


@dataclass(frozen=True)
class Round:
    written: float  # records/s
    written_mb: float  # MB/s
    write_p99: float  # ms
    read: float  # records/s, fetch phase
    read_mb: float


def spec() -> dict[str, object]:
    base = cluster_spec("combined", tls={"internal": False})
    base["brokers"] = {**base["brokers"], "storage": {"size": "4Gi"}}  # (six rounds of 1M records, RF 3)
    return base


@pytest.fixture
def pod_tool(operator: KubeCluster) -> Iterator[Callable[..., str]]:
    """Runs one of Kafka's tools in a pod beside the clusters; the pod is gone after the test."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": NAMESPACE},
            "spec": {"containers": [{"name": "tools", "image": BROKER_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sleep", "infinity"],
                                     "resources": {"requests": {"cpu": "50m", "memory": "512Mi"}}}],
                     "terminationGracePeriodSeconds": 1}}
    operator.kubectl("apply", "-f", "-", stdin=json.dumps(body))
    operator.kubectl("wait", "--for=condition=Ready", f"pod/{POD}", "-n", NAMESPACE, "--timeout=180s", timeout=200)
    environment = [f"{key}={value}" for key, value in TOOL_ENV.items()]
    yield lambda *args: operator.kubectl("exec", "-n", NAMESPACE, POD, "--", "env", *environment, *args, timeout=900)
    operator.kubectl("delete", "pod", POD, "-n", NAMESPACE, "--wait=false")


def host_tool(*args: str) -> str:
    return subprocess.run([str(kafka_dist.tool_path(args[0])), *args[1:]], capture_output=True, text=True,
                          check=True, timeout=900, env={**os.environ, **TOOL_ENV}).stdout


@pytest.fixture(scope="module")
def krafty(operator: KubeCluster) -> Iterator[KafkaClusterHandle]:
    handle = KafkaClusterHandle(operator, "path")
    handle.apply(spec())
    handle.wait_ready(900)
    operator.apply([topic_resource("perf", "path", partitions=6, replicas=3, config={"min.insync.replicas": 2})])
    wait_topic_ready(operator, "perf")
    yield handle
    delete_topics(operator, "perf")
    handle.delete(600)


@pytest.fixture(scope="module")
def statefulset(operator: KubeCluster) -> Iterator[str]:
    fresh_namespace(operator)
    try:
        operator.apply(raw_manifests(spec()))
        operator.kubectl("wait", "--for=jsonpath={.status.readyReplicas}=3", "statefulset/raw-broker", "-n", RAW,
                         "--timeout=900s", timeout=960)
        operator.kubectl("exec", "-n", RAW, "raw-broker-0", "--", "kafka-topics.sh", "--bootstrap-server",
                         "localhost:9092", "--create", "--topic", "perf", "--partitions", "6", "--replication-factor",
                         "3", "--config", "min.insync.replicas=2", timeout=120)
        yield f"raw-kafka-bootstrap.{RAW}.svc.cluster.local:9092"
    finally:
        operator.kubectl("delete", "namespace", RAW, "--wait=false")


@pytest.fixture(scope="module")
def processes(local_kafka_module: Callable[..., LocalKafkaCluster]) -> LocalKafkaCluster:
    cluster = local_kafka_module(Layout.combined(3), heap="256m")
    kafka_admin.create_topic(cluster.admin(), "perf", 6, 3, **{"min.insync.replicas": "2"})
    kafka_admin.wait_fully_in_sync(cluster.admin(), "perf")
    return cluster


def one_round(target: Target, held: int) -> Round:
    """Writes RECORDS, then reads the `held` records the topic holds then."""
    wrote = target.tool("kafka-producer-perf-test.sh", "--topic", "perf", "--num-records", str(RECORDS),
                        "--record-size", str(SIZE), "--throughput", "-1", "--producer-props",
                        f"bootstrap.servers={target.bootstrap}", "acks=all", "linger.ms=5")
    produced = PRODUCED.search(wrote.strip().splitlines()[-1])
    assert produced, wrote[-500:]
    read = target.tool("kafka-consumer-perf-test.sh", "--bootstrap-server", target.bootstrap, "--topic", "perf",
                       "--messages", str(held), "--timeout", "120000")
    header, values = (line for line in read.strip().splitlines()[-2:])
    fields = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=True))
    assert float(fields["data.consumed.in.nMsg"]) >= held, read[-500:]
    return Round(float(produced.group(1)), float(produced.group(2)), float(produced.group(3)),
                 float(fields["fetch.nMsg.sec"]), float(fields["fetch.MB.sec"]))


def test_perf_tools_against_krafty_a_hand_written_statefulset_and_bare_processes(
        krafty: KafkaClusterHandle, statefulset: str, processes: LocalKafkaCluster, pod_tool: Callable[..., str]):
    targets = [Target("krafty (KafkaCluster, the operator running)", krafty.bootstrap, pod_tool),
               Target("hand-written StatefulSet (the same pods)", statefulset, pod_tool),
               Target("bare processes (the same release and heap)", processes.bootstrap_servers, host_tool)]
    rounds: dict[str, list[Round]] = {t.name: [] for t in targets}
    for number in range(ROUNDS + 1):  # the first warms up
        # each round starts with another target: the disk still writes back the target before's records
        for target in targets[number % len(targets):] + targets[:number % len(targets)]:
            measured = one_round(target, RECORDS * (number + 1))
            if number:
                rounds[target.name].append(measured)

    def median(name: str, figure: str) -> float:
        return statistics.median(getattr(r, figure) for r in rounds[name])

    bare = targets[-1].name

    def ratios(name: str, figure: str) -> str:
        of_medians = median(name, figure) / median(bare, figure)
        by_round = statistics.median(getattr(mine, figure) / getattr(theirs, figure)
                                     for mine, theirs in zip(rounds[name], rounds[bare], strict=True))
        return f"{of_medians:.2f}x / {by_round:.2f}x"

    rows = []
    for target in targets:
        name = target.name
        rows.append([name, f"{median(name, 'written'):,.0f}", f"{median(name, 'written_mb'):.1f}",
                     f"{median(name, 'write_p99'):,.0f}", f"{median(name, 'read'):,.0f}",
                     f"{median(name, 'read_mb'):.1f}", ratios(name, "written"), ratios(name, "read"),
                     f"{median(name, 'written') / CORES:,.0f}"])
    rows.append(["Kafka's 2014 benchmark: 3 producers, 3x async replication, 3 brokers of 6 cores",
                 f"{FAMOUS[0]:,}", "193.0", "", "", "", "", "", f"{FAMOUS[0] / FAMOUS[1]:,.0f}"])
    report_table(f"Kafka's perf tools, {RECORDS:,} records of {SIZE} B written a round (acks=all), all the topic's "
                 "read back, 6 partitions RF 3 min ISR 2, "
                 f"3 combined nodes; medians of {ROUNDS} rounds after a warm-up round; everything on {CORES} cores", [
                     "target", "written/s", "MB/s", "write p99 (ms)", "read/s (fetch)", "read MB/s",
                     "written / processes (of medians / by round)",
                     "read / processes (of medians / by round)", f"written/s per core ({CORES})"], rows)
    for target in targets:
        assert all(r.written > 0 and r.read > 0 for r in rounds[target.name])
