"""The disk pass: each broker's log directories (the size of the volume under each, the bytes still free on it,
and whether the broker still serves it) as metrics, asked of every broker itself, with the lag pass's clients'
connection settings and like it never holding up a cluster pass."""

from __future__ import annotations

import logging

from krafty.clients import kraft
from krafty.clients.errors import KafkaUnavailable
from krafty.reconcile.lag import Locate
from krafty.telemetry import metrics
from krafty.wire import KafkaProtocolError, LogDir

log = logging.getLogger(__name__)
DISK_INTERVAL = 30.0
CALL_TIMEOUT = 5.0


class DiskPass:
    def __init__(self, locate: Locate) -> None:
        self._locate = locate

    def reconcile(self, namespace: str, cluster: str) -> float | None:
        connection = self._locate(namespace, cluster)
        if connection is None:
            return None
        found: dict[int, tuple[LogDir, ...]] = {}
        try:
            brokers = kraft.describe_brokers(connection, timeout=CALL_TIMEOUT)
        except (KafkaUnavailable, KafkaProtocolError) as error:
            log.info("log dirs of %s/%s unreadable: %s", namespace, cluster, error)
            brokers = ()
        # A fenced broker is down or cut off: asking it would only hold one of the cluster's two workers for a
        # timeout (the lag pass waits behind it), and a short timeout keeps a hung one from doing the same
        for broker in (b for b in brokers if not b.fenced):
            try:
                found[broker.node_id] = kraft.log_dirs(connection.to(f"{broker.host}:{broker.port}"),
                                                       timeout=CALL_TIMEOUT)
            except (KafkaUnavailable, KafkaProtocolError) as error:
                log.info("log dirs of broker %d of %s/%s unreadable: %s", broker.node_id, namespace, cluster, error)
        metrics.COLLECTOR.set_log_dirs(namespace, cluster, found)
        return DISK_INTERVAL
