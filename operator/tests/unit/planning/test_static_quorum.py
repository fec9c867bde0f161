"""A static quorum (kraft.version 0: a cluster formatted before KIP-853, adopted): its nodes name the voters, its
voters cannot change, and raising kraft.version (spec.features) moves it to a dynamic quorum."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from krafty import naming
from krafty.decide import identity, scaling
from krafty.decide.identity import IdentityConflict
from krafty.decide.roll import RestartReason
from krafty.facts.observed import FeatureLevel, NodeState, PodPhase
from krafty.model.context import QuorumKind
from krafty.naming import Pool
from krafty.planning.actions import ApplyChildren, RestartNode, UpdateFeature
from krafty.planning.cluster import Facts, plan
from krafty.render.kafka_config import node_properties, restart_hash

from ...conftest import context, example
from .test_plan import BROKERS, CONTROLLERS, ctx, node, observe, quorum

STATIC = (FeatureLevel("kraft.version", 0, (0, 1)),)
DYNAMIC = (FeatureLevel("kraft.version", 1, (0, 1)),)


def config_map(result: Any) -> dict[str, str]:
    [apply] = [a for a in result.actions if isinstance(a, ApplyChildren)]
    found = next(c.desired for c in apply.children if c.name == naming.config_map("prod"))
    assert found is not None
    return dict(found["data"])


def test_a_static_quorums_nodes_name_the_voters_and_a_dynamic_ones_bootstrap_from_them():
    static = replace(ctx(), quorum=QuorumKind.STATIC)
    props = node_properties(static, naming.Pool.BROKER, 0)
    assert props["controller.quorum.voters"] == ",".join(
        f"{1000 + i}@{static.host(naming.Pool.CONTROLLER, i)}:9093" for i in range(3))
    assert "controller.quorum.bootstrap.servers" not in props
    dynamic = node_properties(ctx(), naming.Pool.BROKER, 0)
    assert "controller.quorum.voters" not in dynamic
    # Moving from one to the other restarts the nodes (the voters list is read only at start)
    assert restart_hash(static, naming.Pool.BROKER) != restart_hash(ctx(), naming.Pool.BROKER)


def test_the_pass_follows_kraft_version_and_keeps_what_it_last_read_when_kafka_cannot_be_asked():
    # Given a cluster whose kraft.version Kafka says is 0, Then its ConfigMap says static
    assert config_map(plan(ctx(), observe(ctx(), features=STATIC), Facts(BROKERS)))[naming.KRAFT_QUORUM_KEY] == \
        "static"
    # And once it reads 1, dynamic
    stored = replace(ctx(), quorum=QuorumKind.STATIC)
    assert config_map(plan(stored, observe(stored, features=DYNAMIC), Facts(BROKERS)))[naming.KRAFT_QUORUM_KEY] == \
        "dynamic"
    # And with Kafka unread, what the ConfigMap said stands
    assert identity.quorum_kind(QuorumKind.STATIC, None) is QuorumKind.STATIC
    assert identity.stored_quorum({naming.KRAFT_QUORUM_KEY: "static"}) is QuorumKind.STATIC
    assert identity.stored_quorum({}) is identity.stored_quorum(None) is QuorumKind.DYNAMIC
    with pytest.raises(IdentityConflict, match="kraft-quorum is 'statc', neither static nor dynamic"):
        identity.stored_quorum({naming.KRAFT_QUORUM_KEY: "statc"})


def test_a_static_quorums_voters_are_refused_a_change_unless_kraft_version_is_raised_with_it():
    stored = replace(ctx(controllers=5), quorum=QuorumKind.STATIC)
    refused = plan(stored, observe(stored, features=STATIC), Facts(BROKERS))
    ready = next(c for c in refused.conditions if c.type == "Ready")
    assert (ready.reason, ready.message) == ("QuorumRefused", (
        "spec.controllers.replicas 5: the quorum is static (kraft.version 0) and its 3 voters cannot change; set "
        "spec.features kraft.version: 1 first (a point of no return). Nothing changes"))
    # Given kraft.version raised in the same spec, Then kraft.version goes first and the voters wait for it
    raising = replace(stored, spec=stored.spec.model_copy(update={"features": {"kraft.version": 1}}))
    nodes = [replace(node(i), version=raising.spec.version) for i in (*CONTROLLERS, *BROKERS)]
    result = plan(raising, observe(raising, nodes, features=STATIC), Facts(BROKERS))
    assert [a.change.name for a in result.actions if isinstance(a, UpdateFeature)] == ["kraft.version"]
    assert result.status["scaling"]["message"] == scaling.STATIC_QUORUM
    # And with the same voters, a static quorum is left alone
    same = replace(ctx(), quorum=QuorumKind.STATIC)
    assert scaling.static_refusal(True, 3, quorum(), False) is None
    assert next(c for c in plan(same, observe(same, features=STATIC), Facts(BROKERS)).conditions
                if c.type == "Ready").reason != "QuorumRefused"


def test_a_combined_voter_to_be_lets_the_roll_restart_it_into_the_controller_role_first():
    # Given a combined cluster of 5 brokers asked for 5 voters, brokers 3 and 4 running as brokers only
    spec = example("kafkacluster-combined.yaml")["spec"]
    spec["brokers"]["replicas"], spec["controllers"]["replicas"] = 5, 5
    c = replace(context(spec, name="prod"), initial_voters=())
    nodes = [NodeState(b, Pool.BROKER, f"prod-broker-{b}", c.roles(Pool.BROKER, b), PodPhase.READY, True,
                       registered=True, version=c.spec.version, controller_running=False if b >= 3 else None)
             for b in range(5)]
    result = plan(c, observe(c, nodes, quorum=quorum((0, 1, 2), leader=0),
                             statefulset_replicas={Pool.BROKER: 5}), Facts((0, 1, 2, 3, 4)))
    # Then the scaling waits for the roll, and the roll restarts broker 3 into its roles (not each for the other)
    assert result.status["scaling"]["message"] == "waiting for broker 3 to restart as a controller before it votes"
    assert [(a.node.pod, a.reason) for a in result.actions if isinstance(a, RestartNode)] == [
        ("prod-broker-3", RestartReason.ROLES_CHANGED)]
