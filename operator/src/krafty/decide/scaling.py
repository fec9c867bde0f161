"""Scaling: how many brokers and controllers the StatefulSets run right now, and
which replica moves, voter removals and unregistrations get there safely.

Brokers
  up    the StatefulSet grows at once; when every new broker has registered,
        replicas and preferred leaders are spread over all brokers.
  down  refused (spec kept, condition set) while a topic's replication factor
        exceeds the remaining brokers; otherwise every replica leaves the
        brokers that go away first, then the StatefulSet shrinks, then the
        removed brokers are unregistered from the KRaft metadata.
Combined voters (the first spec.controllers.replicas brokers), one at a time,
each step only while every voter is caught up:
  up    the new voters' brokers restart with the controller role (the roll,
        krafty.decide.roll: RolesChanged), then each, caught up as an
        observer, is made a voter;
  down  the highest voter is removed from the voters while it runs; once it
        is no longer one, the roll restarts it as a broker only.
Dedicated controllers (KIP-853 dynamic quorum), one voter at a time, each
step only while every voter is caught up:
  up    one more controller starts as an observer; once it has caught up the
        operator makes it a voter (AddRaftVoter);
  down  the highest controller is removed from the voters while it still runs,
        and stopped right after in the same pass (only if the removal went
        through), then its volume goes (krafty.decide.volumes): the quorum never
        passes through a voter set without a live majority (3 -> 1 used to stop
        a voter of two).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from krafty import naming
from krafty.decide import placement
from krafty.decide.roll import MAX_VOTER_LAG
from krafty.facts.observed import ClusterObservation, PartitionState, QuorumState, VoterState
from krafty.naming import Pool

TopicPartition = tuple[str, int]
NAMED_TOPICS = 5  # a refused scale-down names this many of the topics in the way, then counts the rest


class ScalePhase(StrEnum):
    STABLE = "Stable"
    BLOCKED = "Blocked"  # a scale-down that cannot be made safely: refused, nothing changes
    ADDING_BROKERS = "AddingBrokers"
    REBALANCING = "Rebalancing"
    MOVING_REPLICAS = "MovingReplicas"  # off the brokers that go away
    REMOVING_BROKERS = "RemovingBrokers"
    SCALING_CONTROLLERS = "ScalingControllers"
    REMOVING_VOTER = "RemovingVoter"


ROLL_FIRST = "waiting for the rolling restart to finish"


@dataclass(frozen=True)
class ScaleInput:
    desired_brokers: int
    running_brokers: int  # the broker StatefulSet's replicas now
    desired_controllers: int
    running_controllers: int  # the controller StatefulSet's replicas now (0 in combined mode)
    dedicated: bool
    ongoing: Mapping[TopicPartition, object]  # partition reassignments in progress
    balanced_for: tuple[int, ...] | None  # brokers the placement was last balanced for
    roll_pending: bool = False  # a rolling restart goes first: no new moves or quorum changes meanwhile
    racks: Mapping[int, str] = field(default_factory=dict)
    voters: int = 0  # combined mode: the brokers that vote (spec.controllers.replicas)
    static_quorum: bool = False  # kraft.version 0: the voters cannot change until it is raised


@dataclass(frozen=True)
class ScalePlan:
    brokers: int
    controllers: int
    phase: ScalePhase = ScalePhase.STABLE
    message: str = ""
    blocked: bool = False
    reassign: dict[TopicPartition, list[int]] = field(default_factory=dict)
    unregister: tuple[int, ...] = ()
    remove_voter: VoterState | None = None
    balanced_for: tuple[int, ...] | None = None
    partitions_to_move: int = 0
    add_voter: VoterState | None = None
    after_roll: bool = False  # its next step waits for the pending rolling restart, which therefore goes first

    @property
    def busy(self) -> bool:
        return self.phase not in (ScalePhase.STABLE, ScalePhase.BLOCKED)


def _quorum_problem(obs: ClusterObservation, ignore: frozenset[int] = frozenset()) -> str | None:
    """Why the quorum may not change now, or None when every voter (but those ignored) is caught up."""
    if obs.quorum is None or obs.quorum.leader_id < 0:
        return obs.quorum_error or "the controller quorum has no leader"
    lagging = [v.node_id for v in obs.quorum.voters if v.node_id not in ignore and not 0 <= v.lag <= MAX_VOTER_LAG]
    if lagging:
        return f"voters {lagging} are not caught up"
    return None


@dataclass(frozen=True)
class QuorumStep:
    controllers: int  # controller replicas to run
    phase: ScalePhase = ScalePhase.STABLE
    message: str = ""
    remove: VoterState | None = None  # a voter to remove from the quorum
    add: VoterState | None = None  # a caught-up observer to make a voter
    after_roll: bool = False  # waits for the pending rolling restart


def _membership(obs: ClusterObservation, current: int, running: set[int]) -> QuorumStep | None:
    """Voters the running controllers (`running`: those that stay) do not match: a controller back on a new disk
    (its old voter entry goes first), or a running controller that stays and is only an observer (it becomes a
    voter once caught up). `current`: the controller replicas to keep running."""
    quorum = obs.quorum
    if quorum is None or quorum.leader_id < 0:
        return None
    observers = {o.node_id: o for o in quorum.observers if o.node_id in running}
    for voter in quorum.voters:
        found = observers.get(voter.node_id)
        if found is not None and found.directory_id != voter.directory_id:
            problem = _quorum_problem(obs, frozenset({voter.node_id}))
            if problem:
                return QuorumStep(current, ScalePhase.REMOVING_VOTER,
                                  f"waiting to replace controller {voter.node_id}'s voter entry: {problem}")
            return QuorumStep(current, ScalePhase.REMOVING_VOTER, f"controller {voter.node_id} came back on a new "
                              "disk: removing its old voter entry", remove=voter)
    for node in sorted(running - quorum.voter_ids()):
        found = observers.get(node)
        if found is not None and 0 <= found.lag <= MAX_VOTER_LAG and not _quorum_problem(obs):
            return QuorumStep(current, ScalePhase.SCALING_CONTROLLERS, f"adding controller {node} to the voters",
                              add=found)
        return QuorumStep(current, ScalePhase.SCALING_CONTROLLERS,
                          f"waiting for controller {node} to catch up with the metadata log before it votes")
    return None


def _combined_voters(inp: ScaleInput, obs: ClusterObservation) -> QuorumStep:
    """Combined mode: the voters made the first `inp.voters` brokers, one at a time."""
    staying = {naming.node_id(Pool.BROKER, i) for i in range(inp.voters)}
    quorum = obs.quorum
    if quorum is None or quorum.leader_id < 0:
        return QuorumStep(0)
    leaving = sorted((v for v in quorum.voters if v.node_id not in staying), key=lambda v: -v.node_id)
    if leaving:
        problem = _quorum_problem(obs, frozenset({leaving[0].node_id}))
        if problem:
            return QuorumStep(0, ScalePhase.REMOVING_VOTER, f"waiting to remove broker {leaving[0].node_id} from "
                                                            f"the voters: {problem}")
        return QuorumStep(0, ScalePhase.REMOVING_VOTER, f"removing broker {leaving[0].node_id} from the voters "
                          f"(controllers.replicas {inp.voters}); the roll then restarts it as a broker only",
                          remove=leaving[0])
    # A broker that is to vote runs as a controller once the roll restarted it into that role
    controllers = {n.node_id for n in obs.nodes if n.node_id in staying and n.running
                   and (n.controller_running or (n.controller_running is None and n.node_id in quorum.voter_ids()))}
    repair = _membership(obs, 0, controllers)
    if repair is not None:
        return repair
    joining = sorted(staying - quorum.voter_ids())
    if joining:  # (the roll restarts it into the controller role: it goes first)
        return QuorumStep(0, ScalePhase.SCALING_CONTROLLERS, f"waiting for broker {joining[0]} to restart as a "
                                                             "controller before it votes", after_roll=True)
    return QuorumStep(0)


STATIC_QUORUM = ("the quorum is static (kraft.version 0): its voters change once spec.features raises kraft.version "
                 "to 1")


def static_refusal(static: bool, wanted_voters: int, quorum: QuorumState | None, raising: bool) -> str | None:
    """Why a spec that changes a static quorum's voters cannot be carried out (unless it also raises kraft.version,
    after which the voters change), or None."""
    if not static or raising or quorum is None or len(quorum.voters) == wanted_voters:
        return None
    return (f"spec.controllers.replicas {wanted_voters}: the quorum is static (kraft.version 0) and its "
            f"{len(quorum.voters)} voters cannot change; set spec.features kraft.version: 1 first (a point of no "
            "return). Nothing changes")


def _controllers(inp: ScaleInput, obs: ClusterObservation) -> QuorumStep:
    wanted = inp.desired_controllers if inp.dedicated else inp.voters
    if inp.static_quorum and obs.quorum is not None and len(obs.quorum.voters) != wanted:
        # (Blocked, not busy: the cluster stays healthy, and so kraft.version can be raised)
        return QuorumStep(inp.running_controllers, ScalePhase.BLOCKED, STATIC_QUORUM)
    return _dedicated_controllers(inp, obs) if inp.dedicated else _combined_voters(inp, obs)


def _dedicated_controllers(inp: ScaleInput, obs: ClusterObservation) -> QuorumStep:
    current, desired = inp.running_controllers, inp.desired_controllers
    first_gone = naming.node_id(Pool.CONTROLLER, current)
    stale = [v for v in (obs.quorum.voters if obs.quorum else ()) if v.node_id >= first_gone]
    if stale:
        # A voter whose controller no longer runs: remove it while the others are healthy.
        problem = _quorum_problem(obs, frozenset(v.node_id for v in stale))
        if problem:
            return QuorumStep(current, ScalePhase.REMOVING_VOTER,
                              f"waiting to remove controller {stale[0].node_id}: {problem}")
        return QuorumStep(current, ScalePhase.REMOVING_VOTER,
                          f"removing stopped controller {stale[0].node_id} from the voters", remove=stale[0])
    repair = _membership(obs, current, {naming.node_id(Pool.CONTROLLER, i) for i in range(min(current, desired))})
    if repair is not None:
        return repair
    if current == desired:
        return QuorumStep(current)
    if inp.roll_pending:
        return QuorumStep(current, ScalePhase.SCALING_CONTROLLERS, ROLL_FIRST, after_roll=True)
    problem = _quorum_problem(obs)
    if problem:
        return QuorumStep(current, ScalePhase.SCALING_CONTROLLERS, f"quorum change waits: {problem}")
    if current < desired:
        # It starts as an observer; the operator makes it a voter once it has caught up (_membership).
        return QuorumStep(current + 1, ScalePhase.SCALING_CONTROLLERS, f"starting controller {first_gone}")
    leaving = naming.node_id(Pool.CONTROLLER, current - 1)
    voter = next((v for v in obs.quorum.voters if v.node_id == leaving), None) if obs.quorum else None
    if voter is None:
        return QuorumStep(current - 1, ScalePhase.SCALING_CONTROLLERS, f"stopping controller {leaving}: no longer "
                                                                        "a voter")
    # Removed while it runs, and stopped in the same pass once that went through (the removal is the pass's
    # first action): the quorum never waits on a voter that is gone.
    return QuorumStep(current - 1, ScalePhase.REMOVING_VOTER,
                      f"removing controller {leaving} from the voters, then stopping it", remove=voter)


def _scale_down(inp: ScaleInput, obs: ClusterObservation) -> ScalePlan:
    keep = range(inp.desired_brokers)
    if obs.partitions is None:
        return ScalePlan(inp.running_brokers, 0, ScalePhase.REMOVING_BROKERS, f"waiting for Kafka: {obs.kafka_error}")
    unsettled = _unsettled(obs.partitions, inp.running_brokers, ScalePhase.REMOVING_BROKERS)
    if unsettled:
        return unsettled
    wide = placement.infeasible_topics(obs.partitions, inp.desired_brokers)
    if wide:
        named = [f"{t} (replication factor {rf})" for t, rf in sorted(wide.items())]
        topics = ", ".join(named[:NAMED_TOPICS]) + (f" and {len(named) - NAMED_TOPICS} more topics"
                                                     if len(named) > NAMED_TOPICS else "")
        return ScalePlan(inp.running_brokers, 0, ScalePhase.BLOCKED, blocked=True, message=(
            f"cannot scale down to {inp.desired_brokers} brokers: {topics} would not fit. Nothing was removed; "
            f"lower those replication factors or set brokers.replicas back to {inp.running_brokers}"))
    leaving = set(range(inp.desired_brokers, inp.running_brokers))
    holding = [p for p in obs.partitions if leaving & set(p.replicas)]
    if inp.ongoing:
        return ScalePlan(inp.running_brokers, 0, ScalePhase.MOVING_REPLICAS,
                         f"moving replicas off brokers {sorted(leaving)}: {len(inp.ongoing)} partitions in flight",
                         partitions_to_move=len(holding))
    if holding and inp.roll_pending:
        return ScalePlan(inp.running_brokers, 0, ScalePhase.MOVING_REPLICAS, ROLL_FIRST,
                         partitions_to_move=len(holding), after_roll=True)
    if holding:
        moves = placement.balance(obs.partitions, keep, inp.racks)
        return ScalePlan(inp.running_brokers, 0, ScalePhase.MOVING_REPLICAS,
                         f"moving {len(holding)} partitions off brokers {sorted(leaving)}", reassign=moves,
                         partitions_to_move=len(holding))
    return ScalePlan(inp.desired_brokers, 0, ScalePhase.REMOVING_BROKERS,
                     f"brokers {sorted(leaving)} hold no replicas: stopping them")


def _unsettled(partitions: tuple[PartitionState, ...], brokers: int, phase: ScalePhase,
               balanced_for: tuple[int, ...] | None = None) -> ScalePlan | None:
    """A wait while some topic's replica lists disagree in length: no plan is made from them."""
    uneven = placement.uneven_topics(partitions)
    if not uneven:
        return None
    return ScalePlan(brokers, 0, phase, f"waiting for the replica lists of {', '.join(uneven[:NAMED_TOPICS])} to "
                     "agree in length (a move that just finished may not have reached every broker yet)",
                     balanced_for=balanced_for)


def _rebalance(inp: ScaleInput, obs: ClusterObservation) -> ScalePlan:
    brokers = tuple(range(inp.desired_brokers))
    registered = {n.node_id for n in obs.nodes if n.is_broker and n.registered}
    if inp.ongoing:
        return ScalePlan(inp.desired_brokers, 0, ScalePhase.REBALANCING,
                         f"{len(inp.ongoing)} partition moves in flight", balanced_for=inp.balanced_for,
                         partitions_to_move=len(inp.ongoing))
    if inp.balanced_for == brokers or obs.partitions is None:
        return ScalePlan(inp.desired_brokers, 0, balanced_for=inp.balanced_for)
    if not set(brokers) <= registered:
        return ScalePlan(inp.desired_brokers, 0, ScalePhase.ADDING_BROKERS,
                         f"waiting for brokers {sorted(set(brokers) - registered)} to register",
                         balanced_for=inp.balanced_for)
    if inp.roll_pending:
        return ScalePlan(inp.desired_brokers, 0, ScalePhase.ADDING_BROKERS, ROLL_FIRST,
                         balanced_for=inp.balanced_for, after_roll=True)
    unsettled = _unsettled(obs.partitions, inp.desired_brokers, ScalePhase.REBALANCING, inp.balanced_for)
    if unsettled:
        return unsettled
    moves = placement.balance(obs.partitions, brokers, inp.racks)
    if not moves:
        return ScalePlan(inp.desired_brokers, 0, balanced_for=brokers)
    return ScalePlan(inp.desired_brokers, 0, ScalePhase.REBALANCING,
                     f"spreading replicas and leaders over brokers {list(brokers)}: {len(moves)} partitions move",
                     reassign=moves, balanced_for=inp.balanced_for, partitions_to_move=len(moves))


def _stale_registrations(obs: ClusterObservation, brokers: int) -> tuple[int, ...]:
    """Brokers still registered in the KRaft metadata whose node is gone for good (removed by a scale-down)."""
    existing = {n.node_id for n in obs.nodes if n.exists}
    return tuple(sorted(r.node_id for r in obs.registrations
                        if brokers <= r.node_id < naming.CONTROLLER_ID_OFFSET and r.node_id not in existing))


def plan(inp: ScaleInput, obs: ClusterObservation) -> ScalePlan:
    quorum = _controllers(inp, obs)
    brokers = _scale_down(inp, obs) if inp.running_brokers > inp.desired_brokers else _rebalance(inp, obs)
    phase, message, after_roll = brokers.phase, brokers.message, brokers.after_roll
    if quorum.phase is not ScalePhase.STABLE and not brokers.busy:
        phase, message, after_roll = quorum.phase, quorum.message, quorum.after_roll
    return ScalePlan(brokers.brokers, quorum.controllers, phase, message, brokers.blocked, brokers.reassign,
                     _stale_registrations(obs, brokers.brokers), quorum.remove, brokers.balanced_for,
                     brokers.partitions_to_move, quorum.add, after_roll)
