"""Consumer lag from committed offsets and the log's start and end: right, or marked unknown.

A partition whose log range could not be read, a committed offset that could
not be read, or a whole group whose offsets could not be read is never
counted as zero or left out: its lag is None. A group that could not be read
keeps the partitions it had in the last report, so what went dark is named.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class GroupSelection:
    """Which consumer groups the lag pass reads: those the patterns allow (full matches), at most `limit`
    of them in name order, so that a cluster with thousands of groups costs the operator a bounded amount."""

    include: tuple[str, ...] = ()  # empty: every group
    exclude: tuple[str, ...] = ()
    limit: int = 200


DEFAULT_GROUPS = GroupSelection()


@dataclass(frozen=True)
class SelectedGroups:
    groups: tuple[str, ...]
    excluded: int  # left out by the patterns
    over_limit: int  # allowed by the patterns, left out by the limit


def select_groups(groups: Iterable[str], selection: GroupSelection) -> SelectedGroups:
    every = set(groups)
    allowed = sorted(g for g in every if (not selection.include or any(re.fullmatch(p, g) for p in selection.include))
                     and not any(re.fullmatch(p, g) for p in selection.exclude))
    return SelectedGroups(tuple(allowed[:selection.limit]), len(every) - len(allowed),
                          max(0, len(allowed) - selection.limit))


@dataclass(frozen=True)
class LogRange:
    start: int  # oldest retained offset
    end: int  # log end offset


@dataclass(frozen=True)
class LagRead:
    """One read of a cluster's consumer groups (krafty.clients.lag)."""

    committed: Mapping[str, Mapping[TopicPartitionKey, int | None]]  # per group; None: that offset unreadable
    unknown_groups: frozenset[str]  # groups whose committed offsets could not be read at all
    logs: Mapping[TopicPartitionKey, LogRange | None]  # None: unreadable
    selected: SelectedGroups = SelectedGroups((), 0, 0)  # which groups were read, which left out


@dataclass(frozen=True)
class PartitionLag:
    """How far a consumer group is behind on one partition (None: cannot be seen now)."""

    group: str
    topic: str
    partition: int
    lag: int | None  # records between the committed offset and the log end
    headroom: float | None  # (committed - log start) / (log end - log start): near 0, retention deletes unread data

    @property
    def known(self) -> bool:
        return self.lag is not None


def _entry(group: str, tp: TopicPartitionKey, offset: int | None, log_range: LogRange | None) -> PartitionLag:
    if offset is None or log_range is None:
        return PartitionLag(group, tp[0], tp[1], None, None)
    retained = log_range.end - log_range.start
    headroom = 1.0 if retained <= 0 else max(0.0, min(1.0, (offset - log_range.start) / retained))
    return PartitionLag(group, tp[0], tp[1], max(0, log_range.end - offset), headroom)


def partition_lag(read: LagRead, previous: Iterable[PartitionLag] = ()) -> list[PartitionLag]:
    """Every (group, partition) with its lag, or None where any part of it could not be read."""
    out = [_entry(group, tp, offset, read.logs.get(tp))
           for group, offsets in sorted(read.committed.items()) for tp, offset in sorted(offsets.items())]
    out += [PartitionLag(p.group, p.topic, p.partition, None, None)
            for p in previous if p.group in read.unknown_groups]
    return out


def unreadable(previous: Iterable[PartitionLag]) -> list[PartitionLag]:
    """The last report with every value unknown: what a failed read leaves visible."""
    return [PartitionLag(p.group, p.topic, p.partition, None, None) for p in previous]


@dataclass(frozen=True)
class TopicLag:
    """One group on one topic: the sum and the worst headroom over its partitions, when all are known."""

    group: str
    topic: str
    partitions: int
    unknown: int  # partitions whose lag cannot be seen now
    total: int | None  # None unless every partition is known
    headroom: float | None


def by_topic(entries: Iterable[PartitionLag]) -> list[TopicLag]:
    grouped: dict[tuple[str, str], list[PartitionLag]] = {}
    for entry in entries:
        grouped.setdefault((entry.group, entry.topic), []).append(entry)
    out = []
    for (group, topic), parts in sorted(grouped.items()):
        unknown = sum(not p.known for p in parts)
        complete = unknown == 0
        out.append(TopicLag(group, topic, len(parts), unknown,
                            sum(p.lag or 0 for p in parts) if complete else None,
                            min(p.headroom or 0.0 for p in parts) if complete else None))
    return out
