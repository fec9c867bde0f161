"""Groups: those a broker coordinates, of every type and state (ListGroups v5: classic, consumer, share and streams
groups, each with its type), and their positions, many groups per request: FindCoordinator v4 (KIP-699), then
OffsetFetch v8 (KIP-709) for the committed offsets of the groups that commit, DescribeShareGroupOffsets v1
(KIP-932, KIP-1226) for each share-partition's start offset and the lag Kafka counts for it, both with no topic
list so that each group answers with its own partitions and nothing else. librdkafka asks one group per request,
for the partitions the caller names. The topics a share or Streams group's live members read (ShareGroupDescribe,
StreamsGroupDescribe), which librdkafka's describe does not answer for those types."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from krafty.wire.codec import Reader, Writer, check, error_text

FIND_COORDINATOR = 10
OFFSET_FETCH = 9
LIST_GROUPS = 16
DESCRIBE_SHARE_GROUP_OFFSETS = 90
SHARE_GROUP_DESCRIBE = 77
STREAMS_GROUP_DESCRIBE = 89
SHARE_GROUP = "share"  # the type ListGroups gives a share group (its position is its start offset, not a commit)
STREAMS_GROUP = "streams"  # the type of a Kafka Streams application's group of the streams protocol (KIP-1071)
_GROUP_KEY = 0


@dataclass(frozen=True)
class Coordinator:
    """The broker that keeps a group's offsets, or why it is not known now (error set, address empty)."""

    node_id: int
    host: str
    port: int
    error: str | None = None


@dataclass(frozen=True)
class GroupReaders:
    """The topics a group's live members are assigned partitions of, or why they are not known."""

    topics: frozenset[str]
    error: str | None = None


@dataclass(frozen=True)
class GroupOffsets:
    """A group's committed offsets (None: that partition's offset could not be read), or why none could; and the
    lag Kafka itself counts where it does (a share-partition: records above the start offset already acknowledged
    are not lag, which the start offset alone cannot tell)."""

    offsets: dict[tuple[str, int], int | None]
    error: str | None = None
    lags: dict[tuple[str, int], int] = field(default_factory=dict)


def encode_list_groups() -> Writer:
    """Every group the broker asked coordinates, whatever its state and type (empty filters)."""
    return Writer().compact_array([], Writer.compact_string).compact_array([], Writer.compact_string).tags()


def decode_list_groups(r: Reader) -> dict[str, str]:
    """The groups the broker coordinates, each with its type (classic, consumer, share, streams)."""
    r.int32()
    check("ListGroups", r.int16(), None)

    def group(g: Reader) -> tuple[str, str]:
        group_id = g.compact_string() or ""
        g.compact_string()  # protocol type
        g.compact_string()  # state
        group_type = (g.compact_string() or "").lower()
        g.skip_tags()
        return group_id, group_type

    groups = dict(r.compact_array(group))
    r.skip_tags()
    return groups


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


def _every_topic(w: Writer, group: str) -> None:
    """A group asked for all of its partitions (topics null)."""
    w.compact_string(group).compact_array(None, Writer.compact_string).tags()


def encode_offset_fetch(groups: Sequence[str]) -> Writer:
    """Every committed offset of each group (topics null), stable or not (require_stable false: a
    transaction in flight must not fail the read)."""
    return Writer().compact_array(list(groups), _every_topic).int8(0).tags()


def _offsets_by_group(r: Reader, topic_ids: bool, partition: Callable[[Reader], tuple[int, int, int, int]],
                      group_message: bool) -> dict[str, GroupOffsets]:
    """The groups of an answer that gives each group's topics, each topic's partitions (`partition` reads one:
    its index, offset, lag (-1: not given) and error code), then the group's error; a partition without an offset
    (-1) is left out, one that errs is None."""
    r.int32()

    def group(g: Reader) -> tuple[str, GroupOffsets]:
        name = g.compact_string() or ""
        offsets: dict[tuple[str, int], int | None] = {}
        lags: dict[tuple[str, int], int] = {}

        def topic(t: Reader) -> None:
            topic_name = t.compact_string() or ""
            if topic_ids:
                t.uuid()
            for index, offset, lag, code in t.compact_array(partition):
                if code or offset >= 0:
                    offsets[(topic_name, index)] = None if code else offset
                if not code and offset >= 0 and lag >= 0:
                    lags[(topic_name, index)] = lag
            t.skip_tags()

        g.compact_array(topic)
        error = error_text(g.int16(), g.compact_string() if group_message else None)
        g.skip_tags()
        return name, GroupOffsets(offsets, error, lags)

    found = dict(r.compact_array(group))
    r.skip_tags()
    return found


def _committed(p: Reader) -> tuple[int, int, int, int]:
    index, offset = p.int32(), p.int64()
    p.int32()  # committed leader epoch
    p.compact_string()  # metadata
    code = p.int16()
    p.skip_tags()
    return index, offset, -1, code


def decode_offset_fetch(r: Reader) -> dict[str, GroupOffsets]:
    return _offsets_by_group(r, topic_ids=False, partition=_committed, group_message=False)


def encode_describe_share_group_offsets(groups: Sequence[str]) -> Writer:
    """Each share group's start offset in every share-partition it has (topics null)."""
    return Writer().compact_array(list(groups), _every_topic).tags()


def _started(p: Reader) -> tuple[int, int, int, int]:
    index, start = p.int32(), p.int64()
    p.int32()  # leader epoch
    lag = p.int64()  # (v1, KIP-1226; -1: the coordinator cannot count it now)
    code = p.int16()
    p.compact_string()  # error message
    p.skip_tags()
    return index, start, lag, code


def decode_describe_share_group_offsets(r: Reader) -> dict[str, GroupOffsets]:
    """Each share group's start offsets, as GroupOffsets (v1): records below a share-partition's start offset are
    delivered and acknowledged, so the group is as far as that offset (a partition not started yet is left out;
    one that errs is None); with the lag Kafka counts, which leaves out records above it already acknowledged."""
    return _offsets_by_group(r, topic_ids=True, partition=_started, group_message=True)


def encode_group_describe(groups: Sequence[str]) -> Writer:
    """ShareGroupDescribe's and StreamsGroupDescribe's request: the groups, no authorized operations."""
    return Writer().compact_array(list(groups), Writer.compact_string).int8(0).tags()


def _described(g: Reader) -> tuple[str | None, str]:
    """A described share or Streams group's error and name, read past its state and epochs."""
    error = error_text(g.int16(), g.compact_string())
    name = g.compact_string() or ""
    g.compact_string()  # state
    g.int32()  # group epoch
    g.int32()  # assignment epoch
    return error, name


def decode_share_group_describe(r: Reader) -> dict[str, GroupReaders]:
    """Each share group's members' assigned topics (ShareGroupDescribe v1, KIP-932), or its error."""
    r.int32()

    def group(g: Reader) -> tuple[str, GroupReaders]:
        error, name = _described(g)
        g.compact_string()  # assignor
        topics: set[str] = set()

        def member(m: Reader) -> None:
            for _ in range(2):  # member id, rack id
                m.compact_string()
            m.int32()  # member epoch
            m.compact_string()  # client id
            m.compact_string()  # client host
            m.compact_array(Reader.compact_string)  # subscribed topics

            def assigned(t: Reader) -> None:
                t.uuid()
                topics.add(t.compact_string() or "")
                t.compact_array(Reader.int32)
                t.skip_tags()

            m.compact_array(assigned)
            m.skip_tags()  # (the assignment's)
            m.skip_tags()

        g.compact_array(member)
        g.int32()  # authorized operations
        g.skip_tags()
        return name, GroupReaders(frozenset(topics), error)

    found = dict(r.compact_array(group))
    r.skip_tags()
    return found


def decode_streams_group_describe(r: Reader) -> dict[str, GroupReaders]:
    """Each Streams group's topics its live members read (StreamsGroupDescribe v0, KIP-1071): the source topics,
    repartition topics included, of the subtopologies whose tasks a member runs; or the group's error."""
    r.int32()

    def group(g: Reader) -> tuple[str, GroupReaders]:
        error, name = _described(g)
        sources: dict[str, set[str]] = {}
        if g.int8() >= 0:  # the topology (null until the group is initialized)
            g.int32()  # its epoch

            def subtopology(s: Reader) -> None:
                key = s.compact_string() or ""
                read = set(s.compact_array(_name))  # source topics
                s.compact_array(Reader.compact_string)  # repartition sink topics
                s.compact_array(_topic_info)  # state changelog topics
                read |= set(s.compact_array(_topic_info))  # repartition source topics
                s.skip_tags()
                sources[key] = read

            g.compact_array(subtopology)
            g.skip_tags()
        running: set[str] = set()

        def member(m: Reader) -> None:
            m.compact_string()  # member id
            m.int32()  # member epoch
            m.compact_string()  # instance id
            m.compact_string()  # rack id
            m.compact_string()  # client id
            m.compact_string()  # client host
            m.int32()  # topology epoch
            m.compact_string()  # process id
            if m.int8() >= 0:  # user endpoint
                m.compact_string()
                m.uint16()
                m.skip_tags()
            m.compact_array(_key_value)  # client tags
            m.compact_array(_task_offset)  # task offsets
            m.compact_array(_task_offset)  # task end offsets
            running.update(_assignment(m))  # (its active tasks' subtopologies)
            _assignment(m)  # target assignment
            m.boolean()  # is classic
            m.skip_tags()

        g.compact_array(member)
        g.int32()  # authorized operations
        g.skip_tags()
        return name, GroupReaders(frozenset(t for key in running for t in sources.get(key, ())), error)

    found = dict(r.compact_array(group))
    r.skip_tags()
    return found


def _name(r: Reader) -> str:
    return r.compact_string() or ""


def _topic_info(r: Reader) -> str:
    name = _name(r)
    r.int32()  # partitions
    r.int16()  # replication factor
    r.compact_array(_key_value)  # configs
    r.skip_tags()
    return name


def _key_value(r: Reader) -> None:
    r.compact_string()
    r.compact_string()
    r.skip_tags()


def _task_offset(r: Reader) -> None:
    r.compact_string()
    r.int32()
    r.int64()
    r.skip_tags()


def _assignment(r: Reader) -> set[str]:
    """An assignment's subtopologies with active tasks (standby and warm-up tasks read nothing of the sources)."""
    active: set[str] = set()

    def tasks(t: Reader) -> tuple[str, list[int]]:
        key, partitions = _name(t), t.compact_array(Reader.int32)
        t.skip_tags()
        return key, partitions

    active.update(key for key, partitions in r.compact_array(tasks) if partitions)
    r.compact_array(tasks)  # standby
    r.compact_array(tasks)  # warm-up
    r.skip_tags()
    return active
