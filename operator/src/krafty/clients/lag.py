"""Reading consumer lag: committed offsets of the selected groups and the log range of their partitions.

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

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from krafty import metrics
from krafty.clients import kraft
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable, describe_error
from krafty.clients.kafka_admin import Recycler, admin_config
from krafty.decide.lag import (
    DEFAULT_GROUPS,
    GroupSelection,
    LagRead,
    LogRange,
    TopicPartitionKey,
    select_groups,
)

log = logging.getLogger(__name__)
TIMEOUT = 10.0
CLIENT_ID = "krafty-operator-lag"


class LagReader:
    """The clients of one cluster's lag pass: an AdminClient (groups, log ranges) and the wire client's
    batched OffsetFetch (committed offsets: one request per group coordinator, every selected group in it)."""

    def __init__(self, connection: Connection, selection: GroupSelection = DEFAULT_GROUPS) -> None:
        self.connection = connection
        self.selection = selection
        self._admin = AdminClient(admin_config(connection, CLIENT_ID))
        self._admin_recycler = Recycler()
        self._lock = threading.Lock()

    def read(self) -> LagRead:
        """Committed offsets of every selected consumer group, and the log range of each partition they
        committed: only the groups' own partitions are asked for.

        Raises KafkaUnavailable when not even the groups can be listed."""
        metrics.KAFKA_REQUESTS.labels("lag_read").inc()
        with self._lock:
            try:
                listed = self._admin.list_consumer_groups(request_timeout=TIMEOUT).result(timeout=TIMEOUT + 5)
                # A fresh metadata request: it also refreshes the leader epochs that ListOffsets sends (after a
                # roll, librdkafka's own refresh comes minutes later and every log range would be refused)
                self._admin.list_topics(timeout=TIMEOUT)
            except (KafkaException, FutureTimeout) as error:
                if self._admin_recycler.failed():
                    self._admin = AdminClient(admin_config(self.connection, CLIENT_ID))
                raise KafkaUnavailable(f"consumer groups: {describe_error(error)}") from error
            self._admin_recycler.succeeded()
            selected = select_groups((g.group_id for g in listed.valid), self.selection)
            committed: dict[str, dict[TopicPartitionKey, int | None]] = {}
            unknown_groups = set()
            for group, answer in kraft.committed_offsets(self.connection, selected.groups, TIMEOUT).items():
                if answer.error is None:
                    committed[group] = {tp: offset for tp, offset in answer.offsets.items()
                                        if not tp[0].startswith("__")}
                else:
                    log.info("committed offsets of group %s unreadable: %s", group, answer.error)
                    unknown_groups.add(group)
            wanted = {tp for offsets in committed.values() for tp in offsets}
            return LagRead(committed, frozenset(unknown_groups), self.log_ranges(wanted), selected)

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

