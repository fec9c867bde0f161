"""Partition health, counted one way for the cluster status, the Topic status and the metrics."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from krafty.facts.observed import PartitionState


@dataclass(frozen=True)
class PartitionHealth:
    total: int
    under_replicated: int  # fewer in-sync replicas than replicas
    under_min_isr: int  # has a leader but fewer in-sync replicas than min.insync.replicas: acks=all fails
    offline: int  # no leader
    not_preferred_leader: int  # led by another replica than the first one
    eligible_leaders_only: int = 0  # no in-sync replica, eligible leader replicas waiting to lead (ELR, KIP-966)

    @property
    def imbalance(self) -> float:
        """Share (0..1) of partitions not led by their preferred replica."""
        return self.not_preferred_leader / self.total if self.total else 0.0


def summarize(partitions: Iterable[PartitionState]) -> PartitionHealth:
    items = list(partitions)
    return PartitionHealth(
        total=len(items),
        under_replicated=sum(p.under_replicated for p in items),
        under_min_isr=sum(p.under_min_isr and not p.offline for p in items),
        offline=sum(p.offline for p in items),
        not_preferred_leader=sum(p.leader != p.preferred_leader for p in items),
        eligible_leaders_only=sum(p.eligible_leaders_only for p in items))


def unhealthy(partitions: Iterable[PartitionState]) -> list[PartitionState]:
    """Partitions counted in any of the problem counts above."""
    return [p for p in partitions if p.offline or p.under_min_isr or p.under_replicated]
