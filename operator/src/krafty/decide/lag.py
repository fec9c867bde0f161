"""Consumer lag from committed offsets and the log's start and end: right, or marked unknown; and lag in time.

A partition whose log range could not be read, a committed offset that could
not be read, or a whole group whose offsets could not be read is never
counted as zero or left out: its lag is None. A group that could not be read
keeps the partitions it had in the last report, so what went dark is named.

Lag in time is the age of the oldest record a group has not processed (the
timestamp of the record at its committed offset, against the clock of the
read). Retention deletes a record once it is older than the topic's
retention.ms (a little later: Kafka deletes whole segments, every few
minutes), so the age also forecasts data loss: the seconds left before the
oldest unread record may be deleted, at the pace the age grows now: 1 s each
second while the group makes no progress (its first unread record the same as
at the last read), else as it grew over the last half minute to minute while
the group had records to read (not growing: never).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

TopicPartitionKey = tuple[str, int]
RecordKey = tuple[str, int, int]  # topic, partition, offset
SAMPLE_SPACING = 30.0  # the growth rate is measured from the newest age sample at least this old
FORECAST_WINDOW = 3 * SAMPLE_SPACING  # seconds of age samples kept for it
NO_RECORD = -1  # a first unread "record" that is only transaction markers up to the log end: nothing to process
RISK_HORIZON = 3600.0  # at risk: retention may delete unread records within this, or half the retention if shorter


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
    types: Mapping[str, str] = field(default_factory=dict)  # each read group's type: classic, consumer, share, ...


def select_groups(groups: Mapping[str, str], selection: GroupSelection) -> SelectedGroups:
    """The groups (each with its type, as ListGroups gives it) whose lag is read: those the patterns allow, up to
    the limit, in name order."""
    every = set(groups)
    allowed = sorted(g for g in every if (not selection.include or any(re.fullmatch(p, g) for p in selection.include))
                     and not any(re.fullmatch(p, g) for p in selection.exclude))
    read = tuple(allowed[:selection.limit])
    return SelectedGroups(read, len(every) - len(allowed), max(0, len(allowed) - selection.limit),
                          {group: groups[group] for group in read})


@dataclass(frozen=True)
class LogRange:
    start: int  # oldest retained offset
    end: int  # log end offset


@dataclass(frozen=True)
class Retention:
    """How long a topic keeps a record for its age; seconds None: age never deletes one (retention.ms -1, or
    a cleanup.policy without delete)."""

    seconds: float | None


def retention_of(configs: Mapping[str, str | None]) -> Retention:
    """A topic's retention from its effective configs."""
    policies = {p.strip() for p in (configs.get("cleanup.policy") or "delete").split(",")}
    ms = int(configs.get("retention.ms") or -1)
    return Retention(ms / 1000 if "delete" in policies and ms >= 0 else None)


def first_unread(committed: int, log_range: LogRange) -> int | None:
    """The offset of the oldest record a group has not read and Kafka still holds (None: it read them all)."""
    offset = max(committed, log_range.start)
    return offset if offset < log_range.end else None


@dataclass(frozen=True)
class LagRead:
    """One read of a cluster's consumer groups (krafty.clients.lag)."""

    committed: Mapping[str, Mapping[TopicPartitionKey, int | None]]  # per group; None: that offset unreadable
    unknown_groups: frozenset[str]  # groups whose committed offsets could not be read at all
    logs: Mapping[TopicPartitionKey, LogRange | None]  # None: unreadable
    selected: SelectedGroups = SelectedGroups((), 0, 0)  # which groups were read, which left out
    at: float = 0.0  # wall-clock seconds when it was read
    # The timestamp (ms) of the record at each first unread offset (NO_RECORD: none up to the log end, only
    # transaction markers); None or absent: unreadable
    timestamps: Mapping[RecordKey, int | None] = field(default_factory=dict)
    retention: Mapping[str, Retention] = field(default_factory=dict)  # per topic; absent: unreadable
    # The lag Kafka counts itself, per group, where it does (a share group's share-partitions, KIP-1226: records
    # above the start offset already acknowledged are not lag); absent: the log end minus the offset
    counted: Mapping[str, Mapping[TopicPartitionKey, int]] = field(default_factory=dict)


def unread_records(committed: Mapping[str, Mapping[TopicPartitionKey, int | None]],
                   logs: Mapping[TopicPartitionKey, LogRange | None]) -> set[RecordKey]:
    """The records whose timestamps give the groups' lag in time: each group's first unread one."""
    wanted = set()
    for offsets in committed.values():
        for (topic, partition), offset in offsets.items():
            log_range = logs.get((topic, partition))
            first = None if offset is None or log_range is None else first_unread(offset, log_range)
            if first is not None:
                wanted.add((topic, partition, first))
    return wanted


@dataclass(frozen=True)
class AgeSample:
    at: float
    age: float


@dataclass(frozen=True)
class PartitionLag:
    """How far a consumer group is behind on one partition (None: cannot be seen now)."""

    group: str
    topic: str
    partition: int
    lag: int | None  # records between the committed offset and the log end
    headroom: float | None  # (committed - log start) / (log end - log start): near 0, retention deletes unread data
    seconds: float | None = None  # age of the oldest record not read (0: none); None: unreadable
    # Seconds until retention may delete the oldest unread record (inf: the age is not growing); None: unreadable,
    # or the topic's records are never deleted for their age
    retention_left: float | None = None
    unread_deleted: bool = False  # the committed offset is below the log start: retention deleted unread records
    retention: float | None = None  # the topic's retention (s), when it deletes records for their age
    # Age samples of the last FORECAST_WINDOW, SAMPLE_SPACING apart, since the group last had nothing to read
    history: tuple[AgeSample, ...] = ()
    first_unread: int | None = None  # the offset whose record gave the age

    @property
    def known(self) -> bool:
        return self.lag is not None


def growth(history: tuple[AgeSample, ...], now: AgeSample) -> float:
    """How many seconds the age grows each second: since the newest sample at least SAMPLE_SPACING old (the pace
    now, not mixed with an earlier one); 1 (stalled, the worst) until there is one."""
    old = [s for s in history if now.at - s.at >= SAMPLE_SPACING]
    if not old:
        return 1.0
    return (now.age - old[-1].age) / (now.at - old[-1].at)


def retention_left(age: float, retention: Retention | None, rate: float) -> float | None:
    """Seconds until the age reaches the retention, growing `rate` seconds each second."""
    if retention is None or retention.seconds is None:
        return None
    left = retention.seconds - age
    if left <= 0:
        return 0.0
    return math.inf if rate <= 0 else left / rate


def _kept(history: tuple[AgeSample, ...], sample: AgeSample) -> tuple[AgeSample, ...]:
    recent = tuple(s for s in history if sample.at - s.at <= FORECAST_WINDOW)
    return recent if recent and sample.at - recent[-1].at < SAMPLE_SPACING else (*recent, sample)


def _entry(group: str, tp: TopicPartitionKey, offset: int | None, read: LagRead,
           before: PartitionLag | None) -> PartitionLag:
    log_range = read.logs.get(tp)
    if offset is None or log_range is None:
        return PartitionLag(group, tp[0], tp[1], None, None)
    retained = log_range.end - log_range.start
    headroom = 1.0 if retained <= 0 else max(0.0, min(1.0, (offset - log_range.start) / retained))
    counted = read.counted.get(group, {}).get(tp)
    lag = max(0, log_range.end - offset) if counted is None else counted
    history = before.history if before is not None else ()
    first = None if lag == 0 else first_unread(offset, log_range)
    stamp = None if first is None else read.timestamps.get((*tp, first))
    if stamp == NO_RECORD:
        first = stamp = None
    if first is not None and stamp is None:
        return PartitionLag(group, tp[0], tp[1], lag, headroom, unread_deleted=offset < log_range.start,
                            history=history)
    if stamp is None:  # nothing unread: no age, and samples of the backlog that is gone say nothing of the next one
        return PartitionLag(group, tp[0], tp[1], lag, headroom, 0.0, math.inf)
    age = max(0.0, read.at - stamp / 1000)
    retention = read.retention.get(tp[0])
    # No progress since the last read: stalled, the age grows with the clock (however the group kept up before)
    stalled = before is not None and before.first_unread == first
    left = retention_left(age, retention, 1.0 if stalled else growth(history, AgeSample(read.at, age)))
    return PartitionLag(group, tp[0], tp[1], lag, headroom, age, left, offset < log_range.start,
                        None if retention is None else retention.seconds, _kept(history, AgeSample(read.at, age)),
                        first)


def partition_lag(read: LagRead, previous: Iterable[PartitionLag] = ()) -> list[PartitionLag]:
    """Every (group, partition) with its lag, or None where any part of it could not be read."""
    previous = list(previous)
    before = {(p.group, p.topic, p.partition): p for p in previous}
    out = [_entry(group, tp, offset, read, before.get((group, *tp)))
           for group, offsets in sorted(read.committed.items()) for tp, offset in sorted(offsets.items())]
    out += [PartitionLag(p.group, p.topic, p.partition, None, None)
            for p in previous if p.group in read.unknown_groups]
    return out


def unreadable(previous: Iterable[PartitionLag]) -> list[PartitionLag]:
    """The last report with every value unknown: what a failed read leaves visible."""
    return [PartitionLag(p.group, p.topic, p.partition, None, None) for p in previous]


class RetentionRisk(enum.Enum):
    """Whether retention deletes records a group has not read: forecast soon (TopicLag.risk), or already did."""

    SAFE = "Safe"
    AT_RISK = "AtRisk"
    LOST = "Lost"

    @property
    def event_reason(self) -> str:
        """The reason of the Event a change to this risk gets (a Warning, except back to safe)."""
        return {RetentionRisk.SAFE: "DataLossForecastCleared", RetentionRisk.AT_RISK: "DataLossForecast",
                RetentionRisk.LOST: "ConsumerDataLost"}[self]


@dataclass(frozen=True)
class TopicLag:
    """One group on one topic: the sum and the worst headroom over its partitions, when all are known; the worst
    lag in time and forecast over the partitions where they are known."""

    group: str
    topic: str
    partitions: int
    unknown: int  # partitions whose lag cannot be seen now
    total: int | None  # None unless every partition is known
    headroom: float | None
    seconds: float | None = None  # the oldest unread record's age, over every partition where it is known
    retention_left: float | None = None  # the least, over every partition where it is forecast
    unread_deleted: int = 0  # partitions where retention deleted records the group had not read
    judged: bool = True  # every partition's lag and lag in time were read: its risk can be told
    retention: float | None = None  # the topic's retention (s), when it deletes records for their age

    @property
    def risk(self) -> RetentionRisk:
        """Lost; at risk when retention may delete unread records within the hour, or within half the retention
        when that is shorter (on a topic keeping records minutes, an hour says nothing); else safe."""
        if self.unread_deleted:
            return RetentionRisk.LOST
        if self.retention_left is not None and self.retention is not None \
                and self.retention_left < min(RISK_HORIZON, self.retention / 2):
            return RetentionRisk.AT_RISK
        return RetentionRisk.SAFE


def _known(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def by_topic(entries: Iterable[PartitionLag]) -> list[TopicLag]:
    grouped: dict[tuple[str, str], list[PartitionLag]] = {}
    for entry in entries:
        grouped.setdefault((entry.group, entry.topic), []).append(entry)
    out = []
    for (group, topic), parts in sorted(grouped.items()):
        unknown = sum(not p.known for p in parts)
        complete = unknown == 0
        ages = _known(p.seconds for p in parts)
        forecasts = _known(p.retention_left for p in parts)
        retention = _known(p.retention for p in parts)
        out.append(TopicLag(group, topic, len(parts), unknown,
                            sum(p.lag or 0 for p in parts) if complete else None,
                            min(p.headroom or 0.0 for p in parts) if complete else None,
                            max(ages) if ages else None, min(forecasts) if forecasts else None,
                            sum(p.unread_deleted for p in parts), complete and len(ages) == len(parts),
                            retention[0] if retention else None))
    return out


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}h{whole % 3600 // 60:02}m" if whole >= 3600 else f"{whole // 60}m{whole % 60:02}s"


def risk_message(topic: TopicLag) -> str:
    """What an Event says when a group's risk changes (to the risk the topic has now)."""
    name = f"consumer group {topic.group} on topic {topic.topic}"
    if topic.risk is RetentionRisk.LOST:
        return (f"retention deleted records that {name} had not read, on {topic.unread_deleted} of "
                f"{topic.partitions} partitions (its committed offset is below the log start)")
    if topic.risk is RetentionRisk.AT_RISK and topic.retention_left is not None and topic.seconds is not None:
        return (f"{name} is {_duration(topic.seconds)} behind; at the rate that grows, retention may delete records "
                f"it has not read in {_duration(topic.retention_left)}")
    return f"{name} is no longer at risk of losing records to retention"


def risk_changes(known: Mapping[tuple[str, str], RetentionRisk],
                 topics: Iterable[TopicLag]) -> list[TopicLag]:
    """The group topics whose risk differs from the one last told (never told: SAFE); one not fully read now
    keeps the last one."""
    return [t for t in topics if t.judged and t.risk is not known.get((t.group, t.topic), RetentionRisk.SAFE)]
