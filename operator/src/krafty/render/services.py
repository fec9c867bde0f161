"""Services: a headless one per pool (stable pod DNS names), the client bootstrap
Service, the metrics Service Prometheus scrapes, and for each nodeport or loadbalancer listener one Service
per broker and one to bootstrap from."""

from __future__ import annotations

from typing import Any

from krafty import naming
from krafty.model.cluster import Listener, ListenerType
from krafty.model.context import ClusterContext
from krafty.naming import Pool


def _listener_ports(ctx: ClusterContext) -> list[dict[str, Any]]:
    return [{"name": lst.name, "port": lst.port, "targetPort": lst.port} for lst in ctx.listeners_by_port]


def headless_service(ctx: ClusterContext, pool: Pool) -> dict[str, Any]:
    ports = [{"name": "controller", "port": naming.CONTROLLER_PORT, "targetPort": naming.CONTROLLER_PORT}]
    if pool is Pool.BROKER:
        ports = [*_listener_ports(ctx),
                 {"name": "replication", "port": naming.REPLICATION_PORT, "targetPort": naming.REPLICATION_PORT},
                 *([] if ctx.dedicated else ports)]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(naming.headless_service(ctx.name, pool), pool),
        "spec": {
            "clusterIP": "None",
            # Nodes must find each other before they are ready: the quorum forms through these names.
            "publishNotReadyAddresses": True,
            "selector": naming.selector_labels(ctx.name, pool),
            "ports": ports,
        },
    }


def bootstrap_service(ctx: ClusterContext) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(naming.bootstrap_service(ctx.name), Pool.BROKER),
        "spec": {"type": "ClusterIP", "selector": naming.selector_labels(ctx.name, Pool.BROKER),
                 "ports": _listener_ports(ctx)},
    }


def metrics_service(ctx: ClusterContext) -> dict[str, Any] | None:
    if not ctx.spec.metrics.enabled:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(naming.metrics_service(ctx.name)),
        "spec": {"clusterIP": "None", "selector": naming.selector_labels(ctx.name),
                 "ports": [{"name": "metrics", "port": naming.METRICS_PORT, "targetPort": naming.METRICS_PORT}]},
    }


POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"  # set by the StatefulSet controller on each pod


def external_services(ctx: ClusterContext) -> list[tuple[str, dict[str, Any]]]:
    """(name, Service) of every broker of each nodeport or loadbalancer listener, and of its bootstrap."""
    out = []
    for listener in ctx.listeners_by_port:
        if listener.outside is not None:
            out.append(_external(ctx, listener, None))
            out += [_external(ctx, listener, ordinal) for ordinal in range(ctx.replicas(Pool.BROKER))]
    return out


def _external(ctx: ClusterContext, listener: Listener, ordinal: int | None) -> tuple[str, dict[str, Any]]:
    outside = listener.outside
    assert outside is not None
    name = naming.external_service(ctx.name, listener.name, ordinal)
    port: dict[str, Any] = {"name": listener.name, "port": listener.port, "targetPort": listener.port}
    node_port = outside.bootstrap_node_port if ordinal is None else outside.of(ordinal).node_port
    if node_port is not None:
        port["nodePort"] = node_port
    selector = naming.selector_labels(ctx.name, Pool.BROKER)
    if ordinal is not None:
        selector[POD_NAME_LABEL] = naming.pod(ctx.name, Pool.BROKER, ordinal)
    labels = {**naming.labels(ctx.name, Pool.BROKER), naming.EXTERNAL_LISTENER_LABEL: listener.name}
    metadata = {**ctx.metadata(name, Pool.BROKER), "labels": labels}
    if outside.annotations:
        metadata["annotations"] = dict(outside.annotations)
    kind = "NodePort" if listener.type is ListenerType.NODEPORT else "LoadBalancer"
    return name, {"apiVersion": "v1", "kind": "Service", "metadata": metadata,
                  "spec": {"type": kind, "selector": selector, "ports": [port]}}
