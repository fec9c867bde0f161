"""The roll decision, situation by situation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from krafty.decide.restart_groups import Parallelism
from krafty.decide.roll import (
    Awaits,
    Blocked,
    Done,
    ElectLeaders,
    Restart,
    RestartReason,
    Wait,
    broker_blockers,
    controller_blocker,
    leaders_settled,
    next_step,
    restart_order,
)
from krafty.facts.observed import (
    BrokerRegistration,
    ChangeKind,
    ClusterObservation,
    NodeState,
    PartitionState,
    PendingChange,
    PodPhase,
    QuorumState,
    RestartRequest,
    VoterState,
)
from krafty.facts.pods import restart_request
from krafty.naming import Pool


def node(node_id: int, *, outdated: bool = True, ready: bool = True, running: bool = True,
         registered: bool = True, roles: tuple[str, ...] | None = None) -> NodeState:
    pool = Pool.CONTROLLER if node_id >= 1000 else Pool.BROKER
    roles = roles or (("controller",) if pool is Pool.CONTROLLER else ("broker",))
    phase = (PodPhase.READY if ready else PodPhase.NOT_READY) if running else PodPhase.DOWN
    return NodeState(node_id=node_id, pool=pool, pod=f"c-{pool.value}-{node_id % 1000}", roles=roles, phase=phase,
                     revision_current=not outdated, registered=registered and "broker" in roles,
                     pending=(PendingChange(ChangeKind.CONFIG, "num.network.threads", "3", "8"),) if outdated else ())


def quorum(leader: int, voters: dict[int, int]) -> QuorumState:
    return QuorumState(leader, 3, tuple(VoterState(v, "d", lag) for v, lag in voters.items()))


def part(p: int, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None, leader: int | None = None,
         min_isr: int = 2, topic: str = "t") -> PartitionState:
    isr = replicas if isr is None else isr
    return PartitionState(topic, p, replicas[0] if leader is None else leader, replicas, isr, min_isr)


HEALTHY = (part(0, (0, 1, 2)), part(1, (1, 2, 0)), part(2, (2, 0, 1)))
DEDICATED_QUORUM = quorum(1001, {1000: 0, 1001: 0, 1002: 0})


def observe(nodes, partitions=HEALTHY, q=DEDICATED_QUORUM) -> ClusterObservation:
    return ClusterObservation(tuple(nodes), tuple(partitions) if partitions is not None else None, q)


def dedicated(**overrides: NodeState) -> list[NodeState]:
    nodes = {i: node(i) for i in (1000, 1001, 1002, 0, 1, 2)}
    nodes.update({int(k[1:]): v for k, v in overrides.items()})
    return list(nodes.values())


def test_controllers_first_and_the_active_controller_last():
    order = [n.node_id for n in restart_order(tuple(dedicated()), DEDICATED_QUORUM)]
    assert order == [1000, 1002, 1001, 0, 1, 2]


def test_nodes_that_are_not_running_go_first():
    nodes = dedicated(n2=node(2, running=False))
    assert restart_order(tuple(nodes), DEDICATED_QUORUM)[0].node_id == 2
    step = next_step(observe(nodes), restore_leaders=True)
    assert isinstance(step, Restart)
    assert step.node.node_id == 2
    assert step.reason is RestartReason.NOT_RUNNING


def test_first_step_restarts_a_follower_controller_with_its_reason():
    step = next_step(observe(dedicated()), restore_leaders=True)
    assert isinstance(step, Restart)
    assert step.node.node_id == 1000
    assert step.reason is RestartReason.CONFIG_CHANGED
    assert "num.network.threads" in step.message


def test_nothing_outdated_means_done():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002, 0, 1, 2)]
    assert isinstance(next_step(observe(nodes), restore_leaders=True), Done)


def test_waits_for_a_restarted_node_to_be_ready():
    nodes = dedicated(n1000=replace(node(1000, outdated=False), phase=PodPhase.WARMING_UP))
    step = next_step(observe(nodes), restore_leaders=True)
    assert step == Wait("waiting for c-controller-0 to start")


def test_waits_for_a_lagging_voter():
    nodes = dedicated(n1000=node(1000, outdated=False))
    step = next_step(observe(nodes, q=quorum(1001, {1000: 50_000, 1001: 0, 1002: 0})), restore_leaders=True)
    assert isinstance(step, Wait)
    assert "voter 1000" in step.message
    assert step.awaits is Awaits.STATE


def test_a_wait_says_whether_a_pods_events_or_only_another_look_will_end_it():
    """A pod created, started or ready is an event the pass is woken by; a broker registering with the controller
    (like rejoining the ISR, or a voter catching up) is seen only by looking again."""
    starting = dedicated(n0=replace(node(0, outdated=False), phase=PodPhase.WARMING_UP))
    assert next_step(observe(starting), restore_leaders=True).awaits is Awaits.PODS
    unregistered = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [
        node(0, outdated=False, registered=False), node(1), node(2)]
    assert next_step(observe(unregistered), restore_leaders=True) == Wait(
        "waiting for broker 0 to register with the controller", Awaits.STATE)


def test_waits_for_a_broker_to_rejoin_the_isr():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [node(0, outdated=False), node(1), node(2)]
    partitions = (part(0, (0, 1, 2), isr=(1, 2)), part(1, (1, 2, 0)))
    step = next_step(observe(nodes, partitions), restore_leaders=True)
    assert step == Wait("waiting for broker 0 to rejoin the ISR of t-0", Awaits.STATE)


def test_restores_preferred_leaders_before_the_next_restart():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [node(0, outdated=False), node(1), node(2)]
    partitions = (part(0, (0, 1, 2), leader=1), part(1, (1, 2, 0)), part(2, (2, 0, 1)))
    step = next_step(observe(nodes, partitions), restore_leaders=True)
    assert isinstance(step, ElectLeaders)
    assert step.partitions == (("t", 0),)
    # Without leader balancing by the operator the roll goes on.
    assert isinstance(next_step(observe(nodes, partitions), restore_leaders=False), Restart)


def test_broker_blocked_by_a_partition_that_would_drop_below_min_isr():
    # Given partition t-0 whose in-sync replicas are exactly its min ISR (3 of 3), broker 0 cannot stop
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [node(0), node(1, outdated=False),
                                                                     node(2, outdated=False)]
    partitions = (part(0, (0, 1, 2), min_isr=3),)
    step = next_step(observe(nodes, partitions), restore_leaders=True)
    assert isinstance(step, Blocked)
    assert step.partition == "t-0"
    assert "would drop below min.insync.replicas=3" in step.message


def test_only_in_sync_replica_blocks_even_under_min_isr():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [node(0), node(1, outdated=False),
                                                                     node(2, outdated=False)]
    # (replica 5 belongs to a broker that is gone: it can never come back into the ISR)
    partitions = (part(0, (0, 5), isr=(0,), min_isr=1),)
    step = next_step(observe(nodes, partitions), restore_leaders=True)
    assert isinstance(step, Blocked)
    assert "would go offline" in step.message


def test_a_node_that_runs_the_new_configuration_but_is_not_back_stops_the_roll():
    # Given broker 1 restarted into the new configuration and crash-looping, broker 0 still to restart
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [
        node(0), replace(node(1, outdated=False), phase=PodPhase.DOWN,
                         trouble="CrashLoopBackOff (last exit code 1, Error)"), node(2, outdated=False)]
    partitions = (part(0, (0, 2, 1), isr=(0, 2), min_isr=1),)  # broker 0 could stop: min ISR 1
    step = next_step(observe(nodes, partitions), restore_leaders=True)
    # Then no other node restarts into the same configuration, and the message says which and why
    assert isinstance(step, Blocked)
    assert step.node_id == 1
    assert "c-broker-1 runs the current configuration but is not back (CrashLoopBackOff (last exit code 1" in \
        step.message
    # And one that runs but never got ready stops it too
    nodes[4] = replace(nodes[4], phase=PodPhase.NOT_READY, trouble=None)
    assert isinstance(next_step(observe(nodes, partitions), restore_leaders=True), Blocked)


def test_a_down_node_on_an_older_configuration_is_restarted_first():
    # Given the spec changed again: the crash-looping broker now runs an outdated template
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [
        node(0), replace(node(1), phase=PodPhase.DOWN, trouble="CrashLoopBackOff"), node(2, outdated=False)]
    step = next_step(observe(nodes, (part(0, (0, 2, 1), isr=(0, 2), min_isr=1),)), restore_leaders=True)
    assert isinstance(step, Restart)
    assert (step.node.node_id, step.reason) == (1, RestartReason.NOT_RUNNING)


@pytest.mark.parametrize(("partition", "blocked"), [
    (part(0, (0, 1, 2)), False),                     # 3 in sync, min 2: one may stop
    (part(0, (0, 1, 2), isr=(0, 1)), True),          # 2 in sync, min 2: it would drop to 1
    (part(0, (0, 1, 2), isr=(1, 2)), False),         # broker 0 is not in the ISR: nothing changes
    (part(0, (0,), min_isr=1), False),               # RF 1: no other replica could ever take over
    (part(0, (0, 1), isr=(0,), min_isr=2), True),    # its only in-sync replica: it would go offline
    (part(0, (0, 1, 2), isr=(0, 1), min_isr=3), False),  # already under min ISR: a stop cannot make acks=all worse
    (part(0, (0, 1, 2), isr=(0, 1), min_isr=1), False),  # 1 left, min 1
    (replace(part(0, (0, 1), isr=(0,)), elr=(1,)), False),  # ELR: broker 1 holds every committed record and leads
    (replace(part(0, (0, 1), isr=(0,)), elr=(0,)), True),   # (an eligible replica that is the one stopping)
])
def test_broker_blockers_table(partition, blocked):
    assert bool(broker_blockers(0, (partition,))) is blocked


@pytest.mark.parametrize(("voters", "stopping", "blocked"), [
    ({1000: 0, 1001: 0, 1002: 0}, 1000, False),
    ({1000: 0, 1001: 0, 1002: 99_999}, 1000, True),   # only 1001 would remain caught up: no majority of 3
    ({1000: 0, 1001: -1, 1002: 0}, 1002, True),
    ({1000: 0}, 1000, False),                         # a lone voter: no other could ever keep the quorum
    ({i: 0 for i in range(1000, 1005)}, 1000, False),
    ({1000: 0, 1001: 0, 1002: 0, 1003: 9_999_999, 1004: 9_999_999}, 1000, True),
])
def test_controller_majority_table(voters, stopping, blocked):
    assert (controller_blocker(stopping, quorum(1001, voters)) is not None) is blocked


def test_a_blocked_broker_lets_another_broker_go_first():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [node(0), node(1), node(2, outdated=False)]
    partitions = (part(0, (0, 2), isr=(0, 2), min_isr=2), part(1, (1, 2, 0)))
    step = next_step(observe(nodes, partitions), restore_leaders=True)
    assert isinstance(step, Restart)
    assert step.node.node_id == 1


def test_a_blocked_controller_holds_back_the_brokers():
    nodes = dedicated(n1001=node(1001, outdated=False), n1002=node(1002, outdated=False))
    step = next_step(observe(nodes, q=quorum(1001, {1000: 0, 1001: 0, 1002: 5_000})), restore_leaders=True)
    assert isinstance(step, Wait)  # voter 1002 is running but lagging: wait for it


def test_no_partition_data_means_no_broker_restart():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [node(0), node(1), node(2)]
    step = next_step(ClusterObservation(tuple(nodes), None, DEDICATED_QUORUM, kafka_error="timed out"),
                     restore_leaders=True)
    assert isinstance(step, Wait)
    assert "timed out" in step.message


def test_combined_mode_restarts_the_quorum_leader_last():
    nodes = [node(i, roles=("broker", "controller")) for i in (0, 1, 2)]
    step = next_step(observe(nodes, q=quorum(0, {0: 0, 1: 0, 2: 0})), restore_leaders=True)
    assert isinstance(step, Restart)
    assert step.node.node_id == 1


def test_a_stopping_pod_is_waited_for_not_restarted_again():
    nodes = dedicated(n1000=replace(node(1000), phase=PodPhase.TERMINATING))
    step = next_step(observe(nodes), restore_leaders=True)
    assert step == Wait("waiting for c-controller-0 to stop (controlled shutdown)")


def test_after_the_last_restart_leaders_go_back_once_everyone_is_in_sync():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002, 0, 1, 2)]
    partitions = (part(0, (0, 1, 2), leader=1), part(1, (1, 2, 0)), part(2, (2, 0, 1)))
    step = next_step(observe(nodes, partitions), restore_leaders=True, threshold_percent=10)
    assert isinstance(step, ElectLeaders)
    assert step.partitions == (("t", 0),)
    # below the threshold nothing is elected; with leader balancing off, neither
    many = (*(part(p, (p % 3, (p + 1) % 3, (p + 2) % 3)) for p in range(30)), part(30, (0, 1, 2), leader=1))
    assert isinstance(next_step(observe(nodes, many), restore_leaders=True, threshold_percent=10), Done)
    assert isinstance(next_step(observe(nodes, partitions), restore_leaders=False), Done)


def test_leaders_are_settled_only_when_every_electable_partition_is_on_its_preferred_leader():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002, 0, 1, 2)]
    assert leaders_settled(observe(nodes))
    # one partition off its preferred leader is unsettled, even where a 10% threshold would leave it
    many = (*(part(p, (p % 3, (p + 1) % 3, (p + 2) % 3)) for p in range(30)), part(30, (0, 1, 2), leader=1))
    assert not leaders_settled(observe(nodes, many))
    assert isinstance(next_step(observe(nodes, many), restore_leaders=True, threshold_percent=0), ElectLeaders)
    # a preferred replica out of sync cannot lead yet: that is waited for, not settled
    assert not leaders_settled(observe(nodes, (part(0, (0, 1, 2), isr=(1, 2), leader=1),)))
    # nor is anything settled while nodes restart or Kafka cannot be asked
    assert not leaders_settled(observe(dedicated()))
    assert not leaders_settled(observe(nodes, None))


def test_after_the_last_restart_a_broker_still_out_of_sync_is_watched_until_it_can_lead_again():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002, 0, 1, 2)]
    lagging = (part(0, (0, 1, 2), isr=(1, 2), leader=1), part(1, (1, 2, 0)), part(2, (2, 0, 1)))
    step = next_step(observe(nodes, lagging), restore_leaders=True, threshold_percent=10)
    assert step == Wait("waiting for broker 0 to rejoin the ISR of t-0; preferred leaders are restored after that",
                        Awaits.STATE)
    # a lagging replica that leaves every broker balanced is not a reason to keep watching
    balanced = (part(0, (0, 1, 2), isr=(0, 1)), part(1, (1, 2, 0)), part(2, (2, 0, 1)))
    assert isinstance(next_step(observe(nodes, balanced), restore_leaders=True, threshold_percent=10), Done)


def test_a_pod_starting_after_its_restart_is_waited_for():
    nodes = dedicated(n1000=node(1000, outdated=False), n1001=node(1001, outdated=False),
                      n1002=node(1002, outdated=False),
                      n0=replace(node(0, outdated=False), phase=PodPhase.STARTING))
    assert next_step(observe(nodes), restore_leaders=True) == Wait("waiting for c-broker-0 to start")


def test_a_pod_not_created_yet_is_waited_for():
    nodes = [node(i, outdated=False) for i in (1000, 1001, 1002)] + [
        replace(node(0, outdated=False), phase=PodPhase.MISSING), node(1), node(2)]
    assert next_step(observe(nodes), restore_leaders=True) == Wait("waiting for c-broker-0 to be created")


def _asked(n: NodeState, request: RestartRequest) -> NodeState:
    return replace(n, restart_requested=request)


UNANSWERED = {"partitions": None, "quorum": None, "kafka_error": "ListPartitionReassignments: "
                                                                 "CLUSTER_AUTHORIZATION_FAILED"}


@pytest.mark.parametrize(("nodes", "kafka", "expected"), [
    # Kafka refuses the operator: a roll waits; a forced restart goes, as it would under an under-min-ISR partition
    ([node(0), node(1), node(2)], UNANSWERED, ("Wait", None)),
    ([node(0), _asked(node(1), RestartRequest.FORCED), node(2)], UNANSWERED, ("Restart", 1)),
    ([node(0, outdated=False), _asked(node(1, outdated=False), RestartRequest.FORCED), node(2, outdated=False)],
     {"partitions": (part(0, (0, 1, 2), isr=(1, 2)),)}, ("Restart", 1)),
    # ...but not while another node's pod is not back
    ([node(0, ready=False), _asked(node(1), RestartRequest.FORCED), node(2)], UNANSWERED, ("Wait", None)),
    # A plain manual restart keeps every check: it waits while Kafka cannot be asked
    ([node(0, outdated=False), _asked(node(1, outdated=False), RestartRequest.SAFE), node(2, outdated=False)],
     UNANSWERED, ("Wait", None)),
    ([node(0, outdated=False), _asked(node(1, outdated=False), RestartRequest.SAFE), node(2, outdated=False)],
     {}, ("Restart", 1)),
], ids=["refused, not forced", "refused, forced", "under min ISR, forced", "another not ready",
        "refused, manual", "manual"])
def test_a_forced_restart_goes_without_kafkas_checks_and_a_manual_one_keeps_them(nodes, kafka, expected):
    # Given brokers (one annotated for a restart) and what Kafka answered, When the roll decides
    step = next_step(replace(observe(nodes), **kafka), restore_leaders=False)
    # Then it restarts that node or waits, and a forced restart says so
    assert (type(step).__name__, step.node.node_id if isinstance(step, Restart) else None) == expected, step
    if isinstance(step, Restart):
        forced = step.node.restart_requested is RestartRequest.FORCED
        assert step.reason is (RestartReason.FORCED if forced else RestartReason.MANUAL)


@pytest.mark.parametrize(("annotation", "asks"), [(None, RestartRequest.NONE), ("", RestartRequest.NONE),
                                                     ("2026-12-07T16:00:00Z", RestartRequest.SAFE),
                                                     ("force", RestartRequest.FORCED)])
def test_the_restart_annotation_asks_a_safe_or_a_forced_restart(annotation, asks):
    assert restart_request(annotation) is asks


SIX = {0: "a", 1: "b", 2: "c", 3: "a", 4: "b", 5: "c"}


def _zoned(partitions: tuple[PartitionState, ...]) -> ClusterObservation:
    obs = observe([node(b) for b in SIX], partitions, None)
    return replace(obs, registrations=tuple(BrokerRegistration(b, False, zone) for b, zone in SIX.items()))


SPREAD = tuple(part(p, (p % 2 * 3, p % 2 * 3 + 1, p % 2 * 3 + 2)) for p in range(6))  # (0,1,2) and (3,4,5)


@pytest.mark.parametrize(("parallelism", "partitions", "restarted", "alone"), [
    (Parallelism.parse(1), SPREAD, [0], None),
    (Parallelism.parse("zone"), SPREAD, [0, 3], None),
    (Parallelism.parse(3), SPREAD, [0, 3], None),  # (0 with 1 or 2 would leave (0,1,2) one in-sync replica)
    (Parallelism.parse("zone"), (*SPREAD, part(9, (0, 3, 1))), [0], "broker 0 goes alone: t-9 has replicas "
                                                                     "[0, 3] in zone a"),
], ids=["one", "zone", "three", "zone, a partition not spread"])
def test_brokers_of_a_zone_restart_together_where_every_partition_keeps_its_min_isr(parallelism, partitions,
                                                                                    restarted, alone):
    # Given six brokers in three zones, all to restart, When the roll decides with the spec's parallelism
    step = next_step(_zoned(partitions), restore_leaders=False, parallelism=parallelism)
    # Then the first broker goes with those that may go with it, and says why when it goes alone
    assert isinstance(step, Restart)
    assert ([n.node_id for n in step.nodes], step.alone) == (restarted, alone)


def test_a_broker_restarts_into_its_new_roles_once_it_no_longer_votes():
    combined_roles = ("broker", "controller")
    voting = {0: 0, 1: 0, 2: 0, 3: 0}
    nodes = [replace(node(i, outdated=False), roles=combined_roles) for i in (0, 1, 2)]
    # Given broker 3 configured as a broker only (controllers.replicas 3) while it still runs as a controller and
    # votes: it waits for the scaling to take it out of the voters
    leaving = replace(node(3, outdated=False), controller_running=True)
    step = next_step(observe([*nodes, leaving], HEALTHY, quorum(0, voting)), restore_leaders=True)
    assert isinstance(step, Blocked)
    assert step.message == "c-broker-3 leaves the controllers once it is no longer a voter"
    # When it no longer votes, Then it restarts as a broker only
    step = next_step(observe([*nodes, leaving], HEALTHY, quorum(0, {0: 0, 1: 0, 2: 0})), restore_leaders=True)
    assert isinstance(step, Restart)
    assert (step.node.node_id, step.reason, step.message) == (3, RestartReason.ROLES_CHANGED,
                                                             "c-broker-3 leaves the controllers (process.roles broker)")
    # And a broker that is to vote and runs as a broker only restarts as a controller
    joining = replace(node(3, outdated=False), roles=combined_roles, controller_running=False)
    step = next_step(observe([*nodes, joining], HEALTHY, quorum(0, {0: 0, 1: 0, 2: 0})), restore_leaders=True)
    assert isinstance(step, Restart)
    assert step.message == "c-broker-3 joins the controllers (process.roles broker,controller)"
    # And one that runs as it should does not restart
    settled = replace(joining, controller_running=True)
    assert not settled.needs_restart
