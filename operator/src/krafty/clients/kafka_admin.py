"""Kafka's Admin API as the operator uses it (confluent-kafka / librdkafka).

The KRaft-only requests (quorum, voters, reassignments, unregistering) go
through krafty.clients.kraft.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from krafty.clients import kraft
from krafty.observed import PartitionState

_quiet = logging.getLogger("krafty.librdkafka")
TIMEOUT = 15.0


class KafkaAdmin:
    """One AdminClient per cluster bootstrap address, reused across reconciles."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "logger": _quiet,
                                  "socket.timeout.ms": 10000, "client.id": "krafty-operator"}
        self.client = AdminClient(config)

    def registered_brokers(self) -> set[int]:
        """Brokers registered with the controller and not fenced."""
        description = self.client.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT + 5)
        return {node.id for node in description.nodes}

    def cluster_id(self) -> str | None:
        description = self.client.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT + 5)
        return str(description.cluster_id) if description.cluster_id else None

    def topic_configs(self, topics: Iterable[str], keys: set[str] | None = None) -> dict[str, dict[str, ConfigEntry]]:
        """Config entries of the given topics (optionally only some keys)."""
        resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
        if not resources:
            return {}
        out = {}
        for resource, future in self.client.describe_configs(resources, request_timeout=TIMEOUT).items():
            entries = future.result(timeout=TIMEOUT + 5)
            out[resource.name] = {k: v for k, v in entries.items() if keys is None or k in keys}
        return out

    def partitions(self, include_internal: bool = True) -> tuple[PartitionState, ...]:
        """Every partition with its leader, replicas, ISR and its topic's min.insync.replicas."""
        metadata = self.client.list_topics(timeout=TIMEOUT)
        topics = {name: t for name, t in metadata.topics.items()
                  if t.error is None and (include_internal or not name.startswith("__"))}
        min_isr = {name: int(entries["min.insync.replicas"].value or 1)
                   for name, entries in self.topic_configs(topics, {"min.insync.replicas"}).items()}
        out = []
        for name, topic in sorted(topics.items()):
            for p in sorted(topic.partitions.values(), key=lambda x: x.id):
                out.append(PartitionState(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs),
                                          min_isr.get(name, 1)))
        return tuple(out)

    def dynamic_cluster_defaults(self) -> dict[str, str]:
        """Cluster-wide dynamic broker settings currently set.

        librdkafka cannot describe the default broker resource (""), so one broker is
        described with synonyms and the values whose source is the dynamic default kept.
        """
        broker = min(self.registered_brokers())
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        entries = self.client.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT + 5)
        default_source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        out = {}
        for name, entry in entries.items():
            candidates = [entry, *entry.synonyms.values()]
            value = next((c.value for c in candidates if c.source == default_source and c.name == name), None)
            if value is not None:
                out[name] = str(value)
        return out

    def alter_dynamic_cluster_defaults(self, set_values: dict[str, str], delete: Iterable[str]) -> None:
        # librdkafka refuses the default broker resource (name ""): the wire client sends it.
        changes: dict[str, str | None] = {**dict(set_values), **dict.fromkeys(delete)}
        kraft.alter_cluster_defaults(self.bootstrap_servers, changes)

    def elect_preferred(self, partitions: Iterable[tuple[str, int]]) -> dict[str, str]:
        """Preferred leader elections; returns partitions that failed, with the error."""
        targets = [TopicPartition(topic, partition) for topic, partition in partitions]
        if not targets:
            return {}
        # (this client version's elect_leaders takes no timeout keywords)
        result = self.client.elect_leaders(ElectionType.PREFERRED, targets).result(timeout=TIMEOUT + 10)
        return {f"{tp.topic}-{tp.partition}": str(error) for tp, error in result.items()
                if error is not None and "ELECTION_NOT_NEEDED" not in str(error)}


def describe_error(error: BaseException) -> str:
    """A short, readable text for a client error."""
    if isinstance(error, KafkaException) and error.args:
        kafka_error: Any = error.args[0]
        return str(getattr(kafka_error, "str", lambda: kafka_error)())
    return f"{type(error).__name__}: {error}"
