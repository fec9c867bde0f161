"""Every topic's partitions (Metadata v12) and the configuration set on each topic (DescribeConfigs v4), read
by the topic and cluster passes each time they look; and the cluster-wide dynamic broker configs (DescribeConfigs
of the default broker resource, which librdkafka refuses to name).

librdkafka answers both, but as a Python object per config entry (about forty per topic, each with its
synonyms) and per replica: at thousands of topics that was most of a calm pass. Here the answers are read
straight from the bytes, keeping only what the passes use: each partition's leader, replicas and ISR, and of
the configs, those set on the topic itself and the effective min.insync.replicas. Synonyms and documentation
are not asked for.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from krafty.wire.codec import (
    ERROR_NAMES,
    KafkaProtocolError,
    Reader,
    Writer,
    check,
    reads_in_place,
    string_end,
    tags_end,
    varint_at,
)

METADATA = 3
DESCRIBE_CONFIGS = 32
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
DYNAMIC_TOPIC_CONFIG = 1  # a config's source: set on the topic itself
DYNAMIC_DEFAULT_BROKER_CONFIG = 3  # a config's source: set for every broker of the cluster
EVERY_SOURCE = -1  # (kept by _configs: the entries of every source, the values in effect)
UNKNOWN_TOPIC = 3
_MIN_ISR = b"min.insync.replicas"


class PartitionMetadata(NamedTuple):  # (a tuple: tens of thousands are made each pass)
    partition: int
    leader: int  # -1 when offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: str
    partitions: tuple[PartitionMetadata, ...]  # in order


@dataclass(frozen=True)
class TopicConfig:
    overrides: dict[str, str]  # the configs set on the topic itself
    min_isr: int  # the effective min.insync.replicas (the topic's own, or the brokers')


# -- Metadata v12 --------------------------------------------------------------------------------------------------

NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # (a topic asked for by name)


def encode_metadata(names: Sequence[str] | None = None) -> Writer:
    """These topics (None: every topic, a null list), none created by asking, no authorized operations."""
    def topic(w: Writer, name: str) -> None:
        w.uuid(NO_TOPIC_ID).compact_string(name).tags()

    return Writer().compact_array(None if names is None else list(names), topic).int8(0).int8(0).tags()


def _int32_array(data: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    size, pos = varint_at(data, pos)
    if size <= 1:
        return (), pos
    return struct.unpack_from(f">{size - 1}i", data, pos), pos + 4 * (size - 1)


def _partitions(data: bytes, pos: int) -> tuple[list[PartitionMetadata], int]:
    count, pos = varint_at(data, pos)
    out = []
    for _ in range(count - 1):
        _, index, leader, _ = struct.unpack_from(">hiii", data, pos)  # error, index, leader, leader epoch
        replicas, pos = _int32_array(data, pos + 14)
        isr, pos = _int32_array(data, pos)
        _, pos = _int32_array(data, pos)  # offline replicas
        pos = tags_end(data, pos)
        out.append(PartitionMetadata(index, leader, replicas, isr))
    return out, pos


@reads_in_place
def decode_metadata(r: Reader) -> dict[str, TopicMetadata]:
    """Each topic the broker knows (one being deleted, or not yet ready, is left out)."""
    r.int32()  # throttle time

    def broker(b: Reader) -> None:
        b.int32()
        b.compact_string()
        b.int32()
        b.compact_string()
        b.skip_tags()

    r.compact_array(broker)
    r.compact_string()  # cluster id
    r.int32()  # controller id
    out: dict[str, TopicMetadata] = {}
    data = r.data
    count, pos = varint_at(data, r.pos)
    for _ in range(count - 1):
        (code,) = struct.unpack_from(">h", data, pos)
        r.pos = pos + 2
        name, topic_id = r.compact_string(), r.uuid()
        partitions, pos = _partitions(data, r.pos + 1)  # (after is-internal)
        pos = tags_end(data, pos + 4)  # (after the authorized operations)
        if code == 0 and name is not None:
            out[name] = TopicMetadata(topic_id, tuple(sorted(partitions)))
    r.pos = tags_end(data, pos)
    return out


# -- DescribeConfigs v4 --------------------------------------------------------------------------------------------

def _encode_describe_configs(resource_type: int, names: Sequence[str], keys: Sequence[str] | None = None) -> Writer:
    """The configs `keys` (None: every one) of each resource, without synonyms or documentation."""
    def resource(w: Writer, name: str) -> None:
        w.int8(resource_type).compact_string(name)
        w.compact_array(None if keys is None else list(keys), Writer.compact_string).tags()

    return Writer().compact_array(list(names), resource).int8(0).int8(0).tags()


def encode_describe_topic_configs(topics: Sequence[str], keys: Sequence[str] | None = None) -> Writer:
    return _encode_describe_configs(TOPIC_RESOURCE, topics, keys)


def encode_describe_cluster_defaults() -> Writer:
    """The default broker resource (the name ""): what is set for every broker at once."""
    return _encode_describe_configs(BROKER_RESOURCE, [""])


def _configs(data: bytes, pos: int, kept: int = DYNAMIC_TOPIC_CONFIG) -> tuple[TopicConfig, int]:
    """One resource's config entries: those whose source is `kept` (for a topic, those set on the topic itself;
    EVERY_SOURCE: all) and min.insync.replicas are kept, the rest skipped (most of the answer: this loop is the
    pass's cost at thousands of topics, so a length under 128, one varint byte, is read in line, and a name is only
    compared where it matters)."""
    count, pos = varint_at(data, pos)
    overrides: dict[str, str] = {}
    min_isr = 1
    for _ in range(count - 1):
        size = data[pos]
        if size & 0x80:
            size, name_at = varint_at(data, pos)
        else:
            name_at = pos + 1
        pos = name_end = name_at + size - 1
        size = data[pos]
        if size & 0x80:
            size, value_at = varint_at(data, pos)
        else:
            value_at = pos + 1
        pos = value_end = value_at + max(size - 1, 0)  # (size 0: null)
        source = data[pos + 1]  # (after read-only)
        pos += 3  # read-only, source, sensitive
        if data[pos] == 1 and data[pos + 2] == 0 and data[pos + 3] == 0:  # no synonyms, a type, no documentation,
            pos += 4  # no tagged fields: the usual entry
        else:
            pos = _skip_rest(data, pos)
        if not size:
            continue
        if kept in (source, EVERY_SOURCE):
            overrides[data[name_at:name_end].decode()] = data[value_at:value_end].decode()
        if name_end - name_at == len(_MIN_ISR) and data.startswith(_MIN_ISR, name_at):
            min_isr = int(data[value_at:value_end])
    return TopicConfig(overrides, min_isr), pos


def _skip_rest(data: bytes, pos: int) -> int:
    """An entry's synonyms (none asked for; skipped if a broker sends them anyway), type, documentation and
    tagged fields."""
    synonyms, pos = varint_at(data, pos)
    for _ in range(synonyms - 1):
        pos = string_end(data, pos)
        pos = string_end(data, pos)
        pos = tags_end(data, pos + 1)
    return tags_end(data, string_end(data, pos + 1))


@reads_in_place
def _decode_describe_configs(r: Reader, kept: int, ignored: int | None) -> dict[str, TopicConfig]:
    """Each resource's configuration; an error other than `ignored` is raised, a resource with it left out."""
    data = r.data
    pos = r.pos + 4  # throttle time
    count, pos = varint_at(data, pos)
    out: dict[str, TopicConfig] = {}
    for _ in range(count - 1):
        (code,) = struct.unpack_from(">h", data, pos)
        r.pos = pos + 2
        message = r.compact_string()
        r.int8()  # resource type
        name = r.compact_string() or ""
        config, pos = _configs(data, r.pos, kept)
        pos = tags_end(data, pos)
        if code == 0:
            out[name] = config
        elif code != ignored:
            check(f"DescribeConfigs of {name or 'the cluster defaults'}", code, message or ERROR_NAMES.get(code))
    r.pos = tags_end(data, pos)
    return out


def decode_describe_topic_configs(r: Reader) -> dict[str, TopicConfig]:
    """Each topic's configuration; a topic the broker does not know (just created, or deleted) is left out,
    any other error is raised."""
    return _decode_describe_configs(r, DYNAMIC_TOPIC_CONFIG, UNKNOWN_TOPIC)


def decode_describe_topic_values(r: Reader) -> dict[str, dict[str, str]]:
    """Each topic's values in effect of the configs asked for (set on the topic, for the brokers, or Kafka's
    defaults); a topic the broker does not know is left out, any other error is raised."""
    return {name: config.overrides for name, config in _decode_describe_configs(r, EVERY_SOURCE, UNKNOWN_TOPIC).items()}


def decode_describe_cluster_defaults(r: Reader) -> dict[str, str]:
    """The configs set for every broker at once (their names and values); any error is raised."""
    found = _decode_describe_configs(r, DYNAMIC_DEFAULT_BROKER_CONFIG, None).get("")
    if found is None:
        raise KafkaProtocolError("DescribeConfigs", -1, "the answer leaves out the cluster defaults")
    return found.overrides
