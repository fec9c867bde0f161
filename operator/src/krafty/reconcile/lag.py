"""The lag pass: consumer lag of every group of one cluster (Spark jobs' included: their listener
commits offsets), with its own Kafka clients so that it never holds up a cluster pass."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.lag import LagReader
from krafty.decide.lag import (
    DEFAULT_GROUPS,
    GroupSelection,
    PartitionLag,
    RetentionRisk,
    SelectedGroups,
    by_topic,
    partition_lag,
    risk_changes,
    risk_message,
    unreadable,
)
from krafty.telemetry import metrics

log = logging.getLogger(__name__)
LAG_INTERVAL = 10.0

# (namespace, cluster) -> how to connect, or None when the cluster is gone; raises KafkaUnavailable while it
# cannot be reached yet
Locate = Callable[[str, str], Connection | None]
# (namespace, cluster, reason, message, warning): an Event on the KafkaCluster, and the same line in the log
Tell = Callable[[str, str, str, str, bool], None]


class LagPass:
    def __init__(self, locate: Locate, tell: Tell, selection: GroupSelection = DEFAULT_GROUPS) -> None:
        self._locate = locate
        self._selection = selection
        self._tell = tell
        self._risks: dict[tuple[str, str], dict[tuple[str, str], RetentionRisk]] = {}
        self._left_out: dict[tuple[str, str], int] = {}
        self._readers: dict[tuple[str, str], LagReader] = {}
        self._last: dict[tuple[str, str], list[PartitionLag]] = {}
        self._lock = threading.Lock()

    def reconcile(self, namespace: str, cluster: str) -> float | None:
        key = (namespace, cluster)
        previous = self._last.get(key, [])
        try:
            connection = self._locate(namespace, cluster)
            if connection is None:
                self.release(namespace, cluster)
                return None
            read = self._reader(key, connection).read()
            entries = partition_lag(read, previous)
            self._groups(namespace, cluster, read.selected)
        except KafkaUnavailable as error:
            log.info("lag of %s/%s unreadable: %s", namespace, cluster, error)
            entries = unreadable(previous)
        unknown = sum(not e.known for e in entries)
        if unknown:
            log.info("lag of %s/%s: %d of %d group partitions unreadable", namespace, cluster, unknown, len(entries))
        self._last[key] = entries
        metrics.COLLECTOR.set_lag(namespace, cluster, entries)
        self._risk(namespace, cluster, entries)
        return LAG_INTERVAL

    def _risk(self, namespace: str, cluster: str, entries: list[PartitionLag]) -> None:
        """Tells when a group starts or stops being at risk of losing records to retention, or lost some."""
        topics = by_topic(entries)
        present = {(t.group, t.topic) for t in topics}
        known = {key: risk for key, risk in self._risks.get((namespace, cluster), {}).items() if key in present}
        self._risks[(namespace, cluster)] = known
        for topic in risk_changes(known, topics):
            risk = topic.risk
            known[(topic.group, topic.topic)] = risk
            self._tell(namespace, cluster, risk.event_reason, risk_message(topic), risk is not RetentionRisk.SAFE)

    def _groups(self, namespace: str, cluster: str, selected: SelectedGroups) -> None:
        metrics.COLLECTOR.set_lag_groups(namespace, cluster, selected)
        if self._left_out.get((namespace, cluster), 0) != selected.over_limit:
            self._left_out[(namespace, cluster)] = selected.over_limit
            log.warning("lag of %s/%s: %d consumer groups match, the lag of the first %d (by name) is read, "
                        "%d are left out (chart value lag.maxGroups)", namespace, cluster,
                        len(selected.groups) + selected.over_limit, self._selection.limit, selected.over_limit)

    def _reader(self, key: tuple[str, str], connection: Connection) -> LagReader:
        with self._lock:
            reader = self._readers.get(key)
            if reader is None or reader.connection != connection:
                reader = self._readers[key] = LagReader(connection, self._selection)
            return reader

    def release(self, namespace: str, cluster: str) -> None:
        """Forgets a deleted cluster: its report and its clients."""
        self._last.pop((namespace, cluster), None)
        self._risks.pop((namespace, cluster), None)
        self._left_out.pop((namespace, cluster), None)
        with self._lock:
            self._readers.pop((namespace, cluster), None)
