"""Consumer lag from partial reads: what cannot be read is unknown, never zero and never left out."""

from __future__ import annotations

import pytest

from krafty.decide.lag import (
    GroupSelection,
    LagRead,
    LogRange,
    PartitionLag,
    SelectedGroups,
    by_topic,
    partition_lag,
    select_groups,
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
    assert select_groups(["spark-x", "b", "a"], selection) == SelectedGroups(read, excluded, over_limit)
