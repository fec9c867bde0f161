"""Which brokers restart together: whole zones where every partition is spread over the zones, one at a time for
the brokers of a partition that is not, and never a group that leaves a partition below min.insync.replicas."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from krafty.decide.restart_groups import Parallelism, ParallelismKind, group_blocker, next_group, steps, unspread
from krafty.facts.observed import PartitionState

ZONES = ("a", "b", "c")


def spread_cluster(brokers_per_zone: int, partitions: int) -> tuple[dict[int, str], list[PartitionState]]:
    """Brokers 0.. in three zones (broker b in zone b % 3), each partition RF 3 with one replica per zone."""
    racks = {b: ZONES[b % 3] for b in range(3 * brokers_per_zone)}
    parts = []
    for p in range(partitions):
        replicas = tuple((3 * ((p + i) % brokers_per_zone)) + i for i in range(3))
        parts.append(PartitionState("t", p, replicas[0], replicas, replicas, 2))
    return racks, parts


def groups(order: list[int], racks: dict[int, str], parts: list[PartitionState],
           parallelism: Parallelism) -> list[tuple[int, ...]]:
    """The whole roll's groups, each restarted (and back in sync) before the next is chosen."""
    left, out = list(order), []
    while left:
        group = next_group(left, racks, parts, parallelism)
        out.append(group.brokers)
        left = [b for b in left if b not in group.brokers]
    return out


def test_sixty_brokers_in_three_zones_roll_in_three_groups():
    # Given 60 brokers in three zones, every partition spread over them
    racks, parts = spread_cluster(20, 300)
    order = sorted(racks, key=lambda b: (racks[b], b))
    # When the roll goes zone by zone, Then it takes three steps, a zone each
    rolled = groups(order, racks, parts, Parallelism.parse("zone"))
    assert [len(g) for g in rolled] == [20, 20, 20]
    assert [{racks[b] for b in g} for g in rolled] == [{"a"}, {"b"}, {"c"}]
    # And one at a time takes sixty; four at a time fifteen
    assert len(groups(order, racks, parts, Parallelism.parse(1))) == 60
    assert [len(g) for g in groups(order, racks, parts, Parallelism.parse(4))] == [4] * 15


def test_the_brokers_of_a_partition_not_spread_over_zones_go_one_at_a_time_and_say_why():
    # Given a partition with two replicas in zone a (brokers 0 and 3)
    racks, parts = spread_cluster(4, 12)
    parts.append(PartitionState("skewed", 0, 0, (0, 3, 1), (0, 3, 1), 2))
    order = sorted(racks, key=lambda b: (racks[b], b))
    # Then zone a's other brokers go together, and 0 and 3 each alone, saying which partition holds them
    first = next_group(order, racks, parts, Parallelism.parse("zone"))
    assert (first.brokers, first.alone) == ((0,), "broker 0 goes alone: skewed-0 has replicas [0, 3] in zone a")
    assert groups(order, racks, parts, Parallelism.parse("zone"))[:3] == [(0,), (3,), (6, 9)]
    assert unspread(parts, racks) == {0: "skewed-0 has replicas [0, 3] in zone a",
                                      3: "skewed-0 has replicas [0, 3] in zone a"}


def test_a_broker_out_of_sync_keeps_the_brokers_sharing_its_partitions_out_of_a_group():
    # Given broker 1 (zone b) out of the ISR of its partitions (broken: down or behind)
    racks, parts = spread_cluster(4, 12)
    parts = [PartitionState(p.topic, p.partition, p.leader, p.replicas, tuple(b for b in p.isr if b != 1), 2)
             for p in parts]
    # When zone c (2, 5, 8, 11) goes, Then broker 5 stays out: it shares partitions 3, 7 and 11 (replicas 9, 1, 5)
    # with broker 1, and would leave them one in-sync replica
    group = next_group([2, 5, 8, 11], racks, parts, Parallelism.parse("zone"))
    assert group.brokers == (2, 8, 11)
    # And the group with it is refused, naming the partition
    blocked = group_blocker([2, 5], parts)
    assert blocked is not None
    assert (blocked[0].name, blocked[1]) == ("t-3", "t-3 would drop below min.insync.replicas=2: brokers [5] of "
                                                    "its in-sync replicas [9, 5] would stop")


def test_an_eligible_leader_replica_keeps_a_partition_online_where_the_cluster_runs_elr():
    # Given a partition whose only in-sync replica is broker 0, and broker 1 an eligible leader replica (KIP-966)
    alone = PartitionState("t", 0, 0, (0, 1, 2), (0,), 2)
    eligible = PartitionState("t", 0, 0, (0, 1, 2), (0,), 2, elr=(1,))
    # Then without ELR, broker 0 stopping (alone, or with 2) would take it offline
    assert group_blocker([0, 2], [alone]) is not None
    # And with ELR, broker 1 leads once 0 stops; only stopping 1 as well takes it offline
    assert group_blocker([0, 2], [eligible]) is None
    assert group_blocker([0, 1], [eligible]) is not None
    assert eligible.leader_candidates({0}) == (1,)
    assert not eligible.eligible_leaders_only
    assert PartitionState("t", 0, -1, (0, 1, 2), (), 2, elr=(1, 2)).eligible_leaders_only


def test_brokers_without_a_zone_go_one_at_a_time():
    _, parts = spread_cluster(2, 6)
    group = next_group([0, 1, 2], {0: None, 1: None, 2: None}, parts, Parallelism.parse("zone"))
    assert (group.brokers, group.alone) == ((0,), "broker 0 has no zone (broker.rack): one at a time")


@pytest.mark.parametrize(("value", "kind", "count"), [(1, ParallelismKind.ONE, 1), ("zone", ParallelismKind.ZONE, 1),
                                                      (3, ParallelismKind.COUNT, 3), ("2", ParallelismKind.COUNT, 2)])
def test_parallelism_is_read_from_the_spec(value, kind, count):
    assert Parallelism.parse(value) == Parallelism(kind, count)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[int, str], list[PartitionState], list[int]]:
    """Brokers in up to three zones, partitions of RF 1 to 3 anywhere, each ISR a random part of its replicas,
    and the brokers a roll would restart, in some order."""
    count = draw(st.integers(3, 12))
    racks = {b: draw(st.sampled_from(ZONES)) for b in range(count)}
    parts = []
    for p in range(draw(st.integers(1, 20))):
        replicas = tuple(draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=3, unique=True)))
        isr = tuple(b for b in replicas if draw(st.booleans()) or b == replicas[0])
        parts.append(PartitionState(draw(st.sampled_from(string.ascii_lowercase)), p, isr[0], replicas, isr,
                                    draw(st.integers(1, 3))))
    order = draw(st.permutations(list(range(count))))
    return racks, parts, order


@settings(max_examples=300, deadline=None)
@given(clusters(), st.sampled_from([Parallelism.parse("zone"), Parallelism.parse(2), Parallelism.parse(5)]))
def test_no_chosen_group_leaves_a_partition_below_min_isr_or_without_a_leader(cluster, parallelism):
    racks, parts, order = cluster
    group = next_group(order, racks, parts, parallelism)
    assert group.brokers[0] == order[0]
    if len(group.brokers) > 1:  # (the first alone is the single-broker roll's to judge, as before)
        for p in parts:
            going = set(group.brokers) & set(p.isr)
            rest = [b for b in p.isr if b not in group.brokers]
            if going and len(p.replicas) > 1:
                assert rest, (group, p)
                assert len(rest) >= p.min_isr or len(p.isr) < p.min_isr, (group, p)
        assert len(group.brokers) <= (parallelism.count if parallelism.kind is ParallelismKind.COUNT else 99)
        if parallelism.kind is ParallelismKind.ZONE:
            assert {racks[b] for b in group.brokers} == {racks[order[0]]}


def test_a_plan_shows_the_whole_roll_as_steps_controllers_alone_and_brokers_by_zone():
    # Given three dedicated controllers (1000-1002, the active one last) and six brokers in three zones
    racks, parts = spread_cluster(2, 6)
    order = [1000, 1002, 1001, 0, 3, 1, 4, 2, 5]
    # Then the controllers take a step each, and each zone's brokers one
    assert steps(order, set(racks), racks, parts, Parallelism.parse("zone")) == [
        (1000,), (1002,), (1001,), (0, 3), (1, 4), (2, 5)]
    assert len(steps(order, set(racks), racks, parts, Parallelism.parse(1))) == 9
