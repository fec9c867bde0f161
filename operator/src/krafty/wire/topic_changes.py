"""Creating, growing and deleting topics: CreateTopics v7, CreatePartitions v3, DeleteTopics v5. Any broker
forwards them to the active controller (librdkafka sends them to the broker its metadata last named controller,
which may be one a scale-down has since removed). Kafka accepts or refuses each topic of a request on its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from krafty.wire.codec import Reader, Writer, item_error, reads_in_place, string_end, tags_end, varint_at

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37

Replicas = Sequence[Sequence[int]]  # per partition, its brokers (the preferred leader first)


@dataclass(frozen=True)
class NewTopic:
    """A topic to create: `partitions` and `replication_factor` for Kafka to place, or `replicas` placed here
    (then both counts come from it)."""
    name: str
    partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)
    replicas: Replicas = ()


def _ints(w: Writer, values: Sequence[int]) -> Writer:
    return w.compact_array(list(values), lambda ww, v: ww.int32(v))


def encode_create_topics(topics: Sequence[NewTopic], timeout_ms: int, validate_only: bool) -> Writer:
    def assignment(w: Writer, item: tuple[int, Sequence[int]]) -> None:
        _ints(w.int32(item[0]), item[1]).tags()

    def config(w: Writer, item: tuple[str, str]) -> None:
        w.compact_string(item[0]).compact_string(item[1]).tags()

    def topic(w: Writer, t: NewTopic) -> None:
        placed = bool(t.replicas)
        w.compact_string(t.name).int32(-1 if placed else t.partitions).int16(-1 if placed else t.replication_factor)
        w.compact_array(list(enumerate(t.replicas)), assignment).compact_array(sorted(t.config.items()), config)
        w.tags()

    return Writer().compact_array(list(topics), topic).int32(timeout_ms).int8(int(validate_only)).tags()


@reads_in_place
def decode_create_topics(r: Reader) -> dict[str, str | None]:
    """Kafka's refusal per topic (None: created, or would be)."""
    r.int32()

    def result(t: Reader) -> tuple[str, str | None]:
        name = t.compact_string() or ""
        t.take(16)  # topic id
        code, message = t.int16(), t.compact_string()
        t.take(6)  # partitions, replication factor
        t.pos = _configs_end(t.data, t.pos)
        t.skip_tags()
        return name, item_error("CreateTopics", code, message)

    results = dict(r.compact_array(result))
    r.skip_tags()
    return results


def _configs_end(data: bytes, pos: int) -> int:
    """The position after a new topic's whole config, unused here (read in place: about 40 entries a topic)."""
    count, pos = varint_at(data, pos)
    for _ in range(count - 1):
        pos = string_end(data, string_end(data, pos))  # name, value
        pos = tags_end(data, pos + 3)  # (after read-only, source, sensitive)
    return pos


def encode_create_partitions(totals: Mapping[str, int], placed: Mapping[str, Replicas], timeout_ms: int,
                             validate_only: bool) -> Writer:
    """Each topic grown to its total; the new partitions' replicas given for the topics in `placed` (Kafka
    places the others')."""
    def topic(w: Writer, item: tuple[str, int]) -> None:
        name, total = item
        new = placed.get(name)
        w.compact_string(name).int32(total)
        w.compact_array(None if new is None else list(new), lambda ww, brokers: _ints(ww, brokers).tags()).tags()

    return Writer().compact_array(sorted(totals.items()), topic).int32(timeout_ms).int8(int(validate_only)).tags()


def encode_delete_topics(names: Sequence[str], timeout_ms: int) -> Writer:
    return Writer().compact_array(list(names), lambda w, n: w.compact_string(n)).int32(timeout_ms).tags()


def _named_results(r: Reader, api: str) -> dict[str, str | None]:
    """Kafka's refusal per topic (None: done), of an answer of name, error code and message per topic."""
    r.int32()

    def result(t: Reader) -> tuple[str, str | None]:
        name, code, message = t.compact_string() or "", t.int16(), t.compact_string()
        t.skip_tags()
        return name, item_error(api, code, message)

    results = dict(r.compact_array(result))
    r.skip_tags()
    return results


def decode_create_partitions(r: Reader) -> dict[str, str | None]:
    return _named_results(r, "CreatePartitions")


def decode_delete_topics(r: Reader) -> dict[str, str | None]:
    return _named_results(r, "DeleteTopics")
