"""Where partitions' logs start and end (ListOffsets v6), asked of each partition's leader: the lag pass's log
ranges. librdkafka's ListOffsets sends the leader epoch its metadata cache holds, which a leader refuses once it
moved, and that cache is refreshed by asking for every topic's metadata; these requests send no epoch (-1: the
leader does not check it), so a pass asks only for the metadata of its groups' topics."""

from __future__ import annotations

from collections.abc import Sequence

from krafty.wire.codec import Reader, Writer, error_text

LIST_OFFSETS = 2
EARLIEST = -2  # the log start offset
LATEST = -1  # the next offset (the high watermark: records of open transactions included)
_CONSUMER = -1  # the replica id a client sends
_READ_UNCOMMITTED = 0
_NO_EPOCH = -1


def encode_list_offsets(partitions: Sequence[tuple[str, int]], timestamp: int) -> Writer:
    """The offset at `timestamp` (EARLIEST or LATEST) of each of these partitions (each once), read uncommitted."""
    by_topic: dict[str, list[int]] = {}
    for name, index in partitions:
        by_topic.setdefault(name, []).append(index)

    def partition(w: Writer, index: int) -> None:
        w.int32(index).int32(_NO_EPOCH).int64(timestamp).tags()

    def topic(w: Writer, item: tuple[str, list[int]]) -> None:
        w.compact_string(item[0]).compact_array(item[1], partition).tags()

    return Writer().int32(_CONSUMER).int8(_READ_UNCOMMITTED).compact_array(sorted(by_topic.items()), topic).tags()


def decode_list_offsets(r: Reader) -> dict[tuple[str, int], int | str]:
    """Each partition's offset, or Kafka's error for it (NOT_LEADER_OR_FOLLOWER: asked of a broker that no longer
    leads it)."""
    r.int32()  # throttle time
    out: dict[tuple[str, int], int | str] = {}

    def topic(t: Reader) -> None:
        name = t.compact_string() or ""

        def partition(p: Reader) -> None:
            index, error = p.int32(), error_text(p.int16())
            p.int64()  # timestamp
            offset = p.int64()
            p.int32()  # leader epoch
            p.skip_tags()
            out[(name, index)] = offset if error is None else error

        t.compact_array(partition)
        t.skip_tags()

    r.compact_array(topic)
    r.skip_tags()
    return out
