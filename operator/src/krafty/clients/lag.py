"""Reading consumer lag: committed offsets of the selected groups and the log range of their partitions.

The lag pass has its own clients, never the cluster pass's Admin client: a
slow read (a group coordinator restarting, a broker behind) must not hold up
a roll. What cannot be read is returned as unknown, never as zero or left
out, so a sum is only ever made of complete reads (krafty.decide.lag).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, TopicPartition

from krafty import wire
from krafty.clients import kraft
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable, describe_error
from krafty.clients.kafka_admin import admin_config
from krafty.decide.lag import (
    DEFAULT_GROUPS,
    NO_RECORD,
    GroupSelection,
    LagRead,
    LogRange,
    RecordKey,
    Retention,
    TopicPartitionKey,
    retention_of,
    select_groups,
    unread_records,
)
from krafty.telemetry import metrics
from krafty.wire import KafkaProtocolError

log = logging.getLogger(__name__)
TIMEOUT = 10.0
STAMP_BUDGET = 5.0  # seconds a read spends fetching the timestamps of first unread records
RETENTION_REFRESH = 60.0  # seconds between reads of a topic's retention
RETENTION_KEYS = ("cleanup.policy", "retention.ms")
CLIENT_ID = "krafty-operator-lag"


class LagReader:
    """The clients of one cluster's lag pass: the wire client (the groups of every type, listed by each broker;
    their committed offsets in a batched OffsetFetch, a share group's start offsets in a batched
    DescribeShareGroupOffsets: one request per group coordinator, every selected group in it; the log ranges
    of their partitions, from each leader; their topics' retention), and a consumer that joins no group (the
    timestamps of first unread records: fetched once, kept while wanted)."""

    def __init__(self, connection: Connection, selection: GroupSelection = DEFAULT_GROUPS) -> None:
        self.connection = connection
        self.selection = selection
        self._stamps = RecordStamps(connection)
        self._retention: dict[str, tuple[float, Retention]] = {}  # topic -> (read at, monotonic), retention
        self._lock = threading.Lock()

    def read(self) -> LagRead:
        """Committed offsets of every selected consumer group, and the log range of each partition they
        committed: only the groups' own partitions are asked for.

        Raises KafkaUnavailable when not even the groups can be listed."""
        metrics.KAFKA_REQUESTS.labels("lag_read").inc()
        with self._lock:
            try:
                listed = kraft.group_ids(self.connection, TIMEOUT)
            except KafkaProtocolError as error:
                raise KafkaUnavailable(f"consumer groups: {error}") from error
            selected = select_groups(listed, self.selection)
            committed: dict[str, dict[TopicPartitionKey, int | None]] = {}
            counted: dict[str, dict[TopicPartitionKey, int]] = {}
            unknown_groups = set()
            # (a share group commits nothing: its position is each share-partition's start offset)
            shared = [g for g in selected.groups if listed[g] == wire.SHARE_GROUP]
            answers = {**kraft.committed_offsets(self.connection, [g for g in selected.groups if g not in shared],
                                                 TIMEOUT),
                       **kraft.committed_offsets(self.connection, shared, TIMEOUT, share=True)}
            for group, answer in answers.items():
                if answer.error is None:
                    committed[group] = {tp: offset for tp, offset in answer.offsets.items()
                                        if not tp[0].startswith("__")}
                    if answer.lags:
                        counted[group] = dict(answer.lags)
                else:
                    log.info("committed offsets of group %s unreadable: %s", group, answer.error)
                    unknown_groups.add(group)
            wanted = {tp for offsets in committed.values() for tp in offsets}
            logs = self.log_ranges(wanted)
            at = time.time()
            return LagRead(committed, frozenset(unknown_groups), logs, selected, at,
                           self._stamps.read(unread_records(committed, logs)),
                           self.retention({topic for topic, _ in wanted}), counted)

    def retention(self, topics: set[str]) -> dict[str, Retention]:
        """Each topic's retention, read again once it is RETENTION_REFRESH old; absent where unreadable."""
        now = time.monotonic()
        kept = {t: value for t, value in self._retention.items() if t in topics}
        stale = sorted(t for t in topics if t not in kept or now - kept[t][0] >= RETENTION_REFRESH)
        kept.update((topic, (now, retention)) for topic, retention in self._read_retention(stale).items())
        self._retention = kept
        return {t: retention for t, (_, retention) in kept.items()}

    def _read_retention(self, topics: list[str]) -> dict[str, Retention]:
        if not topics:
            return {}
        try:
            values = kraft.topic_config_values(self.connection, topics, RETENTION_KEYS, TIMEOUT)
        except (KafkaUnavailable, KafkaProtocolError) as error:
            log.info("topic configs unreadable: %s", error)
            return {}
        return {topic: retention_of(configs) for topic, configs in values.items()}

    def log_ranges(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, LogRange | None]:
        """The (log start, log end) of each partition; None where it could not be read (logged)."""
        wanted = set(partitions)
        try:
            ranges = kraft.log_ranges(self.connection, wanted, TIMEOUT)
        except (KafkaUnavailable, KafkaProtocolError) as error:
            log.info("log offsets unreadable: %s", error)
            return dict.fromkeys(wanted)
        found: dict[TopicPartitionKey, LogRange | None] = {}
        for (topic, partition), answer in ranges.items():
            if isinstance(answer, str):
                log.info("log offsets of %s-%d unreadable: %s", topic, partition, answer)
                found[(topic, partition)] = None
            else:
                found[(topic, partition)] = LogRange(*answer)
        return found


class RecordStamps:
    """The timestamps of records at given offsets, read with a consumer that joins no group and commits
    nothing (assign, one record per partition, then let go); each is kept while it is asked for."""

    def __init__(self, connection: Connection) -> None:
        self._config = {**admin_config(connection, f"{CLIENT_ID}-stamps"), "group.id": f"{CLIENT_ID}-stamps",
                        "enable.auto.commit": False, "enable.auto.offset.store": False,
                        # records of open transactions count (a group waits behind them too), and the end of a
                        # partition is told (only transaction markers after the offset: nothing to process)
                        "isolation.level": "read_uncommitted", "enable.partition.eof": True,
                        # a record below the log start was deleted: the oldest one retained is the first unread
                        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                        "queued.min.messages": 1, "queued.max.messages.kbytes": 1024}
        self._consumer: Consumer | None = None
        self._known: dict[RecordKey, int] = {}

    def read(self, wanted: set[RecordKey]) -> dict[RecordKey, int | None]:
        """Each record's timestamp (ms); NO_RECORD where the log holds only transaction markers from that offset
        to its end (asked again each time: a record can come after them); None where unreadable."""
        missing = sorted(wanted - self._known.keys())
        fetched: dict[RecordKey, int] = {}
        if missing:
            try:
                fetched = self._fetch(missing, time.monotonic() + STAMP_BUDGET)
            except KafkaException as error:
                log.info("record timestamps unreadable: %s", describe_error(error))
                self._consumer = None
        self._known = {key: stamp for key, stamp in {**self._known, **fetched}.items()
                       if key in wanted and stamp != NO_RECORD}
        return {key: self._known.get(key, fetched.get(key)) for key in wanted}

    def _fetch(self, missing: list[RecordKey], deadline: float) -> dict[RecordKey, int]:
        if self._consumer is None:
            self._consumer = Consumer(self._config)
        found: dict[RecordKey, int] = {}
        while missing and time.monotonic() < deadline:
            # One offset per partition at a time (two groups can wait at different offsets of one partition)
            batch: dict[TopicPartitionKey, int] = {}
            for topic, partition, offset in missing:
                batch.setdefault((topic, partition), offset)
            found.update(self._fetch_batch(self._consumer, batch, deadline))
            missing = [key for key in missing if batch.get(key[:2]) != key[2]]
        return found

    @staticmethod
    def _fetch_batch(consumer: Consumer, batch: dict[TopicPartitionKey, int],
                     deadline: float) -> dict[RecordKey, int]:
        found: dict[RecordKey, int] = {}
        assigned = [TopicPartition(t, p, offset) for (t, p), offset in batch.items()]
        consumer.assign(assigned)
        try:
            while len(found) < len(batch) and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=len(batch), timeout=0.5):
                    tp = (message.topic() or "", message.partition() or 0)
                    stamp = _stamp(message)
                    if tp in batch and stamp is not None:
                        found.setdefault((*tp, batch[tp]), stamp)
                        consumer.pause([TopicPartition(*tp)])
        finally:
            consumer.resume(assigned)  # (a partition paused here stays paused when it is assigned again)
            consumer.unassign()
        return found


def _stamp(message: Message) -> int | None:
    """A fetched record's timestamp; NO_RECORD at the end of its partition; None for anything else."""
    error = message.error()
    if error is not None:
        return NO_RECORD if error.code() == KafkaError._PARTITION_EOF else None
    kind, stamp = message.timestamp()
    return None if kind == TIMESTAMP_NOT_AVAILABLE else stamp
