"""Leader balance: which partitions to hand back to their preferred replica."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from krafty.facts.observed import PartitionState


def electable(partitions: Iterable[PartitionState], alive: set[int]) -> list[PartitionState]:
    """Partitions not led by their preferred replica although it is alive and in sync."""
    return [p for p in partitions
            if p.preferred_leader in alive and p.preferred_leader in p.isr and p.leader != p.preferred_leader]


def imbalance_by_broker(partitions: Iterable[PartitionState], alive: set[int]) -> dict[int, float]:
    """Per broker: the share (0..1) of the partitions it should lead that it does not lead."""
    preferred: Counter[int] = Counter()
    missing: Counter[int] = Counter()
    for p in partitions:
        if p.preferred_leader in alive:
            preferred[p.preferred_leader] += 1
            if p.leader != p.preferred_leader:
                missing[p.preferred_leader] += 1
    return {broker: missing[broker] / count for broker, count in preferred.items()}


def partitions_to_rebalance(partitions: Iterable[PartitionState], alive: set[int],
                            threshold_percent: int) -> list[PartitionState]:
    """The partitions of brokers whose imbalance exceeds the threshold that an election can fix."""
    items = list(partitions)
    over = {b for b, share in imbalance_by_broker(items, alive).items() if share * 100 > threshold_percent}
    return [p for p in electable(items, alive) if p.preferred_leader in over]
