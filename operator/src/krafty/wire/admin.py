"""Admin requests: partition reassignments, dynamic configs of topics and of the cluster-wide broker default
(resource name "", which librdkafka refuses), and preferred-leader elections."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from krafty.wire.codec import Reader, Writer, check, error_text, item_error
from krafty.wire.topics import BROKER_RESOURCE, TOPIC_RESOURCE

ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
INCREMENTAL_ALTER_CONFIGS = 44
ELECT_LEADERS = 43
SET, DELETE = 0, 1
PREFERRED_ELECTION = 0
ELECTION_NOT_NEEDED = 84


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


def _partition_errors(r: Reader, not_errors: frozenset[int] = frozenset()) -> dict[TopicPartition, str]:
    """The errors of an answer's topics and partitions (name; index, error code, message each), through to the
    end of the answer."""
    errors: dict[TopicPartition, str] = {}

    def topic(t: Reader) -> None:
        name = t.compact_string() or ""

        def partition(p: Reader) -> None:
            index, code, message = p.int32(), p.int16(), p.compact_string()
            p.skip_tags()
            if code and code not in not_errors:
                errors[(name, index)] = error_text(code, message) or ""

        t.compact_array(partition)
        t.skip_tags()

    r.compact_array(topic)
    r.skip_tags()
    return errors


def decode_alter_reassignments(r: Reader) -> dict[TopicPartition, str]:
    """Per-partition errors ({} when every partition was accepted)."""
    r.int32()
    check("AlterPartitionReassignments", r.int16(), r.compact_string())
    return _partition_errors(r)


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


# -- IncrementalAlterConfigs v1 (topics, and the cluster-wide broker default: resource name "") ----

Changes = Mapping[str, str | None]  # value per key; None deletes the key (back to the default)


def _encode_alter_configs(resource_type: int, changes: Mapping[str, Changes], validate_only: bool) -> Writer:
    def config(w: Writer, item: tuple[str, str | None]) -> None:
        w.compact_string(item[0]).int8(DELETE if item[1] is None else SET).compact_string(item[1]).tags()

    def resource(w: Writer, item: tuple[str, Changes]) -> None:
        w.int8(resource_type).compact_string(item[0]).compact_array(sorted(item[1].items()), config).tags()

    return Writer().compact_array(sorted(changes.items()), resource).int8(1 if validate_only else 0).tags()


def encode_alter_cluster_defaults(changes: Changes, validate_only: bool = False) -> Writer:
    """changes: value per key; None deletes the key (back to the static or built-in default)."""
    return _encode_alter_configs(BROKER_RESOURCE, {"": changes}, validate_only)


def encode_alter_topic_configs(changes: Mapping[str, Changes], validate_only: bool = False) -> Writer:
    """changes: per topic, value per key; None deletes the key (back to the broker's default)."""
    return _encode_alter_configs(TOPIC_RESOURCE, changes, validate_only)


def _alter_config_results(r: Reader) -> list[tuple[str, int, str | None]]:
    """(resource name, error code, error message) of each resource."""
    r.int32()

    def response(x: Reader) -> tuple[str, int, str | None]:
        code, message = x.int16(), x.compact_string()
        x.take(1)
        name = x.compact_string() or ""
        x.skip_tags()
        return name, code, message

    results = r.compact_array(response)
    r.skip_tags()
    return results


def decode_alter_configs(r: Reader) -> None:
    """Raises the first resource's error."""
    for _, code, message in _alter_config_results(r):
        check("IncrementalAlterConfigs", code, message)


def decode_alter_config_errors(r: Reader) -> dict[str, str | None]:
    """Kafka's refusal per resource (None: done)."""
    return {name: item_error("IncrementalAlterConfigs", code, message)
            for name, code, message in _alter_config_results(r)}


# -- ElectLeaders v2 --------------------------------------------------------------

def encode_elect_preferred(partitions: Iterable[TopicPartition], timeout_ms: int) -> Writer:
    """A preferred-leader election of the given partitions."""
    by_topic: dict[str, list[int]] = {}
    for topic_name, index in sorted(set(partitions)):
        by_topic.setdefault(topic_name, []).append(index)

    def topic(w: Writer, item: tuple[str, list[int]]) -> None:
        w.compact_string(item[0]).compact_array(item[1], lambda ww, p: ww.int32(p)).tags()

    return Writer().int8(PREFERRED_ELECTION).compact_array(sorted(by_topic.items()), topic).int32(timeout_ms).tags()


def decode_elect_leaders(r: Reader) -> dict[TopicPartition, str]:
    """Partitions whose election failed, with the error; one whose preferred replica already leads is not one."""
    r.int32()
    check("ElectLeaders", r.int16(), None)
    return _partition_errors(r, frozenset({ELECTION_NOT_NEEDED}))
