"""Reading consumer lag: committed offsets of every group and the log range of their partitions.

The lag pass has its own clients, never the cluster pass's Admin client: a
slow read (a group coordinator restarting, a broker behind) must not hold up
a roll. What cannot be read is returned as unknown, never as zero or left
out, so a sum is only ever made of complete reads (krafty.decide.lag).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from krafty import metrics
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable, describe_error
from krafty.clients.kafka_admin import Recycler, admin_config
from krafty.decide.lag import (
    DEFAULT_GROUPS,
    GroupSelection,
    LagRead,
    LogRange,
    SelectedGroups,
    TopicPartitionKey,
    select_groups,
)

log = logging.getLogger(__name__)
TIMEOUT = 10.0
CLIENT_ID = "krafty-operator-lag"


class LagReader:
    """The clients of one cluster's lag pass: an AdminClient and one offset reader per group."""

    def __init__(self, connection: Connection, selection: GroupSelection = DEFAULT_GROUPS) -> None:
        self.connection = connection
        self.selection = selection
        self._admin = AdminClient(admin_config(connection, CLIENT_ID))
        self._admin_recycler = Recycler()
        self._readers: dict[str, tuple[Consumer, Recycler]] = {}
        self._lock = threading.Lock()

    def read(self) -> LagRead:
        """Committed offsets of every consumer group, and the log range of each partition they committed.

        Raises KafkaUnavailable when not even the groups can be listed."""
        metrics.KAFKA_REQUESTS.labels("lag_read").inc()
        with self._lock:
            try:
                selected, partitions = self._groups_and_partitions()
            except (KafkaException, FutureTimeout) as error:
                if self._admin_recycler.failed():
                    self._admin = AdminClient(admin_config(self.connection, CLIENT_ID))
                raise KafkaUnavailable(f"consumer groups: {describe_error(error)}") from error
            self._admin_recycler.succeeded()
            committed: dict[str, dict[TopicPartitionKey, int | None]] = {}
            unknown_groups = set()
            for group in selected.groups if partitions else []:
                offsets = self._committed(group, partitions)
                if offsets is None:
                    unknown_groups.add(group)
                else:
                    committed[group] = offsets
            wanted = {tp for offsets in committed.values() for tp in offsets}
            return LagRead(committed, frozenset(unknown_groups), self.log_ranges(wanted), selected)

    def _groups_and_partitions(self) -> tuple[SelectedGroups, list[TopicPartition]]:
        listed = self._admin.list_consumer_groups(request_timeout=TIMEOUT).result(timeout=TIMEOUT + 5)
        selected = select_groups((g.group_id for g in listed.valid), self.selection)
        for gone in set(self._readers) - set(selected.groups):  # each reader holds a connection: only those read
            self._readers.pop(gone)[0].close()
        # A fresh metadata request: it also refreshes the leader epochs that ListOffsets sends.
        metadata = self._admin.list_topics(timeout=TIMEOUT)
        partitions = [TopicPartition(name, p) for name, topic in sorted(metadata.topics.items())
                      if topic.error is None and not name.startswith("__") for p in sorted(topic.partitions)]
        return selected, partitions

    def _committed(self, group: str, partitions: list[TopicPartition]) -> dict[TopicPartitionKey, int | None] | None:
        """The group's committed offsets (None per partition whose read failed), or None if none could be read.

        Asked through a consumer handle per group that never joins it: librdkafka's
        ListConsumerGroupOffsets crashes the process (SIGSEGV) when the group's
        coordinator goes away mid-request, as it does in every broker restart.
        """
        reader, recycler = self._readers.get(group) or self._new_reader(group)
        try:
            answer = reader.committed(partitions, timeout=TIMEOUT)
        except KafkaException as error:
            log.info("committed offsets of group %s unreadable: %s", group, describe_error(error))
            if recycler.failed():
                log.warning("offset reader of group %s failed for long: replacing it", group)
                self._readers.pop(group)[0].close()
            return None
        recycler.succeeded()
        return {(tp.topic, tp.partition): (None if tp.error is not None else tp.offset) for tp in answer
                if tp.error is not None or tp.offset >= 0}

    def _new_reader(self, group: str) -> tuple[Consumer, Recycler]:
        reader = Consumer({"bootstrap.servers": self.connection.servers, "group.id": group,
                           "enable.auto.commit": False, "client.id": CLIENT_ID, "log_level": 3,
                           **self.connection.librdkafka()})
        self._readers[group] = (reader, Recycler())
        return self._readers[group]

    def log_ranges(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, LogRange | None]:
        """The (log start, log end) of each partition; None where Kafka did not answer.

        librdkafka sends ListOffsets with the leader epoch it has cached; after a leader moves, the
        broker refuses it (FENCED_LEADER_EPOCH) until the client's metadata is refreshed, which
        librdkafka does on its own only every few minutes. Partitions that fail are asked once more
        after a fresh metadata request."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        ranges = self._list_offsets(wanted)
        failed = [tp for tp, value in ranges.items() if value is None]
        if failed:
            try:
                self._admin.list_topics(timeout=TIMEOUT)
            except KafkaException as error:
                log.info("metadata refresh failed: %s", describe_error(error))
                return ranges
            ranges.update(self._list_offsets(failed))
        return ranges

    def _list_offsets(self, wanted: list[TopicPartitionKey]) -> dict[TopicPartitionKey, LogRange | None]:
        found: dict[TopicPartitionKey, list[int | None]] = {tp: [None, None] for tp in wanted}
        for index, spec in enumerate((OffsetSpec.earliest(), OffsetSpec.latest())):
            try:
                futures = self._admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted},
                                                   request_timeout=TIMEOUT)
            except KafkaException as error:
                log.info("log offsets unreadable: %s", describe_error(error))
                break
            for tp, future in futures.items():
                try:
                    found[(tp.topic, tp.partition)][index] = future.result(timeout=TIMEOUT + 5).offset
                except (KafkaException, FutureTimeout) as error:
                    log.info("log offsets of %s-%d unreadable: %s", tp.topic, tp.partition, describe_error(error))
        return {tp: (LogRange(start, end) if start is not None and end is not None else None)
                for tp, (start, end) in found.items()}

    def close(self) -> None:
        with self._lock:
            for reader, _ in self._readers.values():
                reader.close()
            self._readers.clear()
