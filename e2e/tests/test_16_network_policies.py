"""NetworkPolicies on real pods, enforced by kube-router's firewall on the local cluster (the CNI bridge alone
enforces none). The "small" cluster has its policy by default: the client pod reaches the client listeners and
the metrics port but not the controller and replication ports, which only the cluster's own pods and the operator
reach (the cluster keeps working under it: every other test runs with it). A listener that names peers admits
only them; switching policies off removes the policy. None of this restarts a Kafka pod."""

from __future__ import annotations

from typing import Any

from krafty_testkit.k8s_kafka import NAMESPACE, ClientPod, KafkaClusterHandle
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for

PROBE = """import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("open")
except OSError as error:
    print("closed", error)
"""
PLAIN, TLS, REPLICATION, CONTROLLER, METRICS = 9092, 9094, 9091, 9093, 9404
LISTENERS = [{"name": "plain", "port": PLAIN}, {"name": "tls", "port": TLS, "tls": True}]


def reachable(client: ClientPod, port: int) -> bool:
    """Whether a TCP connection from the client pod to broker 0's port opens (three seconds at most)."""
    host = f"small-broker-0.small-brokers.{NAMESPACE}.svc.cluster.local"
    out = client.kube.kubectl("exec", "-n", client.namespace, client.name, "--", "python3", "-c", PROBE, host,
                              str(port), timeout=30)
    return out.strip().startswith("open")


def wait_reachable(client: ClientPod, wanted: dict[int, bool], why: str) -> None:
    wait_for(lambda: {port: reachable(client, port) for port in wanted}, lambda seen: seen == wanted, 60, why)


def pod_uids(handle: KafkaClusterHandle) -> list[str]:
    return [p["metadata"]["uid"] for p in handle.pods("broker")]


def policy(kube: KubeCluster) -> dict[str, Any] | None:
    found = kube.kubectl_json("get", "networkpolicies", "-n", NAMESPACE, "--field-selector",
                              "metadata.name=small-kafka")["items"]
    return found[0] if found else None


def test_client_pods_reach_the_listeners_and_metrics_but_not_the_internal_ports(small: KafkaClusterHandle,
                                                                                 client: ClientPod):
    found = policy(small.kube)
    assert found is not None
    ports = {rule["ports"][0]["port"]: len(rule.get("from", [])) for rule in found["spec"]["ingress"]}
    # (the internal ports: the cluster's pods and the operator's; the others: everyone)
    assert ports == {CONTROLLER: 2, REPLICATION: 2, PLAIN: 0, TLS: 0, METRICS: 0}
    wait_reachable(client, {PLAIN: True, TLS: True, METRICS: True, REPLICATION: False, CONTROLLER: False},
                   "only the client and metrics ports open to the client pod")
    assert small.condition("Ready")["status"] == "True"


def test_a_listener_naming_peers_admits_only_them(small: KafkaClusterHandle, client: ClientPod):
    uids = pod_uids(small)
    peers = [{"podSelector": {"matchLabels": {"kafka-client": "true"}}}]
    small.patch_spec({"listeners": [LISTENERS[0], {**LISTENERS[1], "networkPolicyPeers": peers}]})
    try:
        # Given the TLS listener open to pods labelled kafka-client=true only, the unlabelled client is kept out
        wait_reachable(client, {TLS: False, PLAIN: True}, "the TLS listener closed to the unlabelled client")
        # When the client pod gets the label, Then it is let in
        small.kube.kubectl("label", "pod", client.name, "-n", client.namespace, "kafka-client=true")
        wait_reachable(client, {TLS: True}, "the TLS listener open to the labelled client")
    finally:
        small.kube.kubectl("label", "pod", client.name, "-n", client.namespace, "kafka-client-")
        small.patch_spec({"listeners": LISTENERS})
    wait_reachable(client, {TLS: True}, "the TLS listener open to everyone again")
    assert pod_uids(small) == uids


def test_switching_policies_off_removes_the_policy_and_on_restores_it(small: KafkaClusterHandle, client: ClientPod):
    uids = pod_uids(small)
    small.patch_spec({"networkPolicies": {"enabled": False}})
    try:
        wait_for(lambda: policy(small.kube), lambda found: found is None, 60, "the NetworkPolicy deleted")
        # Without it the controller port is open to any pod (TLS still asks for a client certificate)
        wait_reachable(client, {CONTROLLER: True}, "the controller port open without a policy")
    finally:
        small.patch_spec({"networkPolicies": {"enabled": True}})
    wait_for(lambda: policy(small.kube), lambda found: found is not None, 60, "the NetworkPolicy back")
    wait_reachable(client, {CONTROLLER: False}, "the controller port closed again")
    assert pod_uids(small) == uids
