"""Kafka's Admin API as the operator uses it (confluent-kafka / librdkafka).

The KRaft-only requests (quorum, voters, reassignments, unregistering) go
through krafty.clients.kraft.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from confluent_kafka import (
    Consumer,
    ElectionType,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from krafty.clients import kraft
from krafty.observed import PartitionState

log = logging.getLogger(__name__)
TIMEOUT = 15.0
F = TypeVar("F", bound=Callable[..., Any])


def _serialized(method: F) -> F:
    """One call at a time per client: the reconcile, topic and lag passes share it from several threads."""
    @functools.wraps(method)
    def wrapper(self: KafkaAdmin, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)
    return cast(F, wrapper)


class KafkaAdmin:
    """One AdminClient per cluster bootstrap address, reused across reconciles."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        # librdkafka logs to stderr itself (a Python logger callback would run on its threads).
        config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "log_level": 3,
                                  "socket.timeout.ms": 10000, "client.id": "krafty-operator"}
        self.client = AdminClient(config)
        self._lock = threading.RLock()
        self._min_isr: dict[str, int] = {}  # last read per topic, for when configs cannot be read
        self._offset_readers: dict[str, Consumer] = {}  # per consumer group, for committed offsets

    @_serialized
    def registered_brokers(self) -> set[int]:
        """Brokers registered with the controller and not fenced."""
        description = self.client.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT + 5)
        return {node.id for node in description.nodes}

    @_serialized
    def topic_configs(self, topics: Iterable[str], keys: set[str] | None = None) -> dict[str, dict[str, ConfigEntry]]:
        """Config entries of the given topics (optionally only some keys)."""
        resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
        if not resources:
            return {}
        out = {}
        for resource, future in self.client.describe_configs(resources, request_timeout=TIMEOUT).items():
            try:
                entries = future.result(timeout=TIMEOUT + 5)
            except KafkaException as error:
                if "UNKNOWN_TOPIC" in str(error):
                    continue  # just created or deleted: not known to every broker yet
                raise
            out[resource.name] = {k: v for k, v in entries.items() if keys is None or k in keys}
        return out

    @_serialized
    def partitions(self, include_internal: bool = True) -> tuple[PartitionState, ...]:
        """Every partition with its leader, replicas, ISR and its topic's min.insync.replicas."""
        metadata = self.client.list_topics(timeout=TIMEOUT)
        topics = {name: t for name, t in metadata.topics.items()
                  if t.error is None and (include_internal or not name.startswith("__"))}
        try:
            self._min_isr.update({name: int(entries["min.insync.replicas"].value or 1)
                                  for name, entries in self.topic_configs(topics, {"min.insync.replicas"}).items()})
        except KafkaException as error:
            # librdkafka sends this to the broker it believes is the controller, which may be the one
            # restarting: the last values read stand in, and a topic never read counts as needing
            # every replica in sync (the safe side for a roll).
            log.info("topic configs unreadable (%s); using the last min.insync.replicas read", error)
        out = []
        for name, topic in sorted(topics.items()):
            for p in sorted(topic.partitions.values(), key=lambda x: x.id):
                out.append(PartitionState(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs),
                                          self._min_isr.get(name, len(p.replicas))))
        return tuple(out)

    @_serialized
    def dynamic_cluster_defaults(self) -> dict[str, str]:
        """Cluster-wide dynamic broker settings currently set.

        librdkafka cannot describe the default broker resource (""), so one broker is
        described with synonyms and the values whose source is the dynamic default kept.
        """
        broker = min(self.registered_brokers())
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        entries = self.client.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT + 5)
        default_source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        out = {}
        for name, entry in entries.items():
            candidates = [entry, *entry.synonyms.values()]
            value = next((c.value for c in candidates if _source(c) == default_source.value and c.name == name), None)
            if value is not None:
                out[name] = str(value)
        return out

    @_serialized
    def alter_dynamic_cluster_defaults(self, set_values: dict[str, str], delete: Iterable[str]) -> None:
        # librdkafka refuses the default broker resource (name ""): the wire client sends it.
        changes: dict[str, str | None] = {**dict(set_values), **dict.fromkeys(delete)}
        kraft.alter_cluster_defaults(self.bootstrap_servers, changes)

    @_serialized
    def elect_preferred(self, partitions: Iterable[tuple[str, int]]) -> dict[str, str]:
        """Preferred leader elections; returns partitions that failed, with the error."""
        targets = [TopicPartition(topic, partition) for topic, partition in partitions]
        if not targets:
            return {}
        # (this client version's elect_leaders takes no timeout keywords)
        result = self.client.elect_leaders(ElectionType.PREFERRED, targets).result(timeout=TIMEOUT + 10)
        return {f"{tp.topic}-{tp.partition}": str(error) for tp, error in result.items()
                if error is not None and "ELECTION_NOT_NEEDED" not in str(error)}


    # -- topics ----------------------------------------------------------------
    @_serialized
    def describe_topics(self, names: Iterable[str]) -> dict[str, tuple[str, tuple[PartitionState, ...]]]:
        """Topic id and partitions of each existing topic among `names` (missing ones are left out)."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        existing = set(self.client.list_topics(timeout=TIMEOUT).topics)
        wanted = [n for n in wanted if n in existing]
        if not wanted:
            return {}
        min_isr = {name: int(entries["min.insync.replicas"].value or 1)
                   for name, entries in self.topic_configs(wanted, {"min.insync.replicas"}).items()}
        out = {}
        futures = self.client.describe_topics(TopicCollection(wanted), request_timeout=TIMEOUT)
        for name, future in futures.items():
            try:
                description = future.result(timeout=TIMEOUT + 5)
            except KafkaException:
                continue  # deleted meanwhile
            partitions = tuple(
                PartitionState(name, p.id, p.leader.id if p.leader is not None else -1,
                               tuple(r.id for r in p.replicas), tuple(r.id for r in p.isr), min_isr.get(name, 1))
                for p in sorted(description.partitions, key=lambda x: x.id))
            out[name] = (str(description.topic_id), partitions)
        return out

    @_serialized
    def topic_overrides(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """The configuration set on each topic itself (not inherited from the brokers)."""
        source = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        return {name: {k: str(e.value) for k, e in entries.items() if _source(e) == source}
                for name, entries in self.topic_configs(names).items()}

    @_serialized
    def create_topics(self, topics: Iterable[tuple[str, int, int, dict[str, str]]],
                      validate_only: bool = False) -> dict[str, str | None]:
        """Creates (or only validates) topics in one request; returns each topic's error, or None."""
        new = [NewTopic(name, partitions, replicas, config=dict(config))
               for name, partitions, replicas, config in topics]
        if not new:
            return {}
        futures = self.client.create_topics(new, validate_only=validate_only, request_timeout=TIMEOUT,
                                            operation_timeout=TIMEOUT)
        return {name: _error_of(future) for name, future in futures.items()}

    @_serialized
    def create_partitions(self, counts: dict[str, int], validate_only: bool = False) -> dict[str, str | None]:
        if not counts:
            return {}
        futures = self.client.create_partitions([NewPartitions(t, n) for t, n in counts.items()],
                                                validate_only=validate_only, request_timeout=TIMEOUT,
                                                operation_timeout=TIMEOUT)
        return {name: _error_of(future) for name, future in futures.items()}

    @_serialized
    def alter_topic_configs(self, changes: dict[str, dict[str, str | None]],
                            validate_only: bool = False) -> dict[str, str | None]:
        """Incremental config changes for many topics in one request (None: back to the default)."""
        resources = []
        for topic, keys in changes.items():
            entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                                   else AlterConfigOpType.DELETE) for k, v in keys.items()]
            resources.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries))
        if not resources:
            return {}
        futures = self.client.incremental_alter_configs(resources, validate_only=validate_only,
                                                        request_timeout=TIMEOUT)
        return {resource.name: _error_of(future) for resource, future in futures.items()}

    @_serialized
    def delete_topics(self, names: list[str]) -> dict[str, str | None]:
        if not names:
            return {}
        futures = self.client.delete_topics(names, request_timeout=TIMEOUT, operation_timeout=TIMEOUT)
        return {name: _error_of(future) for name, future in futures.items()}

    @_serialized
    def groups_reading(self, topic: str) -> list[str]:
        """Consumer groups with a live member assigned a partition of the topic."""
        listed = self.client.list_consumer_groups(request_timeout=TIMEOUT).result(timeout=TIMEOUT + 5)
        ids = [g.group_id for g in listed.valid]
        if not ids:
            return []
        reading = []
        for group_id, future in self.client.describe_consumer_groups(ids, request_timeout=TIMEOUT).items():
            try:
                group = future.result(timeout=TIMEOUT + 5)
            except KafkaException:
                continue
            assigned = {tp.topic for m in group.members for tp in (m.assignment.topic_partitions if m.assignment
                                                                     else [])}
            if topic in assigned:
                reading.append(group_id)
        return sorted(reading)


    # -- consumer lag ------------------------------------------------------------------
    @_serialized
    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Committed offsets of every consumer group.

        Asked through a consumer handle per group that never joins it: librdkafka's
        ListConsumerGroupOffsets crashes the process (SIGSEGV) when the group's
        coordinator goes away mid-request, as it does in every broker restart.
        """
        listed = self.client.list_consumer_groups(request_timeout=TIMEOUT).result(timeout=TIMEOUT + 5)
        groups = sorted(g.group_id for g in listed.valid)
        for gone in set(self._offset_readers) - set(groups):
            self._offset_readers.pop(gone).close()
        metadata = self.client.list_topics(timeout=TIMEOUT)
        partitions = [TopicPartition(name, p) for name, topic in sorted(metadata.topics.items())
                      if topic.error is None and not name.startswith("__") for p in sorted(topic.partitions)]
        out: dict[str, dict[tuple[str, int], int]] = {}
        for group in groups if partitions else []:
            try:
                committed = self._offset_reader(group).committed(partitions, timeout=TIMEOUT)
            except KafkaException:
                continue
            out[group] = {(tp.topic, tp.partition): tp.offset for tp in committed
                          if tp.error is None and tp.offset >= 0}
        return out

    @_serialized
    def close(self) -> None:
        """Closes the consumer handles (the admin handle closes when dropped)."""
        for reader in self._offset_readers.values():
            reader.close()
        self._offset_readers.clear()

    def _offset_reader(self, group: str) -> Consumer:
        if group not in self._offset_readers:
            self._offset_readers[group] = Consumer({
                "bootstrap.servers": self.bootstrap_servers, "group.id": group, "enable.auto.commit": False,
                "client.id": "krafty-operator-lag", "log_level": 3})
        return self._offset_readers[group]

    @_serialized
    def log_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start offset, log end offset) of each partition."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        ends: dict[tuple[str, int], list[int]] = {tp: [0, 0] for tp in wanted}
        for index, spec in enumerate((OffsetSpec.earliest(), OffsetSpec.latest())):
            futures = self.client.list_offsets({TopicPartition(t, p): spec for t, p in wanted},
                                               request_timeout=TIMEOUT)
            for tp, future in futures.items():
                try:
                    ends[(tp.topic, tp.partition)][index] = future.result(timeout=TIMEOUT + 5).offset
                except KafkaException:
                    ends.pop((tp.topic, tp.partition), None)
        return {tp: (v[0], v[1]) for tp, v in ends.items()}


def _source(entry: ConfigEntry) -> int:
    """The entry's config source as a number (the client hands out ints or enum members)."""
    source: Any = entry.source
    return int(getattr(source, "value", source))


def _error_of(future: Any) -> str | None:
    try:
        future.result(timeout=TIMEOUT + 10)
    except KafkaException as error:
        return describe_error(error)
    return None


def describe_error(error: BaseException) -> str:
    """A short, readable text for a client error."""
    if isinstance(error, KafkaException) and error.args:
        kafka_error: Any = error.args[0]
        return str(getattr(kafka_error, "str", lambda: kafka_error)())
    return f"{type(error).__name__}: {error}"
