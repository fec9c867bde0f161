"""The replica placement planner."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from krafty.decide.placement import balance, infeasible_topics, moved_replicas, replica_spread
from krafty.facts.observed import PartitionState


def round_robin(topic: str, partitions: int, rf: int, brokers: list[int]) -> list[PartitionState]:
    out = []
    for p in range(partitions):
        replicas = tuple(brokers[(p + i) % len(brokers)] for i in range(rf))
        out.append(PartitionState(topic, p, replicas[0], replicas, replicas, 2))
    return out


def apply(partitions: list[PartitionState], moves) -> list[PartitionState]:
    out = []
    for p in partitions:
        replicas = tuple(moves.get((p.topic, p.partition), p.replicas))
        out.append(PartitionState(p.topic, p.partition, replicas[0], replicas, replicas, p.min_isr))
    return out


def leader_spread(partitions: list[PartitionState], brokers: list[int]) -> int:
    leaders = Counter({b: 0 for b in brokers})
    leaders.update(p.replicas[0] for p in partitions)
    return max(leaders.values()) - min(leaders.values())


def test_scale_up_moves_only_the_fair_share_to_new_brokers():
    # Given 30 partitions with 3 replicas on brokers 0-2, When brokers 3 and 4 join
    before = round_robin("t", 30, 3, [0, 1, 2])
    moves = balance(before, [0, 1, 2, 3, 4])
    after = apply(before, moves)
    # Then 90 replicas are spread 18 per broker, by moving exactly the 36 the new brokers need
    assert replica_spread(after, [0, 1, 2, 3, 4]) == 0
    assert moved_replicas(before, moves) == 36
    assert leader_spread(after, [0, 1, 2, 3, 4]) <= 1
    assert all(len(set(p.replicas)) == 3 for p in after)


def test_scale_down_evacuates_the_leaving_brokers():
    before = round_robin("t", 20, 3, [0, 1, 2, 3, 4])
    after = apply(before, balance(before, [0, 1, 2]))
    assert all(set(p.replicas) <= {0, 1, 2} for p in after)
    assert replica_spread(after, [0, 1, 2]) == 0
    assert leader_spread(after, [0, 1, 2]) <= 1


def test_balanced_placement_is_left_alone():
    before = round_robin("t", 12, 3, [0, 1, 2, 3])
    assert balance(before, [0, 1, 2, 3]) == {}


def test_leadership_is_balanced_by_reordering_only():
    # Every partition led by broker 0: reordering fixes it without copying any data
    before = [PartitionState("t", p, 0, (0, 1, 2), (0, 1, 2), 2) for p in range(9)]
    moves = balance(before, [0, 1, 2])
    assert moved_replicas(before, moves) == 0
    assert leader_spread(apply(before, moves), [0, 1, 2]) == 0


def test_racks_are_spread():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    before = round_robin("t", 12, 3, [0, 1, 2])  # brokers 0-2 span only racks a and b
    after = apply(before, balance(before, list(racks), racks))
    assert all(len({racks[r] for r in p.replicas}) == 3 for p in after)
    assert replica_spread(after, list(racks)) <= 1


@pytest.mark.parametrize(("partitions", "rf", "old", "new"), [
    (7, 3, 3, 5), (7, 3, 5, 3), (50, 2, 2, 7), (13, 3, 4, 4), (1, 3, 3, 4), (40, 1, 1, 3),
])
def test_invariants_over_many_shapes(partitions, rf, old, new):
    before = round_robin("a", partitions, rf, list(range(old))) + round_robin("b", 3, 1, list(range(old)))
    brokers = list(range(new))
    after = apply(before, balance(before, brokers))
    assert replica_spread(after, brokers) <= 1
    assert leader_spread(after, brokers) <= 1
    assert all(set(p.replicas) <= set(brokers) and len(set(p.replicas)) == len(p.replicas) for p in after)


def test_a_replication_factor_above_the_brokers_is_reported():
    before = round_robin("wide", 3, 3, [0, 1, 2]) + round_robin("narrow", 3, 2, [0, 1, 2])
    assert infeasible_topics(before, 2) == {"wide": 3}
    with pytest.raises(ValueError, match="replication factor 3 cannot fit on 2 brokers"):
        balance(before, [0, 1])


def test_every_permutation_of_a_small_cluster_converges():
    for order in itertools.permutations([0, 1, 2, 3]):
        before = [PartitionState("t", i, order[0], order[:3], order[:3], 2) for i in range(4)]
        after = apply(before, balance(before, [0, 1, 2, 3]))
        assert replica_spread(after, [0, 1, 2, 3]) <= 1
