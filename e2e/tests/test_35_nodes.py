"""Kafka on three nodes in three zones: each pool spread one per zone, broker.rack the zone, RF-3 replicas in three
zones; and what a machine's failure does under an idempotent acks=all producer: the node of the active controller
and a broker stopped like a power cut, a broker's node cut off from the network for a minute, a node drained.
Nothing acknowledged is lost or duplicated, and the cluster is whole again minutes later."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    assert_written,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster, KubeError
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

RATE = 200  # records/s, each acknowledged by all in-sync replicas


def node_of(kube: KubeCluster, pod: str) -> str:
    return str(kube.kubectl_json("get", "pod", pod, "-n", NAMESPACE)["spec"]["nodeName"])


def zones(kube: KubeCluster) -> dict[str, str]:
    return kube.workers()


def placement(handle: KafkaClusterHandle, pool: str) -> dict[str, str]:
    """pod -> the zone of the node it runs on."""
    by_node = zones(handle.kube)
    return {p["metadata"]["name"]: by_node.get(p["spec"].get("nodeName", ""), "?") for p in handle.pods(pool)}


def describe(handle: KafkaClusterHandle, topic: str, broker: int = 0) -> list[dict[str, list[int]]]:
    """Each partition's replicas and in-sync replicas, as kafka-topics.sh --describe prints them."""
    out = handle.kafka_tool("kafka-topics.sh", "--describe", "--topic", topic, broker=broker)
    partitions = []
    for line in out.splitlines():
        fields = dict(part.split(": ", 1) for part in line.strip().split("\t") if ": " in part)
        if "Partition" in fields and "Isr" in fields:
            partitions.append({key: [int(n) for n in fields[key].split(",") if n]
                               for key in ("Replicas", "Isr")})
    return partitions


def broker_rack(handle: KafkaClusterHandle, broker: int) -> str:
    out = handle.kafka_tool("kafka-configs.sh", "--describe", "--all", "--entity-type", "brokers",
                            "--entity-name", str(broker))
    line = next(line for line in out.splitlines() if line.strip().startswith("broker.rack="))
    return line.strip().split("=", 1)[1].split(" ", 1)[0]


def test_each_pool_spreads_one_per_zone_and_rf3_replicas_span_three_zones(prod: KafkaClusterHandle,
                                                                         small: KafkaClusterHandle,
                                                                         operator: KubeCluster):
    # Given three workers in three zones, prod with the default spread and small rack-aware by zone
    assert sorted(zones(operator).values()) == ["zone-a", "zone-b", "zone-c"]
    # Then every pool has one pod in each zone
    for handle, pool in ((prod, "broker"), (prod, "controller"), (small, "broker")):
        placed = placement(handle, pool)
        print(f"\n{handle.name} {pool}s: {placed}")
        assert sorted(placed.values()) == ["zone-a", "zone-b", "zone-c"], placed
    # And each of small's brokers has its node's zone as broker.rack (read with kafka-configs.sh)
    racks = {int(pod.rsplit("-", 1)[1]): zone for pod, zone in placement(small, "broker").items()}
    assert {broker: broker_rack(small, broker) for broker in racks} == racks
    # When an RF-3 topic is made on small
    operator.apply([topic_resource("across-zones", "small", partitions=6, replicas=3)])
    wait_topic_ready(operator, "across-zones")
    # Then the replicas of every partition are in three zones (read with kafka-topics.sh)
    for partition in describe(small, "across-zones"):
        assert sorted(racks[b] for b in partition["Replicas"]) == ["zone-a", "zone-b", "zone-c"], partition


@pytest.fixture(scope="module")
def durable_topic(operator: KubeCluster) -> str:
    operator.apply([topic_resource("through-node-faults", "prod", partitions=6, replicas=3,
                                   config={"min.insync.replicas": "2"})])
    wait_topic_ready(operator, "through-node-faults")
    return "through-node-faults"


@pytest.fixture(scope="module")
def clients(operator: KubeCluster, client: ClientPod) -> Iterator[dict[str, ClientPod]]:
    """A client pod on every worker, so each test produces from a node its fault leaves alone."""
    pods = {}
    for node in zones(operator):
        pod = ClientPod(operator, name=f"kafka-client-{node}", node=node)
        pod.create()
        pods[node] = pod
    yield pods
    for pod in pods.values():
        operator.kubectl("delete", "pod", pod.name, "-n", NAMESPACE, "--ignore-not-found", "--wait=false")


def elsewhere(clients: dict[str, ClientPod], *nodes: str) -> ClientPod:
    return next(pod for node, pod in clients.items() if node not in nodes)


def wait_whole(*handles: KafkaClusterHandle) -> float:
    """Ready and every partition in sync again; returns the seconds the first cluster took."""
    began = time.monotonic()
    took = []
    for handle in handles:
        handle.wait_ready(900)
        wait_for(lambda h=handle: h.status().get("partitions", {}),
                 lambda p: p.get("underReplicated") == 0 and "total" in p, 600, f"{handle.name} in sync",
                 interval=5)
        took.append(time.monotonic() - began)
    return took[0]


@pytest.mark.full  # about three and a half minutes: CI SIGKILLs a broker under load in test_60_failures.py
@pytest.mark.local_faults
def test_losing_the_node_of_the_active_controller_and_a_broker_under_load_loses_nothing(
        prod: KafkaClusterHandle, small: KafkaClusterHandle, operator: KubeCluster, clients: dict[str, ClientPod],
        durable_topic: str):
    # Given the node that runs prod's active controller, and a broker beside it
    leader = prod.status()["quorum"]["leaderId"]
    victim = node_of(operator, f"prod-controller-{leader - 1000}")
    brokers_there = [p["metadata"]["name"] for p in prod.pods("broker") if p["spec"]["nodeName"] == victim]
    assert brokers_there, f"no broker of prod on {victim}, the active controller's node"
    producer = elsewhere(clients, victim)
    seen: dict[str, Any] = {}
    with producer.steady_producer(prod.bootstrap, durable_topic, rate=RATE) as report:
        time.sleep(10)
        # When every process of that node dies at once (a power cut)
        stopped = time.monotonic()
        operator.node_fault("stop", victim)
        # Then the KafkaCluster names the lost node and its broker while it is down
        degraded = wait_for(lambda: prod.condition("Degraded"),
                            lambda c: c.get("reason") == "NodeDown" and victim in c.get("message", ""), 240,
                            f"Degraded to name {victim}")
        seen["degraded"] = degraded["message"]
        seen["named after s"] = time.monotonic() - stopped
        assert brokers_there[0] in degraded["message"], degraded
        # And a new active controller leads
        wait_for(lambda: prod.status().get("quorum", {}).get("leaderId"), lambda new: new not in (leader, -1, None),
                 60, "another active controller")
        # When the node starts again (well within the 300 s before Kubernetes would evict its pods)
        started = time.monotonic()
        operator.node_fault("start", victim)
        seen["whole again after s"] = wait_whole(prod, small)
        seen["down for s"] = started - stopped
    verified = producer.verify(prod.bootstrap, durable_topic)
    report_table(f"Node {victim} (active controller {leader} and {brokers_there[0]}) stopped under {RATE} records/s",
                 ["acknowledged", "failed", "longest stall s", "lost", "duplicated", "status named it after s",
                  "down s", "whole again after start s"],
                 [[report["acked"], sum(report["failed"].values()), round(report["longest_ack_gap_s"], 1),
                   verified["lost"], verified["duplicated"], round(seen["named after s"], 1),
                   round(seen["down for s"], 1), round(seen["whole again after s"], 1)]])
    print(f"\nDegraded while it was down: {seen['degraded']}")
    # Then producing went on, and every acknowledged record is there once, in order
    assert (verified["lost"], verified["duplicated"], verified["out_of_order_keys"]) == (0, 0, 0), verified
    assert report["acked"] > RATE * 45


@pytest.mark.full  # about two and a half minutes; CI cuts a node off in test_local_cluster.py
@pytest.mark.local_faults
def test_a_brokers_node_cut_off_for_a_minute_under_load_loses_nothing(
        prod: KafkaClusterHandle, operator: KubeCluster, clients: dict[str, ClientPod], durable_topic: str,
        client: ClientPod):
    # Given a node with one of prod's brokers (not the one the session's client pod runs on)
    client_node = node_of(operator, client.name)
    broker = next(p for p in prod.pods("broker") if p["spec"]["nodeName"] != client_node)
    victim = broker["spec"]["nodeName"]
    producer = elsewhere(clients, victim)
    with producer.steady_producer(prod.bootstrap, durable_topic, rate=RATE) as report:
        time.sleep(10)
        # When its traffic to and from every other node is dropped for 60 s
        operator.node_fault("partition", victim)
        try:
            time.sleep(60)
        finally:
            operator.node_fault("heal", victim)
        whole_after = wait_whole(prod)
    # Then every acknowledged record is there once and in order: no two leaders took writes for one partition
    # (the cut-off broker's writes would have been truncated away, and acknowledged records lost)
    verified = producer.verify(prod.bootstrap, durable_topic)
    report_table(f"Node {victim} ({broker['metadata']['name']}) cut off for 60 s under {RATE} records/s",
                 ["acknowledged", "failed", "longest stall s", "lost", "duplicated", "out of order keys",
                  "whole again after heal s"],
                 [[report["acked"], sum(report["failed"].values()), round(report["longest_ack_gap_s"], 1),
                   verified["lost"], verified["duplicated"], verified["out_of_order_keys"], round(whole_after, 1)]])
    assert (verified["lost"], verified["duplicated"], verified["out_of_order_keys"]) == (0, 0, 0), verified
    assert report["acked"] > RATE * 50


def _drain_brokers_of(kube: KubeCluster, node: str) -> str:
    """kubectl drain of prod's brokers on a node, which must give up after 30 s; returns what it printed. The node
    is uncordoned again."""
    argv = [str(kube.tools / "kubectl"), "--kubeconfig", str(kube.kubeconfig), "drain", node, "--pod-selector",
            "kafka.krafty.io/cluster=prod,kafka.krafty.io/pool=broker", "--delete-emptydir-data",
            "--ignore-daemonsets", "--timeout=30s"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    finally:
        kube.kubectl("uncordon", node)
    assert proc.returncode != 0, f"the drain of {node} should have waited for the budget: {proc.stdout}"
    return proc.stdout + proc.stderr


@pytest.mark.full  # about two minutes, like the loss of a whole node above
def test_a_drain_completes_and_never_takes_a_second_replica_offline(
        prod: KafkaClusterHandle, small: KafkaClusterHandle, operator: KubeCluster, clients: dict[str, ClientPod],
        durable_topic: str, client: ClientPod):
    # Given a node with one of prod's brokers and none of the tests' own client pods
    avoid = {node_of(operator, client.name)}
    broker = next(p for p in prod.pods("broker") if p["spec"]["nodeName"] not in avoid)
    victim = broker["spec"]["nodeName"]
    watcher = int(next(p for p in prod.pods("broker") if p["spec"]["nodeName"] != victim)["metadata"]["name"]
                  .rsplit("-", 1)[1])
    operator.kubectl("delete", "pod", clients[victim].name, "-n", NAMESPACE, "--wait=true")
    producer = elsewhere(clients, victim)
    smallest: list[tuple[float, int]] = []  # (when, the fewest in-sync replicas of any partition then)
    done = threading.Event()

    def watch_isr() -> None:
        while not done.is_set():
            try:
                isr = min(len(p["Isr"]) for p in describe(prod, durable_topic, broker=watcher))
                smallest.append((time.monotonic(), isr))
            except KubeError as error:  # no sample this time (the asked broker busy); the next one may work
                print(f"ISR not read: {error}")
            done.wait(1)

    thread = threading.Thread(target=watch_isr, daemon=True)
    with producer.steady_producer(prod.bootstrap, durable_topic, rate=RATE) as report:
        thread.start()
        try:
            time.sleep(5)
            # When the node is drained (evictions honour each pool's disruption budget)
            began = time.monotonic()
            try:
                # (--force: pods of earlier tests that no controller owns go too; the session's client is elsewhere)
                out = operator.kubectl("drain", victim, "--ignore-daemonsets", "--delete-emptydir-data", "--force",
                                       "--timeout=600s", timeout=660)
                drained_after = time.monotonic() - began
                # Then the drain completes; the broker waits, Pending, for its node (its volume lives there)
                broker_after = operator.kubectl_json("get", "pod", broker["metadata"]["name"], "-n", NAMESPACE)
                # And while it is away, the disruption budget lets no second broker go: draining another node's
                # brokers waits, and gives up (the drained broker's pod, Pending, has no node)
                second = _drain_brokers_of(operator, next(p["spec"]["nodeName"] for p in prod.pods("broker")
                                                          if p["spec"].get("nodeName") not in (victim, None)))
            finally:
                operator.kubectl("uncordon", victim)
                uncordoned = time.monotonic()
            whole_after = wait_whole(prod, small)
        finally:  # the watcher stops however the drain ended (it would otherwise keep the session alive)
            done.set()
            thread.join(30)
    verified = producer.verify(prod.bootstrap, durable_topic)
    # (samples taken while the broker was away: from the drain's start until its node was uncordoned)
    away = [isr for when, isr in smallest if began <= when <= uncordoned]
    fewest = min(isr for _, isr in smallest)
    print(f"\n{out}")
    report_table(f"Node {victim} ({broker['metadata']['name']}) drained, then uncordoned, under {RATE} records/s",
                 ["drain took s", "broker during the drain", "fewest in-sync replicas seen",
                  "ISR samples while away, of all", "acknowledged", "lost", "duplicated",
                  "whole again after uncordon s"],
                 [[round(drained_after, 1), broker_after["status"].get("phase"), fewest,
                   f"{len(away)} of {len(smallest)}", report["acked"], verified["lost"], verified["duplicated"],
                   round(whole_after, 1)]])
    # And samples were taken while it was away, no partition ever had fewer than two replicas in sync, and nothing
    # acknowledged was lost
    assert "Cannot evict pod as it would violate the pod's disruption budget" in second, second[-2000:]
    assert len(away) >= 2, smallest
    assert fewest >= 2, smallest
    assert_written(report)
    assert (verified["lost"], verified["duplicated"]) == (0, 0), verified

