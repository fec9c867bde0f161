"""Rack awareness against a real API server: rack-aware clusters' accounts join the chart's one binding and
leave it, and a rack-aware cluster under an operator installed without it is held, saying why."""

from __future__ import annotations

import pytest

from krafty import naming
from krafty.clients.kube import Kube
from krafty.planning.cluster import PassResult
from krafty.reconcile import rack
from krafty.reconcile.cluster import ClusterReconciler, Settings
from krafty_testkit.apiserver import LocalApiServer

from ..conftest import TEST_IMAGES, admin_kube, operator_kube

NS = "racks"
BINDING = "krafty-kafka-rack"
@pytest.fixture(scope="module")
def kube(apiserver: LocalApiServer) -> Kube:
    return admin_kube(apiserver, NS)


def _subjects(kube: Kube) -> list[str]:
    body = kube.get("ClusterRoleBinding", BINDING, None)
    assert body is not None
    return sorted(f"{s['namespace']}/{s['name']}" for s in body.get("subjects") or [])


def test_rack_aware_clusters_join_the_one_binding_and_leave_it_with_the_charts_rights_only(
        apiserver: LocalApiServer, kube: Kube):
    # Given the chart's RBAC and its binding, with no subject yet, and the operator's rights only
    operator = operator_kube(apiserver, (NS,), rack_awareness=True)
    assert _subjects(kube) == []
    # When two clusters are rack-aware: both accounts are in it, each added once
    assert rack.admit(operator, BINDING, NS, "east", wanted=True)
    assert rack.admit(operator, BINDING, "other", "west", wanted=True)
    assert not rack.admit(operator, BINDING, NS, "east", wanted=True)
    assert _subjects(kube) == ["other/west-kafka", f"{NS}/east-kafka"]
    # When one stops being rack-aware (or is deleted): only its account leaves
    assert rack.admit(operator, BINDING, NS, "east", wanted=False)
    assert _subjects(kube) == ["other/west-kafka"]
    # And any other binding is out of its reach, said as such
    apiserver.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                     "metadata": {"name": "someone-elses"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": BINDING}})
    with pytest.raises(rack.RackBindingRefused, match="someone-elses"):
        rack.admit(operator, "someone-elses", NS, "east", wanted=True)


def test_a_missing_binding_is_named(kube: Kube):
    with pytest.raises(rack.RackBindingMissing, match="ClusterRoleBinding gone-rack"):
        rack.admit(kube, "gone-rack", NS, "east", wanted=True)
    assert not rack.admit(kube, "gone-rack", NS, "east", wanted=False)  # nothing to leave


def test_a_rack_aware_cluster_under_an_operator_without_rack_awareness_is_held_saying_why(
        apiserver: LocalApiServer, kube: Kube):
    # Given an operator installed without rack awareness, and a cluster that asks for it
    apiserver.apply({"apiVersion": naming.API_VERSION, "kind": naming.CLUSTER_KIND,
                     "metadata": {"name": "zoned", "namespace": NS},
                     "spec": {"brokers": {"replicas": 3}, "rack": {"topologyKey": "topology.kubernetes.io/zone"}}})
    body = kube.get(naming.CLUSTER_KIND, "zoned", NS)
    assert body is not None
    # When its pass runs
    outcome = ClusterReconciler(kube, Settings(TEST_IMAGES)).reconcile(body)
    # Then nothing is made, and the condition names the chart value to set
    assert outcome.result is PassResult.INVALID
    status = (kube.get(naming.CLUSTER_KIND, "zoned", NS) or {})["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "RackAwarenessNotInstalled"
    assert "rackAwareness.enabled" in ready["message"]
    assert kube.get("StatefulSet", naming.statefulset("zoned", naming.Pool.BROKER), NS) is None
