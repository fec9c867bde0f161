"""The cluster's NetworkPolicy and the peers the spec names."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from krafty import naming
from krafty.decide import identity
from krafty.model import KafkaClusterSpec
from krafty.model.context import OperatorPeer
from krafty.model.network import NetworkPolicyPeer, UnnamedPeers
from krafty.naming import Pool
from krafty.render.cluster import children
from krafty.render.network_policy import network_policy

from ...conftest import context, example

OPERATOR = OperatorPeer("krafty-system",
                        {"app.kubernetes.io/name": "krafty-operator", "app.kubernetes.io/instance": "k"})
CLUSTER_PODS = {"podSelector": {"matchLabels": naming.selector_labels("demo")}}


def _rules(spec: dict[str, Any], operator: OperatorPeer | None = OPERATOR) -> dict[int, list[dict[str, Any]] | None]:
    policy = network_policy(replace(context(spec), operator=operator))
    assert policy is not None
    assert policy["spec"]["podSelector"] == {"matchLabels": naming.selector_labels("demo")}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    return {rule["ports"][0]["port"]: rule.get("from") for rule in policy["spec"]["ingress"]}


def test_internal_ports_admit_only_the_clusters_pods_and_the_operators():
    rules = _rules(example("kafkacluster-combined.yaml")["spec"])
    operator = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "krafty-system"}},
                "podSelector": {"matchLabels": dict(OPERATOR.labels)}}
    brokers = {"podSelector": {"matchLabels": naming.selector_labels("demo", Pool.BROKER)}}
    assert rules[naming.CONTROLLER_PORT] == [CLUSTER_PODS, operator]
    assert rules[naming.REPLICATION_PORT] == [brokers, operator]  # (dedicated controllers never call brokers)
    # an operator outside the cluster (development) reaches the pods from the node, which policies leave open
    assert _rules(example("kafkacluster-combined.yaml")["spec"], None)[naming.CONTROLLER_PORT] == [CLUSTER_PODS]


PROMETHEUS = NetworkPolicyPeer.model_validate({"namespaceSelector": {}, "podSelector": {"matchLabels": {
    "app.kubernetes.io/name": "prometheus"}}})
OWN = {"podSelector": {}}
NODEPORT = {"name": "outside", "port": 9095, "type": "nodeport"}


@pytest.mark.parametrize(("created", "asked", "listener", "nodeport", "metrics"), [
    (UnnamedPeers.NAMESPACE, None, [OWN], None, [OWN, PROMETHEUS.as_kubernetes()]),  # a new cluster
    (UnnamedPeers.EVERYONE, None, None, None, None),  # made before this release: as it ran
    (UnnamedPeers.EVERYONE, "Namespace", [OWN], None, [OWN, PROMETHEUS.as_kubernetes()]),  # moved by its spec
    (UnnamedPeers.NAMESPACE, "Everyone", None, None, None),  # opened by its spec
], ids=["new", "made before", "made before, then Namespace", "new, then Everyone"])
def test_a_listener_or_metrics_naming_no_peers_admits_the_namespace_or_everyone(created, asked, listener, nodeport,
                                                                               metrics):
    # Given a cluster created with one default, its spec choosing another (or none), and the install's Prometheus
    spec = example("kafkacluster-combined.yaml")["spec"] | {
        "listeners": [{"name": "plain", "port": 9092}, NODEPORT],
        "networkPolicies": {"unnamedPeers": asked} if asked else {}}
    policy = network_policy(replace(context(spec), created_unnamed_peers=created, monitoring_peers=(PROMETHEUS,)))
    assert policy is not None
    rules = {rule["ports"][0]["port"]: rule.get("from") for rule in policy["spec"]["ingress"]}
    # Then an internal listener and the metrics port admit what that says, a nodeport listener everyone
    assert (rules[9092], rules[9095], rules[naming.METRICS_PORT]) == (listener, nodeport, metrics)


def test_the_default_chosen_at_creation_is_kept_in_the_clusters_config_map():
    # A new cluster records Namespace; one whose ConfigMap predates the key ran with Everyone, and keeps it
    assert identity.unnamed_peers(None) is UnnamedPeers.NAMESPACE
    assert identity.unnamed_peers({naming.CLUSTER_ID_KEY: "x"}) is UnnamedPeers.EVERYONE
    assert identity.unnamed_peers({naming.UNNAMED_PEERS_KEY: "Namespace"}) is UnnamedPeers.NAMESPACE
    config = next(c for c in children(replace(context(example("kafkacluster-combined.yaml")["spec"]),
                                              created_unnamed_peers=UnnamedPeers.EVERYONE))
                  if c.kind == "ConfigMap" and c.name == naming.config_map("demo"))
    assert config.desired is not None
    assert config.desired["data"][naming.UNNAMED_PEERS_KEY] == "Everyone"


def test_listeners_and_metrics_admit_the_peers_they_name():
    rules = _rules(example("kafkacluster-dedicated.yaml")["spec"])
    assert rules[9092] == [OWN]  # no peers named: the cluster's namespace (a new cluster)
    assert rules[9094] == [{"podSelector": {"matchLabels": {"kafka-client": "true"}}},
                           {"namespaceSelector": {"matchLabels": {"team": "analytics"}}}]
    assert rules[naming.METRICS_PORT] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}, "podSelector": {"matchLabels": {
            "app.kubernetes.io/name": "prometheus"}}}]
    assert set(rules) == {naming.CONTROLLER_PORT, naming.REPLICATION_PORT, 9092, 9094, naming.METRICS_PORT}


def test_metrics_off_closes_the_metrics_port():
    spec = example("kafkacluster-combined.yaml")["spec"] | {"metrics": {"enabled": False}}
    assert naming.METRICS_PORT not in _rules(spec)


def test_disabled_policies_are_deleted():
    spec = example("kafkacluster-combined.yaml")["spec"] | {"networkPolicies": {"enabled": False}}
    policy = [c for c in children(context(spec)) if c.kind == "NetworkPolicy"]
    assert [(c.name, c.desired) for c in policy] == [("demo-kafka", None)]


def test_ip_blocks_keep_their_except_key():
    peer = NetworkPolicyPeer.model_validate({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}})
    assert peer.as_kubernetes() == {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}


@pytest.mark.parametrize(("peer", "message"), [
    ({"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}, "cannot be combined"),
    ({}, "needs podSelector, namespaceSelector or ipBlock"),
    ({"ipBlock": {"cidr": "10.0.0.300/8"}}, "does not appear to be an IPv4 or IPv6 network"),
    ({"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]}}, "is not inside"),
    ({"podSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}, "need values"),
    ({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}}, "take none"),
    ({"podSelector": {"matchLabels": {"not a key": "x"}}}, "is not a valid label"),
    ({"podSelector": {"matchLabels": {"app": "-dash-first"}}}, "is not a valid label"),
    ({"podSelectr": {}}, "Extra inputs are not permitted"),
])
def test_bad_peers_are_refused_with_the_reason(peer: dict[str, Any], message: str):
    spec = example("kafkacluster-combined.yaml")["spec"] | {
        "listeners": [{"name": "plain", "port": 9092, "networkPolicyPeers": [peer]}]}
    with pytest.raises(ValidationError, match=message):
        KafkaClusterSpec.model_validate(spec)


def test_operator_peer_comes_from_the_charts_selector():
    peer = OperatorPeer.parse("ops", "app.kubernetes.io/name=krafty-operator,app.kubernetes.io/instance=k")
    assert peer == OperatorPeer("ops", {"app.kubernetes.io/name": "krafty-operator", "app.kubernetes.io/instance": "k"})
    for bad in ("", "app", "a=b,c"):
        with pytest.raises(ValueError, match="is not key=value"):
            OperatorPeer.parse("ops", bad)
