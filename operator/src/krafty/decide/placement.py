"""Replica placement: where each partition's replicas should live.

A pure planner for scaling: given the partitions, the brokers that should
hold replicas and (optionally) each broker's rack, it returns new replica
lists such that
  - no replica stays on a broker that is going away,
  - replica counts per broker differ by at most one,
  - preferred-leader counts (first replicas) differ by at most one,
  - racks are spread when racks are known,
moving as few replicas as it can: only the excess of over-full brokers moves,
and leadership is balanced by reordering replicas, which moves no data.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from krafty.facts.observed import PartitionState

TopicPartition = tuple[str, int]


def _rack_ok(candidate: int, replicas: list[int], racks: Mapping[int, str]) -> bool:
    """A candidate keeps racks spread: no second replica on a rack while another rack has none."""
    if not racks:
        return True
    used = Counter(racks.get(r, "") for r in replicas if r != candidate)
    rack_count = len(set(racks.values()))
    return used[racks.get(candidate, "")] == 0 or len(used) >= rack_count


def _evacuate(assignment: dict[TopicPartition, list[int]], brokers: list[int], load: Counter[int],
              racks: Mapping[int, str]) -> None:
    """Every replica on a broker that is going away moves to the least loaded fitting broker."""
    keep = set(brokers)
    for tp in sorted(assignment):
        replicas = assignment[tp]
        for i, broker in enumerate(replicas):
            if broker in keep:
                continue
            free = [b for b in brokers if b not in replicas]
            fitting = [b for b in free if _rack_ok(b, replicas, racks)] or free
            chosen = min(fitting, key=lambda b: (load[b], b))
            replicas[i] = chosen
            load[chosen] += 1


def _one_move(assignment: dict[TopicPartition, list[int]], source: int, target: int,
              racks: Mapping[int, str]) -> bool:
    for tp in sorted(assignment):
        replicas = assignment[tp]
        if source in replicas and target not in replicas:
            i = replicas.index(source)
            candidate = [*replicas[:i], target, *replicas[i + 1:]]
            if _rack_ok(target, candidate, racks):
                assignment[tp] = candidate
                return True
    return False


def _level(assignment: dict[TopicPartition, list[int]], brokers: list[int], load: Counter[int],
           racks: Mapping[int, str]) -> None:
    """One replica at a time from the fullest broker to the emptiest, until they differ by at most one:
    each move narrows the gap, so no replica moves that does not have to."""
    while max(load[b] for b in brokers) - min(load[b] for b in brokers) > 1:
        fullest = sorted(brokers, key=lambda b: (-load[b], b))
        emptiest = sorted(brokers, key=lambda b: (load[b], b))
        moved = False
        for source in fullest:
            for target in emptiest:
                if load[source] - load[target] > 1 and _one_move(assignment, source, target, racks):
                    load[source] -= 1
                    load[target] += 1
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def _lead(assignment: dict[TopicPartition, list[int]], brokers: list[int]) -> None:
    """Balance preferred leaders by reordering each partition's replicas (no data moves)."""
    leaders = Counter({b: 0 for b in brokers})
    leaders.update(replicas[0] for replicas in assignment.values() if replicas)
    while max(leaders.values()) - min(leaders.values()) > 1:
        swapped = False
        for source in sorted(brokers, key=lambda b: (-leaders[b], b)):
            for tp in sorted(assignment):
                replicas = assignment[tp]
                better = [r for r in replicas[1:] if leaders[source] - leaders[r] > 1]
                if replicas[0] == source and better:
                    chosen = min(better, key=lambda b: (leaders[b], b))
                    assignment[tp] = [chosen, *[r for r in replicas if r != chosen]]
                    leaders[source] -= 1
                    leaders[chosen] += 1
                    swapped = True
                    break
            if swapped:
                break
        if not swapped:
            return


def balance(partitions: Iterable[PartitionState], brokers: Iterable[int],
            racks: Mapping[int, str] | None = None) -> dict[TopicPartition, list[int]]:
    """New replica lists for the partitions whose placement should change."""
    brokers = sorted(set(brokers))
    current = {(p.topic, p.partition): list(p.replicas) for p in partitions}
    if not brokers or not current:
        return {}
    widest = max(len(r) for r in current.values())
    if widest > len(brokers):
        raise ValueError(f"replication factor {widest} cannot fit on {len(brokers)} brokers")
    assignment = {tp: list(replicas) for tp, replicas in current.items()}
    load = Counter({b: 0 for b in brokers})
    load.update(b for replicas in assignment.values() for b in replicas if b in brokers)
    _evacuate(assignment, brokers, load, racks or {})
    _level(assignment, brokers, load, racks or {})
    _lead(assignment, brokers)
    return {tp: replicas for tp, replicas in assignment.items() if replicas != current[tp]}


def uneven_topics(partitions: Iterable[PartitionState]) -> list[str]:
    """Topics whose partitions do not all have the same number of replicas.

    Right after a move a broker may still answer with the move's in-flight replica list (target
    and old replicas together); planning from it would make that list the new replica set.
    """
    sizes: dict[str, set[int]] = {}
    for p in partitions:
        sizes.setdefault(p.topic, set()).add(len(p.replicas))
    return sorted(topic for topic, found in sizes.items() if len(found) > 1)


def infeasible_topics(partitions: Iterable[PartitionState], brokers: int) -> dict[str, int]:
    """Topics whose replication factor exceeds the number of brokers (by name, with their factor)."""
    out: dict[str, int] = {}
    for p in partitions:
        if len(p.replicas) > brokers:
            out[p.topic] = max(out.get(p.topic, 0), len(p.replicas))
    return out


def replica_spread(partitions: Iterable[PartitionState], brokers: Iterable[int]) -> int:
    """Max minus min replicas per broker (0 or 1 is balanced)."""
    load = Counter({b: 0 for b in brokers})
    load.update(r for p in partitions for r in p.replicas)
    return max(load.values(), default=0) - min(load.values(), default=0)


def moved_replicas(partitions: Iterable[PartitionState], moves: Mapping[TopicPartition, list[int]]) -> int:
    """How many replicas (data copies) a plan moves; reorderings move none."""
    by_tp = {(p.topic, p.partition): p for p in partitions}
    return sum(len(set(new) - set(by_tp[tp].replicas)) for tp, new in moves.items())
