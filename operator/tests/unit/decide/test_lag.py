"""Consumer lag from partial reads: what cannot be read is unknown, never zero and never left out."""

from __future__ import annotations

import math

import pytest

from krafty.decide.lag import (
    GroupSelection,
    LagRead,
    LogRange,
    PartitionLag,
    Retention,
    RetentionRisk,
    by_topic,
    partition_lag,
    retention_of,
    risk_changes,
    risk_message,
    select_groups,
    unread_records,
    unreadable,
)


def _lags(entries: list[PartitionLag]) -> dict[tuple[str, str, int], int | None]:
    return {(e.group, e.topic, e.partition): e.lag for e in entries}


def test_lag_and_retention_headroom_from_a_complete_read():
    read = LagRead({"spark-pageviews": {("views", 0): 900, ("views", 1): 100}}, frozenset(),
                   {("views", 0): LogRange(0, 1000), ("views", 1): LogRange(90, 1090)})
    entries = partition_lag(read)
    assert _lags(entries) == {("spark-pageviews", "views", 0): 100, ("spark-pageviews", "views", 1): 990}
    assert entries[1].headroom == 0.01  # 10 of 1000 retained records left: danger
    [topic] = by_topic(entries)
    assert (topic.total, topic.unknown, topic.headroom) == (1090, 0, 0.01)


def test_a_partition_whose_log_end_is_unreadable_is_unknown_and_the_topic_has_no_sum():
    # Given the log range of partition 1 could not be read (its leader restarting)
    read = LagRead({"g": {("t", 0): 10, ("t", 1): 10, ("t", 2): 10}}, frozenset(),
                   {("t", 0): LogRange(0, 800), ("t", 1): None, ("t", 2): LogRange(0, 610)})
    entries = partition_lag(read)
    # Then partition 1 is unknown, not left out, and the topic's sum is unknown, not the 1390 that was read
    assert _lags(entries) == {("g", "t", 0): 790, ("g", "t", 1): None, ("g", "t", 2): 600}
    [topic] = by_topic(entries)
    assert (topic.total, topic.headroom, topic.unknown, topic.partitions) == (None, None, 1, 3)


def test_a_committed_offset_that_is_unreadable_is_unknown():
    read = LagRead({"g": {("t", 0): None, ("t", 1): 5}}, frozenset(),
                   {("t", 0): LogRange(0, 9), ("t", 1): LogRange(0, 9)})
    assert _lags(partition_lag(read)) == {("g", "t", 0): None, ("g", "t", 1): 4}


def test_a_share_groups_lag_is_the_one_kafka_counts_where_it_counts_one():
    # Given a share group whose start offsets are 96 and 10, Kafka counting 0 records of lag on partition 0
    # (the 4 records above its start offset already acknowledged) and nothing on partition 1
    read = LagRead({"pickers": {("t", 0): 96, ("t", 1): 10}}, frozenset(),
                   {("t", 0): LogRange(0, 100), ("t", 1): LogRange(0, 30)}, counted={"pickers": {("t", 0): 0}})
    entries = partition_lag(read)
    # Then partition 0's lag is Kafka's 0, with nothing unread (no age), and partition 1's the log end minus 10
    assert _lags(entries) == {("pickers", "t", 0): 0, ("pickers", "t", 1): 20}
    assert (entries[0].seconds, entries[0].retention_left) == (0.0, math.inf)


def test_a_group_that_cannot_be_read_keeps_its_last_partitions_as_unknown():
    # Given group g was read last time, and this time its committed offsets could not be read at all
    before = partition_lag(LagRead({"g": {("t", 0): 1}, "h": {("t", 0): 1}}, frozenset(), {("t", 0): LogRange(0, 3)}))
    now = LagRead({"h": {("t", 0): 2}}, frozenset({"g"}), {("t", 0): LogRange(0, 3)})
    # Then g is still there, unknown, while h is read
    assert _lags(partition_lag(now, before)) == {("h", "t", 0): 1, ("g", "t", 0): None}


def test_a_group_that_is_gone_disappears():
    before = partition_lag(LagRead({"g": {("t", 0): 1}}, frozenset(), {("t", 0): LogRange(0, 3)}))
    assert partition_lag(LagRead({}, frozenset(), {}), before) == []


def test_a_failed_read_keeps_every_series_visible_as_unknown():
    before = partition_lag(LagRead({"g": {("t", 0): 1, ("u", 0): 2}}, frozenset(),
                                   {("t", 0): LogRange(0, 3), ("u", 0): LogRange(0, 3)}))
    assert _lags(unreadable(before)) == {("g", "t", 0): None, ("g", "u", 0): None}
    assert [(t.topic, t.unknown, t.total) for t in by_topic(unreadable(before))] == [("t", 1, None), ("u", 1, None)]


@pytest.mark.parametrize(("selection", "read", "excluded", "over_limit"), [
    (GroupSelection(), ("a", "b", "spark-x"), 0, 0),
    (GroupSelection(include=("spark-.*",)), ("spark-x",), 2, 0),
    (GroupSelection(exclude=("spark-.*", "a")), ("b",), 2, 0),
    (GroupSelection(include=("spark",)), (), 3, 0),  # a whole-name match: "spark" is not "spark-x"
    (GroupSelection(limit=2), ("a", "b"), 0, 1),  # the first by name, the rest counted
], ids=["all", "include", "exclude", "whole-name", "limit"])
def test_the_groups_read_are_chosen_by_pattern_and_bounded(selection: GroupSelection, read: tuple[str, ...],
                                                           excluded: int, over_limit: int) -> None:
    chosen = select_groups({"spark-x": "classic", "b": "consumer", "a": "share"}, selection)
    assert (chosen.groups, chosen.excluded, chosen.over_limit) == (read, excluded, over_limit)
    assert chosen.types == {group: {"spark-x": "classic", "b": "consumer", "a": "share"}[group] for group in read}


# Lag in time: the records are stamped 1,000 s after the epoch, one per second from offset 0
def _stamps(topic: str, offsets: range, first_ms: int = 1_000_000) -> dict[tuple[str, int, int], int | None]:
    return {(topic, 0, o): first_ms + 1000 * o for o in offsets}


def _read(committed: int, end: int, at: float, start: int = 0, retention: float | None = 600.0) -> LagRead:
    return LagRead({"g": {("t", 0): committed}}, frozenset(), {("t", 0): LogRange(start, end)}, at=at,
                   timestamps=_stamps("t", range(end)), retention={"t": Retention(retention)})


def test_the_lag_in_seconds_is_the_age_of_the_oldest_unread_record():
    # Given a group that read 10 records and the record at offset 10 was stamped at 1,010 s
    [entry] = partition_lag(_read(committed=10, end=50, at=1100.0))
    # Then it is 90 s behind, and with 600 s of retention and no history (the worst: stalled) 510 s remain
    assert (entry.seconds, entry.retention_left) == (90.0, 510.0)
    # And a group that has read everything is 0 s behind, never at risk
    [caught_up] = partition_lag(_read(committed=50, end=50, at=1100.0))
    assert (caught_up.seconds, caught_up.retention_left) == (0.0, math.inf)


def test_only_each_groups_first_unread_record_is_asked_for():
    committed = {"g": {("t", 0): 10, ("t", 1): 7}, "h": {("t", 0): 3, ("u", 0): 2}, "i": {("t", 0): None}}
    logs = {("t", 0): LogRange(5, 20), ("t", 1): LogRange(0, 7), ("u", 0): None}
    # g: offset 10; g on t-1 read everything; h on t-0 is below the log start: the oldest retained, 5, is first
    assert unread_records(committed, logs) == {("t", 0, 10), ("t", 0, 5)}


def test_the_forecast_follows_the_rate_the_age_grows():
    # Given a stalled group: the age grows 1 s each second over the window
    entries = partition_lag(_read(10, 50, at=1100.0))
    entries = partition_lag(_read(10, 60, at=1160.0), entries)
    [stalled] = entries
    assert (stalled.seconds, stalled.retention_left) == (150.0, 450.0)
    # Given a group that consumes as fast as records come: the age stays at 90 s
    steady = partition_lag(_read(10, 50, at=1100.0))
    steady = partition_lag(_read(70, 110, at=1160.0), steady)
    assert (steady[0].seconds, steady[0].retention_left) == (90.0, math.inf)
    # Given one that falls behind at half speed: the age grows from 90 to 120 s in 60 s (it made progress)
    slow = partition_lag(_read(10, 50, at=1100.0))
    slow = partition_lag(_read(40, 110, at=1160.0), slow)
    assert (slow[0].seconds, slow[0].retention_left) == (120.0, 960.0)


def test_a_group_that_had_read_everything_and_stalls_is_forecast_as_stalled():
    # Given a group that read everything for two minutes, then stopped while records kept coming
    entries: list[PartitionLag] = []
    for step in range(12):
        entries = partition_lag(_read(10 + step, 10 + step, at=1000.0 + 10 * step), entries)
    assert entries[0].history == ()
    entries = partition_lag(_read(22, 40, at=1130.0), entries)  # offset 22 was stamped at 1,022 s
    entries = partition_lag(_read(22, 60, at=1170.0), entries)
    # Then its age grows 1 s each second (its caught-up past does not make that look slower)
    assert (entries[0].seconds, entries[0].retention_left) == (148.0, 452.0)


def test_age_samples_are_kept_for_the_window_and_spaced():
    entries: list[PartitionLag] = []
    for step in range(40):  # a read every 10 s for 400 s
        entries = partition_lag(_read(10, 50 + step, at=1100.0 + 10 * step), entries)
    [entry] = entries
    assert [s.at for s in entry.history] == [1100.0 + 10 * step for step in (30, 33, 36, 39)]


def test_the_forecast_follows_the_pace_now_not_an_earlier_one():
    # Given a group that kept up for five minutes (10 s behind), then stalled
    entries: list[PartitionLag] = []
    for step in range(30):  # (record o is stamped 1,000 + o s: a read every 10 s, 10 records behind)
        entries = partition_lag(_read(10 * step, 10 * step + 10, at=1010.0 + 10 * step), entries)
    for step in range(30, 36):
        entries = partition_lag(_read(290, 10 * step + 10, at=1010.0 + 10 * step), entries)
    [entry] = entries
    # Then, a minute after, its age grows 1 s each second and so does what is left fall
    assert entry.seconds == 70.0
    assert entry.retention_left == 530.0


def test_a_group_that_makes_no_progress_is_forecast_as_stalled_at_once():
    # Given a group 10 s behind for five minutes, that stops 30 s ago (its samples of 30-60 s ago are from before)
    entries: list[PartitionLag] = []
    for step in range(30):
        entries = partition_lag(_read(10 * step, 10 * step + 10, at=1010.0 + 10 * step), entries)
    for step in range(30, 33):
        entries = partition_lag(_read(290, 10 * step + 10, at=1010.0 + 10 * step), entries)
    [entry] = entries
    # Then its first unread record, the same as at the last read, says it is stalled: 600 - 40 s left, not the
    # 933 s a growth measured across the stop would say
    assert (entry.seconds, entry.retention_left) == (40.0, 560.0)


def test_no_forecast_without_time_retention_or_a_readable_timestamp():
    [forever] = partition_lag(_read(10, 50, at=1100.0, retention=None))
    assert (forever.seconds, forever.retention_left) == (90.0, None)
    unknown = LagRead({"g": {("t", 0): 10}}, frozenset(), {("t", 0): LogRange(0, 50)}, at=1100.0,
                      timestamps={("t", 0, 10): None}, retention={"t": Retention(600.0)})
    [entry] = partition_lag(unknown)
    assert (entry.lag, entry.seconds, entry.retention_left) == (40, None, None)
    [topic] = by_topic([entry])
    assert not topic.judged  # its risk is not told from what could not be read
    assert risk_changes({}, [topic]) == []


@pytest.mark.parametrize(("configs", "seconds"), [
    ({"retention.ms": "604800000", "cleanup.policy": "delete"}, 604800.0),
    ({"retention.ms": "-1", "cleanup.policy": "delete"}, None),
    ({"retention.ms": "60000", "cleanup.policy": "compact"}, None),
    ({"retention.ms": "60000", "cleanup.policy": "compact,delete"}, 60.0),
], ids=["delete", "forever", "compact", "compact-and-delete"])
def test_retention_from_topic_configs(configs: dict[str, str], seconds: float | None) -> None:
    assert retention_of(configs) == Retention(seconds)


def test_risk_is_told_when_it_changes_with_what_to_do():
    # Given a stalled group 51 minutes behind on a topic keeping records 100 minutes: 48 minutes are left
    entries = partition_lag(_read(10, 5000, at=4110.0, retention=6000.0))
    [topic] = by_topic(entries)
    assert topic.risk is RetentionRisk.AT_RISK
    assert risk_changes({}, [topic]) == [topic]
    assert risk_message(topic) == ("consumer group g on topic t is 51m40s behind; at the rate that grows, retention "
                                   "may delete records it has not read in 48m20s")
    # Told once: the same risk again is no change
    assert risk_changes({("g", "t"): RetentionRisk.AT_RISK}, [topic]) == []
    # When retention deleted records it had not read (its committed offset below the log start), it lost some
    [lost] = by_topic(partition_lag(_read(10, 50, at=1100.0, start=20)))
    assert (lost.risk, lost.seconds) == (RetentionRisk.LOST, 80.0)  # the oldest still retained is offset 20
    assert "retention deleted records that consumer group g on topic t had not read" in risk_message(lost)
    # And once it caught up, it is safe again
    [safe] = by_topic(partition_lag(_read(50, 50, at=1100.0, start=20)))
    assert risk_changes({("g", "t"): RetentionRisk.LOST}, [safe]) == [safe]
    assert safe.risk.event_reason == "DataLossForecastCleared"


@pytest.mark.parametrize(("retention", "at", "risk"), [
    (604800.0, 1100.0, RetentionRisk.SAFE),  # 90 s behind, a week kept
    (604800.0, 1010.0 + 604800 - 3000, RetentionRisk.AT_RISK),  # 50 minutes left
    (300.0, 1110.0, RetentionRisk.SAFE),  # 100 s behind, 5 minutes kept: 200 s left, more than half
    (300.0, 1170.0, RetentionRisk.AT_RISK),  # 160 s behind: 140 s left
], ids=["week-safe", "week-hour", "minutes-safe", "minutes-half"])
def test_at_risk_within_the_hour_or_half_the_retention_if_shorter(retention: float, at: float,
                                                                   risk: RetentionRisk) -> None:
    # (a stalled group: nothing but its age counts, its first unread record was stamped at 1,010 s)
    [topic] = by_topic(partition_lag(_read(10, 50, at=at, retention=retention)))
    assert topic.risk is risk
