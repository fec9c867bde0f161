"""The KafkaCluster status: per-node state, partition health, quorum, roll, conditions and the passes failing."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from krafty.decide import external, roll
from krafty.decide.health import summarize
from krafty.decide.restart_phases import RestartPhase
from krafty.decide.scaling import ScalePlan
from krafty.decide.status import AVAILABLE, DEGRADED, PROGRESSING, READY, Condition
from krafty.decide.upgrade import VersionPhase, VersionPlan
from krafty.decide.volumes import Growth
from krafty.facts.observed import ClusterObservation, NodeState, PodPhase
from krafty.model import format_bytes, versions
from krafty.model.cluster import Listener
from krafty.model.context import ClusterContext


def _in_sync(node: NodeState, obs: ClusterObservation) -> bool | None:
    if obs.partitions is None or not node.is_broker:
        return None
    return all(node.node_id in p.isr for p in obs.partitions if node.node_id in p.replicas)


NODE_MESSAGES = {
    PodPhase.MISSING: "pod not created yet",
    PodPhase.TERMINATING: "pod not running",
    PodPhase.STARTING: "pod not running",
    PodPhase.DOWN: "pod not running",
    PodPhase.WARMING_UP: "starting or catching up",
    PodPhase.NOT_READY: "starting or catching up",
}


def _node_message(node: NodeState) -> str:
    if node.host_down:
        return node.host_down
    if node.trouble:
        return f"pod not running: {node.trouble}"
    if node.phase in NODE_MESSAGES:
        return NODE_MESSAGES[node.phase]
    if node.is_broker and not node.registered:
        return "not registered with the controller"
    if node.needs_restart:
        return "waiting to be restarted with the new configuration"
    return ""


def node_entries(obs: ClusterObservation, phases: Mapping[str, tuple[RestartPhase, datetime.datetime]]
                 ) -> list[dict[str, Any]]:
    """Each node's state; one coming back from a restart with its phase and since when (krafty.decide.
    restart_phases)."""
    leaders = Counter(p.leader for p in obs.partitions or ())
    voters = obs.quorum.voter_ids() if obs.quorum else set()
    entries = []
    for node in obs.nodes:
        entry: dict[str, Any] = {
            "nodeId": node.node_id, "pod": node.pod, "roles": list(node.roles),
            "ready": node.serving, "phase": node.phase.value,
            "voter": node.node_id in voters, "revisionCurrent": node.revision_current,
        }
        in_sync = _in_sync(node, obs)
        if in_sync is not None:
            entry["inSync"] = in_sync
            entry["leaderCount"] = leaders.get(node.node_id, 0)
        if node.pod in phases:
            phase, since = phases[node.pod]
            entry["restartPhase"], entry["restartPhaseSince"] = phase.value, since.isoformat()
        message = _node_message(node)
        if message:
            entry["message"] = message
        entries.append(entry)
    return entries


def partition_summary(obs: ClusterObservation) -> dict[str, int] | None:
    if obs.partitions is None:
        return None
    health = summarize(obs.partitions)
    return {"total": health.total, "underReplicated": health.under_replicated, "underMinIsr": health.under_min_isr,
            "offline": health.offline, "notPreferredLeader": health.not_preferred_leader,
            "eligibleLeadersOnly": health.eligible_leaders_only}


def quorum_summary(obs: ClusterObservation) -> dict[str, Any] | None:
    if obs.quorum is None:
        return None
    lags = [v.lag for v in obs.quorum.voters if v.lag >= 0]
    return {"leaderId": obs.quorum.leader_id, "leaderEpoch": obs.quorum.leader_epoch,
            "voters": sorted(obs.quorum.voter_ids()), "maxFollowerLag": max(lags, default=0)}


def _available(obs: ClusterObservation) -> Condition:
    """Clients can read and write every partition with acks=all."""
    if obs.partitions is None:
        return Condition(AVAILABLE, None, "KafkaUnreachable", f"Kafka cannot be asked: {obs.kafka_error}")
    if obs.quorum is None or obs.quorum.leader_id < 0:
        return Condition(AVAILABLE, False, "NoQuorumLeader", obs.quorum_error or "the controller quorum has no "
                                                                                 "leader")
    health = summarize(obs.partitions)
    if health.offline:
        waiting = (f"; {health.eligible_leaders_only} of them wait for an eligible leader replica (ELR) to come "
                   "back, with every committed record" if health.eligible_leaders_only else "")
        return Condition(AVAILABLE, False, "PartitionsOffline", f"{health.offline} partitions have no leader: "
                                                                 f"nobody can read or write them{waiting}")
    if health.under_min_isr:
        return Condition(AVAILABLE, False, "UnderMinIsr", f"{health.under_min_isr} partitions are below "
                                                          "min.insync.replicas: acks=all writes to them fail")
    serving = sum(n.is_broker and n.serving for n in obs.nodes)
    return Condition(AVAILABLE, True, "Serving", f"every partition has a leader and min.insync.replicas in sync; "
                                                  f"{serving} brokers serving")


def _progressing(obs: ClusterObservation, step: roll.Step, scale: ScalePlan) -> Condition:
    if scale.busy:
        return Condition(PROGRESSING, True, scale.phase.value, scale.message)
    order = roll.restart_order(obs.nodes, obs.quorum)
    if order:
        current = sum(n.exists and not n.needs_restart for n in obs.nodes)
        total = sum(n.exists for n in obs.nodes)
        rest = f"next {order[0].pod}, then {len(order) - 1} more" if len(order) > 1 else f"last {order[0].pod}"
        done = f"{current} of {total} nodes run the current configuration"
        if isinstance(step, roll.Gated):
            return Condition(PROGRESSING, True, step.reason, f"{done}; {step.message}")
        return Condition(PROGRESSING, True, "RollingRestart", f"{done}; {rest}")
    if isinstance(step, roll.ElectLeaders):
        return Condition(PROGRESSING, True, "RestoringLeaders", step.message)
    waiting = roll.catching_up(obs)
    if waiting:
        return Condition(PROGRESSING, True, "CatchingUp", waiting.message)
    starting = [n.pod for n in obs.nodes if not n.ready]
    if starting:
        return Condition(PROGRESSING, True, "NodesStarting", f"waiting for {', '.join(starting)}")
    return Condition(PROGRESSING, False, "Reconciled", "every node runs the current configuration")


def _ready(obs: ClusterObservation, desired_brokers: set[int], available: Condition, progressing: Condition,
           scale: ScalePlan) -> Condition:
    """Everything is as the spec asks."""
    if not available.status:
        return Condition(READY, False, available.reason, available.message)
    missing = sorted(n.node_id for n in obs.nodes if n.node_id in desired_brokers and not n.serving)
    if missing:
        return Condition(READY, False, "BrokersNotReady", f"brokers not ready: {missing}")
    if scale.busy or progressing.reason in ("RollingRestart", roll.HELD_BY_CANARY, "NodesStarting"):
        return Condition(READY, False, progressing.reason, progressing.message)
    under = summarize(obs.partitions or ()).under_replicated
    if under:
        return Condition(READY, False, "UnderReplicated", f"{under} partitions are missing in-sync replicas")
    return Condition(READY, True, "ClusterReady", f"{len(desired_brokers)} brokers serving, every node in sync")


def _degraded(obs: ClusterObservation, step: roll.Step, scale: ScalePlan) -> Condition:
    if scale.blocked:
        return Condition(DEGRADED, True, "ScaleDownBlocked", scale.message)
    if isinstance(step, roll.Blocked):
        return Condition(DEGRADED, True, step.reason, step.message)
    down = [n for n in obs.nodes if n.phase is PodPhase.DOWN or n.host_down]
    if down:
        return Condition(DEGRADED, True, "NodeDown", "not running: " + ", ".join(
            f"{n.pod} ({n.host_down or n.trouble})" if n.host_down or n.trouble else n.pod for n in down))
    summary = partition_summary(obs) or {}
    if summary.get("underReplicated"):
        return Condition(DEGRADED, True, "UnderReplicated", f"{summary['underReplicated']} partitions are "
                                                            "under-replicated")
    return Condition(DEGRADED, False, "AsExpected", "nothing needs attention")


def conditions(obs: ClusterObservation, step: roll.Step, desired_brokers: set[int],
               scale: ScalePlan, version: VersionPlan, growth: Growth) -> list[Condition]:
    """Ready (everything as the spec asks), Available (clients are served), Progressing (what changes and how
    far: a version change that waits to raise metadata.version, volumes growing too) and Degraded (what needs
    attention)."""
    available, progressing = _available(obs), _progressing(obs, step, scale)
    if progressing.status is False and version.phase is VersionPhase.FINALIZING:
        progressing = Condition(PROGRESSING, True, "FinalizingUpgrade", version.message)
    if progressing.status is False and growth.growing:
        progressing = Condition(PROGRESSING, True, "ExpandingVolumes", growth.growing)
    ready = _ready(obs, desired_brokers, available, progressing, scale)
    if growth.refused:  # like a refused version: the spec asks what cannot be, whatever else the cluster does
        ready = Condition(READY, False, growth.reason, growth.refused)
    elif ready.status is True and progressing.reason == "ExpandingVolumes":
        ready = Condition(READY, False, progressing.reason, progressing.message)
    return [ready, available, progressing, _degraded(obs, step, scale)]


def volume_entries(obs: ClusterObservation) -> list[dict[str, Any]] | None:
    """Each data claim: what it asks for, what it has, how its growth stands."""
    entries = [{"claim": v.claim, "requested": format_bytes(v.requested),
                "capacity": format_bytes(v.capacity) if v.capacity is not None else None,
                "state": v.resize.value, **({"message": v.message} if v.message else {})}
               for v in sorted(obs.volumes, key=lambda v: v.claim)]
    return entries or None


def roll_summary(obs: ClusterObservation, step: roll.Step) -> dict[str, Any] | None:
    order = roll.restart_order(obs.nodes, obs.quorum)
    if not order:
        return None
    out: dict[str, Any] = {"pending": [n.pod for n in order], "reason": roll.restart_reason(order[0])[1]}
    if isinstance(step, roll.Restart):
        out["current"] = step.node.pod
        if step.together:
            out["group"] = [n.pod for n in step.nodes]
        if step.alone:
            out["alone"] = step.alone
    if isinstance(step, roll.Blocked | roll.Wait | roll.Gated):
        out["blockedBy"] = step.message
    return out


def planned_actions(obs: ClusterObservation) -> list[str]:
    actions = []
    for node in roll.restart_order(obs.nodes, obs.quorum):
        reason, message = roll.restart_reason(node)
        actions.append(f"restart {node.pod} ({reason.value}: {message})")
    return actions


def scaling_fields(scale: ScalePlan, obs: ClusterObservation, balanced_for: tuple[int, ...] | None,
                   leaders_pending: bool) -> dict[str, Any]:
    return {
        "phase": scale.phase.value, "message": scale.message, "partitionsToMove": scale.partitions_to_move,
        "balancedBrokers": list(balanced_for) if balanced_for is not None else None,
        "throttledTopics": sorted(obs.throttled_topics) if obs.throttled_topics else None,
        "pendingUnregister": list(scale.unregister) or None,
        "leadersPending": leaders_pending or None,
    }


def _bootstrap(ctx: ClusterContext, obs: ClusterObservation, listener: Listener) -> str | None:
    """Inside Kubernetes, the bootstrap Service; from outside, what krafty.decide.external says."""
    if listener.outside is None:
        return ctx.bootstrap_servers(listener)
    return external.bootstrap(ctx.name, listener, ctx.external_endpoints, [n for n in obs.nodes if n.is_broker],
                              obs.external_services)


def fields(ctx: ClusterContext, obs: ClusterObservation, step: roll.Step, scale: ScalePlan,
           balanced_for: tuple[int, ...] | None, leaders_pending: bool,
           phases: Mapping[str, tuple[RestartPhase, datetime.datetime]]) -> dict[str, Any]:
    """Everything status holds besides the conditions."""
    status: dict[str, Any] = {
        "clusterId": ctx.cluster_id,
        "bootstrapServers": ctx.bootstrap_servers(),
        "listeners": [{"name": listener.name, "port": listener.port, "type": listener.type.value, "tls": listener.tls,
                       "authentication": listener.authentication.value, "securityProtocol": listener.protocol.value,
                       "bootstrapServers": _bootstrap(ctx, obs, listener)} for listener in ctx.published_listeners],
        "readyBrokers": sum(1 for n in obs.nodes if n.is_broker and n.serving),
        "nodes": node_entries(obs, phases),
        "roll": roll_summary(obs, step),
        "plannedActions": planned_actions(obs) + ([scale.message] if scale.busy else []),
        "scaling": scaling_fields(scale, obs, balanced_for, leaders_pending),
    }
    running = sorted({n.version for n in obs.nodes if n.exists and n.version})
    if running:
        status["kafkaVersion"] = ",".join(running)
    for key, value in (("partitions", partition_summary(obs)), ("quorum", quorum_summary(obs))):
        if value is not None:
            status[key] = value
    return status


def feature_entries(obs: ClusterObservation, wanted: Mapping[str, int],
                    waiting: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """status.features: each feature's finalized level, the range the brokers' release supports, and the level
    spec.features asks with why it is not there yet; None when Kafka could not be read this pass (the last ones
    stay)."""
    if not obs.features:
        return None
    return [{"name": f.name, "level": f.finalized,
             **({"supportedMin": f.supported[0], "supportedMax": f.supported[1]} if f.supported else {}),
             **({"wanted": wanted[f.name]} if f.name in wanted else {}),
             **({"waiting": waiting[f.name]} if f.name in waiting else {})}
            for f in obs.features]


def version_fields(target: str, obs: ClusterObservation, version: VersionPlan) -> dict[str, Any]:
    """Where a version change stands: the target, each node's release, the cluster's metadata.version."""
    level = obs.metadata_level
    return {"target": target, "phase": version.phase.value, "message": version.message,
            "nodes": {n.pod: n.version or "unknown" for n in obs.nodes if n.exists},
            "metadataVersion": versions.metadata_name(level) if level is not None else None,
            "metadataLevel": level,
            "healthySince": version.healthy_since.isoformat() if version.healthy_since else None}


@dataclass(frozen=True)
class PassFailure:
    """A pass that raised (not Kafka not answering, which each pass reports itself): how many times in a row, the
    error, and when the next one comes."""

    failures: int
    error: str
    next_at: datetime.datetime

    def message(self, kind: str) -> str:
        return (f"the {kind} pass failed {self.failures} time{'s' * (self.failures != 1)} in a row ({self.error}); "
                f"the next at {self.next_at.strftime('%H:%M:%SZ')}")


def failing_passes(failing: Mapping[str, PassFailure]) -> list[dict[str, Any]] | None:
    """status.failingPasses: each of the cluster's passes that keeps failing, by kind; None (removed) once none."""
    if not failing:
        return None
    return [{"pass": kind, "failures": failure.failures, "error": failure.error,
             "nextAttemptAt": failure.next_at.strftime("%Y-%m-%dT%H:%M:%SZ")}
            for kind, failure in sorted(failing.items())]
