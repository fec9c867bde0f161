"""The Kafka wire format's building blocks: values, framing, headers and error codes."""

from __future__ import annotations

import base64
import functools
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

T = TypeVar("T")

# The error codes the operator names in what it reports or acts on; the rest are reported by number and message.
ERROR_NAMES = {
    0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
    8: "BROKER_NOT_AVAILABLE", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR", 17: "INVALID_TOPIC_EXCEPTION", 29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED", 36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR", 39: "INVALID_REPLICA_ASSIGNMENT",
    40: "INVALID_CONFIG", 41: "NOT_CONTROLLER", 42: "INVALID_REQUEST", 44: "POLICY_VIOLATION",
    54: "SECURITY_DISABLED", 56: "KAFKA_STORAGE_ERROR", 60: "REASSIGNMENT_IN_PROGRESS", 69: "GROUP_ID_NOT_FOUND",
    80: "PREFERRED_LEADER_NOT_AVAILABLE", 83: "ELIGIBLE_LEADERS_NOT_AVAILABLE", 84: "ELECTION_NOT_NEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS", 89: "THROTTLING_QUOTA_EXCEEDED", 94: "INCONSISTENT_VOTER_SET",
    95: "INVALID_UPDATE_VERSION", 96: "FEATURE_UPDATE_FAILED", 102: "BROKER_ID_NOT_REGISTERED",
    104: "INCONSISTENT_CLUSTER_ID", 125: "INVALID_VOTER_KEY", 126: "DUPLICATE_VOTER", 127: "VOTER_NOT_FOUND",
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

    def uint16(self, v: int) -> Writer:
        self.parts.append(struct.pack(">H", v))
        return self

    def int32(self, v: int) -> Writer:
        self.parts.append(struct.pack(">i", v))
        return self

    def int64(self, v: int) -> Writer:
        self.parts.append(struct.pack(">q", v))
        return self

    def float64(self, v: float) -> Writer:
        self.parts.append(struct.pack(">d", v))
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

    def compact_bytes(self, v: bytes) -> Writer:
        self.uvarint(len(v) + 1)
        self.parts.append(v)
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


# A varint carries at most 64 bits in 10 bytes: a longer one (a broken answer's run of continuation bytes) is
# refused, not summed into an ever larger number
MAX_VARINT_SHIFT = 63


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"truncated message: need {n} bytes at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def boolean(self) -> bool:
        return self.int8() != 0

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def uint16(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def float64(self) -> float:
        return float(struct.unpack(">d", self.take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > MAX_VARINT_SHIFT:
                raise ValueError(f"a varint longer than 10 bytes at {self.pos}")

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def uuid(self) -> str:
        return uuid_to_kafka(self.take(16))

    def compact_array(self, read: Callable[[Reader], T]) -> list[T]:
        n = self.uvarint()
        return [] if n == 0 else [read(self) for _ in range(n - 1)]

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


# -- reading in place, for the long answers whose most entries are skipped (a call per field costs more) --------

P = ParamSpec("P")
R = TypeVar("R")


def reads_in_place(decode: Callable[P, R]) -> Callable[P, R]:
    """For a decoder that reads its answer by position: a read past the end (struct's or an index's error) is a
    truncated message, refused as Reader.take refuses one."""

    @functools.wraps(decode)
    def read(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return decode(*args, **kwargs)
        except (struct.error, IndexError) as error:
            raise ValueError(f"truncated message: {error}") from error

    return read


def varint_at(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at `pos`: its value and the position after it (most are one byte: read first)."""
    try:
        byte = data[pos]
        if byte < 0x80:
            return byte, pos + 1
        value, shift = byte & 0x7F, 7
        while True:
            pos += 1
            byte = data[pos]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value, pos + 1
            shift += 7
            if shift > MAX_VARINT_SHIFT:
                raise ValueError(f"a varint longer than 10 bytes at {pos}")
    except IndexError:
        raise ValueError(f"truncated message: a varint at {pos} of {len(data)}") from None


def tags_end(data: bytes, pos: int) -> int:
    """The position after the tagged fields at `pos`."""
    count, pos = varint_at(data, pos)
    for _ in range(count):
        _, pos = varint_at(data, pos)
        size, pos = varint_at(data, pos)
        pos += size
    return pos


def string_end(data: bytes, pos: int) -> int:
    """The position after the compact (nullable) string at `pos`."""
    size, pos = varint_at(data, pos)
    return pos + max(size - 1, 0)


def request_header(api_key: int, version: int, correlation_id: int, client_id: str) -> Writer:
    """Request header v2 (flexible): the client id keeps its two-byte length."""
    return Writer().int16(api_key).int16(version).int32(correlation_id).legacy_nullable_string(client_id).tags()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def read_response_header(reader: Reader, flexible: bool = True) -> int:
    """Response header v1 (flexible), or v0 (ApiVersions answers with it at every version); returns the
    correlation id."""
    correlation_id = reader.int32()
    if flexible:
        reader.skip_tags()
    return correlation_id


def check(api: str, code: int, message: str | None) -> None:
    if code:
        raise KafkaProtocolError(api, code, message)


def error_text(code: int, message: str | None = None) -> str | None:
    """One item's error as the operator reports it (None: no error)."""
    if not code:
        return None
    return f"{ERROR_NAMES.get(code, f'error {code}')}" + (f": {message}" if message else "")


# Errors of one item of a request that say the request itself went unanswered (a broker that could not reach the
# controller in time, or no longer the one to ask): REQUEST_TIMED_OUT, NOT_CONTROLLER
NOT_ANSWERED = frozenset({7, 41})


def item_error(api: str, code: int, message: str | None) -> str | None:
    """One item's error, for a request whose items Kafka accepts or refuses one by one; an error that says the
    request was not answered raises for the whole request (it says nothing of the item)."""
    if code in NOT_ANSWERED:
        raise KafkaProtocolError(api, code, message)
    return error_text(code, message)


def random_kafka_uuid(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A new cluster or directory id, as Kafka makes them: never one of the reserved ids (the lowest
    ones), and never starting with "-", which Kafka's tools would read as an option."""
    while True:
        raw = random_bytes()
        text = uuid_to_kafka(raw)
        if any(raw[:15]) and not text.startswith("-"):
            return text
