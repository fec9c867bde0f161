"""The KafkaCluster pass's plan: a pure function of (spec and identity, observation, persisted facts).

Everything the pass will do is decided here, from what it read once at its
start, as a tuple of named actions that krafty.reconcile.act carries out in
order, stopping at the first one Kafka cannot carry out: remove a leaving
voter, apply the children (rendered for the sizes to run this pass, never by
rewriting the spec), set the cluster-wide dynamic config, move replicas or
remove throttles, unregister removed brokers, delete their volumes, grow the others to the spec's size, start or
delete preflight pods (a new pod template is tried before any node restarts into it), then one
roll step (restart a node, elect preferred leaders, or report what blocks), and
once a version change is through, raise metadata.version (krafty.decide.upgrade).
A spec version the cluster's metadata.version cannot run changes nothing.
The status the pass writes, once, is part of the plan.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from krafty import naming
from krafty.decide import (
    canary,
    cluster_status,
    external,
    features,
    identity,
    listeners,
    preflight,
    restart_phases,
    roll,
    scaling,
    upgrade,
    volumes,
)
from krafty.decide.configs import ConfigDiff, diff
from krafty.decide.restart_groups import Parallelism
from krafty.decide.restart_phases import RestartPhase
from krafty.decide.status import DEGRADED, PROGRESSING, READY, Condition
from krafty.facts.observed import ClusterObservation
from krafty.model import KafkaClusterSpec, LeaderBalanceMode
from krafty.model.context import ClusterContext, QuorumKind, Sizes
from krafty.model.validation import validate_cluster
from krafty.model.versions import KRAFT_VERSION
from krafty.naming import Pool
from krafty.planning.actions import (
    Action,
    AddVoter,
    Announce,
    ApplyChildren,
    ChangeCanaryTopic,
    DeletePreflights,
    DeleteVolumes,
    ElectLeaders,
    ExpandVolumes,
    FinalizeMetadata,
    MoveReplicas,
    RemoveThrottles,
    RemoveVoter,
    RestartNode,
    SetClusterDefaults,
    StartPreflight,
    Unregister,
    UpdateFeature,
)
from krafty.render.cluster import Child, children
from krafty.render.kafka_config import dynamic_broker_config
from krafty.render.preflight import preflight_pod


@dataclass(frozen=True)
class Facts:
    """What the operator remembers between passes (in status.scaling); everything else is read again."""

    balanced_for: tuple[int, ...] | None = None  # brokers the replica placement was last balanced for
    leaders_pending: bool = False  # replicas moved: every preferred leader goes back, whatever the threshold
    healthy_since: datetime.datetime | None = None  # every node on the target release and healthy since (status)
    calm_since: datetime.datetime | None = None  # the canary's p99s within spec.restarts.canaryGate since (status)
    # each node's restart phase and since when, by pod (status.nodes[].restartPhase, restartPhaseSince)
    restart_phases: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> Facts:
        scaling_status = (status or {}).get("scaling") or {}
        balanced = scaling_status.get("balancedBrokers")
        since = ((status or {}).get("versions") or {}).get("healthySince")
        calm = ((status or {}).get("canary") or {}).get("calmSince")
        phases = {n["pod"]: (n["restartPhase"], n["restartPhaseSince"]) for n in (status or {}).get("nodes") or ()
                  if n.get("restartPhase") and n.get("restartPhaseSince")}
        return cls(tuple(balanced) if balanced is not None else None, bool(scaling_status.get("leadersPending")),
                   datetime.datetime.fromisoformat(since) if since else None,
                   datetime.datetime.fromisoformat(calm) if calm else None, phases)


class PassResult(StrEnum):
    PAUSED = "paused"
    INVALID = "invalid"
    CONFLICT = "conflict"
    RESTARTED = "restarted"
    ELECTED = "elected"
    BLOCKED = "blocked"
    WAITING = "waiting"
    RECONCILED = "reconciled"
    ERROR = "error"


class Pace(StrEnum):
    """How soon the next pass looks again."""

    CALM = "calm"  # nothing under way: the idle interval, or when something is due
    BUSY = "busy"  # a roll, formation, move or election under way, whose next step a pod's events announce
    FOLLOWING = "following"  # the next step waits on what no watch reports (Kafka's ISR, a voter, leaders just
    # elected): look again within a second or so


def pace(step: roll.Step, busy: bool) -> Pace:
    """FOLLOWING after an election (the next restart waits for its leaders) and while the roll waits on state
    only a look shows; otherwise BUSY while anything is under way."""
    if isinstance(step, roll.ElectLeaders) or (isinstance(step, roll.Wait) and step.awaits is roll.Awaits.STATE):
        return Pace.FOLLOWING
    return Pace.BUSY if busy else Pace.CALM


@dataclass(frozen=True)
class ClusterPlan:
    sizes: Sizes  # the nodes rendered this pass (new brokers waiting for their addresses: not in the StatefulSet)
    actions: tuple[Action, ...]
    step: roll.Step
    scale: scaling.ScalePlan
    facts: Facts  # to remember for the next pass
    status: Mapping[str, Any]
    conditions: tuple[Condition, ...]
    result: PassResult
    pace: Pace
    wake_at: datetime.datetime | None = None  # check again by then: metadata.version's raise is due
    phases_ended: tuple[tuple[RestartPhase, float], ...] = ()  # nodes' restart phases that ended, and their seconds


@dataclass(frozen=True)
class NotAdmitted:
    """A pass that stops before observing: the cluster is paused, or its spec cannot work."""

    result: PassResult
    conditions: tuple[Condition, ...]
    event: Announce | None = None


def admit(body: Mapping[str, Any]) -> KafkaClusterSpec | NotAdmitted:
    """The spec to work with, or why this pass changes nothing."""
    if naming.paused(body):
        return NotAdmitted(PassResult.PAUSED, (Condition(PROGRESSING, False, "Paused",
                                                  f"changes are paused by the annotation {naming.PAUSED_ANNOTATION}"),))
    try:
        spec = KafkaClusterSpec.model_validate(body.get("spec") or {})
    except ValidationError as error:
        problems = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in error.errors()]
    else:
        problems = [str(p) for p in validate_cluster(spec)]
        if not problems:
            return spec
    message = "the spec cannot work and nothing was changed: " + "; ".join(problems)
    return NotAdmitted(PassResult.INVALID, (Condition(READY, False, "InvalidSpec", message),
                                     Condition(DEGRADED, True, "InvalidSpec", message)),
                Announce("InvalidSpec", message, warning=True))


def _scale(ctx: ClusterContext, obs: ClusterObservation, facts: Facts) -> scaling.ScalePlan:
    now = Sizes.running(ctx.spec, obs.statefulset_replicas)
    wanted = Sizes.of(ctx.spec)
    if obs.reassignments is None:  # moves cannot be listed: nothing may be planned from the replica lists
        obs = replace(obs, partitions=None, kafka_error=obs.kafka_error or "partition reassignments cannot be listed")
    return scaling.plan(scaling.ScaleInput(
        desired_brokers=wanted.brokers, running_brokers=now.brokers, desired_controllers=wanted.controllers,
        running_controllers=now.controllers, dedicated=ctx.dedicated, ongoing=obs.reassignments or {},
        balanced_for=facts.balanced_for, roll_pending=any(n.needs_restart for n in obs.nodes),
        voters=0 if ctx.dedicated else ctx.spec.controllers.replicas,
        static_quorum=_quorum(ctx, obs) is QuorumKind.STATIC), obs)


def _quorum(ctx: ClusterContext, obs: ClusterObservation) -> QuorumKind:
    """How the nodes find the quorum: static while kraft.version is 0, as read this pass (else as stored)."""
    return identity.quorum_kind(ctx.quorum, next((f.finalized for f in obs.features if f.name == KRAFT_VERSION),
                                                 None))


def _quorum_formed(ctx: ClusterContext, obs: ClusterObservation) -> bool:
    """Every first voter has joined and caught up: the first-quorum list can be retired."""
    if not ctx.initial_voters or obs.quorum is None or obs.quorum.leader_id < 0:
        return False
    return {v.node_id for v in ctx.initial_voters} <= obs.quorum.caught_up(roll.MAX_VOTER_LAG)


def _dynamic_config(ctx: ClusterContext, obs: ClusterObservation) -> ConfigDiff:
    if obs.partitions is None or obs.cluster_defaults is None:
        return ConfigDiff()
    return diff(dynamic_broker_config(ctx), obs.cluster_defaults, keep=naming.THROTTLE_RATE_KEYS)


def _throttles_to_remove(obs: ClusterObservation, scale: scaling.ScalePlan) -> RemoveThrottles | None:
    if scale.busy or scale.reassign or obs.reassignments != {}:
        return None
    rate_set = any(key in (obs.cluster_defaults or {}) for key in naming.THROTTLE_RATE_KEYS)
    topics = tuple(sorted(obs.throttled_topics or ()))
    return RemoveThrottles(topics) if topics or rate_set else None


def _roll_step(ctx: ClusterContext, obs: ClusterObservation, scale: scaling.ScalePlan,
               leaders_pending: bool, gate: canary.Gate, held: str | None) -> roll.Step:
    if held:  # new brokers not started yet (a new cluster's, or a scale-up's: the roll goes on after it)
        return roll.Wait(held, roll.Awaits.STATE)
    if scale.busy and not scale.after_roll:  # (scaling that waits for the roll lets it go first)
        return roll.Wait(f"scaling first: {scale.message}")
    balance = ctx.spec.leader_balance
    # After replicas moved, every partition goes back to its preferred leader, not only those of brokers above
    # the threshold: scaling promises new brokers their full share of leaders.
    threshold = 0 if leaders_pending else balance.imbalance_threshold_percent
    return _canary_gate(gate, roll.next_step(obs, restore_leaders=balance.mode is LeaderBalanceMode.OPERATOR,
                                             threshold_percent=threshold,
                                             parallelism=Parallelism.parse(ctx.spec.restarts.parallelism)))


def _preflight(ctx: ClusterContext, obs: ClusterObservation, step: roll.Step) -> tuple[roll.Step, list[Action]]:
    """The roll step once the preflight gate had its say, and the preflight pods to start or delete."""
    gated = preflight.gate(step, obs.nodes, obs.revisions, obs.preflights)
    actions: list[Action] = [DeletePreflights(gated.stale)] if gated.stale else []
    if gated.start is not None and isinstance(step, roll.Restart):
        revision, template = obs.revisions[gated.start], obs.templates[gated.start]
        pod = preflight_pod(ctx, gated.start, revision, template, step.node.requests)
        actions.append(StartPreflight(pod, f"trying the new pod template of the {gated.start.value}s ({revision}) "
                                           f"in {pod['metadata']['name']} before restarting {step.node.pod}"))
    return gated.step, actions


def _canary_gate(gate: canary.Gate, step: roll.Step) -> roll.Step:
    """A running node's restart, held while the canary says clients suffer (spec.restarts.canaryGate): before
    its preflight pod too, so that a held roll starts nothing."""
    if not (isinstance(step, roll.Restart) and step.node.running) or gate.position is not canary.GatePosition.HOLDING:
        return step
    return roll.Gated(step.node, f"{step.node.pod} waits: {gate.message}")


def _step_actions(step: roll.Step) -> tuple[Action, ...]:
    if isinstance(step, roll.Restart):  # (with the brokers going together with it, one Event each)
        return tuple(RestartNode(node, step.reason, step.message) for node in step.nodes)
    if isinstance(step, roll.ElectLeaders):
        return (ElectLeaders(step.partitions, step.message),)
    if isinstance(step, roll.Blocked):
        return (Announce(step.reason, step.message, warning=True),)
    if isinstance(step, roll.Gated):  # told once per node (the figures change every pass; status has them)
        return (Announce(step.reason, f"{step.node.pod} waits until the canary's p99 is within "
                                      "spec.restarts.canaryGate", warning=True),)
    return ()


def _result(step: roll.Step) -> PassResult:
    return {roll.Restart: PassResult.RESTARTED, roll.ElectLeaders: PassResult.ELECTED,
            roll.Blocked: PassResult.BLOCKED, roll.Done: PassResult.RECONCILED}.get(type(step), PassResult.WAITING)


def plan(ctx: ClusterContext, obs: ClusterObservation, facts: Facts) -> ClusterPlan:
    """Everything this pass does, and the status it writes."""
    version_facts = _version_facts(ctx, obs)
    decided = _plan(ctx, obs, facts, version_facts)
    reason, refused = "VersionRefused", upgrade.refusal(version_facts)
    if refused is None:
        reason, refused = "FeatureRefused", features.refusal(feature_facts(ctx, obs))
    if refused is None:
        reason, refused = "QuorumRefused", scaling.static_refusal(
            _quorum(ctx, obs) is QuorumKind.STATIC, ctx.spec.controllers.replicas, obs.quorum,
            ctx.spec.features.get(KRAFT_VERSION, 0) >= 1)
    if refused is None:
        return decided
    # Like an invalid spec: nothing is applied, nothing restarts, and the status says why
    return replace(decided, sizes=Sizes.running(ctx.spec, obs.statefulset_replicas),
                   actions=(Announce(reason, refused, warning=True),), step=roll.Wait(refused), facts=facts,
                   conditions=(Condition(READY, False, reason, refused), Condition(DEGRADED, True, reason, refused)),
                   result=PassResult.INVALID, pace=Pace.CALM)


def growth_of(ctx: ClusterContext, obs: ClusterObservation) -> volumes.Growth:
    running = Sizes.running(ctx.spec, obs.statefulset_replicas)
    return volumes.growth(ctx.name, volumes.wanted_sizes(
        (pool, storage.size if (storage := ctx.storage(pool)) else None, running.of_pool(pool))
        for pool in ctx.pools()), obs.volumes, obs.storage_classes, obs.observed_at)


def _volume_actions(ctx: ClusterContext, obs: ClusterObservation, scale: scaling.ScalePlan,
                    growth: volumes.Growth) -> list[Action]:
    """Volumes of removed nodes to delete, and volumes to grow (or why they cannot)."""
    claims = volumes.removable(ctx.name, obs.claims, obs, Sizes.of(ctx.spec), Sizes(scale.brokers, scale.controllers))
    actions: list[Action] = [DeleteVolumes(claims)] if claims else []
    if growth.expand:
        actions.append(ExpandVolumes(growth.expand))
    if growth.refused:
        actions.append(Announce(growth.reason, growth.refused, warning=True))
    return actions


def _canary_actions(ctx: ClusterContext, obs: ClusterObservation) -> list[Action]:
    topic = canary.topic_change(ctx.spec.canary.enabled, range(ctx.spec.brokers.replicas), obs.registered,
                                obs.partitions)
    return [ChangeCanaryTopic(topic)] if topic is not None else []


def with_resizes(obs: ClusterObservation, growth: volumes.Growth) -> ClusterObservation:
    """A file system that grows only when its pod starts: the node restarts in the roll."""
    return replace(obs, nodes=tuple(replace(n, resize_waiting=growth.restarts.get(n.node_id)) for n in obs.nodes))


def _plan(ctx: ClusterContext, obs: ClusterObservation, facts: Facts,
          version_facts: upgrade.VersionFacts) -> ClusterPlan:
    growth = growth_of(ctx, obs)
    obs = with_resizes(obs, growth)
    scale = _scale(ctx, obs, facts)
    formed = _quorum_formed(ctx, obs)
    published = listeners.published(ctx.spec.listeners, ctx.announced_listeners, obs.nodes)
    outside = external.endpoints(ctx.name, ctx.spec.listeners, scale.brokers, obs.external_services)
    sized = replace(ctx, sizes=Sizes(scale.brokers, scale.controllers), announced_listeners=published,
                    claim_sizes=obs.claim_templates, external_endpoints=outside,
                    quorum=_quorum(ctx, obs),
                    # once formed, a node formatting an empty disk joins the existing quorum instead
                    initial_voters=() if formed else ctx.initial_voters)
    # A voter leaving is removed before anything else: the StatefulSet stops it only once that went through.
    actions: list[Action] = [RemoveVoter(scale.remove_voter)] if scale.remove_voter is not None else []
    moved = listeners.moved(ctx.announced_listeners, published)
    if moved:
        actions.append(Announce("ListenersPublished", moved))
    if scale.add_voter is not None:
        pool, ordinal = naming.pool_and_ordinal(scale.add_voter.node_id)
        actions.append(AddVoter(scale.add_voter, ctx.host(pool, ordinal)))
    running_brokers = obs.statefulset_replicas.get(Pool.BROKER)
    held = external.holding_new_brokers(ctx.name, ctx.spec.listeners, range(running_brokers or 0, scale.brokers),
                                        outside, obs.external_services, obs.observed_at)
    actions.append(ApplyChildren(_with_stale_services(_brokers_held(ctx, children(sized), running_brokers) if held
                                                      else children(sized), obs)))
    if formed:
        assert obs.quorum is not None
        actions.append(Announce("QuorumFormed", f"controller quorum formed with voters "
                                f"{sorted(v.node_id for v in ctx.initial_voters)}, leader {obs.quorum.leader_id}"))
    dynamic = _dynamic_config(ctx, obs)
    if dynamic:
        actions.append(SetClusterDefaults(dynamic))
    leaders_pending = facts.leaders_pending
    if scale.reassign:
        rate = ctx.spec.leader_balance.replication_throttle_bytes_per_second
        actions.append(MoveReplicas(scale.reassign, rate, scale.message))
        leaders_pending = True
    else:
        unthrottle = _throttles_to_remove(obs, scale)
        actions += [unthrottle] if unthrottle else []
    if scale.unregister:
        actions.append(Unregister(scale.unregister))
    actions += _volume_actions(ctx, obs, scale, growth) + _canary_actions(ctx, obs)
    gate = canary.gate(ctx.spec.restarts.canary_gate, obs.canary, facts.calm_since, obs.observed_at)
    step, preflight_actions = _preflight(ctx, obs, _roll_step(ctx, obs, scale, leaders_pending, gate, held))
    actions += preflight_actions
    if not scale.busy:
        restore = ctx.spec.leader_balance.mode is LeaderBalanceMode.OPERATOR
        leaders_pending = leaders_pending and restore and not roll.leaders_settled(obs)
    actions += _step_actions(step)
    healthy = isinstance(step, roll.Done) and all(n.serving for n in obs.nodes)
    version, featured, level_actions = _levels(ctx, obs, facts, version_facts, healthy)
    actions += level_actions
    next_facts = Facts(scale.balanced_for if scale.balanced_for is not None else facts.balanced_for, leaders_pending,
                       version.healthy_since, gate.calm_since)
    addressing = held or external.waiting(ctx.name, ctx.spec.listeners, scale.brokers, outside)
    conditions = _conditions(cluster_status.conditions(obs, step, set(range(ctx.spec.brokers.replicas)), scale,
                                                       version, growth), addressing)
    phases = restart_phases.track(facts.restart_phases, obs, obs.observed_at) if obs.observed_at else None
    status = {**cluster_status.fields(sized, obs, step, scale, next_facts.balanced_for, next_facts.leaders_pending,
                                      phases.now if phases else {}),
              "versions": cluster_status.version_fields(ctx.spec.version, obs, version),
              "volumes": cluster_status.volume_entries(obs),
              "features": cluster_status.feature_entries(obs, ctx.spec.features, featured.waiting or {}),
              "canary": canary.status(obs.canary, gate)}
    # (a raised metadata.version is observed, and the cluster Ready again, by the next pass)
    busy = (bool(ctx.initial_voters) or scale.busy or not isinstance(step, roll.Done) or growth.growing is not None
            or addressing is not None or version.finalize_to is not None or featured.change is not None)
    return ClusterPlan(Sizes(scale.brokers, scale.controllers), tuple(actions), step, scale, next_facts, status,
                       tuple(conditions), _result(step), pace(step, busy), version.due,
                       phases.ended if phases else ())


def settle(conditions: tuple[Condition, ...], refused: Sequence[str], conflicts: Sequence[str],
           withheld: Sequence[str] = ()) -> list[Condition]:
    """The plan's conditions once its actions ran: Ready and Degraded say what the API server refused to apply,
    or which objects of the children's names are not the cluster's and were left alone, and what the nodes run
    was therefore not sent (no node restarts into part of a change)."""
    settled = list(conditions)
    held = f"; not sent, so that no node restarts into part of the change: {', '.join(withheld)}" if withheld else ""
    for reason, found, lead in (("ApplyRefused", refused, "Kubernetes refused what the spec asks for: "),
                                ("NameConflict", conflicts, "")):
        if found:
            message = lead + "; ".join(found) + held
            settled = [Condition(READY, False, reason, message)] + [
                Condition(DEGRADED, True, reason, message) if c.type == DEGRADED else c for c in settled[1:]]
    return settled


def _conditions(conditions: list[Condition], addressing: str | None) -> list[Condition]:
    """A listener not open on every broker yet (its external addresses unknown): said in Progressing, and not
    Ready until it is."""
    if addressing is None:
        return conditions
    ready, available, _, degraded = conditions
    if ready.status is True:
        ready = Condition(READY, False, "WaitingForExternalAddress", addressing)
    return [ready, available, Condition(PROGRESSING, True, "WaitingForExternalAddress", addressing), degraded]


def _brokers_held(ctx: ClusterContext, rendered: list[Child], replicas: int | None) -> list[Child]:
    """The children with the brokers' StatefulSet kept at the `replicas` it has: new brokers not started yet
    (None: a new cluster's, whose StatefulSet is not made yet)."""
    name = naming.statefulset(ctx.name, Pool.BROKER)
    out = []
    for child in rendered:
        if not (child.kind == "StatefulSet" and child.name == name and child.desired is not None):
            out.append(child)
        elif replicas is not None:
            out.append(replace(child, desired={**child.desired,
                                               "spec": {**child.desired["spec"], "replicas": replicas}}))
    return out


def _with_stale_services(rendered: list[Child], obs: ClusterObservation) -> tuple[Child, ...]:
    """The children, and the deletion of each external Service no listener or broker needs any more."""
    names = {child.name for child in rendered if child.kind == "Service"}
    return (*rendered, *(Child("Service", name, None) for name in sorted(obs.external_services) if name not in names))


def _levels(ctx: ClusterContext, obs: ClusterObservation, facts: Facts, version_facts: upgrade.VersionFacts,
            healthy: bool) -> tuple[upgrade.VersionPlan, features.FeaturePlan, list[Action]]:
    """Where metadata.version and the other feature levels stand, and this pass's change of one of them (a
    feature waits while metadata.version is raised)."""
    version = upgrade.plan(version_facts, healthy, obs.observed_at, facts.healthy_since)
    featured = features.plan(feature_facts(ctx, obs), healthy and version.finalize_to is None)
    actions: list[Action] = []
    if version.finalize_to is not None:
        actions.append(FinalizeMetadata(version.finalize_to, version.message))
    if featured.change is not None:
        actions.append(UpdateFeature(featured.change))
    return version, featured, actions


def feature_facts(ctx: ClusterContext, obs: ClusterObservation) -> features.FeatureFacts:
    finalized = {f.name: f.finalized for f in obs.features} if obs.features else None
    return features.FeatureFacts(ctx.spec.features, finalized, tuple(n.version for n in obs.nodes if n.exists),
                                 obs.groups, tuple(p.name for p in obs.partitions or () if p.eligible_leaders_only))


def _version_facts(ctx: ClusterContext, obs: ClusterObservation) -> upgrade.VersionFacts:
    return upgrade.VersionFacts(ctx.spec.version, ctx.spec.upgrade.metadata_version,
                                ctx.spec.upgrade.finalize_after_seconds,
                                tuple(n.version for n in obs.nodes if n.exists), obs.metadata_level)
