"""Kafka wire format for the KRaft admin requests no Python client offers.

confluent-kafka covers topics, configs, groups, offsets and leader election;
it has no DescribeQuorum, RemoveRaftVoter, UnregisterBroker or partition
reassignment calls. These are small flexible-version messages, encoded here
as pure functions from typed values to bytes and back, and sent by
krafty.clients.kraft. Field order follows Kafka's message definitions
(clients/src/main/resources/common/message/*.json).
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

DESCRIBE_QUORUM = 55
UNREGISTER_BROKER = 64
REMOVE_RAFT_VOTER = 81
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
INCREMENTAL_ALTER_CONFIGS = 44
BROKER_RESOURCE = 4
SET, DELETE = 0, 1

METADATA_TOPIC = "__cluster_metadata"

# The few error codes this module's callers act on; the rest are reported by number and message.
ERROR_NAMES = {
    0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
    8: "BROKER_NOT_AVAILABLE",
    38: "INVALID_REPLICATION_FACTOR", 39: "INVALID_REPLICA_ASSIGNMENT", 41: "NOT_CONTROLLER",
    40: "INVALID_CONFIG", 42: "INVALID_REQUEST", 60: "REASSIGNMENT_IN_PROGRESS", 85: "NO_REASSIGNMENT_IN_PROGRESS",
    94: "INCONSISTENT_VOTER_SET", 102: "BROKER_ID_NOT_REGISTERED", 104: "INCONSISTENT_CLUSTER_ID",
    125: "INVALID_VOTER_KEY", 126: "DUPLICATE_VOTER", 127: "VOTER_NOT_FOUND",
}


class KafkaProtocolError(RuntimeError):
    def __init__(self, api: str, code: int, message: str | None) -> None:
        self.code = code
        self.error_name = ERROR_NAMES.get(code, f"error {code}")
        super().__init__(f"{api}: {self.error_name}" + (f": {message}" if message else ""))


def uuid_from_kafka(text: str) -> bytes:
    """Kafka's Uuid string form (22 base64url chars) to its 16 bytes."""
    return base64.urlsafe_b64decode(text + "==")


def uuid_to_kafka(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int8(self, v: int) -> Writer:
        self.parts.append(struct.pack(">b", v))
        return self

    def int16(self, v: int) -> Writer:
        self.parts.append(struct.pack(">h", v))
        return self

    def int32(self, v: int) -> Writer:
        self.parts.append(struct.pack(">i", v))
        return self

    def uvarint(self, v: int) -> Writer:
        out = bytearray()
        while True:
            byte = v & 0x7F
            v >>= 7
            if v:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                break
        self.parts.append(bytes(out))
        return self

    def legacy_nullable_string(self, v: str | None) -> Writer:
        if v is None:
            return self.int16(-1)
        raw = v.encode()
        self.int16(len(raw))
        self.parts.append(raw)
        return self

    def compact_string(self, v: str | None) -> Writer:
        if v is None:
            return self.uvarint(0)
        raw = v.encode()
        self.uvarint(len(raw) + 1)
        self.parts.append(raw)
        return self

    def uuid(self, kafka_uuid: str) -> Writer:
        self.parts.append(uuid_from_kafka(kafka_uuid))
        return self

    def compact_array(self, items: Sequence[T] | None, write: Callable[[Writer, T], object]) -> Writer:
        if items is None:
            return self.uvarint(0)
        self.uvarint(len(items) + 1)
        for item in items:
            write(self, item)
        return self

    def tags(self) -> Writer:
        return self.uvarint(0)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"truncated message: need {n} bytes at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def uint16(self) -> int:
        return int(struct.unpack(">H", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def uuid(self) -> str:
        return uuid_to_kafka(self._take(16))

    def compact_array(self, read: Callable[[Reader], T]) -> list[T]:
        n = self.uvarint()
        return [] if n == 0 else [read(self) for _ in range(n - 1)]

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def request_header(api_key: int, version: int, correlation_id: int, client_id: str) -> Writer:
    """Request header v2 (flexible): the client id keeps its two-byte length."""
    return Writer().int16(api_key).int16(version).int32(correlation_id).legacy_nullable_string(client_id).tags()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def read_response_header(reader: Reader) -> int:
    """Response header v1 (flexible); returns the correlation id."""
    correlation_id = reader.int32()
    reader.skip_tags()
    return correlation_id


def _check(api: str, code: int, message: str | None) -> None:
    if code:
        raise KafkaProtocolError(api, code, message)


# -- DescribeQuorum v2 ----------------------------------------------------------

@dataclass(frozen=True)
class ReplicaState:
    node_id: int
    directory_id: str
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True)
class Quorum:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]
    endpoints: dict[int, tuple[str, int]]

    def lag(self, replica: ReplicaState) -> int:
        """Offsets the replica is behind the leader's high watermark (0 when caught up)."""
        return max(0, self.high_watermark - replica.log_end_offset) if replica.log_end_offset >= 0 else -1

    def voter_ids(self) -> set[int]:
        return {v.node_id for v in self.voters}


def encode_describe_quorum() -> Writer:
    def partition(w: Writer, index: int) -> None:
        w.int32(index).tags()

    def topic(w: Writer, name: str) -> None:
        w.compact_string(name).compact_array([0], partition).tags()

    return Writer().compact_array([METADATA_TOPIC], topic).tags()


def _replica_state(r: Reader) -> ReplicaState:
    state = ReplicaState(r.int32(), r.uuid(), r.int64(), r.int64(), r.int64())
    r.skip_tags()
    return state


def decode_describe_quorum(r: Reader) -> Quorum:
    _check("DescribeQuorum", r.int16(), r.compact_string())
    partitions: list[tuple[int, int, int, list[ReplicaState], list[ReplicaState]]] = []

    def partition(p: Reader) -> None:
        p.int32()
        _check("DescribeQuorum partition", p.int16(), p.compact_string())
        leader, epoch, high_watermark = p.int32(), p.int32(), p.int64()
        voters = p.compact_array(_replica_state)
        observers = p.compact_array(_replica_state)
        p.skip_tags()
        partitions.append((leader, epoch, high_watermark, voters, observers))

    def topic(t: Reader) -> None:
        t.compact_string()
        t.compact_array(partition)
        t.skip_tags()

    r.compact_array(topic)
    endpoints: dict[int, tuple[str, int]] = {}

    def listener(lr: Reader) -> tuple[str, int]:
        lr.compact_string()
        host, port = lr.compact_string() or "", lr.uint16()
        lr.skip_tags()
        return host, port

    def node(n: Reader) -> None:
        node_id = n.int32()
        listeners = n.compact_array(listener)
        n.skip_tags()
        if listeners:
            endpoints[node_id] = listeners[0]

    r.compact_array(node)
    r.skip_tags()
    if len(partitions) != 1:
        raise ValueError(f"DescribeQuorum returned {len(partitions)} partitions for {METADATA_TOPIC}")
    leader, epoch, high_watermark, voters, observers = partitions[0]
    return Quorum(leader, epoch, high_watermark, tuple(voters), tuple(observers), endpoints)


# -- RemoveRaftVoter v0, UnregisterBroker v0 -------------------------------------

def encode_remove_raft_voter(cluster_id: str | None, voter_id: int, directory_id: str) -> Writer:
    return Writer().compact_string(cluster_id).int32(voter_id).uuid(directory_id).tags()


def encode_unregister_broker(broker_id: int) -> Writer:
    return Writer().int32(broker_id).tags()


def decode_simple(api: str) -> Callable[[Reader], None]:
    """Responses of throttle time, error code and error message only."""
    def decode(r: Reader) -> None:
        r.int32()
        _check(api, r.int16(), r.compact_string())
        r.skip_tags()
    return decode


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
    _check("AlterPartitionReassignments", r.int16(), r.compact_string())
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
    _check("ListPartitionReassignments", r.int16(), r.compact_string())
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
        x._take(1)
        x.compact_string()
        x.skip_tags()
        _check("IncrementalAlterConfigs", code, message)

    r.compact_array(response)
    r.skip_tags()


def random_kafka_uuid(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A new cluster or directory id, as Kafka makes them: never one of the reserved ids (the lowest
    ones), and never starting with "-", which Kafka's tools would read as an option."""
    while True:
        raw = random_bytes()
        text = uuid_to_kafka(raw)
        if any(raw[:15]) and not text.startswith("-"):
            return text
