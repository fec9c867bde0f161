"""The whole cluster pass as a table: an observation in, the plan out (actions, status, conditions).

Each case is what the pass would see on a real cluster at one moment; none
touches Kafka or Kubernetes, so the table runs in milliseconds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from krafty import naming
from krafty.decide.configs import ConfigDiff
from krafty.decide.status import DEGRADED, READY, Condition
from krafty.facts.observed import (
    BrokerRegistration,
    ChangeKind,
    ClusterObservation,
    NodeState,
    PartitionState,
    PendingChange,
    PodPhase,
    QuorumState,
    ServedListener,
    VolumeState,
    VoterState,
)
from krafty.model.cluster import ClientAuthentication, SecurityProtocol
from krafty.model.context import ClusterContext, Sizes, Voter
from krafty.naming import Pool
from krafty.planning.actions import (
    AddVoter,
    Announce,
    ApplyChildren,
    DeleteVolumes,
    ElectLeaders,
    MoveReplicas,
    RemoveThrottles,
    RemoveVoter,
    RestartNode,
    SetClusterDefaults,
    Unregister,
)
from krafty.planning.cluster import Facts, NotAdmitted, Pace, PassResult, admit, plan, settle
from krafty.render.kafka_config import dynamic_broker_config

from ...conftest import context, example

BROKERS = (0, 1, 2)
CONTROLLERS = (1000, 1001, 1002)


def ctx(brokers: int = 3, controllers: int = 3, formed: bool = True) -> ClusterContext:
    spec = example("kafkacluster-dedicated.yaml")["spec"]
    spec["brokers"]["replicas"] = brokers
    spec["controllers"]["replicas"] = controllers
    made = context(spec, name="prod")
    return made if not formed else replace(made, initial_voters=())


def node(node_id: int, phase: PodPhase = PodPhase.READY, outdated: bool = False) -> NodeState:
    pool, ordinal = naming.pool_and_ordinal(node_id)
    pending = (PendingChange(ChangeKind.CONFIG, "num.io.threads", "8", "16"),) if outdated else ()
    return NodeState(node_id, pool, naming.pod("prod", pool, ordinal), (pool.value,), phase, not outdated,
                     registered=pool is Pool.BROKER and phase is PodPhase.READY, pending=pending)


def partitions(brokers: tuple[int, ...] = BROKERS, count: int = 6, isr_without: int | None = None,
               min_isr: int = 2) -> tuple[PartitionState, ...]:
    out = []
    for p in range(count):
        replicas = tuple(brokers[(p + i) % len(brokers)] for i in range(3))
        isr = tuple(b for b in replicas if b != isr_without)
        out.append(PartitionState("t", p, replicas[0] if replicas[0] in isr else isr[0], replicas, isr, min_isr))
    return tuple(out)


def quorum(voters: tuple[int, ...] = CONTROLLERS, lagging: int | None = None, leader: int = 1001) -> QuorumState:
    return QuorumState(leader, 7, tuple(VoterState(v, f"dir-{v}", 50_000 if v == lagging else 0) for v in voters))


def observe(c: ClusterContext, nodes: list[NodeState] | None = None, **overrides: Any) -> ClusterObservation:
    nodes = nodes if nodes is not None else [node(i) for i in (*CONTROLLERS, *BROKERS)]
    brokers = [n for n in nodes if n.pool is Pool.BROKER]
    base: dict[str, Any] = {
        "partitions": partitions(),
        "quorum": quorum() if c.dedicated else quorum(BROKERS[:c.spec.controllers.replicas], leader=BROKERS[0]),
        "statefulset_replicas": {Pool.BROKER: len(brokers), Pool.CONTROLLER: len(nodes) - len(brokers)},
        "reassignments": {},
        "registrations": tuple(BrokerRegistration(n.node_id, not n.registered) for n in brokers),
        "cluster_defaults": dynamic_broker_config(c), "throttled_topics": frozenset(),
    }
    base.update(overrides)
    return ClusterObservation(tuple(nodes), **base)


def kinds(actions: tuple[Any, ...]) -> list[str]:
    return [type(a).__name__ for a in actions]


def statefulset_replicas(actions: tuple[Any, ...], pool: Pool) -> int | None:
    apply = next(a for a in actions if isinstance(a, ApplyChildren))
    child = next(c for c in apply.children if c.kind == "StatefulSet" and c.name == naming.statefulset("prod", pool))
    return None if child.desired is None else int(child.desired["spec"]["replicas"])


def test_a_calm_cluster_applies_its_children_and_does_nothing_else():
    c = ctx()
    result = plan(c, observe(c), Facts(BROKERS))
    assert kinds(result.actions) == ["ApplyChildren"]
    assert (result.result, result.pace) == (PassResult.RECONCILED, Pace.CALM)
    assert [(x.type, x.status, x.reason) for x in result.conditions] == [
        ("Ready", True, "ClusterReady"), ("Available", True, "Serving"), ("Progressing", False, "Reconciled"),
        ("Degraded", False, "AsExpected")]
    assert result.status["readyBrokers"] == 3
    assert result.status["partitions"]["underReplicated"] == 0


def test_scale_up_midway_grows_the_statefulset_without_rewriting_the_spec():
    # Given 3 -> 5 brokers asked for while the StatefulSet still runs 3
    c = ctx(brokers=5)
    result = plan(c, observe(c), Facts(BROKERS))
    # Then the StatefulSet is rendered with 5, and the spec still says 5 (nothing rewritten)
    assert result.sizes == Sizes(5, 3)
    assert statefulset_replicas(result.actions, Pool.BROKER) == 5
    assert c.spec.brokers.replicas == 5
    # And once the new brokers registered, replicas move onto them, throttled, and leaders go back after
    grown = [node(i) for i in (*CONTROLLERS, 0, 1, 2, 3, 4)]
    moving = plan(c, observe(c, grown), Facts(BROKERS))
    [move] = [a for a in moving.actions if isinstance(a, MoveReplicas)]
    assert {b for replicas in move.reassign.values() for b in replicas} >= {3, 4}
    assert move.throttle_rate == c.spec.leader_balance.replication_throttle_bytes_per_second
    assert moving.facts.leaders_pending
    assert moving.status["scaling"]["phase"] == "Rebalancing"
    assert moving.pace is not Pace.CALM


def test_scale_down_midway_keeps_the_running_size_until_the_brokers_are_emptied():
    # Given 5 -> 3 asked for, with replicas still on brokers 3 and 4
    c = ctx(brokers=3)
    five = [node(i) for i in (*CONTROLLERS, 0, 1, 2, 3, 4)]
    result = plan(c, observe(c, five, partitions=partitions((0, 1, 2, 3, 4))), Facts((0, 1, 2, 3, 4)))
    # Then the StatefulSet keeps 5 this pass, replicas move off 3 and 4, and the spec keeps asking for 3
    assert statefulset_replicas(result.actions, Pool.BROKER) == 5
    [move] = [a for a in result.actions if isinstance(a, MoveReplicas)]
    assert all(set(r) <= set(BROKERS) for r in move.reassign.values())
    assert result.status["scaling"]["phase"] == "MovingReplicas"


def test_a_roll_blocked_by_a_partition_says_which_and_restarts_nothing():
    # Given broker 0 to restart, and partitions whose min ISR is their replication factor (3)
    c = ctx()
    nodes = [node(i) for i in CONTROLLERS] + [node(0, outdated=True), node(1), node(2)]
    result = plan(c, observe(c, nodes, partitions=partitions(min_isr=3)), Facts(BROKERS))
    assert not [a for a in result.actions if isinstance(a, RestartNode)]
    [blocked] = [a for a in result.actions if isinstance(a, Announce)]
    assert (blocked.reason, blocked.warning) == ("RollBlocked", True)
    assert "would drop below min.insync.replicas=3" in blocked.message
    degraded = next(x for x in result.conditions if x.type == "Degraded")
    assert (degraded.status, degraded.reason) == (True, "RollBlocked")
    assert result.result is PassResult.BLOCKED


def test_a_roll_restarts_one_node_with_its_reason():
    c = ctx()
    nodes = [node(i, outdated=True) for i in CONTROLLERS] + [node(i) for i in BROKERS]
    result = plan(c, observe(c, nodes), Facts(BROKERS))
    [restart] = [a for a in result.actions if isinstance(a, RestartNode)]
    assert restart.node.node_id == 1000  # a follower controller first, the active one (1001) last
    assert "num.io.threads=16" in restart.message
    assert result.status["roll"]["pending"] == ["prod-controller-0", "prod-controller-2", "prod-controller-1"]


@pytest.mark.parametrize("balanced_for", [None, (0, 1)], ids=["new cluster", "a broker added"])
def test_a_roll_goes_first_when_scaling_waits_for_it(balanced_for: tuple[int, ...] | None):
    # Given brokers never balanced for (a new cluster, or one whose third broker just joined) and a node to restart
    # (a config change in the same apply; an external listener's address that came after the brokers started)
    c = ctx()
    nodes = [node(i) for i in CONTROLLERS] + [node(0, outdated=True), node(1), node(2)]
    result = plan(c, observe(c, nodes), Facts(balanced_for))
    # Then the roll restarts the node while scaling waits for it: neither waits for the other for ever
    [restart] = [a for a in result.actions if isinstance(a, RestartNode)]
    assert restart.node.node_id == 0
    assert result.status["scaling"]["message"] == "waiting for the rolling restart to finish"
    assert result.pace is not Pace.CALM


def test_a_quorum_change_in_flight_removes_the_stopped_voter_and_waits_for_the_rest():
    # Given controllers 5 -> 3 with controller 1004 already stopped but still a voter
    c = ctx(controllers=3)
    nodes = [node(i) for i in (1000, 1001, 1002, 1003, *BROKERS)]
    voters = quorum((1000, 1001, 1002, 1003, 1004))
    result = plan(c, observe(c, nodes, quorum=voters, statefulset_replicas={Pool.BROKER: 3, Pool.CONTROLLER: 4}),
                  Facts(BROKERS))
    [remove] = [a for a in result.actions if isinstance(a, RemoveVoter)]
    assert remove.voter.node_id == 1004
    assert result.pace is not Pace.CALM
    # And while a voter lags, the quorum does not change
    lagging = plan(c, observe(c, nodes, quorum=quorum((1000, 1001, 1002, 1003, 1004), lagging=1000),
                              statefulset_replicas={Pool.BROKER: 3, Pool.CONTROLLER: 4}), Facts(BROKERS))
    assert not [a for a in lagging.actions if isinstance(a, RemoveVoter)]
    assert "not caught up" in lagging.status["scaling"]["message"]


def test_a_leaving_controller_is_removed_from_the_voters_before_its_statefulset_shrinks():
    # Given controllers 3 -> 1 with three voters running
    c = ctx(controllers=1)
    result = plan(c, observe(c), Facts(BROKERS))
    # Then the pass removes voter 1002 first, and only then applies the StatefulSet with 2
    assert kinds(result.actions)[:2] == ["RemoveVoter", "ApplyChildren"]
    assert result.actions[0].voter.node_id == 1002
    assert statefulset_replicas(result.actions, Pool.CONTROLLER) == 2


def test_kafka_unreachable_changes_nothing_in_kafka_and_says_why():
    c = ctx()
    nodes = [node(i) for i in CONTROLLERS] + [node(0, outdated=True), node(1), node(2)]
    result = plan(c, observe(c, nodes, partitions=None, kafka_error="no server answered", reassignments=None,
                             cluster_defaults=None, throttled_topics=None), Facts(BROKERS))
    assert kinds(result.actions) == ["ApplyChildren"]  # no broker restarts without seeing the partitions
    ready = result.conditions[0]
    assert (ready.status, ready.reason) == (False, "KafkaUnreachable")
    assert "no server answered" in ready.message
    assert result.pace is not Pace.CALM


def test_a_formed_quorum_retires_the_first_voters_list():
    c = replace(ctx(formed=False), initial_voters=tuple(Voter(v, f"dir-{v}") for v in CONTROLLERS))
    result = plan(c, observe(c), Facts(BROKERS))
    [formed] = [a for a in result.actions if isinstance(a, Announce)]
    assert formed.reason == "QuorumFormed"
    apply = next(a for a in result.actions if isinstance(a, ApplyChildren))
    config = next(x for x in apply.children if x.name == naming.config_map("prod"))
    assert config.desired is not None
    assert config.desired["data"][naming.INITIAL_CONTROLLERS_KEY] == ""
    # While a first voter has not caught up, the list stays
    forming = plan(c, observe(c, quorum=quorum(lagging=1002)), Facts(BROKERS))
    assert not [a for a in forming.actions if isinstance(a, Announce)]
    assert forming.pace is not Pace.CALM


def test_dynamic_config_differences_are_applied_without_a_restart_and_throttles_are_left_alone():
    c = ctx()
    live = {**dynamic_broker_config(c), "log.retention.ms": "1", "log.cleaner.threads": "4",
            naming.THROTTLE_RATE_KEYS[0]: "100"}
    result = plan(c, observe(c, cluster_defaults=live, reassignments={("t", 0): object()}), Facts(BROKERS))
    [change] = [a for a in result.actions if isinstance(a, SetClusterDefaults)]
    assert change.changes == ConfigDiff({"log.retention.ms": "259200000"}, ("log.cleaner.threads",))


def test_throttles_left_from_finished_moves_are_removed():
    c = ctx()
    live = {**dynamic_broker_config(c), naming.THROTTLE_RATE_KEYS[0]: "100"}
    result = plan(c, observe(c, cluster_defaults=live, throttled_topics=frozenset({"t"})), Facts(BROKERS))
    assert [a for a in result.actions if isinstance(a, RemoveThrottles)] == [RemoveThrottles(("t",))]
    # but never while a move is in flight
    moving = plan(c, observe(c, cluster_defaults=live, throttled_topics=frozenset({"t"}),
                             reassignments={("t", 0): object()}), Facts(BROKERS))
    assert not [a for a in moving.actions if isinstance(a, RemoveThrottles)]


def test_removed_brokers_still_registered_are_unregistered():
    c = ctx()
    registrations = (*(BrokerRegistration(b, False) for b in BROKERS), BrokerRegistration(3, True))
    result = plan(c, observe(c, registrations=registrations), Facts(BROKERS))
    assert [a for a in result.actions if isinstance(a, Unregister)] == [Unregister((3,))]
    assert result.status["scaling"]["pendingUnregister"] == [3]


def test_leaders_go_back_after_a_restart_before_the_next_one():
    c = ctx()
    off = tuple(replace(p, leader=p.replicas[1]) if p.preferred_leader == 0 else p for p in partitions())
    nodes = [node(i) for i in CONTROLLERS] + [node(0), node(1, outdated=True), node(2)]
    result = plan(c, observe(c, nodes, partitions=off), Facts(BROKERS))
    [elect] = [a for a in result.actions if isinstance(a, ElectLeaders)]
    assert {p.preferred_leader for p in off if (p.topic, p.partition) in elect.partitions} == {0}
    assert result.result is PassResult.ELECTED
    # and the next pass follows closely: the next restart waits only for the elected leaders, which no event tells
    assert result.pace is Pace.FOLLOWING


@pytest.mark.parametrize(("nodes", "parts", "expected", "kind"), [
    # a restarted broker's pod starting: its events wake the pass
    ([node(0, PodPhase.WARMING_UP), node(1, outdated=True), node(2)], partitions(), Pace.BUSY, "Wait"),
    # Ready, back in the ISR of every partition but not yet registered, or not yet in every ISR: only a look tells
    ([replace(node(0), registered=False), node(1, outdated=True), node(2)], partitions(), Pace.FOLLOWING,
     "Wait"),
    ([node(0), node(1, outdated=True), node(2)], partitions(isr_without=0), Pace.FOLLOWING, "Wait"),
    # a broker blocked (each partition would drop below its min ISR of 3) waits for a person, not for a second
    ([node(0), node(1, outdated=True), node(2)], partitions(min_isr=3), Pace.BUSY, "Blocked"),
    ([node(0), node(1), node(2)], partitions(), Pace.CALM, "Done"),
])
def test_a_roll_waiting_on_what_no_watch_reports_looks_again_soon(nodes, parts, expected, kind):
    c = ctx()
    result = plan(c, observe(c, [node(i) for i in CONTROLLERS] + nodes, partitions=parts), Facts(BROKERS))
    assert (result.pace, type(result.step).__name__) == (expected, kind), result.step


@pytest.mark.parametrize(("body", "result", "reason"), [
    ({"metadata": {"annotations": {naming.PAUSED_ANNOTATION: "true"}}, "spec": {"brokers": {"replicas": 3}}},
     PassResult.PAUSED, "Paused"),
    ({"metadata": {}, "spec": {"brokers": {"replicas": 3, "config": {"num.io.threads": "-4"}}}},
     PassResult.INVALID, "InvalidSpec"),
    ({"metadata": {}, "spec": {"brokers": {"replicaz": 3}}}, PassResult.INVALID, "InvalidSpec"),
])
def test_a_paused_cluster_or_an_invalid_spec_stops_the_pass_before_it_observes(body, result, reason):
    held = admit(body)
    assert isinstance(held, NotAdmitted)
    assert held.result is result
    assert held.conditions[0].reason == reason


def test_a_valid_spec_is_admitted():
    assert admit({"metadata": {}, "spec": {"brokers": {"replicas": 3}}}) == ctx().spec.__class__.model_validate(
        {"brokers": {"replicas": 3}})


def conditions(result: Any) -> dict[str, tuple[bool | None, str]]:
    return {c.type: (c.status, c.reason) for c in result.conditions}


def test_a_serving_cluster_stays_available_through_a_roll_and_says_how_far_it_is():
    # Given a roll with one controller done and the other five nodes to go, every partition healthy
    c = ctx()
    nodes = [node(1000)] + [node(i, outdated=True) for i in (1001, 1002, *BROKERS)]
    result = plan(c, observe(c, nodes), Facts(BROKERS))
    found = conditions(result)
    assert found["Available"] == (True, "Serving")
    assert found["Ready"] == (False, "RollingRestart")
    progressing = next(x for x in result.conditions if x.type == "Progressing")
    assert progressing.message == "1 of 6 nodes run the current configuration; next prod-controller-2, then 4 more"


@pytest.mark.parametrize(("overrides", "available"), [
    ({"partitions": None, "kafka_error": "no server answered"}, (None, "KafkaUnreachable")),
    ({"partitions": partitions(isr_without=1, min_isr=3)}, (False, "UnderMinIsr")),
    ({"quorum": QuorumState(-1, 7, ())}, (False, "NoQuorumLeader")),
    ({"partitions": (PartitionState("t", 0, -1, (0, 1, 2), (), 2),)}, (False, "PartitionsOffline")),
])
def test_available_says_whether_clients_are_served(overrides: dict[str, Any], available: tuple[bool | None, str]):
    c = ctx()
    result = plan(c, observe(c, **overrides), Facts(BROKERS))
    assert conditions(result)["Available"] == available
    assert conditions(result)["Ready"] == (False, available[1])


def test_under_replicated_partitions_keep_ready_false_while_the_cluster_is_available():
    c = ctx()
    result = plan(c, observe(c, partitions=partitions(isr_without=2)), Facts(BROKERS))
    assert conditions(result)["Available"] == (True, "Serving")
    assert conditions(result)["Ready"] == (False, "UnderReplicated")
    assert conditions(result)["Progressing"] == (True, "CatchingUp")


def claims(*names: str) -> tuple[VolumeState, ...]:
    return tuple(VolumeState(name, 2**30, 2**30, "standard") for name in names)


def deleted(result: Any) -> tuple[str, ...]:
    return next((a.claims for a in result.actions if isinstance(a, DeleteVolumes)), ())


def test_a_removed_brokers_volume_goes_only_once_it_is_emptied_and_unregistered():
    # Given 5 -> 3 done: brokers 3 and 4 stopped, their replicas moved, their claims left by the StatefulSet
    c = ctx()
    left = claims(*(naming.claim("prod", Pool.BROKER, i) for i in range(5)))
    fenced = (*(BrokerRegistration(b, False) for b in BROKERS), *(BrokerRegistration(b, True) for b in (3, 4)))
    # While Kafka still knows them, the volumes stay (they are unregistered first)
    still_known = plan(c, observe(c, volumes=left, registrations=fenced), Facts(BROKERS))
    assert deleted(still_known) == ()
    assert [a for a in still_known.actions if isinstance(a, Unregister)] == [Unregister((3, 4))]
    # Once they are forgotten, their volumes go, and no other
    forgotten = plan(c, observe(c, volumes=left), Facts(BROKERS))
    assert deleted(forgotten) == ("data-prod-broker-3", "data-prod-broker-4")
    # Never while a replica is still on one of them, or while Kafka cannot be asked
    holding = (*partitions(), PartitionState("u", 0, 0, (0, 1, 4), (0, 1, 4), 2))
    assert deleted(plan(c, observe(c, volumes=left, partitions=holding), Facts(BROKERS))) == ("data-prod-broker-3",)
    assert deleted(plan(c, observe(c, volumes=left, partitions=None, kafka_error="down"), Facts(BROKERS))) == ()


def test_a_statefulset_shrunk_behind_the_operators_back_loses_no_volume():
    # Given kubectl scale sts prod-broker --replicas=2 while the spec still asks for 3
    c = ctx()
    two = [node(i) for i in (*CONTROLLERS, 0, 1)]
    result = plan(c, observe(c, two, volumes=claims(*(naming.claim("prod", Pool.BROKER, i) for i in BROKERS)),
                             statefulset_replicas={Pool.BROKER: 2, Pool.CONTROLLER: 3},
                             registrations=(BrokerRegistration(0, False), BrokerRegistration(1, False))),
                  Facts(BROKERS))
    # Then broker 2's volume stays, and the StatefulSet goes back to 3
    assert deleted(result) == ()
    assert statefulset_replicas(result.actions, Pool.BROKER) == 3


def test_a_removed_controllers_volume_goes_once_it_is_no_longer_a_voter():
    c = ctx(controllers=3)
    left = claims(*(naming.claim("prod", Pool.CONTROLLER, i) for i in range(5)))
    voter = plan(c, observe(c, volumes=left, quorum=quorum((1000, 1001, 1002, 1004))), Facts(BROKERS))
    assert deleted(voter) == ("data-prod-controller-3",)
    assert deleted(plan(c, observe(c, volumes=left), Facts(BROKERS))) == ("data-prod-controller-3",
                                                                          "data-prod-controller-4")


def test_a_node_starting_is_not_degraded_but_a_crash_looping_one_is_named():
    c = ctx()
    starting = [node(i) for i in (*CONTROLLERS, 0, 1)] + [node(2, PodPhase.STARTING)]
    assert conditions(plan(c, observe(c, starting), Facts(BROKERS)))["Degraded"] == (False, "AsExpected")
    crashing = [node(i) for i in (*CONTROLLERS, 0, 1)] + [
        replace(node(2, PodPhase.DOWN), trouble="CrashLoopBackOff (last exit code 1, Error)")]
    result = plan(c, observe(c, crashing), Facts(BROKERS))
    degraded = next(x for x in result.conditions if x.type == "Degraded")
    assert (degraded.status, degraded.reason) == (True, "NodeDown")
    assert degraded.message == "not running: prod-broker-2 (CrashLoopBackOff (last exit code 1, Error))"


def test_a_node_whose_kubernetes_node_is_lost_is_named_with_that_node():
    # Given broker 2's pod on a Kubernetes node that stopped answering (its pod still says Running, not ready)
    c = ctx()
    lost = "Kubernetes node worker-2 is not Ready (Kubelet stopped posting node status.)"
    nodes = [node(i) for i in (*CONTROLLERS, 0, 1)] + [
        replace(node(2, PodPhase.NOT_READY), host="worker-2", host_down=lost)]
    # When the pass plans
    result = plan(c, observe(c, nodes), Facts(BROKERS))
    # Then Degraded names the broker's pod and its lost node, and so does the node's own entry
    degraded = next(x for x in result.conditions if x.type == "Degraded")
    assert (degraded.status, degraded.reason) == (True, "NodeDown")
    assert degraded.message == f"not running: prod-broker-2 ({lost})"
    entry = next(e for e in result.status["nodes"] if e["pod"] == "prod-broker-2")
    assert entry["message"] == lost


def test_a_caught_up_controller_is_made_a_voter_at_its_own_address():
    # Given controllers 3 -> 5 midway: controller 1003 runs and has caught up as an observer
    c = ctx(controllers=5)
    nodes = [node(i) for i in (1000, 1001, 1002, 1003, *BROKERS)]
    observer = VoterState(1003, "dir-1003", 0)
    with_observer = QuorumState(1001, 7, quorum().voters, (observer,))
    result = plan(c, observe(c, nodes, quorum=with_observer,
                             statefulset_replicas={Pool.BROKER: 3, Pool.CONTROLLER: 4}), Facts(BROKERS))
    [add] = [a for a in result.actions if isinstance(a, AddVoter)]
    assert (add.voter, add.host) == (observer, "prod-controller-3.prod-controllers.kafka.svc.cluster.local")
    assert statefulset_replicas(result.actions, Pool.CONTROLLER) == 4  # the next one starts after it votes


def connection(result: Any) -> dict[str, str]:
    apply = next(a for a in result.actions if isinstance(a, ApplyChildren))
    child = next(c for c in apply.children if c.name == naming.connection_config_map("prod"))
    assert child.desired is not None
    return dict(child.desired["data"])


def test_moving_clients_from_plaintext_to_tls_waits_until_every_broker_serves_the_new_listener():
    plain, tls = {"name": "plain", "port": 9092}, {"name": "tls", "port": 9094, "tls": True}
    served_plain = ServedListener("PLAIN", 9092, SecurityProtocol.PLAINTEXT, ClientAuthentication.NONE)
    served_tls = ServedListener("TLS", 9094, SecurityProtocol.SSL, ClientAuthentication.NONE)
    base = ctx()

    def with_listeners(*listeners: dict[str, Any], before: tuple[dict[str, Any], ...]) -> ClusterContext:
        spec = base.spec.model_validate(base.spec.model_dump(by_alias=True) | {"listeners": list(listeners)})
        return replace(base, spec=spec, announced_listeners=tuple(spec.listeners[0].model_validate(s) for s in before))

    def serving(*per_broker: frozenset[ServedListener]) -> ClusterObservation:
        brokers = [replace(node(b), listeners=served) for b, served in zip(BROKERS, per_broker, strict=True)]
        return observe(base, [node(i) for i in CONTROLLERS] + brokers)

    old, both = frozenset({served_plain}), frozenset({served_plain, served_tls})
    # Given a plaintext cluster whose spec puts a new TLS listener first, while the brokers roll to open it
    # (the first pass after the change too: no broker has a change pending yet, none serves the listener)
    for brokers in ((old, old, old), (both, old, old)):
        during = plan(with_listeners(tls, plain, before=(plain,)), serving(*brokers), Facts(BROKERS))
        # Then applications are still sent to the plaintext listener, and status says so
        assert connection(during)["security.protocol"] == "PLAINTEXT"
        assert connection(during)["bootstrap.servers"].endswith(":9092")
        assert [entry["name"] for entry in during.status["listeners"]] == ["plain"]
        assert "Announce" not in kinds(during.actions)
    # When every broker serves it, Then the connection ConfigMap moves clients to TLS and an Event says so
    after = plan(with_listeners(tls, plain, before=(plain,)), serving(both, both, both), Facts(BROKERS))
    assert connection(after)["security.protocol"] == "SSL"
    assert connection(after)["ssl.truststore.secret"] == "prod-cluster-ca-cert"
    assert after.status["bootstrapServers"].endswith(":9094")
    assert [(e["name"], e["tls"]) for e in after.status["listeners"]] == [("tls", True), ("plain", False)]
    [announced] = [a for a in after.actions if isinstance(a, Announce)]
    assert announced.reason == "ListenersPublished"
    assert "connect to tls (SSL, port 9094)" in announced.message
    # And removing the plaintext listener later keeps clients on TLS through the roll that closes it
    closing = plan(with_listeners(tls, before=(tls, plain)), serving(both, frozenset({served_tls}), both),
                   Facts(BROKERS))
    assert connection(closing)["security.protocol"] == "SSL"
    assert [entry["name"] for entry in closing.status["listeners"]] == ["tls"]
    # A broker down keeps what was published; a new cluster publishes its spec at once
    down = [replace(node(0, PodPhase.MISSING), listeners=both), *(replace(node(b), listeners=both) for b in (1, 2))]
    assert connection(plan(with_listeners(tls, plain, before=(plain,)), observe(
        base, [node(i) for i in CONTROLLERS] + down), Facts(BROKERS)))["security.protocol"] == "PLAINTEXT"
    assert connection(plan(with_listeners(tls, before=()), serving(old, old, old), Facts(BROKERS)))[
        "security.protocol"] == "SSL"


def test_what_the_api_server_refused_or_a_name_taken_by_another_settles_ready_and_degraded():
    planned = (Condition(READY, True, "Ready", "all brokers ready"), Condition("Available", True, "Serving", "ok"),
               Condition(DEGRADED, False, "Healthy", "nothing is wrong"))
    assert settle(planned, [], []) == list(planned)
    refused = settle(planned, ["StatefulSet prod-broker: affinity is invalid"],
                     ["Service prod-plain-0 exists and is left alone: it belongs to Deployment web"])
    # (the name taken is told last: it is what the user must act on before anything else applies)
    assert [(c.type, c.status, c.reason) for c in refused] == [
        (READY, False, "NameConflict"), ("Available", True, "Serving"), (DEGRADED, True, "NameConflict")]
    assert refused[0].message == "Service prod-plain-0 exists and is left alone: it belongs to Deployment web"
    only_refused = settle(planned, ["StatefulSet prod-broker: affinity is invalid"], [])
    assert only_refused[0].message == "Kubernetes refused what the spec asks for: StatefulSet prod-broker: " \
                                      "affinity is invalid"
