"""The rolling restart: which node to restart next, or why not yet.

One node at a time, in this order: nodes whose pod is not running (they serve
nothing), then dedicated controllers, then brokers; among voters the active
controller goes last. A voter restarts only while a caught-up majority of the
other voters remains; a broker only if no partition would go offline (no
in-sync replica left, nor an eligible leader replica where the cluster runs
ELR) or drop below min.insync.replicas. Before each restart every running node must be
back: pods ready, brokers registered and back in the ISR of all their
partitions, voters caught up, and (when the operator balances leaders) each
partition led by its preferred replica again.

A node annotated for a forced restart (kubectl krafty restart --force) goes as soon as no other node is stopping
or starting, without asking Kafka: the way back for a cluster that refuses the operator (whose checks then cannot
be asked), at the user's word.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from krafty.decide.leaders import electable, imbalance_by_broker, partitions_to_rebalance
from krafty.decide.restart_groups import Parallelism, ParallelismKind, next_group
from krafty.decide.restart_phases import recovering
from krafty.facts.observed import (
    ChangeKind,
    ClusterObservation,
    NodeState,
    PartitionState,
    PodPhase,
    QuorumState,
    RestartRequest,
)
from krafty.naming import Pool

# A voter this many offsets behind the leader still counts as caught up.
MAX_VOTER_LAG = 1000
# A restart message names this many changed config keys, then counts the rest.
NAMED_KEYS = 5
HELD_BY_CANARY = "RollHeldByCanary"  # the reason of a restart the canary's gate holds


class RestartReason(StrEnum):
    """Why a node restarts; each comes with a readable message in the Event."""

    CONFIG_CHANGED = "ConfigChanged"
    CERTIFICATES_CHANGED = "CertificatesChanged"
    POD_TEMPLATE_CHANGED = "PodTemplateChanged"
    MANUAL = "ManualRestart"
    FORCED = "ForcedRestart"
    FILE_SYSTEM_RESIZE = "FileSystemResize"
    ROLES_CHANGED = "RolesChanged"  # combined mode: it joins or leaves the controllers (spec.controllers.replicas)
    NOT_RUNNING = "PodNotRunning"


@dataclass(frozen=True)
class Restart:
    node: NodeState
    reason: RestartReason
    message: str
    together: tuple[NodeState, ...] = ()  # brokers restarted at the same time (spec.restarts.parallelism)
    alone: str | None = None  # why it goes alone when more were asked for

    @property
    def nodes(self) -> tuple[NodeState, ...]:
        return (self.node, *self.together)


@dataclass(frozen=True)
class ElectLeaders:
    partitions: tuple[tuple[str, int], ...]
    message: str


class Awaits(StrEnum):
    """What a waiting roll waits on: how its pass learns that the wait is over."""

    PODS = "Pods"  # a pod's change (a pod created, started, ready or gone): its events wake the pass
    STATE = "State"  # what no watch reports (a broker registered or back in the ISR, a voter caught up, a
    # StatefulSet's new revision): only looking again tells


@dataclass(frozen=True)
class Wait:
    message: str
    awaits: Awaits = Awaits.PODS


@dataclass(frozen=True)
class Blocked:
    node_id: int
    partition: str
    message: str
    reason: str = "RollBlocked"


@dataclass(frozen=True)
class Gated:
    """The next restart is safe for Kafka but waits on what clients feel (the canary's gate)."""

    node: NodeState
    message: str
    reason: str = HELD_BY_CANARY


@dataclass(frozen=True)
class Done:
    pass


Step = Restart | ElectLeaders | Wait | Blocked | Gated | Done


def restart_reason(node: NodeState) -> tuple[RestartReason, str]:
    if not node.running:
        return RestartReason.NOT_RUNNING, f"{node.pod} is not running and waits for a new configuration"
    if node.restart_requested is RestartRequest.FORCED:
        return RestartReason.FORCED, (f"{node.pod} was annotated for a forced restart: it goes without Kafka's "
                                      "checks (partitions in sync, the quorum)")
    if node.restart_requested is RestartRequest.SAFE and node.revision_current:
        return RestartReason.MANUAL, f"{node.pod} was annotated for a restart"
    if node.resize_waiting is not None and node.revision_current:
        return RestartReason.FILE_SYSTEM_RESIZE, f"{node.pod}: {node.resize_waiting}"
    if node.roles_pending and node.revision_current:
        joins = "joins the controllers" if node.is_controller else "leaves the controllers"
        return RestartReason.ROLES_CHANGED, f"{node.pod} {joins} (process.roles {','.join(node.roles)})"
    config = [c.describe() for c in node.pending if c.kind is ChangeKind.CONFIG]
    details = []
    if config:
        more = f" and {len(config) - NAMED_KEYS} more" if len(config) > NAMED_KEYS else ""
        details.append(f"config: {', '.join(config[:NAMED_KEYS])}{more} need a restart")
    details += [c.describe() for c in node.pending if c.kind is not ChangeKind.CONFIG]
    if config:
        reason = RestartReason.CONFIG_CHANGED
    elif node.pending and all(c.kind in (ChangeKind.CERTIFICATES, ChangeKind.CLIENTS_CA) for c in node.pending):
        reason = RestartReason.CERTIFICATES_CHANGED
    else:
        reason = RestartReason.POD_TEMPLATE_CHANGED
    return reason, f"{node.pod}: {'; '.join(details) or 'the pod template changed'}"


def restart_order(nodes: tuple[NodeState, ...], quorum: QuorumState | None) -> list[NodeState]:
    """Nodes that need a restart, in the order they restart."""
    leader = quorum.leader_id if quorum else -1

    def key(node: NodeState) -> tuple[int, int, int, int]:
        return (0 if not node.running else 1,
                0 if node.pool is Pool.CONTROLLER else 1,
                1 if node.node_id == leader else 0,
                node.node_id)

    return sorted((n for n in nodes if n.needs_restart), key=key)


def broker_blockers(broker: int, partitions: tuple[PartitionState, ...]) -> list[tuple[PartitionState, str]]:
    """Partitions a restart of this broker would take offline or below min.insync.replicas."""
    blockers = []
    for p in partitions:
        if broker not in p.isr or len(p.replicas) == 1:
            continue  # not serving it, or no other replica could ever take over
        rest = len(p.isr) - 1
        if not p.leader_candidates({broker}):
            blockers.append((p, f"{p.name} would go offline: broker {broker} is its only in-sync replica "
                                f"(replicas {list(p.replicas)})"))
        elif len(p.isr) >= p.min_isr > rest:
            blockers.append((p, f"{p.name} would drop below min.insync.replicas={p.min_isr}: its in-sync replicas "
                                f"are {list(p.isr)}"))
    return blockers


def controller_blocker(node_id: int, quorum: QuorumState | None) -> str | None:
    """Why stopping this voter could cost the quorum its majority, or None when it is safe. A lone voter
    restarts: no other voter could ever keep the quorum while it is down (like a partition with a single
    replica), and refusing would leave the cluster without any change, certificate renewals included."""
    if quorum is None:
        return "the metadata quorum cannot be described"
    voters = quorum.voter_ids()
    if node_id not in voters or voters == {node_id}:
        return None
    others_caught_up = quorum.caught_up(MAX_VOTER_LAG) - {node_id}
    majority = len(voters) // 2 + 1
    if len(others_caught_up) < majority:
        return (f"stopping voter {node_id} would leave {len(others_caught_up)} caught-up voters of {len(voters)}; "
                f"a majority of {majority} is needed")
    return None


def _node_not_back(node: NodeState) -> Wait | None:
    match node.phase:
        case PodPhase.MISSING:
            return Wait(f"waiting for {node.pod} to be created")
        case PodPhase.STARTING | PodPhase.WARMING_UP:
            return Wait(f"waiting for {node.pod} to start")
        case PodPhase.NOT_READY:
            return Wait(f"waiting for {node.pod} to be ready")
        case PodPhase.READY if node.is_broker and not node.registered:
            return Wait(f"waiting for broker {node.node_id} to register with the controller", Awaits.STATE)
    # Ready, or down for longer than a restart takes (the partition checks decide what may stop), or
    # terminating (the roll waits for that on its own).
    return None


def catching_up(obs: ClusterObservation) -> Wait | None:
    """A node that is not fully back yet (the roll waits for it)."""
    for node in obs.nodes:
        wait = _node_not_back(node)
        if wait:
            return wait
    running = {n.node_id for n in obs.nodes if n.running}
    for voter in obs.quorum.voters if obs.quorum is not None else ():
        if voter.node_id in running and not 0 <= voter.lag <= MAX_VOTER_LAG:
            return Wait(f"waiting for voter {voter.node_id} to catch up with the metadata log (lag {voter.lag})",
                        Awaits.STATE)
    running_brokers = {n.node_id for n in obs.nodes if n.is_broker and n.running}
    for p in obs.partitions or ():
        missing = (set(p.replicas) - set(p.isr)) & running_brokers
        if missing:
            return Wait(f"waiting for broker {min(missing)} to rejoin the ISR of {p.name}", Awaits.STATE)
    return None


def blocker(node: NodeState, obs: ClusterObservation) -> Blocked | None:
    """What stops this node from restarting now (a voter the quorum needs, a partition it would take offline or
    below min.insync.replicas), or None."""
    if node.is_controller:
        reason = controller_blocker(node.node_id, obs.quorum)
        if reason:
            return Blocked(node.node_id, "", reason)
    elif node.roles_pending and obs.quorum is not None and node.node_id in obs.quorum.voter_ids():
        return Blocked(node.node_id, "", f"{node.pod} leaves the controllers once it is no longer a voter")
    if node.is_broker:
        blockers = broker_blockers(node.node_id, obs.partitions or ())
        if blockers:
            partition, reason = blockers[0]
            more = f" (and {len(blockers) - 1} more partitions)" if len(blockers) > 1 else ""
            return Blocked(node.node_id, partition.name, f"{node.pod} waits: {reason}{more}")
    return None


def next_step(obs: ClusterObservation, restore_leaders: bool, threshold_percent: int = 0,
              parallelism: Parallelism | None = None) -> Step:
    """The one thing to do next in a rolling restart (or, with nothing to restart, in leader balance:
    once every node is back, partitions of brokers above the imbalance threshold go back to their
    preferred leader). `parallelism`: how many brokers may restart together (krafty.decide.restart_groups)."""
    order = restart_order(obs.nodes, obs.quorum)
    if not order:
        return _balance(obs, threshold_percent) if restore_leaders else Done()
    stopping = [n.pod for n in obs.nodes if n.terminating]
    if stopping:
        return Wait(f"waiting for {stopping[0]} to stop (controlled shutdown)")
    if not order[0].running:
        reason, message = restart_reason(order[0])
        return Restart(order[0], reason, message)
    step = _forced(obs, order) or _not_yet(obs, order, restore_leaders) or _first_safe(obs, order)
    if isinstance(step, Restart) and parallelism is not None and parallelism.kind is not ParallelismKind.ONE:
        return _with_group(obs, order, step, parallelism)
    return step


def _with_group(obs: ClusterObservation, order: list[NodeState], step: Restart, parallelism: Parallelism) -> Restart:
    """The restart with the brokers that may go together with it (a controller always goes alone)."""
    if not step.node.is_broker or step.node.is_controller or step.reason is RestartReason.FORCED:
        return step
    brokers = [n for n in order if n.is_broker and not n.is_controller and n.running
               and n.restart_requested is not RestartRequest.FORCED]
    rest = [n for n in brokers if n.node_id != step.node.node_id]
    racks = {r.node_id: r.rack for r in obs.registrations}
    group = next_group([step.node.node_id, *(n.node_id for n in rest)], racks, obs.partitions or (), parallelism)
    by_id = {n.node_id: n for n in rest}
    together = tuple(by_id[b] for b in group.brokers[1:])
    where = f" (zone {group.zone})" if group.zone else ""
    message = (f"{step.message}; with {', '.join(n.pod for n in together)}{where}" if together else step.message)
    return replace(step, message=message, together=together, alone=group.alone)


def _forced(obs: ClusterObservation, order: list[NodeState]) -> Step | None:
    """A node annotated for a forced restart, once every other node's pod is back (Kubernetes' word only)."""
    forced = next((n for n in order if n.restart_requested is RestartRequest.FORCED), None)
    if forced is None:
        return None
    others = [n for n in obs.nodes if n.node_id != forced.node_id and n.exists]
    if not_back := next((n for n in others if not n.ready), None):
        return Wait(f"{forced.pod} restarts, forced, once {not_back.pod} is ready again")
    reason, message = restart_reason(forced)
    return Restart(forced, reason, message)


def _not_yet(obs: ClusterObservation, order: list[NodeState], restore_leaders: bool) -> Step | None:
    """What must happen before any running node may restart, if anything."""
    if obs.partitions is None and any(n.is_broker for n in order):
        return Wait(f"Kafka cannot be asked about partitions ({obs.kafka_error}); no broker restarts until it can")
    stuck = [n for n in obs.nodes if n.stuck and not recovering(n, obs)]  # (a recovering broker is waited for)
    if stuck:
        # The roll never continues past a node that is not back: the next one would likely fail the same way.
        why = stuck[0].trouble or f"not ready after {stuck[0].phase.value.lower()}"
        return Blocked(stuck[0].node_id, "", f"{stuck[0].pod} runs the current configuration but is not back "
                                             f"({why}); no other node restarts until it is, or until the spec "
                                             "changes")
    waiting = catching_up(obs)
    if waiting:
        return waiting
    if restore_leaders:
        alive = {n.node_id for n in obs.nodes if n.is_broker and n.registered}
        leaders = electable(obs.partitions or (), alive)
        if leaders:
            return ElectLeaders(tuple((p.topic, p.partition) for p in leaders),
                                f"restoring the preferred leader of {len(leaders)} partitions before the next restart")
    return None


def leaders_settled(obs: ClusterObservation) -> bool:
    """Every partition whose preferred replica can lead is led by it, with nothing restarting or catching up."""
    if (obs.partitions is None or restart_order(obs.nodes, obs.quorum) or any(n.terminating for n in obs.nodes)
            or catching_up(obs)):
        return False
    alive = {n.node_id for n in obs.nodes if n.is_broker and n.registered}
    return not electable(obs.partitions, alive)


def _balance(obs: ClusterObservation, threshold_percent: int) -> Step:
    if obs.partitions is None or any(n.terminating for n in obs.nodes):
        return Done()
    alive = {n.node_id for n in obs.nodes if n.is_broker and n.registered}
    waiting = catching_up(obs)
    if waiting:
        # A broker back from a restart leads nothing until it is in sync: keep watching closely
        # while that leaves it above the threshold, so its leadership returns as soon as it can.
        over = any(share * 100 > threshold_percent for share in imbalance_by_broker(obs.partitions, alive).values())
        if not over:
            return Done()
        return replace(waiting, message=f"{waiting.message}; preferred leaders are restored after that")
    targets = partitions_to_rebalance(obs.partitions, alive, threshold_percent)
    if not targets:
        return Done()
    return ElectLeaders(tuple((p.topic, p.partition) for p in targets),
                        f"{len(targets)} partitions are back in sync on their preferred leader "
                        f"(imbalance above {threshold_percent}%)")


def _first_safe(obs: ClusterObservation, order: list[NodeState]) -> Step:
    # A blocked node lets the next one of its pool go first; a later pool waits.
    first_blocked: Blocked | None = None
    for node in order:
        if first_blocked is not None and node.pool is not order[0].pool:
            break
        blocked = blocker(node, obs)
        if blocked is None:
            reason, message = restart_reason(node)
            return Restart(node, reason, message)
        first_blocked = first_blocked or blocked
    assert first_blocked is not None
    return first_blocked
