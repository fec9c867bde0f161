"""Kafka's Admin API as the passes use it: through krafty.clients.kraft (the wire client) for all but listing who
reads a topic, which goes through confluent-kafka (librdkafka).

The wire client sends each request to the brokers in turn; each forwards the requests the controller answers
(creating, growing and deleting topics, config changes, leader elections) to the active one. librdkafka sends
those to the broker its metadata last named controller: after a scale-down, one that no longer runs.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Generic, TypeVar, cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from krafty import naming, wire
from krafty.clients import kraft
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable, describe_error
from krafty.facts.observed import PartitionState
from krafty.telemetry import metrics
from krafty.wire import KafkaProtocolError

log = logging.getLogger(__name__)
TIMEOUT = 15.0
# A librdkafka handle whose calls have failed for this long is replaced by a new one: whatever it holds
# (connections, metadata, addresses) is then read afresh.
RECYCLE_AFTER = 60.0
# A librdkafka handle no call has used for this long is let go with its threads and buffers (the topic pass needs
# one only to list the groups reading a topic it deletes); the next call that needs one makes a new one.
IDLE_AFTER = 120.0
# librdkafka's own errors for a request that never had an answer from Kafka: the whole call failed, not a group
UNANSWERED = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                        KafkaError._RESOLVE})
# A group's coordinator moving or loading: the group's members cannot be known now
COORDINATOR_AWAY = frozenset({KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
                              KafkaError.COORDINATOR_LOAD_IN_PROGRESS})
F = TypeVar("F", bound=Callable[..., Any])


def admin_config(connection: Connection, client_id: str) -> dict[str, Any]:
    # librdkafka logs to stderr itself (a Python logger callback would run on its threads).
    return {"bootstrap.servers": connection.servers, "log_level": 3, "socket.timeout.ms": 10000,
            "client.id": client_id, **connection.librdkafka()}


class Recycler:
    """Decides when a client handle that keeps failing is replaced (bounded in time, never per call)."""

    def __init__(self, after: float = RECYCLE_AFTER, clock: Callable[[], float] = time.monotonic) -> None:
        self.after = after
        self._clock = clock
        self._failing_since: float | None = None

    def succeeded(self) -> None:
        self._failing_since = None

    def failed(self) -> bool:
        """Records a failure; True when the handle has failed for long enough to be replaced."""
        now = self._clock()
        if self._failing_since is None:
            self._failing_since = now
            return False
        if now - self._failing_since >= self.after:
            self._failing_since = None
            return True
        return False


def _kafka_call(method: F, *, through_handle: bool = True) -> F:
    """One call at a time per client (the cluster and topic passes share it from several threads); a
    client error leaves as KafkaUnavailable, and a librdkafka handle that keeps failing is replaced."""
    @functools.wraps(method)
    def wrapper(self: KafkaAdmin, *args: Any, **kwargs: Any) -> Any:
        metrics.KAFKA_REQUESTS.labels(method.__name__).inc()
        with self._lock:
            if self.closed:
                raise KafkaUnavailable(f"{method.__name__}: the client for {self.bootstrap_servers} is closed")
            self._release_if_idle()
            try:
                result = method(self, *args, **kwargs)
            except (KafkaException, FutureTimeout, ConnectionError, KafkaProtocolError) as error:
                if through_handle and self._recycler.failed():
                    log.warning("Kafka admin client for %s failed for %.0fs: replacing it", self.bootstrap_servers,
                                self._recycler.after)
                    self._handle = None  # the next call makes a new one
                raise KafkaUnavailable(f"{method.__name__}: {describe_error(error)}") from error
            if through_handle:
                self._recycler.succeeded()
            return result
    return cast(F, wrapper)


def _wire_call(method: F) -> F:
    """A call through the wire client alone (a connection of its own each time): its outcome says nothing of
    the librdkafka handle, so a handle stuck on a broker is still replaced while these succeed."""
    return _kafka_call(method, through_handle=False)


class KafkaAdmin:
    """One cluster's Admin API client for one kind of pass, reused across reconciles. Its librdkafka handle (a
    thread per broker, their buffers) is made at the first call that needs it, and let go once no call has used it
    for IDLE_AFTER: every other call goes through the wire client."""

    def __init__(self, connection: Connection, clock: Callable[[], float] = time.monotonic, *,
                 timeout: float = TIMEOUT, recycle_after: float = RECYCLE_AFTER,
                 handle: Callable[[Connection], AdminClient] | None = None) -> None:
        """`handle`: makes the librdkafka handle for the connection (by default from admin_config)."""
        self.connection = connection
        self._make_handle = handle or (lambda reach: AdminClient(admin_config(reach, "krafty-operator")))
        self.timeout = timeout  # each request's, in seconds
        self.bootstrap_servers = connection.servers
        self._handle: AdminClient | None = None
        self._clock = clock
        self._used_at = clock()  # when a call last took the handle
        self._lock = threading.RLock()
        self._recycler = Recycler(recycle_after, clock)
        self._min_isr: dict[str, int] = {}  # last read per topic, for when configs cannot be read
        self.closed = False

    def close(self) -> None:
        """Destroys the librdkafka handle now, whoever still holds this object (a pass that raced the cluster's
        deletion, a traceback): left to the garbage collector, a deleted cluster's handle went on connecting to
        its address for as long as the operator ran. A call after it raises KafkaUnavailable."""
        with self._lock:
            self.closed = True
            self._handle = None  # its only reference: librdkafka's threads stop with it

    @property
    def client(self) -> AdminClient:
        """The librdkafka handle, made now if there is none."""
        with self._lock:
            if self.closed:
                raise KafkaUnavailable(f"the client for {self.bootstrap_servers} is closed")
            if self._handle is None:
                self._handle = self._make_handle(self.connection)
            self._used_at = self._clock()
            return self._handle

    def _release_if_idle(self) -> None:
        if self._handle is not None and self._clock() - self._used_at >= IDLE_AFTER:
            log.debug("Kafka admin client for %s unused for %.0fs: letting its handle go", self.bootstrap_servers,
                      self._clock() - self._used_at)
            self._handle = None  # its only reference: librdkafka's threads stop with it

    @_wire_call
    def registered_brokers(self) -> set[int]:
        """Brokers registered with the controller and not fenced."""
        return {broker.node_id for broker in kraft.describe_brokers(self.connection, self.timeout) if not broker.fenced}

    @_wire_call
    def topic_state(self, eligible: bool = False) -> tuple[tuple[PartitionState, ...], frozenset[str] | None]:
        """Every partition with its leader, replicas, ISR and its topic's min.insync.replicas (and, `eligible`:
        where the cluster runs ELR, its eligible leader replicas); and the topics with replication throttles set
        (None when topic configs could not be read)."""
        metadata = kraft.topic_metadata(self.connection)
        elr = kraft.eligible_leaders(self.connection) if eligible else {}
        throttled: frozenset[str] | None = None
        try:
            # (only the keys read here: every topic's whole config is most of the pass's CPU at many topics)
            configs = kraft.topic_configs(self.connection, sorted(metadata),
                                          keys=(naming.MIN_ISR_KEY, *naming.THROTTLED_REPLICAS_KEYS))
        except KafkaUnavailable as error:
            # A broker restarting may take the request and not answer: the last values read stand in, and a
            # topic never read counts as needing every replica in sync (the safe side for a roll).
            log.info("topic configs unreadable (%s); using the last min.insync.replicas read", error)
        else:
            self._min_isr.update({name: config.min_isr for name, config in configs.items()})
            throttled = frozenset(name for name, config in configs.items()
                                  if any(config.overrides.get(k) for k in naming.THROTTLED_REPLICAS_KEYS))
        return tuple(PartitionState(name, p.partition, p.leader, p.replicas, p.isr,
                                    self._min_isr.get(name, len(p.replicas)), elr.get((name, p.partition), ()))
                     for name, topic in sorted(metadata.items()) for p in topic.partitions), throttled

    @_wire_call
    def dynamic_cluster_defaults(self) -> dict[str, str]:
        """Cluster-wide dynamic broker settings currently set."""
        return kraft.cluster_defaults(self.connection, self.timeout)

    @_wire_call
    def alter_dynamic_cluster_defaults(self, set_values: dict[str, str], delete: Iterable[str]) -> None:
        # librdkafka refuses the default broker resource (name ""): the wire client sends it.
        changes: dict[str, str | None] = {**dict(set_values), **dict.fromkeys(delete)}
        kraft.alter_cluster_defaults(self.connection, changes)

    @_wire_call
    def elect_preferred(self, partitions: Iterable[tuple[str, int]]) -> dict[str, str]:
        """Preferred leader elections; returns partitions that failed, with the error."""
        failed = kraft.elect_preferred(self.connection, partitions, self.timeout)
        return {f"{topic}-{partition}": error for (topic, partition), error in failed.items()}


    # -- topics ----------------------------------------------------------------
    @_wire_call
    def describe_topics(self, names: Iterable[str]
                        ) -> dict[str, tuple[str, tuple[PartitionState, ...], dict[str, str]]]:
        """Topic id, partitions and the configuration set on the topic itself, of each existing topic among `names`
        whose configuration could be read (one config read gives both each partition's min.insync.replicas and the
        overrides; a topic just created or deleted may be left out)."""
        wanted = set(names)
        if not wanted:
            return {}
        metadata = kraft.topic_metadata(self.connection, names=sorted(wanted))
        configs = kraft.topic_configs(self.connection, sorted(wanted & set(metadata)))
        return {name: (metadata[name].topic_id,
                       tuple(PartitionState(name, p.partition, p.leader, p.replicas, p.isr, config.min_isr)
                             for p in metadata[name].partitions),
                       config.overrides)
                for name, config in configs.items()}

    @_wire_call
    def topic_overrides(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """The configuration set on each topic itself (not inherited from the brokers)."""
        return {name: config.overrides for name, config in kraft.topic_configs(self.connection, sorted(names)).items()}

    @_wire_call
    def create_topics(self, topics: Iterable[tuple[str, int, int, dict[str, str]]],
                      validate_only: bool = False) -> dict[str, str | None]:
        """Creates (or only validates) topics in one request; returns each topic's error, or None."""
        new = [wire.NewTopic(name, partitions, replicas, config) for name, partitions, replicas, config in topics]
        return kraft.create_topics(self.connection, new, validate_only, self.timeout)

    @_wire_call
    def create_partitions(self, counts: dict[str, int], validate_only: bool = False) -> dict[str, str | None]:
        return kraft.create_partitions(self.connection, counts, {}, validate_only, self.timeout)

    @_wire_call
    def create_placed_topic(self, name: str, replicas: Sequence[Sequence[int]], config: Mapping[str, str]
                            ) -> str | None:
        """Creates a topic whose partitions have the given replica lists (leader first); returns its error."""
        return kraft.create_topics(self.connection, [wire.NewTopic(name, config=config, replicas=replicas)],
                                   timeout=self.timeout)[name]

    @_wire_call
    def add_placed_partitions(self, name: str, total: int, replicas: Sequence[Sequence[int]]) -> str | None:
        """Grows a topic to `total` partitions, the new ones with the given replica lists; returns its error."""
        return kraft.create_partitions(self.connection, {name: total}, {name: replicas}, timeout=self.timeout)[name]

    @_wire_call
    def alter_topic_configs(self, changes: dict[str, dict[str, str | None]],
                            validate_only: bool = False) -> dict[str, str | None]:
        """Incremental config changes for many topics in one request (None: back to the default)."""
        return kraft.alter_topic_configs(self.connection, changes, validate_only, self.timeout)

    @_wire_call
    def delete_topics(self, names: list[str]) -> dict[str, str | None]:
        return kraft.delete_topics(self.connection, names, self.timeout)

    @_kafka_call
    def groups_reading(self, topics: set[str]) -> dict[str, list[str]]:
        """For each of the topics, the groups with a live member assigned one of its partitions: consumer groups
        (librdkafka describes them, of either protocol), share and Streams groups (the wire client)."""
        reading: dict[str, list[str]] = {topic: [] for topic in topics}
        if topics:
            self._wire_groups_reading(reading)
        listed = self.client.list_consumer_groups(request_timeout=self.timeout).result(timeout=self.timeout + 5)
        if listed.errors:  # a broker that did not list its groups may coordinate one reading a topic: not "none"
            error = listed.errors[0]
            raise error if isinstance(error, KafkaException) else KafkaException(error)
        ids = [g.group_id for g in listed.valid]
        if not ids or not topics:
            return reading
        for group_id, future in sorted(self.client.describe_consumer_groups(ids, request_timeout=self.timeout).items()):
            try:
                group = future.result(timeout=self.timeout + 5)
            except KafkaException as error:
                if _kafka_code(error) in UNANSWERED | COORDINATOR_AWAY:  # its members are not known: not "none"
                    raise
                continue  # a group this client cannot describe (another protocol's): none of its members consume
            assigned = {tp.topic for m in group.members for tp in (m.assignment.topic_partitions if m.assignment
                                                                     else [])}
            for topic in assigned & topics:
                reading[topic].append(group_id)
        return reading


    def _wire_groups_reading(self, reading: dict[str, list[str]]) -> None:
        listed = kraft.group_ids(self.connection, self.timeout)
        for kind in (wire.SHARE_GROUP, wire.STREAMS_GROUP):
            groups = sorted(g for g, found in listed.items() if found == kind)
            for group, readers in kraft.group_readers(self.connection, kind, groups, self.timeout).items():
                if readers.error is not None:  # its members are not known: not "none"
                    raise KafkaUnavailable(f"{kind} group {group}: {readers.error}")
                for topic in readers.topics & reading.keys():
                    reading[topic].append(group)


A = TypeVar("A", bound=KafkaAdmin)


class AdminPool(Generic[A]):
    """One KafkaAdmin per cluster for one kind of pass: each kind has its own clients, so one pass
    waiting on Kafka (a topic pass, say) never holds up another's calls (a roll's)."""

    def __init__(self, make: Callable[[Connection], A]) -> None:
        self._make = make
        self._admins: dict[str, A] = {}
        self._lock = threading.Lock()

    def get(self, connection: Connection) -> A:
        """The client for these servers; a new one when the credentials changed (a renewed certificate), the
        previous one closed."""
        with self._lock:
            admin = self._admins.get(connection.servers)
            replaced = admin if admin is not None and admin.connection != connection else None
            if admin is None or replaced is not None:
                admin = self._admins[connection.servers] = self._make(connection)
        if replaced is not None:
            replaced.close()
        return admin

    def release(self, namespace: str, cluster: str) -> None:
        """Closes the clients of a deleted cluster."""
        prefix = f"{naming.headless_service(cluster, naming.Pool.BROKER)}.{namespace}.svc."
        with self._lock:
            released = [self._admins.pop(s) for s in [s for s in self._admins if s.startswith(prefix)]]
        for admin in released:
            admin.close()


def _kafka_code(error: KafkaException) -> int | None:
    return error.args[0].code() if error.args and isinstance(error.args[0], KafkaError) else None
