"""Tenants of one operator, on real pods. Tenant B is a ServiceAccount bound to Kubernetes' own `edit` role in its
namespace only (the krafty kinds reach it through the chart's aggregated role). B reads nothing of tenant A's
namespace nor of the operator's, and may not port-forward to the operator. Each hostile input B can write is
refused by the API server or held with a condition naming it, and makes nothing run. Meanwhile A's cluster (prod)
keeps applying changes: the time a dynamic config change takes while B's inputs are held is printed beside the
same change before them, in the same run; and B's own running cluster takes every acks=all write its producer
sends throughout."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    OPERATOR_NAMESPACE,
    TENANT_NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    assert_written,
    cluster_spec,
    topic_resource,
)
from krafty_testkit.kube import KubeCluster, KubeError
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

TENANT_B = f"system:serviceaccount:{TENANT_NAMESPACE}:tenant-b"
# A certificate that never ends: the PEM reader took 65 s over 3,000 spaces before it was made linear
ENDLESS_PEM = "-----BEGIN CERTIFICATE-----\n" + " " * 3000
HELD_SPEC = cluster_spec("combined")  # (held before any pod: the size never runs)
ROUNDS = 2
RATE = 50  # records a second B's producer sends its own cluster


def as_b(kube: KubeCluster, *args: str, stdin: str | None = None) -> str:
    return kube.kubectl("--as", TENANT_B, *args, stdin=stdin)


def refused_to_b(kube: KubeCluster, *args: str, stdin: str | None = None) -> str:
    """The API server's refusal of a request made as tenant B."""
    with pytest.raises(KubeError) as refused:
        as_b(kube, *args, stdin=stdin)
    return str(refused.value)


def cluster(name: str, spec: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
                       "metadata": {"name": name, "namespace": TENANT_NAMESPACE}, "spec": spec})


@pytest.fixture(scope="module")
def tenant_b(operator: KubeCluster) -> Iterator[KubeCluster]:
    """Tenant B's account, with `edit` in its own namespace and nothing anywhere else; what it made is deleted after."""
    operator.kubectl("delete", "kafkaclusters,secrets", "--all", "-n", TENANT_NAMESPACE, "--wait=true", timeout=300)
    operator.apply([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant-b", "namespace": TENANT_NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "tenant-b-edit", "namespace": TENANT_NAMESPACE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
         "subjects": [{"kind": "ServiceAccount", "name": "tenant-b", "namespace": TENANT_NAMESPACE}]}])
    yield operator
    operator.kubectl("delete", "topics", "--all", "-n", TENANT_NAMESPACE, "--wait=false")
    operator.kubectl("delete", "pods", "--all", "-n", TENANT_NAMESPACE, "--wait=false")
    operator.kubectl("delete", "kafkaclusters", "--all", "-n", TENANT_NAMESPACE, "--wait=true", timeout=300)


@pytest.fixture(scope="module")
def b_running(tenant_b: KubeCluster) -> tuple[KafkaClusterHandle, ClientPod]:
    """B's own running cluster (one combined node) with a topic, made by B, and a client pod of B's namespace."""
    one_node = cluster_spec("combined", brokers=1, controllers=1,
                            topicDefaults={"replicationFactor": 1, "minInsyncReplicas": 1})
    as_b(tenant_b, "apply", "-f", "-", stdin=cluster("mine", one_node))
    as_b(tenant_b, "apply", "-f", "-", stdin=json.dumps(topic_resource("orders", "mine", TENANT_NAMESPACE,
                                                                       partitions=3, replicas=1)))
    client = ClientPod(tenant_b, name="b-client", namespace=TENANT_NAMESPACE)
    client.create()
    mine = KafkaClusterHandle(tenant_b, "mine", TENANT_NAMESPACE)
    mine.wait_ready(600)
    return mine, client


def dynamic_change_seconds(prod: KafkaClusterHandle, value: int) -> float:
    """From the patch of a dynamic cluster-wide setting to the operator's Event that it was applied."""
    began = time.monotonic()
    prod.patch_spec({"brokers": {"config": {"log.retention.ms": value}}})
    wait_for(lambda: [e["message"] for e in prod.events("DynamicConfigApplied")],
             lambda said: any(f"log.retention.ms={value}" in message for message in said), 180,
             f"log.retention.ms={value} applied")
    return time.monotonic() - began


def test_a_hostile_tenant_reads_nothing_of_others_and_holds_only_its_own(
        tenant_b: KubeCluster, prod: KafkaClusterHandle, b_running: tuple[KafkaClusterHandle, ClientPod]):
    kube = tenant_b
    mine, b_client = b_running
    # Given B's rights: the krafty kinds in its own namespace (the chart's role, aggregated into edit)
    assert as_b(kube, "auth", "can-i", "create", "kafkaclusters.kafka.krafty.io", "-n", TENANT_NAMESPACE).strip() \
        == "yes"
    # Then it reads nothing of A's namespace nor of the operator's, and may not port-forward to the operator
    for namespace, kind in [(NAMESPACE, "kafkaclusters"), (NAMESPACE, "secrets"), (NAMESPACE, "topics"),
                            (OPERATOR_NAMESPACE, "secrets"), (OPERATOR_NAMESPACE, "pods")]:
        assert "forbidden" in refused_to_b(kube, "get", kind, "-n", namespace), (namespace, kind)
    assert refused_to_b(kube, "auth", "can-i", "create", "pods/portforward", "-n", OPERATOR_NAMESPACE).strip() \
        .endswith("no")
    # And it may not ask for a plan of A's cluster: not in A's namespace (RBAC), and a plan in its own names a
    # cluster of its own namespace only, which the operator says is not there (nothing of A's is told)
    plan = {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaClusterPlan",
            "spec": {"clusterRef": {"name": prod.name}, "spec": prod.get()["spec"]}}
    assert 'cannot create resource "kafkaclusterplans"' in refused_to_b(kube, "create", "-f", "-", stdin=json.dumps(
        {**plan, "metadata": {"name": "peek", "namespace": NAMESPACE}}))
    kube.kubectl("delete", "kafkaclusterplan", "peek", "-n", TENANT_NAMESPACE, "--ignore-not-found")  # (a run before)
    as_b(kube, "create", "-f", "-", stdin=json.dumps({**plan, "metadata": {"name": "peek",
                                                                          "namespace": TENANT_NAMESPACE}}))
    told = wait_for(lambda: (as_b(kube, "get", "kafkaclusterplan", "peek", "-n", TENANT_NAMESPACE, "-o",
                                  "jsonpath={.status.conditions[0].reason}/{.status.plan}")), lambda said: "/" in said
                    and said.split("/")[0], 120, "B's plan answered")
    assert told == "ClusterNotFound/", told
    kube.kubectl("delete", "kafkaclusterplan", "peek", "-n", TENANT_NAMESPACE)

    # Given A's dynamic changes timed before B writes anything
    config = prod.get()["spec"].get("brokers", {}).get("config", {})
    kept = config.get("log.retention.ms")
    values = iter(range(7_300_000, 7_400_000, 1000))
    before = [dynamic_change_seconds(prod, next(values)) for _ in range(ROUNDS)]

    # While B's own cluster takes an acks=all producer's writes from B's own pod
    with b_client.steady_producer(mine.bootstrap, "orders", rate=RATE) as written:
        # When B writes what it can: a CA Secret whose certificate never ends, a cluster naming it, settings that would
        # wedge a cluster or stop its writes, and a listener named as the nodes' own
        as_b(kube, "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "endless-ca", "namespace": TENANT_NAMESPACE},
            "type": "kubernetes.io/tls", "stringData": {"tls.crt": ENDLESS_PEM, "tls.key": ENDLESS_PEM}}))
        held = {
            "endless": ({**HELD_SPEC, "tls": {"clusterCa": {"secretName": "endless-ca"}}}, "CaUnusable", "endless-ca"),
            "wedge": ({**HELD_SPEC, "brokers": {**HELD_SPEC["brokers"], "config": {
                "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT"}}}, "InvalidSpec",
                      "ssl.principal.mapping.rules"),
            "nobatch": ({**HELD_SPEC, "brokers": {**HELD_SPEC["brokers"], "config": {"message.max.bytes": "0"}}},
                        "InvalidSpec", "message.max.bytes"),
        }
        for name, (spec, _, _) in held.items():
            as_b(kube, "apply", "-f", "-", stdin=cluster(name, spec))
        listener = refused_to_b(kube, "apply", "-f", "-", stdin=cluster("spoof", {**HELD_SPEC, "listeners": [
            {"name": "replication", "port": 9092}]}))
        assert "replication and controller are the nodes' own listeners" in listener, listener

        # Then each cluster is held with a condition naming what it named
        for name, (_, reason, named) in held.items():
            handle = KafkaClusterHandle(kube, name, TENANT_NAMESPACE)
            ready = wait_for(lambda handle=handle: handle.condition("Ready"),
                             lambda c, reason=reason: c.get("reason") == reason, 120, f"{name} held with {reason}")
            assert named in ready["message"], ready
        # And nothing of the held clusters runs
        running = kube.kubectl_json("get", "statefulsets,pods", "-n", TENANT_NAMESPACE)["items"]
        assert not [o["metadata"]["name"] for o in running if o["metadata"]["name"].startswith(tuple(held))]

        # And A's changes apply while B's inputs are held (the operator reads them on every pass)
        during = [dynamic_change_seconds(prod, next(values)) for _ in range(ROUNDS)]
    # And B's own cluster took every write its producer sent through all of it
    assert_written(written)
    prod.patch_spec({"brokers": {"config": {"log.retention.ms": kept}}})
    prod.wait_ready(300)
    base, attacked = statistics.median(before), statistics.median(during)
    report_table("A's dynamic config change, patch to DynamicConfigApplied (s)",
                 ["tenant B", "rounds", "min", "median", "max", "ratio"],
                 [["nothing written (baseline)", ROUNDS, f"{min(before):.1f}", f"{base:.1f}", f"{max(before):.1f}",
                   "1.00"],
                  ["3 hostile clusters held", ROUNDS, f"{min(during):.1f}", f"{attacked:.1f}", f"{max(during):.1f}",
                   f"{attacked / base:.2f}"]])
    report_table(f"B's own cluster meanwhile: an acks=all producer at {RATE}/s",
                 ["seconds", "acknowledged", "failed"], [[f"{written['seconds']:.0f}", written["acked"],
                                                          sum(written["failed"].values())]])
