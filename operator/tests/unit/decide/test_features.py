"""KRaft feature levels: what may be raised when, what is lowered, what is refused, what cannot be undone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from krafty.decide.features import FeatureFacts, irreversible, plan, refusal
from krafty.model import KafkaClusterSpec, versions
from krafty.model.validation import validate_cluster

ON = {"kraft.version": 1, "group.version": 1, "share.version": 1, "streams.version": 1, "transaction.version": 2,
      "eligible.leader.replicas.version": 1, "metadata.version": 30}
NEW = ("4.3.1", "4.3.1", "4.3.1")


def facts(wanted: dict[str, int], finalized: dict[str, int] | None = None, nodes: tuple[str | None, ...] = NEW,
          groups: dict[str, tuple[str, ...]] | None = None) -> FeatureFacts:
    return FeatureFacts(wanted, {**ON, **(finalized or {})}, nodes, groups or {})


# (spec.features, the cluster's levels, the nodes' releases, groups, healthy) -> (the change, the features waiting)
RULES = {
    "nothing asked": ({}, {}, NEW, {}, True, None, []),
    "as it is": ({"share.version": 1}, {}, NEW, {}, True, None, []),
    "raised": ({"share.version": 1}, {"share.version": 0}, NEW, {}, True, ("share.version", 1, False), []),
    "raised, not while unhealthy": ({"share.version": 1}, {"share.version": 0}, NEW, {}, False, None,
                                    ["share.version"]),
    "raised, not while a node runs an unknown release": ({"share.version": 1}, {"share.version": 0},
                                                         ("4.3.1", None, "4.3.1"), {}, True, None, ["share.version"]),
    "lowered": ({"share.version": 0}, {}, NEW, {}, True, ("share.version", 0, True), []),
    "lowered while unhealthy": ({"eligible.leader.replicas.version": 0}, {}, NEW, {}, False,
                                ("eligible.leader.replicas.version", 0, True), []),
    "lowering held by its groups": ({"share.version": 0}, {}, NEW, {"share": ("pickers",)}, True, None,
                                    ["share.version"]),
    "lowering not held by other groups": ({"share.version": 0}, {}, NEW, {"consumer": ("orders",)}, True,
                                          ("share.version", 0, True), []),
    "one at a time, by name": ({"share.version": 1, "group.version": 1}, {"share.version": 0, "group.version": 0},
                               NEW, {}, True, ("group.version", 1, False), ["share.version"]),
    "kraft.version raised": ({"kraft.version": 1}, {"kraft.version": 0}, NEW, {}, True, ("kraft.version", 1, False),
                             []),
}


@pytest.mark.parametrize(("wanted", "finalized", "nodes", "groups", "healthy", "change", "waiting"), RULES.values(),
                         ids=RULES.keys())
def test_feature_rules(wanted, finalized, nodes, groups, healthy, change, waiting):
    decided = plan(facts(wanted, finalized, nodes, groups), healthy)
    got = decided.change
    assert ((got.name, got.level, got.lowering) if got else None) == change
    assert sorted(decided.waiting or {}) == waiting


def test_raising_what_kafka_cannot_lower_says_so_and_lowering_it_is_refused_before_anything():
    raised = plan(facts({"kraft.version": 1}, {"kraft.version": 0}), True).change
    assert raised is not None
    assert raised.message.endswith("Kafka cannot lower it again")
    assert irreversible("kraft.version")
    assert not any(irreversible(f.name) for f in versions.FEATURES if f.name != "kraft.version")
    assert refusal(facts({"kraft.version": 0})) == ("spec.features.kraft.version 0 is below the cluster's "
                                                    "kraft.version 1, which Kafka cannot lower. Nothing changes")
    assert refusal(facts({"share.version": 0})) is None
    # Kafka not read this pass: nothing is decided, nothing refused
    unread = FeatureFacts({"share.version": 0, "kraft.version": 0}, None, NEW, {})
    assert (plan(unread, True).change, refusal(unread)) == (None, None)


def test_a_held_lowering_names_the_groups_that_hold_it():
    decided = plan(facts({"share.version": 0}, groups={"share": tuple(f"g{i}" for i in range(7))}), True)
    assert decided.waiting == {"share.version": "share.version stays 1 while share groups use it (g0, g1, g2, g3, "
                                                 "g4 and 2 more): delete them, or keep the level"}


def test_eligible_leader_replicas_stay_on_while_a_partition_waits_for_one():
    waiting = FeatureFacts({"eligible.leader.replicas.version": 0}, ON, NEW, {}, ("orders-3",))
    decided = plan(waiting, True)
    assert decided.change is None
    assert decided.waiting == {"eligible.leader.replicas.version": (
        "eligible.leader.replicas.version stays 1 while partitions wait for an eligible leader replica (orders-3): "
        "lowering it clears their ELR and leaves them an unclean election")}
    # Once the partition has an in-sync replica again, ELR may be lowered
    assert plan(replace(waiting, eligible_only=()), True).change is not None


@pytest.mark.parametrize(("features", "message"), [
    ({"share.verison": 1}, "knows no feature 'share.verison' (did you mean share.version?)"),
    ({"kraft.versions": 1}, "(did you mean kraft.version?)"),
    ({"fancy.version": 1}, "Kafka 4.3.1 knows no feature 'fancy.version'; it knows eligible.leader.replicas.version"),
    ({"share.version": 2}, "2 is outside what Kafka 4.3.1 runs of share.version (0 to 1)"),
    ({"transaction.version": 3}, "3 is outside what Kafka 4.3.1 runs of transaction.version (0 to 2)"),
    ({"metadata.version": 30}, "metadata.version follows spec.version; pin it with spec.upgrade.metadataVersion"),
])
def test_a_feature_the_release_does_not_run_is_refused_naming_it(features, message):
    spec = KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}, "features": features})
    problems = [str(p) for p in validate_cluster(spec)]
    assert any(message in p for p in problems), problems
    assert all(p.startswith("spec.features.") for p in problems), problems


def test_every_release_knows_every_feature_and_a_new_cluster_gets_all_of_them_on():
    for release in versions.RELEASES:
        assert sorted(release.features) == sorted(f.name for f in versions.FEATURES)
        assert all(r.default == r.highest and r.lowest == 0 for r in release.features.values())
