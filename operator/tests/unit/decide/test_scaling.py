"""Scaling decisions, situation by situation."""

from __future__ import annotations

from krafty import naming
from krafty.decide.cluster_status import scaling_fields
from krafty.decide.scaling import ScaleInput, plan
from krafty.facts.observed import (
    BrokerRegistration,
    ClusterObservation,
    NodeState,
    PartitionState,
    PodPhase,
    QuorumState,
    VoterState,
)
from krafty.naming import Pool
from krafty.planning.cluster import Facts


def broker(node_id: int, registered: bool = True) -> NodeState:
    return NodeState(node_id, Pool.BROKER, f"c-broker-{node_id}", ("broker",), PodPhase.READY, True,
                     registered=registered)


def partitions(rf: int, brokers: list[int], count: int = 6, topic: str = "t") -> tuple[PartitionState, ...]:
    out = []
    for p in range(count):
        replicas = tuple(brokers[(p + i) % len(brokers)] for i in range(rf))
        out.append(PartitionState(topic, p, replicas[0], replicas, replicas, 2))
    return tuple(out)


def voters(*ids: int, lagging: int | None = None) -> QuorumState:
    return QuorumState(ids[0], 1, tuple(VoterState(i, f"dir{i}", 99_999 if i == lagging else 0) for i in ids))


def obs(brokers: list[int], parts, quorum=None, registered: list[int] | None = None,
        fenced: tuple[int, ...] = ()) -> ClusterObservation:
    registered = brokers if registered is None else registered
    nodes = tuple(broker(b, b in registered) for b in brokers)
    registrations = tuple(BrokerRegistration(b, False) for b in registered) + tuple(
        BrokerRegistration(b, True) for b in fenced)
    return ClusterObservation(nodes, parts, quorum or voters(1000, 1001, 1002), registrations=registrations)


def inputs(**kw) -> ScaleInput:
    base = {"desired_brokers": 3, "running_brokers": 3, "desired_controllers": 3, "running_controllers": 3,
            "dedicated": True, "ongoing": {}, "balanced_for": (0, 1, 2)}
    return ScaleInput(**{**base, **kw})


def test_stable_cluster_does_nothing():
    result = plan(inputs(), obs([0, 1, 2], partitions(3, [0, 1, 2])))
    assert (result.brokers, result.controllers, result.phase, result.reassign) == (3, 3, "Stable", {})


def test_scale_up_grows_then_spreads_once_registered():
    # Given 3 -> 5 requested, the StatefulSet grows at once
    grown = plan(inputs(desired_brokers=5), obs([0, 1, 2], partitions(3, [0, 1, 2])))
    assert grown.brokers == 5
    # While the new brokers register, nothing moves
    waiting = plan(inputs(desired_brokers=5, running_brokers=5),
                   obs([0, 1, 2, 3, 4], partitions(3, [0, 1, 2]), registered=[0, 1, 2]))
    assert waiting.phase == "AddingBrokers"
    assert waiting.reassign == {}
    # Then replicas spread over all five
    moving = plan(inputs(desired_brokers=5, running_brokers=5), obs([0, 1, 2, 3, 4], partitions(3, [0, 1, 2])))
    assert moving.phase == "Rebalancing"
    assert {b for r in moving.reassign.values() for b in r} >= {3, 4}
    # And once nothing needs to move, the new broker set is recorded as balanced
    done = plan(inputs(desired_brokers=5, running_brokers=5), obs([0, 1, 2, 3, 4], partitions(3, [0, 1, 2, 3, 4],
                                                                                              count=5)))
    assert done.balanced_for == (0, 1, 2, 3, 4)
    assert done.phase == "Stable"


def test_scale_down_moves_replicas_before_shrinking():
    data = partitions(3, [0, 1, 2, 3, 4])
    first = plan(inputs(desired_brokers=3, running_brokers=5), obs([0, 1, 2, 3, 4], data))
    assert first.brokers == 5
    assert first.phase == "MovingReplicas"
    assert all(set(r) <= {0, 1, 2} for r in first.reassign.values())
    in_flight = plan(inputs(desired_brokers=3, running_brokers=5, ongoing={("t", 0): object()}),
                     obs([0, 1, 2, 3, 4], data))
    assert (in_flight.brokers, in_flight.reassign) == (5, {})
    emptied = plan(inputs(desired_brokers=3, running_brokers=5), obs([0, 1, 2, 3, 4], partitions(3, [0, 1, 2])))
    assert (emptied.brokers, emptied.unregister) == (3, ())
    # Once their pods are gone, the removed brokers still registered (fenced) are unregistered
    gone = plan(inputs(desired_brokers=3), obs([0, 1, 2], partitions(3, [0, 1, 2]), fenced=(3, 4)))
    assert gone.unregister == (3, 4)


def test_a_broker_of_the_cluster_that_is_down_is_never_unregistered():
    # Given broker 2 fenced (its pod crash-looping, or gone for a moment) in a cluster of three
    down = plan(inputs(), obs([0, 1], partitions(3, [0, 1, 2]), fenced=(2,)))
    assert down.unregister == ()


def test_impossible_scale_down_is_refused_and_removes_nothing():
    result = plan(inputs(desired_brokers=2, running_brokers=3), obs([0, 1, 2], partitions(3, [0, 1, 2])))
    assert result.blocked
    assert result.brokers == 3
    assert "t (replication factor 3) would not fit" in result.message
    assert result.reassign == {}


def test_a_refused_scale_down_names_the_first_topics_and_counts_the_rest():
    many = tuple(p for i in range(8) for p in partitions(3, [0, 1, 2], count=1, topic=f"t{i}"))
    message = plan(inputs(desired_brokers=2, running_brokers=3), obs([0, 1, 2], many)).message
    assert "t0 (replication factor 3), t1" in message
    assert "t4 (replication factor 3) and 3 more topics would not fit" in message
    assert "t5" not in message


def test_controllers_grow_one_voter_at_a_time():
    step1 = plan(inputs(desired_controllers=5), obs([0, 1, 2], partitions(3, [0, 1, 2])))
    assert (step1.controllers, step1.message) == (4, "starting controller 1003")
    # controller 1003 runs but has not caught up as an observer yet: wait
    waiting = plan(inputs(desired_controllers=5, running_controllers=4), obs([0, 1, 2], partitions(3, [0, 1, 2])))
    assert waiting.controllers == 4
    assert "1003 to catch up" in waiting.message
    # caught up: the operator makes it a voter
    observer = VoterState(1003, "dir1003", 0)
    caught_up = QuorumState(1000, 1, voters(1000, 1001, 1002).voters, (observer,))
    adding = plan(inputs(desired_controllers=5, running_controllers=4),
                  obs([0, 1, 2], partitions(3, [0, 1, 2]), caught_up))
    assert (adding.controllers, adding.add_voter) == (4, observer)
    joined = plan(inputs(desired_controllers=5, running_controllers=4),
                  obs([0, 1, 2], partitions(3, [0, 1, 2]), voters(1000, 1001, 1002, 1003)))
    assert joined.controllers == 5


def test_a_controller_back_on_a_new_disk_has_its_old_voter_entry_replaced():
    # Given controller 1001 running again on an empty disk: an observer with a new directory id
    fresh = VoterState(1001, "new-dir", 0)
    quorum = QuorumState(1000, 1, voters(1000, 1001, 1002).voters, (fresh,))
    replace = plan(inputs(), obs([0, 1, 2], partitions(3, [0, 1, 2]), quorum))
    # Then its old entry goes first, and then (an observer not a voter) it is added back
    assert replace.remove_voter is not None
    assert (replace.remove_voter.node_id, replace.remove_voter.directory_id) == (1001, "dir1001")
    after = QuorumState(1000, 1, voters(1000, 1002).voters, (fresh,))
    assert plan(inputs(), obs([0, 1, 2], partitions(3, [0, 1, 2]), after)).add_voter == fresh


def test_controllers_never_change_while_a_voter_lags():
    result = plan(inputs(desired_controllers=5), obs([0, 1, 2], partitions(3, [0, 1, 2]),
                                                     voters(1000, 1001, 1002, lagging=1001)))
    assert result.controllers == 3
    assert "not caught up" in result.message


def test_controllers_shrink_by_removing_the_voter_while_it_runs_then_stopping_it():
    five = voters(1000, 1001, 1002, 1003, 1004)
    data = partitions(3, [0, 1, 2])
    # Given 5 -> 3: the highest controller is removed from the voters while it still runs, and stopped in the
    # same pass (the plan puts the removal first: a running controller would join the quorum again by itself)
    remove = plan(inputs(desired_controllers=3, running_controllers=5), obs([0, 1, 2], data, five))
    assert (remove.controllers, remove.phase) == (4, "RemovingVoter")
    assert remove.remove_voter is not None
    assert remove.remove_voter.node_id == 1004
    # A controller that is no longer a voter is just stopped
    stop = plan(inputs(desired_controllers=3, running_controllers=5),
                obs([0, 1, 2], data, voters(1000, 1001, 1002, 1003)))
    assert (stop.controllers, stop.remove_voter) == (4, None)


def test_three_controllers_to_one_never_stop_a_voter_the_majority_needs():
    # Given 3 -> 1, each step removes the leaving voter while every voter runs, before it stops
    data = partitions(3, [0, 1, 2])
    quorum, running, steps = voters(1000, 1001, 1002), 3, []
    for _ in range(4):
        step = plan(inputs(desired_controllers=1, running_controllers=running), obs([0, 1, 2], data, quorum))
        if step.controllers < running:
            leaving = naming.node_id(Pool.CONTROLLER, step.controllers)
            assert step.remove_voter is not None
            assert step.remove_voter.node_id == leaving  # removed in the pass that stops it, first
            assert len(quorum.voter_ids()) - 1 >= 1  # the voters left are all running
            quorum = voters(*sorted(quorum.voter_ids() - {leaving}))
            running = step.controllers
            steps.append(f"remove and stop {leaving}")
    assert steps == ["remove and stop 1002", "remove and stop 1001"]
    assert (running, quorum.voter_ids()) == (1, {1000})


def test_a_voter_whose_controller_is_gone_is_removed_while_the_others_are_healthy():
    # 1004 stopped (its lag grows) without being removed first (a crash, an older operator)
    stopped = voters(1000, 1001, 1002, 1003, 1004, lagging=1004)
    remove = plan(inputs(desired_controllers=3, running_controllers=4), obs([0, 1, 2], partitions(3, [0, 1, 2]),
                                                                              stopped))
    assert remove.remove_voter is not None
    assert remove.remove_voter.node_id == 1004
    assert remove.controllers == 4


def test_a_pending_roll_goes_before_new_moves():
    result = plan(inputs(desired_brokers=5, running_brokers=5, roll_pending=True),
                  obs([0, 1, 2, 3, 4], partitions(3, [0, 1, 2])))
    assert result.reassign == {}
    assert "rolling restart" in result.message


def test_no_move_is_planned_from_replica_lists_that_disagree_in_length():
    # A broker still answering with a finished move's in-flight list (target and old replicas together)
    settled = partitions(2, [0, 1, 2], topic="__consumer_offsets")
    stale = (*settled[1:], PartitionState("__consumer_offsets", 0, 3, (3, 4, 0, 1), (0, 1, 3, 4), 1))
    growing = plan(inputs(desired_brokers=5, running_brokers=5), obs([0, 1, 2, 3, 4], stale))
    assert growing.reassign == {}
    assert growing.busy
    assert "__consumer_offsets" in growing.message
    shrinking = plan(inputs(desired_brokers=3, running_brokers=5), obs([0, 1, 2, 3, 4], stale))
    assert (shrinking.reassign, shrinking.unregister, shrinking.blocked) == ({}, (), False)
    # Once every broker agrees, the plan goes ahead
    agreed = plan(inputs(desired_brokers=5, running_brokers=5), obs([0, 1, 2, 3, 4], settled))
    assert agreed.reassign
    assert all(len(replicas) == 2 for replicas in agreed.reassign.values())


def test_pending_leader_elections_survive_in_status_and_are_dropped_once_done():
    facts = Facts.from_status({"scaling": {"balancedBrokers": [0, 1, 2, 3], "leadersPending": True}})
    assert facts == Facts((0, 1, 2, 3), leaders_pending=True)
    stable = plan(inputs(), obs([0, 1, 2], partitions(3, [0, 1, 2])))
    status = scaling_fields(stable, obs([0, 1, 2], ()), facts.balanced_for, facts.leaders_pending)
    assert Facts.from_status({"scaling": status}) == facts
    cleared = scaling_fields(stable, obs([0, 1, 2], ()), facts.balanced_for, False)
    assert cleared["leadersPending"] is None
    assert not Facts.from_status({"scaling": cleared}).leaders_pending


def combined(brokers: int, voting: tuple[int, ...], quorum: QuorumState,
             controllers: dict[int, bool] | None = None) -> ClusterObservation:
    """A combined cluster: brokers 0..n-1, the first `voting` with the controller role in their configuration,
    and for some brokers whether they run as controllers now."""
    nodes = tuple(NodeState(b, Pool.BROKER, f"c-broker-{b}", ("broker", "controller") if b in voting else ("broker",),
                            PodPhase.READY, True, registered=True, controller_running=(controllers or {}).get(b))
                  for b in range(brokers))
    return ClusterObservation(nodes, partitions(3, list(range(brokers))), quorum,
                              registrations=tuple(BrokerRegistration(b, False) for b in range(brokers)))


def test_combined_voters_grow_once_each_new_voter_restarted_as_a_controller_and_caught_up():
    wanted = (0, 1, 2, 3, 4)
    grow = inputs(desired_brokers=5, running_brokers=5, dedicated=False, desired_controllers=0, running_controllers=0,
                  voters=5, balanced_for=(0, 1, 2, 3, 4))
    # Given 3 -> 5 voters: brokers 3 and 4 still run as brokers only (the roll restarts them: RolesChanged)
    waiting = plan(grow, combined(5, wanted, voters(0, 1, 2), {3: False, 4: False}))
    assert (waiting.phase, waiting.add_voter) == ("ScalingControllers", None)
    assert waiting.message == "waiting for broker 3 to restart as a controller before it votes"
    assert waiting.after_roll  # (the roll restarts it: it goes first, or each would wait for the other)
    # When broker 3 runs as a controller, an observer caught up, Then it becomes a voter (one at a time)
    observer = VoterState(3, "dir3", 0)
    observed = QuorumState(0, 1, voters(0, 1, 2).voters, (observer, VoterState(4, "dir4", 0)))
    adding = plan(grow, combined(5, wanted, observed, {3: True, 4: False}))
    assert adding.add_voter == observer
    # And once both vote, nothing is left to do
    assert plan(grow, combined(5, wanted, voters(0, 1, 2, 3, 4))).phase == "Stable"


def test_combined_voters_shrink_by_removing_the_highest_voter_while_it_runs():
    shrink = inputs(desired_brokers=5, running_brokers=5, dedicated=False, desired_controllers=0,
                    running_controllers=0, voters=3, balanced_for=(0, 1, 2, 3, 4))
    removing = plan(shrink, combined(5, (0, 1, 2), voters(0, 1, 2, 3, 4), {3: True, 4: True}))
    assert (removing.phase, removing.remove_voter) == ("RemovingVoter", VoterState(4, "dir4", 0))
    # Not while another voter lags
    lagging = plan(shrink, combined(5, (0, 1, 2), voters(0, 1, 2, 3, 4, lagging=1), {3: True, 4: True}))
    assert lagging.remove_voter is None
    assert "voters [1] are not caught up" in lagging.message
    # And once only 0..2 vote, brokers 3 and 4 are left to the roll (RolesChanged), the quorum as asked
    assert plan(shrink, combined(5, (0, 1, 2), voters(0, 1, 2), {3: True, 4: True})).phase == "Stable"
