"""Everything one KafkaCluster owns, as an ordered list of named children.

`desired` None means the child must not exist (deleted when found), so one
apply loop both creates and cleans up (for example the controller pool when
a cluster runs combined, the metrics Service when metrics are off).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from krafty import naming
from krafty.model.context import ClusterContext
from krafty.naming import Pool
from krafty.render import configmaps, network_policy, policy, services, workloads


@dataclass(frozen=True)
class Child:
    kind: str
    name: str
    desired: dict[str, Any] | None


def runs_nodes(child: Child, cluster: str) -> bool:
    """Whether the nodes restart into this child: their config (server.properties) or a StatefulSet."""
    return child.kind == "StatefulSet" or (child.kind, child.name) == ("ConfigMap", naming.config_map(cluster))


def children(ctx: ClusterContext) -> list[Child]:
    """In apply order: identity, Services and the NetworkPolicy first, then what the nodes run (their config, then
    the workloads): what the nodes would restart into is sent only once all before it was taken
    (runs_nodes)."""
    name = ctx.name
    out = [
        Child("ServiceAccount", naming.service_account(name), policy.service_account(ctx)),
        Child("ConfigMap", naming.connection_config_map(name), configmaps.connection_config_map(ctx)),
        Child("Service", naming.bootstrap_service(name), services.bootstrap_service(ctx)),
        Child("Service", naming.metrics_service(name), services.metrics_service(ctx)),
        Child("NetworkPolicy", naming.network_policy(name), network_policy.network_policy(ctx)),
        *(Child("Service", service, body) for service, body in services.external_services(ctx)),
        Child("ConfigMap", naming.config_map(name), configmaps.node_config_map(ctx)),
    ]
    for pool in (Pool.CONTROLLER, Pool.BROKER):
        present = pool in ctx.pools()
        out += [
            Child("Service", naming.headless_service(name, pool),
                   services.headless_service(ctx, pool) if present else None),
            Child("PodDisruptionBudget", naming.pod_disruption_budget(name, pool),
                   policy.pod_disruption_budget(ctx, pool) if present else None),
            Child("StatefulSet", naming.statefulset(name, pool),
                   workloads.statefulset(ctx, pool) if present else None),
        ]
    return out
