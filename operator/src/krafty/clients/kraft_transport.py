"""How a request of the KRaft wire client (krafty.clients.kraft) reaches a server, over a TCP or TLS connection.

Each call tries the given servers in turn (brokers forward these requests to
the active controller; controllers answer them directly), and each address a
server's name resolves to (a headless Service answers with one per pod), and
returns the first answer that is not "ask someone else". Addresses that failed
in the last minute are tried last: a node that accepts connections but never
answers (frozen, or stuck on its disk) costs one timeout, not one per call.
A server's name is resolved again whenever a new connection is made, so a
restarted node's new address is the one used; when no server answers,
KafkaUnavailable says why for each.

A connection is kept after its answer and used by the next call to the same
server (name, port and TLS identity) within KEEP_SECONDS, without resolving its
name again: while the passes keep asking, a server costs the operator and itself
one TLS handshake and one name lookup, not one per request. A kept connection
the server closed meanwhile is replaced by a new one; one that times out counts
as that address failing.
"""

from __future__ import annotations

import itertools
import logging
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from krafty import wire
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable
from krafty.telemetry import metrics

T = TypeVar("T")

_RETRIABLE = {6, 7, 8, 41}  # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, BROKER_NOT_AVAILABLE, NOT_CONTROLLER
_correlation = itertools.count(1)
CLIENT_ID = "krafty-operator"
log = logging.getLogger(__name__)
# Where a request goes: a Connection (with TLS when the cluster has it), or plain host:port,... addresses.
Target = Connection | str
# An address that failed this recently is tried after the others (seconds).
FAILED_RECENTLY_S = 60.0
# The largest answer read (a Metadata answer of 20,000 partitions is about 2 MiB, a DescribeConfigs batch of
# CONFIG_BATCH topics as much): a longer frame, a broken or hostile server's, fails the call before any of it is
# read, well below the operator's memory limit
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
KEEP_SECONDS = 60.0  # brokers close a client's idle connection after 10 minutes (connections.max.idle.ms)
_failed_at: dict[tuple[str, int], float] = {}  # address -> when it last failed (time.monotonic())
_failed_lock = threading.Lock()  # passes of several clusters call at once


def _addresses(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad server address {item!r}: want host:port")
        out.append((host, int(port)))
    return out


def _resolved(host: str, port: int) -> list[tuple[str, int]]:
    """Every address `host` resolves to, those that failed in the last minute last."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys((str(info[4][0]), int(info[4][1])) for info in infos))
    now = time.monotonic()
    with _failed_lock:
        failed = {a for a, at in _failed_at.items() if now - at < FAILED_RECENTLY_S}
    return sorted(addresses, key=lambda a: a in failed)


def _failed(address: tuple[str, int]) -> None:
    """Remembers a failure for a minute (older ones are forgotten: pods come and go with new addresses)."""
    now = time.monotonic()
    with _failed_lock:
        for stale in [a for a, at in _failed_at.items() if now - at >= FAILED_RECENTLY_S]:
            del _failed_at[stale]
        _failed_at[address] = now


class _Kept:
    """Connections between calls, per (server name, port, TLS context), each used by one call at a time."""

    PER_SERVER = 4  # kept at most, per key: the passes that called it at once

    def __init__(self, keep_seconds: float = KEEP_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._keep_seconds = keep_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._idle: dict[tuple[object, ...], list[tuple[socket.socket, float]]] = {}

    def take(self, key: tuple[object, ...]) -> socket.socket | None:
        """A kept connection the server has not closed, or None."""
        with self._lock:
            stale = self._expired(self._clock())
            kept = self._idle.get(key, [])
            sock = kept.pop()[0] if kept else None
        for old in stale:
            old.close()
        if sock is not None and select.select([sock], [], [], 0)[0]:  # readable while idle: closed (or junk)
            sock.close()
            return None
        return sock

    def give(self, key: tuple[object, ...], sock: socket.socket) -> None:
        with self._lock:
            kept = self._idle.setdefault(key, [])
            if len(kept) < self.PER_SERVER:
                kept.append((sock, self._clock()))
                return
        sock.close()

    def _expired(self, now: float) -> list[socket.socket]:
        stale = []
        for key in list(self._idle):
            fresh = [(sock, at) for sock, at in self._idle[key] if now - at < self._keep_seconds]
            stale += [sock for sock, at in self._idle[key] if now - at >= self._keep_seconds]
            if fresh:
                self._idle[key] = fresh
            else:
                del self._idle[key]
        return stale

    def close_all(self) -> None:
        with self._lock:
            kept = [sock for idle in self._idle.values() for sock, _ in idle]
            self._idle.clear()
        for sock in kept:
            sock.close()


_kept = _Kept()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            raise ConnectionError("connection closed by the server")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _connect(address: tuple[str, int], host: str, timeout: float, tls: ssl.SSLContext | None) -> socket.socket:
    raw = socket.create_connection(address, timeout=timeout)
    try:
        return tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
    except BaseException:
        raw.close()
        raise


def _answer(sock: socket.socket, key: tuple[object, ...], address: tuple[str, int], api_key: int, version: int,
            body: bytes, timeout: float) -> wire.Reader:
    """Sends the request on `sock` and reads its answer; the connection is kept only after a whole answer."""
    correlation_id = next(_correlation)
    header = wire.request_header(api_key, version, correlation_id, CLIENT_ID).bytes()
    try:
        sock.settimeout(timeout)
        sock.sendall(wire.frame(header + body))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise ConnectionError(f"an answer of {size:,} bytes, over the {MAX_RESPONSE_BYTES:,} read")
        reader = wire.Reader(_recv_exact(sock, size))
    except BaseException:
        sock.close()
        raise
    if wire.read_response_header(reader, flexible=api_key != wire.API_VERSIONS) != correlation_id:
        sock.close()
        raise ConnectionError(f"{address}: response does not match the request")
    _kept.give(key, sock)
    return reader


def _connections(host: str, port: int, tls: ssl.SSLContext | None, asked: set[tuple[str, int]],
                 errors: list[str]) -> Iterator[tuple[tuple[str, int], socket.socket | None]]:
    """Where to ask a server: the connection kept to it, if any (its name is not resolved again while one is),
    then each address its name resolves to (those that failed in the last minute last, those `asked` in this call
    left out), to be connected to."""
    kept = _kept.take((host, port, tls))
    if kept is not None:
        try:
            peer = kept.getpeername()
        except OSError:  # no longer connected
            kept.close()
        else:
            yield (str(peer[0]), int(peer[1])), kept
    try:
        addresses = _resolved(host, port)
    except OSError as error:
        errors.append(f"{host}:{port}: {error}")
        return
    yield from ((address, None) for address in addresses if address not in asked)


def call(target: Target, api_key: int, version: int, body: wire.Writer,
         decode: Callable[[wire.Reader], T], timeout: float = 10.0) -> T:
    errors: list[str] = []
    metrics.KAFKA_REQUESTS.labels(wire_name(api_key)).inc()
    connection = Connection(target) if isinstance(target, str) else target
    tls = connection.ssl_context()
    request = body.bytes()
    for host, port in _addresses(connection.servers):
        asked: set[tuple[str, int]] = set()
        for address, kept in _connections(host, port, tls, asked, errors):
            where = f"{host}:{port}" + (f" ({address[0]})" if address[0] != host else "")
            try:
                sock = kept if kept is not None else _connect(address, host, timeout, tls)
                return decode(_answer(sock, (host, port, tls), address, api_key, version, request, timeout))
            except wire.KafkaProtocolError as error:
                if error.code not in _RETRIABLE:
                    raise
                errors.append(f"{where}: {error.error_name}")
            except ValueError as error:  # a truncated or overlong field, text that is not UTF-8
                errors.append(f"{where}: a malformed answer ({error})")
            except OSError as error:
                if kept is not None and not isinstance(error, TimeoutError):
                    continue  # closed by the server meanwhile (a restart, its idle timeout): ask it anew
                _failed(address)
                errors.append(f"{where}: {error}")
            asked.add(address)
    raise KafkaUnavailable(f"{wire_name(api_key)}: no server answered: " + "; ".join(errors))


def wire_name(api_key: int) -> str:
    return _NAMES.get(api_key, f"request {api_key}")


_NAMES = {wire.DESCRIBE_QUORUM: "DescribeQuorum", wire.DESCRIBE_CLUSTER: "DescribeCluster",
          wire.ADD_RAFT_VOTER: "AddRaftVoter",
          wire.REMOVE_RAFT_VOTER: "RemoveRaftVoter", wire.UNREGISTER_BROKER: "UnregisterBroker",
          wire.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
          wire.LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments",
          wire.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs", wire.ELECT_LEADERS: "ElectLeaders",
          wire.DESCRIBE_CLIENT_QUOTAS: "DescribeClientQuotas", wire.ALTER_CLIENT_QUOTAS: "AlterClientQuotas",
          wire.FIND_COORDINATOR: "FindCoordinator", wire.OFFSET_FETCH: "OffsetFetch", wire.LIST_GROUPS: "ListGroups",
          wire.DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
          wire.SHARE_GROUP_DESCRIBE: "ShareGroupDescribe", wire.STREAMS_GROUP_DESCRIBE: "StreamsGroupDescribe",
          wire.DESCRIBE_TOPIC_PARTITIONS: "DescribeTopicPartitions",
          wire.API_VERSIONS: "ApiVersions", wire.UPDATE_FEATURES: "UpdateFeatures",
          wire.DESCRIBE_LOG_DIRS: "DescribeLogDirs", wire.METADATA: "Metadata",
          wire.DESCRIBE_CONFIGS: "DescribeConfigs", wire.CREATE_TOPICS: "CreateTopics",
          wire.CREATE_PARTITIONS: "CreatePartitions", wire.DELETE_TOPICS: "DeleteTopics",
          wire.DESCRIBE_ACLS: "DescribeAcls", wire.CREATE_ACLS: "CreateAcls", wire.DELETE_ACLS: "DeleteAcls",
          wire.DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
          wire.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials", wire.LIST_OFFSETS: "ListOffsets"}


def listening(address: str, timeout: float = 2.0) -> bool | None:
    """Whether a server listens at host:port: True when a connection opens, False when it is refused (nothing
    listens there), None when that cannot be told (the name does not resolve, no answer in time)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return None
