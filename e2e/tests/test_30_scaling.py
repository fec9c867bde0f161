"""Scaling on real pods: brokers 3 -> 5 -> 3 under acks=all load, a refused scale-down,
and the dedicated controller quorum 3 -> 1 -> 3 while topics keep being created (full set)."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

import pytest
from test_10_operator_core import restart_events

from krafty_testkit.k8s_kafka import (
    OPERATOR_NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    assert_written,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.kubectl_krafty import plan
from krafty_testkit.waiting import wait_for


def placement(handle: KafkaClusterHandle) -> tuple[Counter[int], int, int]:
    """(replicas per broker, partitions, partitions led by their preferred replica) over every topic."""
    out = handle.kafka_tool("kafka-topics.sh", "--describe")
    load: Counter[int] = Counter()
    total = preferred = 0
    for line in out.splitlines():
        fields = dict(part.split(": ", 1) for part in line.strip().split("\t") if ": " in part)
        if "Partition" in fields and "Replicas" in fields:
            replicas = [int(r) for r in fields["Replicas"].split(",")]
            load.update(replicas)
            total += 1
            preferred += int(fields["Leader"]) == replicas[0]
    return load, total, preferred


def wait_scaled(handle: KafkaClusterHandle, brokers: int, timeout: float = 900) -> None:
    def settled(_: object) -> bool:
        status = handle.status()
        scaling = status.get("scaling") or {}
        return (scaling.get("phase") == "Stable" and scaling.get("balancedBrokers") == list(range(brokers))
                and not scaling.get("leadersPending")
                and len(handle.pods("broker")) == brokers and status.get("readyBrokers") == brokers)

    wait_for(handle.summary, settled, timeout, f"{handle.name} settled on {brokers} brokers", interval=5)
    handle.wait_ready(600)


def assert_balanced(handle: KafkaClusterHandle, brokers: int) -> None:
    load, total, preferred = wait_for(lambda: placement(handle), lambda p: p[1] == p[2], 120,
                                      "every partition on its preferred leader")
    assert set(load) == set(range(brokers)), load
    assert max(load.values()) - min(load.values()) <= 1, load
    assert preferred == total


def test_brokers_3_to_5_to_3_under_load(prod: KafkaClusterHandle, client: ClientPod, operator: KubeCluster):
    operator.apply([topic_resource("scaling", "prod", partitions=12, replicas=3, config={"min.insync.replicas": 2})])
    wait_topic_ready(operator, "scaling")
    # Given `kubectl krafty plan` says two more brokers scale the cluster and restart no node
    preview = plan(prod, {"brokers": {"replicas": 5}})
    assert (preview["verdict"], preview["restarts"], preview["refused"]) == ("Changes", [], [])
    assert preview["scaling"] == "waiting for brokers [3, 4] to register"
    started = time.time()
    with client.steady_producer(prod.bootstrap, "scaling", rate=100) as report:
        time.sleep(5)
        # When two brokers join, Then they receive their fair share of replicas and leaders, and no node restarted
        prod.patch_spec({"brokers": {"replicas": 5}})
        wait_scaled(prod, 5)
        assert_balanced(prod, 5)
        assert restart_events(prod, started) == []
        # When they leave again, Then their replicas move first, and they are unregistered
        prod.patch_spec({"brokers": {"replicas": 3}})
        wait_scaled(prod, 3)
        assert_balanced(prod, 3)
    verified = client.verify(prod.bootstrap, "scaling")
    assert_written(report)
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    unregistered = {e["message"] for e in prod.events("BrokerUnregistered")}
    assert unregistered == {"broker 3 removed from the cluster metadata", "broker 4 removed from the cluster metadata"}
    brokers = prod.kafka_tool("kafka-broker-api-versions.sh")
    assert sorted(set(re.findall(r"\(id: (\d+) rack", brokers))) == ["0", "1", "2"]
    # And their volumes are deleted by the operator once they are forgotten (the StatefulSet keeps them)
    wait_for(lambda: claims(prod, "broker"), lambda found: found == {"data-prod-broker-0", "data-prod-broker-1",
                                                                     "data-prod-broker-2"}, 120,
             "the volumes of brokers 3 and 4 deleted")
    assert {e["message"].split(" ")[0] for e in prod.events("VolumeDeleted")} >= {"data-prod-broker-3",
                                                                                  "data-prod-broker-4"}


def claims(handle: KafkaClusterHandle, pool: str) -> set[str]:
    items = handle.kube.kubectl_json("get", "pvc", "-n", handle.namespace, "-l",
                                     f"kafka.krafty.io/cluster={handle.name},kafka.krafty.io/pool={pool}")["items"]
    return {c["metadata"]["name"] for c in items}


def claim_uids(handle: KafkaClusterHandle, pool: str) -> dict[str, str]:
    items = handle.kube.kubectl_json("get", "pvc", "-n", handle.namespace, "-l",
                                     f"kafka.krafty.io/cluster={handle.name},kafka.krafty.io/pool={pool}")["items"]
    return {c["metadata"]["name"]: c["metadata"]["uid"] for c in items}


@pytest.mark.full  # about 30 s: CI scales down through the operator in the test above
def test_a_statefulset_shrunk_while_the_operator_is_stopped_loses_no_volume(prod: KafkaClusterHandle,
                                                                             operator: KubeCluster):
    # Given the operator stopped, and a broker StatefulSet shrunk behind its back (kubectl scale, a GitOps tool)
    before = claim_uids(prod, "broker")
    deployment = ["deployment", "-n", OPERATOR_NAMESPACE, "-l", "app.kubernetes.io/name=krafty-operator"]
    operator.kubectl("scale", *deployment, "--replicas=0")
    try:
        operator.kubectl("wait", "--for=delete", "pod", "-n", OPERATOR_NAMESPACE, "-l",
                         "app.kubernetes.io/name=krafty-operator", "--timeout=120s", timeout=150)
        operator.kubectl("scale", "statefulset", "prod-broker", "-n", prod.namespace, "--replicas=2")
        wait_for(lambda: [p["metadata"]["name"] for p in prod.pods()], lambda pods: pods == ["prod-broker-0",
                                                                                           "prod-broker-1"], 300,
                 "prod-broker-2 gone")
        # Then its volume stays
        assert claim_uids(prod, "broker") == before
    finally:
        operator.kubectl("scale", *deployment, "--replicas=2")  # the chart's default: a leader and a standby
    # And when the operator is back, the broker comes back on the same volume and the cluster is whole again
    wait_for(lambda: [p["metadata"]["name"] for p in prod.pods()], lambda pods: len(pods) == 3, 300,
             "prod-broker-2 back")
    prod.wait_ready(600)
    assert claim_uids(prod, "broker") == before


@pytest.mark.full  # about 3 minutes: the unit tier refuses it (decide/test_scaling.py); CI scales under load above
def test_an_impossible_scale_down_is_refused_and_the_cluster_keeps_serving(prod: KafkaClusterHandle,
                                                                             client: ClientPod):
    # Given a topic with RF 3 ("scaling"), and `kubectl krafty plan` saying brokers.replicas 2 would be refused
    preview = plan(prod, {"brokers": {"replicas": 2}})
    assert (preview["verdict"], preview["restarts"], preview["scaling"]) == ("Refused", [], None)
    # When brokers.replicas goes to 2
    prod.patch_spec({"brokers": {"replicas": 2}})
    try:
        degraded = wait_for(lambda: prod.condition("Degraded"), lambda c: c.get("reason") == "ScaleDownBlocked",
                            180, "the scale-down refused")
        assert degraded["message"] == preview["refused"][0]
        assert "would not fit" in degraded["message"]
        assert "replication factor 3" in degraded["message"]
        assert len(prod.pods("broker")) == 3
        # And the cluster keeps serving
        report = client.cli("produce", prod.bootstrap, "scaling", "--count", "300", "--acked", "/tmp/acked-after.json")
        assert report["acked"] == 300
    finally:
        prod.patch_spec({"brokers": {"replicas": 3}})
    wait_for(lambda: prod.condition("Degraded"), lambda c: c.get("status") == "False", 180, "the refusal cleared")


@pytest.mark.full  # about 90 s: CI scales brokers under load and runs a dedicated quorum in test_25
def test_controller_quorum_3_to_1_to_3_under_load_keeps_a_leader_and_loses_no_metadata(
        prod: KafkaClusterHandle, client: ClientPod, operator: KubeCluster):
    seen: list[tuple[float, int]] = []
    stop = threading.Event()

    def watch_leader() -> None:
        while not stop.is_set():
            out = prod.kafka_tool("kafka-metadata-quorum.sh", "describe", "--status", timeout=60)
            leader = re.search(r"LeaderId:\s+(-?\d+)", out)
            seen.append((time.monotonic(), int(leader.group(1)) if leader else -1))

    operator.apply([topic_resource("quorum-load", "prod", partitions=3, replicas=3, config={"min.insync.replicas": 2})])
    wait_topic_ready(operator, "quorum-load")
    watcher = threading.Thread(target=watch_leader, daemon=True)
    watcher.start()
    created = []
    try:
        with client.steady_producer(prod.bootstrap, "quorum-load", rate=50) as report:
            for size in (1, 3):
                prod.patch_spec({"controllers": {"replicas": size}})
                wait_for(lambda: prod.status().get("quorum", {}).get("voters"),
                         lambda voters, n=size: voters == [1000 + i for i in range(n)], 900, f"{size} voters")
                wait_for(lambda: len(prod.pods("controller")), lambda n, s=size: n == s, 300,
                         f"{size} controller pods")
                # metadata changes keep working after each step
                name = f"quorum-step-{size}"
                operator.apply([topic_resource(name, "prod", partitions=1, replicas=2)])
                wait_topic_ready(operator, name)
                created.append(name)
    finally:
        stop.set()
        watcher.join(90)
    verified = client.verify(prod.bootstrap, "quorum-load")
    assert_written(report)
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    assert seen, "the quorum was never described"
    assert all(leader >= 1000 for _, leader in seen), f"moments without a leader: {seen}"
    # Every voter was removed while it still ran, before it stopped, and no metadata was lost
    removed = {e["message"] for e in prod.events("VoterRemoved")}
    assert {"controller 1002 removed from the KRaft voters", "controller 1001 removed from the KRaft voters"} <= removed
    topics = set(prod.kafka_tool("kafka-topics.sh", "--list").split())
    assert {"quorum-load", *created} <= topics  # made before, between and after the steps
    prod.wait_ready(600)
