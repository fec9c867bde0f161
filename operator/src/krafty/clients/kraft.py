"""Admin requests no Python client has, over a TCP or TLS connection (see krafty.wire).

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
          wire.API_VERSIONS: "ApiVersions", wire.UPDATE_FEATURES: "UpdateFeatures",
          wire.DESCRIBE_LOG_DIRS: "DescribeLogDirs", wire.METADATA: "Metadata",
          wire.DESCRIBE_CONFIGS: "DescribeConfigs", wire.CREATE_TOPICS: "CreateTopics",
          wire.CREATE_PARTITIONS: "CreatePartitions", wire.DELETE_TOPICS: "DeleteTopics",
          wire.DESCRIBE_ACLS: "DescribeAcls", wire.CREATE_ACLS: "CreateAcls", wire.DELETE_ACLS: "DeleteAcls",
          wire.DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
          wire.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials", wire.LIST_OFFSETS: "ListOffsets"}
CONFIG_BATCH = 1000  # topics per DescribeConfigs request (an answer of about 2 MiB)


def describe_brokers(servers: Target, timeout: float = 10.0) -> tuple[wire.Broker, ...]:
    """Every registered broker, fenced ones too (sent to brokers: the bootstrap address)."""
    return call(servers, wire.DESCRIBE_CLUSTER, 2, wire.encode_describe_cluster(), wire.decode_describe_cluster,
                timeout)


def log_dirs(broker: Target, timeout: float = 10.0) -> tuple[wire.LogDir, ...]:
    """The log directories of the broker asked (each broker answers for its own), with their volumes' sizes."""
    return call(broker, wire.DESCRIBE_LOG_DIRS, 4, wire.encode_describe_log_dirs(), wire.decode_describe_log_dirs,
                timeout)


def topic_metadata(brokers: Target, timeout: float = 30.0, names: Sequence[str] | None = None
                   ) -> dict[str, wire.TopicMetadata]:
    """Each topic's id and partitions (leader, replicas, ISR), as the broker asked knows them: every topic, or only
    those of `names` that exist."""
    return call(brokers, wire.METADATA, 12, wire.encode_metadata(names), wire.decode_metadata, timeout)


def topic_configs(brokers: Target, topics: Sequence[str], timeout: float = 30.0,
                  keys: Sequence[str] | None = None) -> dict[str, wire.TopicConfig]:
    """The configs set on each topic (of `keys` only, when given) and its effective min.insync.replicas (asked
    for among `keys`); a topic not known (yet) is left out."""
    return _describe_topics(brokers, topics, keys, wire.decode_describe_topic_configs, timeout)


def topic_config_values(brokers: Target, topics: Sequence[str], keys: Sequence[str], timeout: float = 15.0
                        ) -> dict[str, dict[str, str]]:
    """The values in effect of `keys` for each topic (set on it, for the brokers, or Kafka's defaults); a topic not
    known is left out."""
    return _describe_topics(brokers, topics, keys, wire.decode_describe_topic_values, timeout)


def _describe_topics(brokers: Target, topics: Sequence[str], keys: Sequence[str] | None,
                     decode: Callable[[wire.Reader], Mapping[str, T]], timeout: float) -> dict[str, T]:
    out: dict[str, T] = {}
    for start in range(0, len(topics), CONFIG_BATCH):
        body = wire.encode_describe_topic_configs(topics[start:start + CONFIG_BATCH], keys)
        out.update(call(brokers, wire.DESCRIBE_CONFIGS, 4, body, decode, timeout))
    return out


def cluster_defaults(brokers: Target, timeout: float = 15.0) -> dict[str, str]:
    """The dynamic broker configs set for every broker at once."""
    return call(brokers, wire.DESCRIBE_CONFIGS, 4, wire.encode_describe_cluster_defaults(),
                wire.decode_describe_cluster_defaults, timeout)


def describe_quorum(servers: Target, timeout: float = 10.0) -> wire.Quorum:
    return call(servers, wire.DESCRIBE_QUORUM, 2, wire.encode_describe_quorum(), wire.decode_describe_quorum, timeout)


def add_voter(servers: Target, cluster_id: str | None, voter_id: int, directory_id: str, host: str, port: int,
              listener: str, timeout: float = 30.0) -> None:
    """Makes a controller that runs as an observer a voter (KIP-853), once it has caught up."""
    body = wire.encode_add_raft_voter(cluster_id, voter_id, directory_id, [(listener, host, port)],
                                      int(timeout * 1000))
    call(servers, wire.ADD_RAFT_VOTER, 0, body, wire.decode_simple("AddRaftVoter"), timeout + 5)


def remove_voter(servers: Target, cluster_id: str | None, voter_id: int, directory_id: str,
                 timeout: float = 30.0) -> None:
    call(servers, wire.REMOVE_RAFT_VOTER, 0, wire.encode_remove_raft_voter(cluster_id, voter_id, directory_id),
         wire.decode_simple("RemoveRaftVoter"), timeout)


def unregister_broker(servers: Target, broker_id: int, timeout: float = 30.0) -> None:
    call(servers, wire.UNREGISTER_BROKER, 0, wire.encode_unregister_broker(broker_id),
         wire.decode_simple("UnregisterBroker"), timeout)


def alter_reassignments(servers: Target, targets: Mapping[wire.TopicPartition, list[int] | None],
                        timeout: float = 30.0) -> dict[wire.TopicPartition, str]:
    body = wire.encode_alter_reassignments(targets, int(timeout * 1000))
    return call(servers, wire.ALTER_PARTITION_REASSIGNMENTS, 0, body, wire.decode_alter_reassignments, timeout + 5)


def list_reassignments(servers: Target, timeout: float = 30.0) -> dict[wire.TopicPartition, wire.OngoingReassignment]:
    body = wire.encode_list_reassignments(int(timeout * 1000))
    return call(servers, wire.LIST_PARTITION_REASSIGNMENTS, 0, body, wire.decode_list_reassignments, timeout + 5)


def alter_cluster_defaults(servers: Target, changes: dict[str, str | None], timeout: float = 30.0) -> None:
    """Sets (or with None deletes) cluster-wide dynamic broker settings: the default broker resource ""."""
    if changes:
        call(servers, wire.INCREMENTAL_ALTER_CONFIGS, 1, wire.encode_alter_cluster_defaults(changes),
             wire.decode_alter_configs, timeout)


def alter_topic_configs(servers: Target, changes: Mapping[str, Mapping[str, str | None]], validate_only: bool,
                        timeout: float = 30.0) -> dict[str, str | None]:
    """Sets (None: deletes) configs of many topics in one request; Kafka's refusal per topic (None: done)."""
    if not changes:
        return {}
    return call(servers, wire.INCREMENTAL_ALTER_CONFIGS, 1, wire.encode_alter_topic_configs(changes, validate_only),
                wire.decode_alter_config_errors, timeout)


def create_topics(servers: Target, topics: Sequence[wire.NewTopic], validate_only: bool = False,
                  timeout: float = 30.0) -> dict[str, str | None]:
    """Creates (or only validates) topics in one request; Kafka's refusal per topic (None: done)."""
    if not topics:
        return {}
    return call(servers, wire.CREATE_TOPICS, 7, wire.encode_create_topics(topics, int(timeout * 1000), validate_only),
                wire.decode_create_topics, timeout + 5)


def create_partitions(servers: Target, totals: Mapping[str, int], placed: Mapping[str, Sequence[Sequence[int]]],
                      validate_only: bool = False, timeout: float = 30.0) -> dict[str, str | None]:
    """Grows each topic to its total partitions (the new ones' replicas given for those in `placed`); Kafka's
    refusal per topic (None: done)."""
    if not totals:
        return {}
    body = wire.encode_create_partitions(totals, placed, int(timeout * 1000), validate_only)
    return call(servers, wire.CREATE_PARTITIONS, 3, body, wire.decode_create_partitions, timeout + 5)


def delete_topics(servers: Target, names: Sequence[str], timeout: float = 30.0) -> dict[str, str | None]:
    """Deletes topics in one request; Kafka's refusal per topic (None: done)."""
    if not names:
        return {}
    return call(servers, wire.DELETE_TOPICS, 5, wire.encode_delete_topics(names, int(timeout * 1000)),
                wire.decode_delete_topics, timeout + 5)


def elect_preferred(servers: Target, partitions: Iterable[wire.TopicPartition], timeout: float = 30.0
                    ) -> dict[wire.TopicPartition, str]:
    """Preferred-leader elections; the partitions whose election failed, with the error."""
    wanted = list(partitions)
    if not wanted:
        return {}
    return call(servers, wire.ELECT_LEADERS, 2, wire.encode_elect_preferred(wanted, int(timeout * 1000)),
                wire.decode_elect_leaders, timeout + 5)


def acls(servers: Target, timeout: float = 15.0) -> list[wire.AclEntry]:
    """Every ACL the cluster holds."""
    return call(servers, wire.DESCRIBE_ACLS, 3, wire.encode_describe_every_acl(), wire.decode_describe_acls, timeout)


def create_acls(servers: Target, entries: Sequence[wire.AclEntry], timeout: float = 15.0) -> list[str | None]:
    """Kafka's refusal of each ACL, in order (None: created)."""
    if not entries:
        return []
    return call(servers, wire.CREATE_ACLS, 3, wire.encode_create_acls(entries), wire.decode_create_acls, timeout)


def delete_acls(servers: Target, entries: Sequence[wire.AclEntry], timeout: float = 15.0) -> list[str | None]:
    """Kafka's refusal of each deletion, in order (None: deleted, or none held)."""
    if not entries:
        return []
    return call(servers, wire.DELETE_ACLS, 3, wire.encode_delete_acls(entries), wire.decode_delete_acls, timeout)


def scram_users(servers: Target, timeout: float = 15.0) -> dict[str, frozenset[int]]:
    """The SCRAM mechanisms each user has a credential for."""
    return call(servers, wire.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, wire.encode_describe_every_scram_user(),
                wire.decode_describe_scram_users, timeout)


def alter_scram(servers: Target, upserts: Sequence[wire.ScramUpsert], deletes: Sequence[str],
                timeout: float = 15.0) -> dict[str, str | None]:
    """Sets and removes SCRAM-SHA-512 credentials; Kafka's refusal per user (None: done)."""
    if not upserts and not deletes:
        return {}
    return call(servers, wire.ALTER_USER_SCRAM_CREDENTIALS, 0, wire.encode_alter_scram(upserts, deletes),
                wire.decode_alter_scram, timeout)


def user_quotas(servers: Target, timeout: float = 15.0) -> dict[str, dict[str, float]]:
    """The quotas Kafka holds per user name."""
    return call(servers, wire.DESCRIBE_CLIENT_QUOTAS, 1, wire.encode_describe_user_quotas(),
                wire.decode_describe_user_quotas, timeout)


def alter_user_quotas(servers: Target, changes: Mapping[str, Mapping[str, float | None]], validate_only: bool,
                      timeout: float = 15.0) -> dict[str, str]:
    """Sets (None: removes) quotas per user; returns Kafka's refusal per user."""
    if not changes:
        return {}
    return call(servers, wire.ALTER_CLIENT_QUOTAS, 1, wire.encode_alter_user_quotas(changes, validate_only),
                wire.decode_alter_user_quotas, timeout)


def finalized_features(servers: Target, timeout: float = 10.0) -> dict[str, int]:
    """The cluster's finalized feature levels (metadata.version among them), as a broker knows them."""
    return call(servers, wire.API_VERSIONS, 3, wire.encode_api_versions("krafty", "1"),
                wire.decode_finalized_features, timeout)


def upgrade_feature(servers: Target, feature: str, level: int, timeout: float = 30.0) -> None:
    """Raises a feature's finalized level (metadata.version after every node runs the new release)."""
    call(servers, wire.UPDATE_FEATURES, 1, wire.encode_upgrade_feature(feature, level, int(timeout * 1000)),
         wire.decode_update_features, timeout + 5)


def group_ids(servers: Target, timeout: float = 10.0) -> set[str]:
    """The consumer groups of the cluster: each broker asked for those it coordinates. A broker that does not
    answer leaves its groups out (they come back with it); none answering raises KafkaUnavailable."""
    connection = Connection(servers) if isinstance(servers, str) else servers
    found: set[str] = set()
    answered, errors = 0, []
    for broker in (b for b in describe_brokers(connection, timeout) if not b.fenced):
        try:
            found.update(call(connection.to(f"{broker.host}:{broker.port}"), wire.LIST_GROUPS, 4,
                              wire.encode_list_groups(), wire.decode_list_groups, timeout))
            answered += 1
        except (KafkaUnavailable, wire.KafkaProtocolError) as error:
            errors.append(f"broker {broker.node_id}: {error}")
    if not answered:
        raise KafkaUnavailable("ListGroups: no broker answered: " + "; ".join(errors))
    if errors:
        log.info("consumer groups of some brokers left out: %s", "; ".join(errors))
    return found


def committed_offsets(target: Target, groups: Sequence[str], timeout: float = 10.0) -> dict[str, wire.GroupOffsets]:
    """Each group's committed offsets (the partitions it committed, nothing else), or why they could not be read:
    one FindCoordinator for every group, then each coordinator asked once for all of its groups."""
    if not groups:
        return {}
    connection = Connection(target) if isinstance(target, str) else target
    try:
        coordinators = call(connection, wire.FIND_COORDINATOR, 4, wire.encode_find_coordinators(groups),
                            wire.decode_find_coordinators, timeout)
    except (KafkaUnavailable, wire.KafkaProtocolError) as error:
        return {group: wire.GroupOffsets({}, f"no coordinator: {error}") for group in groups}
    found = {group: wire.GroupOffsets({}, "no coordinator in the answer") for group in groups}
    by_address: dict[str, list[str]] = {}
    for group, coordinator in ((g, coordinators.get(g)) for g in groups):
        if coordinator is not None and coordinator.error is not None:
            found[group] = wire.GroupOffsets({}, f"coordinator: {coordinator.error}")
        elif coordinator is not None:
            by_address.setdefault(f"{coordinator.host}:{coordinator.port}", []).append(group)
    for address, members in sorted(by_address.items()):
        try:
            answers = call(connection.to(address), wire.OFFSET_FETCH, 8, wire.encode_offset_fetch(members),
                           wire.decode_offset_fetch, timeout)
        except (KafkaUnavailable, wire.KafkaProtocolError) as error:
            answers = {group: wire.GroupOffsets({}, f"coordinator {address}: {error}") for group in members}
        found.update({group: answers[group] for group in members if group in answers})
    return found


def log_ranges(target: Target, partitions: Iterable[wire.TopicPartition], timeout: float = 10.0
               ) -> dict[wire.TopicPartition, tuple[int, int] | str]:
    """Where each partition's log starts and ends (its log start offset and high watermark), or why that is not
    known: the metadata of their topics, then each leader asked for its partitions' earliest and latest offsets."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    connection = Connection(target) if isinstance(target, str) else target
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in describe_brokers(connection, timeout) if not b.fenced}
    metadata = topic_metadata(connection, timeout, sorted({topic for topic, _ in wanted}))
    leaders = {(topic, p.partition): p.leader for topic, known in metadata.items() for p in known.partitions}
    found: dict[wire.TopicPartition, tuple[int, int] | str] = {}
    by_leader: dict[str, list[wire.TopicPartition]] = {}
    for topic, index in wanted:
        leader = leaders.get((topic, index))
        if leader is None:
            found[(topic, index)] = "not in the metadata"
        elif leader not in brokers:
            found[(topic, index)] = "no leader" if leader < 0 else f"leader {leader} not registered"
        else:
            by_leader.setdefault(brokers[leader], []).append((topic, index))
    for address, led in sorted(by_leader.items()):
        try:
            starts, ends = (call(connection.to(address), wire.LIST_OFFSETS, 6, wire.encode_list_offsets(led, at),
                                 wire.decode_list_offsets, timeout) for at in (wire.EARLIEST, wire.LATEST))
        except (KafkaUnavailable, wire.KafkaProtocolError) as error:
            found.update((tp, f"leader {address}: {error}") for tp in led)
            continue
        for tp in led:
            start, end = starts.get(tp, "not in the answer"), ends.get(tp, "not in the answer")
            if isinstance(start, str):
                found[tp] = start
            elif isinstance(end, str):
                found[tp] = end
            else:
                found[tp] = (start, end)
    return found
