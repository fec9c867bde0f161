"""The cluster's NetworkPolicy: which pods may reach which port of the Kafka pods.

- the controller port: the cluster's own pods and the operator's;
- the replication port: the cluster's brokers and the operator (its Admin client bootstraps there);
- each client listener: the peers it names; when it names none, the cluster's own namespace (unnamedPeers
  Namespace, a new cluster's default) or everyone (Everyone, and always for a nodeport or loadbalancer
  listener, which clients outside Kubernetes reach through the nodes);
- the metrics port (when metrics are on): the peers metrics names; when none, the cluster's namespace and the
  install's monitoring peers (the chart's networkPolicy.metricsFrom), or everyone.
Any other port of the Kafka pods is closed to pods. Kubelet probes come from the node, which
NetworkPolicies do not restrict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from krafty import naming
from krafty.model.cluster import Listener, ListenerType
from krafty.model.context import ClusterContext
from krafty.model.network import NetworkPolicyPeer, UnnamedPeers
from krafty.naming import Pool


def _rule(port: int, peers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": port}]}
    if peers:
        rule["from"] = list(peers)
    return rule


def _named(peers: Sequence[NetworkPolicyPeer]) -> list[dict[str, Any]]:
    return [peer.as_kubernetes() for peer in peers]


def _own_namespace() -> dict[str, Any]:
    """Every pod of the NetworkPolicy's namespace (a new object each time: manifests share nothing)."""
    return {"podSelector": {}}


def _listener_peers(ctx: ClusterContext, listener: Listener) -> list[dict[str, Any]]:
    if listener.network_policy_peers:
        return _named(listener.network_policy_peers)
    if ctx.unnamed_peers is UnnamedPeers.EVERYONE or listener.type is not ListenerType.INTERNAL:
        return []
    return [_own_namespace()]


def _metrics_peers(ctx: ClusterContext) -> list[dict[str, Any]]:
    named = ctx.spec.metrics.network_policy_peers
    if named:
        return _named(named)
    if ctx.unnamed_peers is UnnamedPeers.EVERYONE:
        return []
    return [_own_namespace(), *_named(ctx.monitoring_peers)]


def internal_peers(ctx: ClusterContext, pool: Pool | None = None) -> list[dict[str, Any]]:
    """The cluster's own pods (of one pool, when given) and, when it runs in the cluster, the operator's."""
    peers: list[dict[str, Any]] = [{"podSelector": {"matchLabels": naming.selector_labels(ctx.name, pool)}}]
    if ctx.operator is not None:
        peers.append({"namespaceSelector": {"matchLabels": {naming.NAMESPACE_NAME_LABEL: ctx.operator.namespace}},
                      "podSelector": {"matchLabels": dict(ctx.operator.labels)}})
    return peers


def network_policy(ctx: ClusterContext) -> dict[str, Any] | None:
    spec = ctx.spec
    if not spec.network_policies.enabled:
        return None
    ingress = [_rule(naming.CONTROLLER_PORT, internal_peers(ctx)),
               _rule(naming.REPLICATION_PORT, internal_peers(ctx, Pool.BROKER))]
    ingress += [_rule(listener.port, _listener_peers(ctx, listener)) for listener in ctx.listeners_by_port]
    if spec.metrics.enabled:
        ingress.append(_rule(naming.METRICS_PORT, _metrics_peers(ctx)))
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": ctx.metadata(naming.network_policy(ctx.name)),
        "spec": {"podSelector": {"matchLabels": naming.selector_labels(ctx.name)},
                 "policyTypes": ["Ingress"], "ingress": ingress},
    }
