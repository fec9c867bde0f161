"""Which brokers may restart together (spec.restarts.parallelism), from the observed assignment and ISR.

Brokers that restart at once take every replica they hold offline at once. A group may go only if every
partition keeps, outside the group, at least min.insync.replicas in-sync replicas (a partition already below it
keeps what it has) and at least one in-sync replica to lead. With `zone` the group is every broker of one zone
that needs a restart: where each partition's replicas are spread over the zones, a zone going down costs each
partition one replica. A partition whose replicas are not spread (two in one zone) would lose two: the brokers
holding it go one at a time, and the group says so. With a number N, up to N brokers go together, taken in the
roll's order, each added only while the group stays safe. Controllers are not grouped: they go one at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from krafty.facts.observed import PartitionState


class ParallelismKind(StrEnum):
    ONE = "one"  # one broker at a time (the default)
    ZONE = "zone"  # every broker of one zone at a time
    COUNT = "count"  # up to a number of brokers at a time


@dataclass(frozen=True)
class Parallelism:
    kind: ParallelismKind = ParallelismKind.ONE
    count: int = 1  # with COUNT: at most this many brokers at once

    @classmethod
    def parse(cls, value: int | str) -> Parallelism:
        """spec.restarts.parallelism: 1, "zone" or a number of brokers."""
        if value == "zone":
            return cls(ParallelismKind.ZONE)
        count = int(value)
        return cls(ParallelismKind.ONE) if count == 1 else cls(ParallelismKind.COUNT, count)


@dataclass(frozen=True)
class RestartGroup:
    brokers: tuple[int, ...]  # in the roll's order
    zone: str | None = None  # with `zone`: the zone they are in
    alone: str | None = None  # why the group is one broker when more were asked for (said in status)


def group_blocker(group: Iterable[int], partitions: Iterable[PartitionState]) -> tuple[PartitionState, str] | None:
    """The first partition these brokers restarting at once would take offline or below min.insync.replicas."""
    stopping = set(group)
    for p in partitions:
        going = stopping & set(p.isr)
        if not going or len(p.replicas) == 1:
            continue  # not serving it, or no other replica could ever take over
        rest = [b for b in p.isr if b not in stopping]
        if not p.leader_candidates(stopping):
            return p, (f"{p.name} would go offline: brokers {sorted(going)} are all of its in-sync replicas "
                       f"(replicas {list(p.replicas)})")
        if len(p.isr) >= p.min_isr > len(rest):
            return p, (f"{p.name} would drop below min.insync.replicas={p.min_isr}: brokers {sorted(going)} of its "
                       f"in-sync replicas {list(p.isr)} would stop")
    return None


def unspread(partitions: Iterable[PartitionState], racks: Mapping[int, str | None]) -> dict[int, str]:
    """The brokers holding a replica of a partition whose replicas are not spread over the zones (two or more in
    one), each with that partition: such a broker restarts alone."""
    found: dict[int, str] = {}
    for p in partitions:
        by_zone: dict[str | None, list[int]] = {}
        for broker in p.replicas:
            by_zone.setdefault(racks.get(broker), []).append(broker)
        for zone, brokers in by_zone.items():
            if len(brokers) > 1:
                for broker in brokers:
                    found.setdefault(broker, f"{p.name} has replicas {sorted(brokers)} in zone {zone}")
    return found


def next_group(order: Sequence[int], racks: Mapping[int, str | None], partitions: Sequence[PartitionState],
               parallelism: Parallelism) -> RestartGroup:
    """The brokers to restart together next: the first of `order` (the roll's order of brokers to restart), and
    those that may go with it."""
    first = order[0]
    if parallelism.kind is ParallelismKind.ONE:
        return RestartGroup((first,))
    alone = unspread(partitions, racks)
    if parallelism.kind is ParallelismKind.ZONE and racks.get(first) is None:
        return RestartGroup((first,), alone=f"broker {first} has no zone (broker.rack): one at a time")
    if first in alone:
        return RestartGroup((first,), racks.get(first), alone=f"broker {first} goes alone: {alone[first]}")
    if parallelism.kind is ParallelismKind.ZONE:
        candidates = [b for b in order if racks.get(b) == racks[first]]
        limit = len(candidates)
    else:
        candidates, limit = list(order), parallelism.count
    group = [first]
    for broker in candidates[1:]:
        if len(group) < limit and broker not in alone and group_blocker([*group, broker], partitions) is None:
            group.append(broker)
    return RestartGroup(tuple(group), racks.get(first) if parallelism.kind is ParallelismKind.ZONE else None)


def steps(order: Sequence[int], brokers: Iterable[int], racks: Mapping[int, str | None],
          partitions: Sequence[PartitionState], parallelism: Parallelism) -> list[tuple[int, ...]]:
    """The whole roll as steps: each node of `order` (the roll's order) in the step it restarts in, a controller
    alone, brokers in groups, each group back in sync before the next is chosen (what a plan shows)."""
    grouped, out, left = set(brokers), [], list(order)
    while left:
        if left[0] not in grouped:
            step: tuple[int, ...] = (left[0],)
        else:
            step = next_group([b for b in left if b in grouped], racks, partitions, parallelism).brokers
        out.append(step)
        left = [n for n in left if n not in step]
    return out
