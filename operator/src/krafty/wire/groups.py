"""Consumer groups: those a broker coordinates (ListGroups v4, every state), and their committed offsets, many
groups per request: FindCoordinator v4 (KIP-699) and OffsetFetch v8 (KIP-709), with no topic list so that each
group answers with the partitions it committed and nothing else. librdkafka asks one group per request, for the
partitions the caller names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from krafty.wire.codec import Reader, Writer, check, error_text

FIND_COORDINATOR = 10
OFFSET_FETCH = 9
LIST_GROUPS = 16
_GROUP_KEY = 0


@dataclass(frozen=True)
class Coordinator:
    """The broker that keeps a group's offsets, or why it is not known now (error set, address empty)."""

    node_id: int
    host: str
    port: int
    error: str | None = None


@dataclass(frozen=True)
class GroupOffsets:
    """A group's committed offsets (None: that partition's offset could not be read), or why none could."""

    offsets: dict[tuple[str, int], int | None]
    error: str | None = None


def encode_list_groups() -> Writer:
    """Every group the broker asked coordinates, whatever its state (no states filter)."""
    return Writer().compact_array([], Writer.compact_string).tags()


def decode_list_groups(r: Reader) -> tuple[str, ...]:
    """The ids of the groups the broker coordinates."""
    r.int32()
    check("ListGroups", r.int16(), None)

    def group(g: Reader) -> str:
        group_id = g.compact_string() or ""
        g.compact_string()  # protocol type
        g.compact_string()  # state
        g.skip_tags()
        return group_id

    groups = r.compact_array(group)
    r.skip_tags()
    return tuple(groups)


def encode_find_coordinators(groups: Sequence[str]) -> Writer:
    return Writer().int8(_GROUP_KEY).compact_array(list(groups), Writer.compact_string).tags()


def decode_find_coordinators(r: Reader) -> dict[str, Coordinator]:
    r.int32()

    def coordinator(c: Reader) -> tuple[str, Coordinator]:
        key, node, host, port = c.compact_string() or "", c.int32(), c.compact_string() or "", c.int32()
        error = error_text(c.int16(), c.compact_string())
        c.skip_tags()
        return key, Coordinator(node, host, port, error)

    found = dict(r.compact_array(coordinator))
    r.skip_tags()
    return found


def encode_offset_fetch(groups: Sequence[str]) -> Writer:
    """Every committed offset of each group (topics null), stable or not (require_stable false: a
    transaction in flight must not fail the read)."""
    def group(w: Writer, name: str) -> None:
        w.compact_string(name).compact_array(None, Writer.compact_string).tags()

    return Writer().compact_array(list(groups), group).int8(0).tags()


def decode_offset_fetch(r: Reader) -> dict[str, GroupOffsets]:
    r.int32()

    def group(g: Reader) -> tuple[str, GroupOffsets]:
        name = g.compact_string() or ""
        offsets: dict[tuple[str, int], int | None] = {}

        def topic(t: Reader) -> None:
            topic_name = t.compact_string() or ""

            def partition(p: Reader) -> None:
                index, offset = p.int32(), p.int64()
                p.int32()  # committed leader epoch
                p.compact_string()  # metadata
                code = p.int16()
                p.skip_tags()
                if code or offset >= 0:
                    offsets[(topic_name, index)] = None if code else offset

            t.compact_array(partition)
            t.skip_tags()

        g.compact_array(topic)
        error = error_text(g.int16())
        g.skip_tags()
        return name, GroupOffsets(offsets, error)

    found = dict(r.compact_array(group))
    r.skip_tags()
    return found
