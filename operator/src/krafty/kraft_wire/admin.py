"""The admin requests librdkafka lacks: partition reassignments, and the cluster-wide dynamic
broker config (the default broker resource, name "")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from krafty.kraft_wire.codec import ERROR_NAMES, Reader, Writer, check

ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
INCREMENTAL_ALTER_CONFIGS = 44
BROKER_RESOURCE = 4
SET, DELETE = 0, 1


# -- Partition reassignments v0 ------------------------------------------------

TopicPartition = tuple[str, int]


def encode_alter_reassignments(targets: Mapping[TopicPartition, list[int] | None], timeout_ms: int) -> Writer:
    """targets: replicas per partition; None cancels that partition's reassignment."""
    by_topic: dict[str, list[tuple[int, list[int] | None]]] = {}
    for (topic_name, index), replicas in sorted(targets.items()):
        by_topic.setdefault(topic_name, []).append((index, replicas))

    def partition(w: Writer, item: tuple[int, list[int] | None]) -> None:
        w.int32(item[0]).compact_array(item[1], lambda ww, b: ww.int32(b)).tags()

    def topic(w: Writer, item: tuple[str, list[tuple[int, list[int] | None]]]) -> None:
        w.compact_string(item[0]).compact_array(item[1], partition).tags()

    return Writer().int32(timeout_ms).compact_array(sorted(by_topic.items()), topic).tags()


def decode_alter_reassignments(r: Reader) -> dict[TopicPartition, str]:
    """Per-partition errors ({} when every partition was accepted)."""
    r.int32()
    check("AlterPartitionReassignments", r.int16(), r.compact_string())
    errors: dict[TopicPartition, str] = {}

    def topic(t: Reader) -> None:
        name = t.compact_string() or ""

        def partition(p: Reader) -> None:
            index, code, message = p.int32(), p.int16(), p.compact_string()
            p.skip_tags()
            if code:
                errors[(name, index)] = f"{ERROR_NAMES.get(code, code)}: {message or ''}".strip()

        t.compact_array(partition)
        t.skip_tags()

    r.compact_array(topic)
    r.skip_tags()
    return errors


@dataclass(frozen=True)
class OngoingReassignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def encode_list_reassignments(timeout_ms: int) -> Writer:
    return Writer().int32(timeout_ms).compact_array(None, lambda w, t: w).tags()


def decode_list_reassignments(r: Reader) -> dict[TopicPartition, OngoingReassignment]:
    r.int32()
    check("ListPartitionReassignments", r.int16(), r.compact_string())
    ongoing: dict[TopicPartition, OngoingReassignment] = {}

    def ints(x: Reader) -> tuple[int, ...]:
        return tuple(x.compact_array(lambda y: y.int32()))

    def topic(t: Reader) -> None:
        name = t.compact_string() or ""

        def partition(p: Reader) -> None:
            index = p.int32()
            ongoing[(name, index)] = OngoingReassignment(ints(p), ints(p), ints(p))
            p.skip_tags()

        t.compact_array(partition)
        t.skip_tags()

    r.compact_array(topic)
    r.skip_tags()
    return ongoing


# -- IncrementalAlterConfigs v1 (the cluster-wide broker default, resource name "") ----

def encode_alter_cluster_defaults(changes: dict[str, str | None], validate_only: bool = False) -> Writer:
    """changes: value per key; None deletes the key (back to the static or built-in default)."""
    def config(w: Writer, item: tuple[str, str | None]) -> None:
        w.compact_string(item[0]).int8(DELETE if item[1] is None else SET).compact_string(item[1]).tags()

    def resource(w: Writer, items: list[tuple[str, str | None]]) -> None:
        w.int8(BROKER_RESOURCE).compact_string("").compact_array(items, config).tags()

    return Writer().compact_array([sorted(changes.items())], resource).int8(1 if validate_only else 0).tags()


def decode_alter_configs(r: Reader) -> None:
    r.int32()

    def response(x: Reader) -> None:
        code, message = x.int16(), x.compact_string()
        x.take(1)
        x.compact_string()
        x.skip_tags()
        check("IncrementalAlterConfigs", code, message)

    r.compact_array(response)
    r.skip_tags()
