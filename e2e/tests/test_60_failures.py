"""Failures on real pods, each with the operator restarted in the middle:
a broker SIGKILLed under acks=all load, the active controller SIGKILLed; and a cluster whose nodes hang,
beside one whose changes go on. (Whole machines failing, and a drain: test_35_nodes.py.)"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    OPERATOR_NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for


def restart_operator(kube: KubeCluster) -> None:
    kube.kubectl("delete", "pod", "-n", OPERATOR_NAMESPACE, "-l", "app.kubernetes.io/name=krafty-operator",
                 "--grace-period=0", "--force")


def in_sync(handle: KafkaClusterHandle) -> None:
    wait_for(lambda: handle.status().get("partitions", {}), lambda p: p.get("underReplicated") == 0 and p.get("total"),
             600, f"{handle.name} fully in sync", interval=5)


@pytest.mark.local_faults
def test_sigkilled_broker_under_load_loses_nothing(prod: KafkaClusterHandle, client: ClientPod,
                                                   operator: KubeCluster):
    operator.apply([topic_resource("crash", "prod", partitions=6, replicas=3, config={"min.insync.replicas": 2})])
    wait_topic_ready(operator, "crash")
    with client.steady_producer(prod.bootstrap, "crash", rate=100) as report:
        time.sleep(10)
        # When a broker is killed outright and, meanwhile, the operator restarts
        operator.kill_container(NAMESPACE, "prod-broker-1")
        restart_operator(operator)
        time.sleep(10)
    verified = client.verify(prod.bootstrap, "crash")
    # Then every acknowledged record is there, once, and the cluster returns to fully in sync
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    assert report["acked"] > 1000
    in_sync(prod)
    prod.wait_ready(600)


@pytest.mark.full  # about 45 s: CI SIGKILLs a broker under load in the test above
@pytest.mark.local_faults
def test_sigkilled_active_controller_is_replaced_within_seconds(prod: KafkaClusterHandle, client: ClientPod,
                                                                operator: KubeCluster):
    leader = prod.status()["quorum"]["leaderId"]
    pod = f"prod-controller-{leader - 1000}"
    watched: dict[str, Any] = {}

    def watch() -> None:
        # Asked through the brokers, which forward to the active controller: the controller listener takes
        # only clients with a certificate of the cluster CA
        watched.update(client.cli("watch-leader", prod.bootstrap, "--seconds", "40", timeout=120))

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(3)
    operator.kill_container(NAMESPACE, pod)
    restart_operator(operator)
    watcher.join(150)
    # A new leader within seconds, and it is another controller
    assert watched["leaders"][0] == leader
    assert any(new != leader for new in watched["leaders"][1:])
    assert watched["longest_without_leader_s"] < 10, watched
    # And topic creation keeps working
    operator.apply([topic_resource("after-controller-crash", "prod", partitions=1, replicas=3)])
    wait_topic_ready(operator, "after-controller-crash")
    prod.wait_ready(600)


@pytest.mark.full  # about two minutes, most of it the frozen cluster coming back
@pytest.mark.local_faults
def test_a_cluster_whose_brokers_hang_does_not_hold_up_another(prod: KafkaClusterHandle, small: KafkaClusterHandle,
                                                               operator: KubeCluster):
    """small's nodes frozen (SIGSTOP: connections open, nothing answers, every call waits out its timeout)."""
    def defaults() -> str:
        return prod.kafka_tool("kafka-configs.sh", "--entity-type", "brokers", "--entity-default", "--describe")

    def applied_after(retention_ms: int) -> float:
        began = time.monotonic()
        prod.patch_spec({"brokers": {"config": {"log.retention.ms": retention_ms}}})
        wait_for(defaults, lambda out: f"log.retention.ms={retention_ms}" in out, 300, "prod's change applied")
        return time.monotonic() - began

    # Given how long prod takes to apply a dynamic change while small is healthy
    small.wait_ready(300)
    healthy = applied_after(7300000)
    # When every node of small freezes
    pods = [p["metadata"]["name"] for p in small.pods()]
    for pod in pods:
        operator.kill_container(NAMESPACE, pod, "STOP")
    try:
        wait_for(lambda: small.condition("Available"), lambda c: c.get("status") != "True", 180,
                 "the operator seeing small hang")
        # Then prod's change still applies as fast
        frozen = applied_after(7400000)
    finally:
        for pod in pods:
            operator.kill_container(NAMESPACE, pod, "CONT")
    report_table("A dynamic change to prod applied (kafka-configs.sh shows it) while small's nodes are frozen",
                 ["small healthy (s)", "small frozen (s)"], [[f"{healthy:.1f}", f"{frozen:.1f}"]])
    small.wait_ready(600)
