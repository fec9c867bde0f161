"""Makes a Spark job's Kafka lag visible to every consumer-group lag tool.

Spark's Kafka source tracks offsets only in its checkpoint and never commits
them to Kafka, so `kafka-consumer-groups.sh`, Kafka exporters and alerts see
nothing. `LagCommitter` is a StreamingQueryListener: after each finished
micro-batch it commits the batch's end offsets (the next offset the query
will read, per partition) to a named consumer group, with a plain
confluent-kafka consumer that never subscribes or joins the group. The group's
committed offsets are then what the query has processed and made durable in
its checkpoint (Spark writes the commit log before it reports progress), and
log-end minus committed is the job's real lag.

The committed offsets never move backwards within a run (progress events are
delivered asynchronously, and the job commits the final batch itself when an
availableNow run ends). Committing never fails the query: an error is logged
and the next batch, or the next idle event of the query, commits again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger(__name__)

TopicPartitionOffsets = dict[tuple[str, int], int]


def end_offsets(source_end_offsets: Iterable[str | None]) -> TopicPartitionOffsets:
    """(topic, partition) → offset from the endOffset JSON of a progress event's Kafka sources.

    Spark's Kafka source reports `{"topic": {"0": 42, "1": 17}}`; other
    sources (or a missing offset) contribute nothing.
    """
    offsets: TopicPartitionOffsets = {}
    for text in source_end_offsets:
        if not text:
            continue
        try:
            parsed = json.loads(text)
        except ValueError:
            continue
        if not isinstance(parsed, dict):
            continue
        for topic, partitions in parsed.items():
            if not isinstance(partitions, dict):
                continue
            for partition, offset in partitions.items():
                if isinstance(offset, int) and offset >= 0 and str(partition).isdigit():
                    key = (topic, int(partition))
                    offsets[key] = max(offset, offsets.get(key, -1))
    return offsets


def advanced(offsets: Mapping[tuple[str, int], int], committed: Mapping[tuple[str, int], int]) -> TopicPartitionOffsets:
    """The offsets that move a partition forward from what was already committed."""
    return {tp: offset for tp, offset in offsets.items() if offset > committed.get(tp, -1)}


class LagCommitter(StreamingQueryListener):
    """Commits the processed offsets of the query named `query_name` to `group`."""

    def __init__(self, query_name: str, group: str, client_config: Mapping[str, str]) -> None:
        self.query_name = query_name
        self.group = group
        self._client_config = dict(client_config)
        self._consumer: Any = None
        self._committed: TopicPartitionOffsets = {}
        self._latest: TopicPartitionOffsets = {}  # the newest processed offsets seen, committed or not
        self._query_id: str | None = None
        self._lock = threading.Lock()
        self._closed = False

    # -- StreamingQueryListener --------------------------------------------
    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if progress.name == self.query_name:
            self._query_id = str(progress.id)
            self.commit_progress(progress)

    def onQueryIdle(self, event: Any) -> None:
        # An idle query reports no progress: retry here what a failed commit left behind.
        if str(event.id) == self._query_id:
            self.commit(self._latest, f"spark query={self.query_name}")

    def onQueryTerminated(self, event: Any) -> None:
        pass

    # -- committing ----------------------------------------------------------
    def commit_progress(self, progress: Any) -> TopicPartitionOffsets:
        """Commits the end offsets of a finished batch; returns what moved forward."""
        if progress is None:
            return {}
        offsets = end_offsets(source.endOffset for source in progress.sources)
        return self.commit(offsets, f"spark query={self.query_name} batch={progress.batchId}")

    def commit(self, offsets: Mapping[tuple[str, int], int], metadata: str = "") -> TopicPartitionOffsets:
        from confluent_kafka import KafkaException, TopicPartition

        with self._lock:
            for tp, offset in offsets.items():
                self._latest[tp] = max(offset, self._latest.get(tp, -1))
            forward = advanced(offsets, self._committed)
            if not forward or self._closed:
                return {}
            partitions = [TopicPartition(topic, partition, offset, metadata=metadata)
                          for (topic, partition), offset in sorted(forward.items())]
            try:
                result = self._client().commit(offsets=partitions, asynchronous=False)
            except KafkaException as error:
                log.warning("could not commit offsets of %s to group %s (retried with the next batch or when idle): %s",
                            self.query_name, self.group, error)
                return {}
            failed = [tp for tp in result or [] if tp.error is not None]
            for tp in failed:
                log.warning("could not commit %s[%d] to group %s: %s", tp.topic, tp.partition, self.group, tp.error)
            done = {tp: offset for tp, offset in forward.items()
                    if not any((f.topic, f.partition) == tp for f in failed)}
            self._committed.update(done)
            return done

    def flush(self, timeout: float = 30.0) -> bool:
        """Commits everything processed, retrying until timeout; True once nothing is left.

        A run that ends right after its group's first commit may meet a coordinator that is
        still loading (a new cluster creates its offsets topic on first use).
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                pending = advanced(self._latest, self._committed)
            if not pending or self._closed:
                return not pending
            self.commit(pending, f"spark query={self.query_name} final")
            if time.monotonic() >= deadline:
                log.warning("offsets of %s not committed to group %s after %.0fs", self.query_name, self.group,
                            timeout)
                return False
            time.sleep(1)

    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer({
                **self._client_config, "group.id": self.group, "enable.auto.commit": False,
                "client.id": f"krafty-spark-lag-{self.query_name}", "logger": log})
        return self._consumer

    def close(self) -> None:
        """Closes the committing consumer; events that still arrive are ignored."""
        with self._lock:
            self._closed = True
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
