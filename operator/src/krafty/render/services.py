"""Services: a headless one per pool (stable pod DNS names), the client bootstrap
Service, and the metrics Service Prometheus scrapes."""

from __future__ import annotations

from typing import Any

from krafty import naming
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
