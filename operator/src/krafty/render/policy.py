"""PodDisruptionBudgets and the Kafka pods' ServiceAccount."""

from __future__ import annotations

from typing import Any

from krafty import naming
from krafty.model.context import ClusterContext
from krafty.naming import Pool


def pod_disruption_budget(ctx: ClusterContext, pool: Pool) -> dict[str, Any]:
    """At most one node of a pool down at a time through voluntary disruptions (drains)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": ctx.metadata(naming.pod_disruption_budget(ctx.name, pool), pool),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": naming.selector_labels(ctx.name, pool)},
                 # A pod that is not ready serves nothing: evicting it never costs availability.
                 "unhealthyPodEvictionPolicy": "AlwaysAllow"},
    }


def service_account(ctx: ClusterContext) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": ctx.metadata(naming.service_account(ctx.name)),
            "automountServiceAccountToken": ctx.spec.rack is not None}
