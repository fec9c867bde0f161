"""Each partition's eligible leader replicas (DescribeTopicPartitions v0, KIP-966), read where the cluster runs ELR
(eligible.leader.replicas.version 1): replicas out of the ISR that hold every committed record and may lead when
the ISR is empty. Metadata does not carry them; this request does, a page of partitions at a time."""

from __future__ import annotations

from dataclasses import dataclass

from krafty.wire.codec import Reader, Writer

DESCRIBE_TOPIC_PARTITIONS = 75
PAGE_PARTITIONS = 2000  # the most a broker answers in one page (its default and its ceiling)


@dataclass(frozen=True)
class EligiblePage:
    eligible: dict[tuple[str, int], tuple[int, ...]]  # (topic, partition) -> its eligible leader replicas, if any
    next_cursor: tuple[str, int] | None  # where the next page starts; None after the last


def encode_describe_topic_partitions(cursor: tuple[str, int] | None = None, limit: int = PAGE_PARTITIONS) -> Writer:
    """Every topic (an empty list asks for all), from `cursor` on."""
    w = Writer().compact_array([], Writer.compact_string).int32(limit)
    if cursor is None:
        return w.int8(-1).tags()
    return w.int8(1).compact_string(cursor[0]).int32(cursor[1]).tags().tags()


def _int32s(r: Reader) -> tuple[int, ...]:
    return tuple(r.compact_array(Reader.int32))


def decode_describe_topic_partitions(r: Reader) -> EligiblePage:
    """The partitions of the page that have eligible leader replicas; a topic or partition answered with an error
    is left out (deleted meanwhile), an error of the whole answer is raised."""
    r.int32()  # throttle time
    eligible: dict[tuple[str, int], tuple[int, ...]] = {}

    def topic(t: Reader) -> None:
        code, name = t.int16(), t.compact_string() or ""
        t.uuid()
        t.boolean()  # internal

        def partition(p: Reader) -> None:
            partition_code, index = p.int16(), p.int32()
            p.int32()  # leader
            p.int32()  # leader epoch
            _int32s(p)  # replicas
            _int32s(p)  # ISR
            elr = _int32s(p)
            _int32s(p)  # last known ELR
            _int32s(p)  # offline replicas
            p.skip_tags()
            if code == 0 and partition_code == 0 and elr:
                eligible[(name, index)] = elr

        t.compact_array(partition)
        t.int32()  # authorized operations
        t.skip_tags()

    r.compact_array(topic)
    cursor = None
    if r.int8() >= 0:
        cursor_topic, cursor_partition = r.compact_string() or "", r.int32()
        r.skip_tags()
        cursor = (cursor_topic, cursor_partition)
    r.skip_tags()
    return EligiblePage(eligible, cursor)

