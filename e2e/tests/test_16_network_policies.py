"""NetworkPolicies on real pods, enforced by kube-router's firewall on the local cluster (the CNI bridge alone
enforces none). The "small" cluster has its policy by default: the client pod of its namespace reaches the client
listeners and the metrics port but not the controller and replication ports, which only the cluster's own pods and
the operator reach (the cluster keeps working under it: every other test runs with it); a pod of another namespace
reaches none of them until the cluster says unnamedPeers: Everyone. A listener that names peers admits only them;
switching policies off removes the policy. None of this restarts a Kafka pod."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from reaching import PLAIN_LISTENER, TLS_LISTENER, reachable

from krafty_testkit.k8s_kafka import NAMESPACE, TENANT_NAMESPACE, ClientPod, KafkaClusterHandle
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for

PLAIN, TLS, REPLICATION, CONTROLLER, METRICS = PLAIN_LISTENER["port"], TLS_LISTENER["port"], 9091, 9093, 9404
LISTENERS = [PLAIN_LISTENER, TLS_LISTENER]


def wait_reachable(client: ClientPod, small: KafkaClusterHandle, wanted: dict[int, bool], why: str) -> None:
    wait_for(lambda: {port: reachable(client, small, port) for port in wanted}, lambda seen: seen == wanted, 60,
             why)


def pod_uids(handle: KafkaClusterHandle) -> list[str]:
    return [p["metadata"]["uid"] for p in handle.pods("broker")]


def policy(kube: KubeCluster) -> dict[str, Any] | None:
    found = kube.kubectl_json("get", "networkpolicies", "-n", NAMESPACE, "--field-selector",
                              "metadata.name=small-kafka")["items"]
    return found[0] if found else None


@pytest.mark.usefixtures("small_tls")
def test_client_pods_reach_the_listeners_and_metrics_but_not_the_internal_ports(small: KafkaClusterHandle,
                                                                                 client: ClientPod):
    found = policy(small.kube)
    assert found is not None
    ports = {rule["ports"][0]["port"]: len(rule.get("from", [])) for rule in found["spec"]["ingress"]}
    # (the internal ports: the cluster's pods and the operator's; the listeners: the namespace's pods; metrics:
    # those and the install's Prometheus)
    assert ports == {CONTROLLER: 2, REPLICATION: 2, PLAIN: 1, TLS: 1, METRICS: 2}
    wait_reachable(client, small, {PLAIN: True, TLS: True, METRICS: True, REPLICATION: False, CONTROLLER: False},
                   "only the client and metrics ports open to the client pod")
    assert small.condition("Ready")["status"] == "True"


@pytest.mark.usefixtures("small_tls")
def test_a_listener_naming_peers_admits_only_them(small: KafkaClusterHandle, client: ClientPod):
    uids = pod_uids(small)
    peers = [{"podSelector": {"matchLabels": {"kafka-client": "true"}}}]
    small.patch_spec({"listeners": [LISTENERS[0], {**LISTENERS[1], "networkPolicyPeers": peers}]})
    try:
        # Given the TLS listener open to pods labelled kafka-client=true only, the unlabelled client is kept out
        wait_reachable(client, small, {TLS: False, PLAIN: True}, "the TLS listener closed to the unlabelled client")
        # When the client pod gets the label, Then it is let in
        small.kube.kubectl("label", "pod", client.name, "-n", client.namespace, "kafka-client=true")
        wait_reachable(client, small, {TLS: True}, "the TLS listener open to the labelled client")
    finally:
        small.kube.kubectl("label", "pod", client.name, "-n", client.namespace, "kafka-client-")
        small.patch_spec({"listeners": LISTENERS})
    wait_reachable(client, small, {TLS: True}, "the TLS listener open to everyone again")
    assert pod_uids(small) == uids


@pytest.mark.usefixtures("small_tls")
def test_switching_policies_off_removes_the_policy_and_on_restores_it(small: KafkaClusterHandle, client: ClientPod):
    uids = pod_uids(small)
    small.patch_spec({"networkPolicies": {"enabled": False}})
    try:
        wait_for(lambda: policy(small.kube), lambda found: found is None, 60, "the NetworkPolicy deleted")
        # Without it the controller port is open to any pod (TLS still asks for a client certificate)
        wait_reachable(client, small, {CONTROLLER: True}, "the controller port open without a policy")
    finally:
        small.patch_spec({"networkPolicies": {"enabled": True}})
    wait_for(lambda: policy(small.kube), lambda found: found is not None, 60, "the NetworkPolicy back")
    wait_reachable(client, small, {CONTROLLER: False}, "the controller port closed again")
    assert pod_uids(small) == uids


@pytest.fixture(scope="module")
def elsewhere(small: KafkaClusterHandle) -> Iterator[ClientPod]:
    """A client pod of another namespace (another tenant's)."""
    pod = ClientPod(small.kube, name="kafka-client-elsewhere", namespace=TENANT_NAMESPACE)
    small.kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TENANT_NAMESPACE}}])
    pod.create()
    yield pod
    small.kube.kubectl("delete", "pod", pod.name, "-n", pod.namespace, "--wait=false")


@pytest.mark.full  # a cluster of its own, about 90 s: CI keeps a listener naming its peers and policies off and on
@pytest.mark.usefixtures("small_tls")
def test_a_pod_of_another_namespace_reaches_a_new_cluster_only_once_it_admits_everyone(
        small: KafkaClusterHandle, elsewhere: ClientPod):
    uids = pod_uids(small)
    # Given a cluster made by this release, whose listeners and metrics name no peers: a pod of another namespace
    # opens none of its ports
    closed = {PLAIN: False, TLS: False, METRICS: False, REPLICATION: False, CONTROLLER: False}
    wait_reachable(elsewhere, small, closed, "every port closed to another namespace's pod")
    # When the cluster says who names no peers admits everyone, Then the pod opens the listeners and metrics only
    small.patch_spec({"networkPolicies": {"unnamedPeers": "Everyone"}})
    try:
        wait_reachable(elsewhere, small, {**closed, PLAIN: True, TLS: True, METRICS: True},
                       "the listeners and metrics open to everyone")
    finally:
        small.patch_spec({"networkPolicies": {"unnamedPeers": None}})
    wait_reachable(elsewhere, small, closed, "every port closed to it again")
    assert pod_uids(small) == uids
