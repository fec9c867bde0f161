"""What the operator would do if a KafkaCluster spec were applied (`kubectl krafty plan`).

Nothing here is a second implementation: the preview is the cluster pass's own plan (krafty.planning.cluster) of the
proposed spec over the live observation, in which each node's pod has been compared with the pod template
that spec renders (as the API server would store it: krafty.reconcile.preview). From it:

- refusals: what the operator would refuse and change nothing for (an invalid spec, a version the
  cluster's metadata.version cannot run, a scale-down a topic's replication factor forbids, a volume that
  cannot grow, a pod template the API server rejects);
- restarts: every node that restarts, in the order the roll takes them, each with its reason, and what
  would hold it if its turn came now (a partition that would go offline or below min.insync.replicas, a
  voter the quorum needs);
- what changes without a restart: cluster-wide dynamic configs, replica moves, volumes that grow, and
  whether a preflight pod tries a new pod template first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from krafty.decide import features, restart_groups, roll
from krafty.decide.scaling import ScalePhase
from krafty.facts import pods
from krafty.facts.observed import ClusterObservation, NodeState
from krafty.model.context import ClusterContext, Sizes
from krafty.naming import Pool
from krafty.planning.actions import Announce, ExpandVolumes, SetClusterDefaults
from krafty.planning.cluster import (
    ClusterPlan,
    Facts,
    NotAdmitted,
    PassResult,
    feature_facts,
    growth_of,
    plan,
    with_resizes,
)

PROPOSED_REVISION = "proposed"  # the revision a changed pod template would get (any name unlike a real one)


class Verdict(StrEnum):
    REFUSED = "Refused"  # nothing of the spec would be applied
    CHANGES = "Changes"
    NOTHING = "NoChange"


@dataclass(frozen=True)
class PlannedRestart:
    pod: str
    node_id: int
    reason: roll.RestartReason
    why: str
    held_by: str | None  # what would hold it if its turn came now (the roll waits, it does not skip it)
    step: int = 1  # the roll's step it restarts in: nodes of one step restart together (spec.restarts.parallelism)

    def as_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "nodeId": self.node_id, "reason": self.reason.value, "why": self.why,
                "heldBy": self.held_by, "step": self.step}


@dataclass(frozen=True)
class Preview:
    verdict: Verdict
    refused: tuple[str, ...] = ()
    restarts: tuple[PlannedRestart, ...] = ()
    dynamic_config: tuple[str, ...] = ()  # applied to every broker without a restart
    scaling: str | None = None
    volumes: tuple[str, ...] = ()  # claims that grow, and to what
    preflight: tuple[Pool, ...] = ()  # pools whose new pod template a preflight pod tries before any restart
    first_step: str = ""  # what the first pass after the apply would do
    features: tuple[str, ...] = ()  # feature levels raised or lowered, each saying whether it can be undone

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "refused": list(self.refused),
                "restarts": [r.as_json() for r in self.restarts], "dynamicConfig": list(self.dynamic_config),
                "scaling": self.scaling, "volumes": list(self.volumes),
                "preflight": [p.value for p in self.preflight], "firstStep": self.first_step,
                "features": list(self.features)}


def not_admitted(refused: NotAdmitted) -> Preview:
    """A spec the operator would not even observe for: invalid, or the cluster paused."""
    message = refused.conditions[-1].message
    if refused.result is PassResult.PAUSED:
        return Preview(Verdict.NOTHING, first_step=f"nothing until resumed: {message}")
    return Preview(Verdict.REFUSED, refused=(message,), first_step="nothing: the spec is refused")


def refused(*messages: str) -> Preview:
    return Preview(Verdict.REFUSED, refused=messages, first_step="nothing: the spec is refused")


def proposed_nodes(obs: ClusterObservation, templates: Mapping[Pool, Mapping[str, Any]],
                   running_pods: Mapping[str, Mapping[str, Any]]) -> ClusterObservation:
    """The observation as the pass after the apply would read it: in each pool whose pod template changes
    (`templates`, as the API server stores it for the proposed spec), a pod that differs from it runs an old
    revision, and its differences are why it restarts."""
    changed = {pool: template for pool, template in templates.items() if obs.templates.get(pool) != template}
    if not changed:
        return obs

    def node(n: NodeState) -> NodeState:
        pod = running_pods.get(n.pod)
        if n.pool not in changed or pod is None:
            return n
        pending = pods.pending_changes(dict(pod), changed[n.pool])
        return replace(n, revision_current=not pending, pending=pending)

    return replace(obs, nodes=tuple(node(n) for n in obs.nodes),
                   templates={**obs.templates, **changed},
                   revisions={**obs.revisions, **dict.fromkeys(changed, PROPOSED_REVISION)})


def preview(ctx: ClusterContext, obs: ClusterObservation, facts: Facts) -> Preview:
    """The plan of the proposed spec (ctx) over what runs (obs, from proposed_nodes)."""
    decided = plan(ctx, obs, facts)
    if decided.result is PassResult.INVALID:
        return refused(decided.conditions[0].message)
    obs = with_resizes(obs, growth_of(ctx, obs))
    restarts = _restarts(ctx, obs)
    # A warning that is not the roll waiting on what runs now: what the spec asks cannot be
    waiting = decided.step.reason if isinstance(decided.step, roll.Blocked) else None
    refusals = [a.message for a in decided.actions if isinstance(a, Announce) and a.warning
                and a.reason != waiting]
    scale_refused = decided.scale.phase is ScalePhase.BLOCKED
    if scale_refused:
        refusals.insert(0, decided.scale.message)
    dynamic = next((a.changes.describe() for a in decided.actions if isinstance(a, SetClusterDefaults)), [])
    grows = next((a.claims for a in decided.actions if isinstance(a, ExpandVolumes)), ())
    scales = not scale_refused and Sizes.of(ctx.spec) != Sizes.running(ctx.spec, obs.statefulset_replicas)
    levels = features.described(feature_facts(ctx, obs))
    changes = bool(restarts or dynamic or grows or scales or levels)
    verdict = Verdict.REFUSED if refusals and not changes else Verdict.CHANGES if changes else Verdict.NOTHING
    return Preview(verdict, tuple(refusals), restarts, tuple(dynamic),
                   decided.scale.message if scales and decided.scale.message else None,
                   tuple(f"{claim} to {size}" for claim, size in grows),
                   tuple(sorted({n.pool for n in obs.nodes if n.running and n.template_pending})),
                   _first_step(decided), levels)


def _restarts(ctx: ClusterContext, obs: ClusterObservation) -> tuple[PlannedRestart, ...]:
    """Every node that restarts, in the roll's order, each with the step it goes in (brokers grouped as
    spec.restarts.parallelism lets them go together)."""
    order = roll.restart_order(obs.nodes, obs.quorum)
    brokers = {n.node_id for n in order if n.is_broker and not n.is_controller and n.running}
    racks = {r.node_id: r.rack for r in obs.registrations}
    grouped = restart_groups.steps([n.node_id for n in order], brokers, racks, obs.partitions or (),
                                   restart_groups.Parallelism.parse(ctx.spec.restarts.parallelism))
    step_of = {node: index for index, step in enumerate(grouped, 1) for node in step}
    return tuple(_restart(n, obs, step_of[n.node_id]) for n in sorted(order, key=lambda n: step_of[n.node_id]))


def _restart(node: NodeState, obs: ClusterObservation, step: int) -> PlannedRestart:
    reason, why = roll.restart_reason(node)
    blocked = roll.blocker(node, obs) if node.running else None
    return PlannedRestart(node.pod, node.node_id, reason, why, blocked.message if blocked else None, step)


def _first_step(decided: ClusterPlan) -> str:
    step = decided.step
    if isinstance(step, roll.Restart):
        return f"restart {step.node.pod}"
    if isinstance(step, roll.Wait | roll.Blocked | roll.Gated | roll.ElectLeaders):
        return step.message
    if decided.scale.busy:
        return decided.scale.message
    return "apply the StatefulSets, Services and configs; no node restarts"

