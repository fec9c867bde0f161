"""The canary (spec.canary): the operator's own acks=all producer and consumer on the cluster's canary topic,
one small record to every partition each interval, on a thread of its own per cluster.

What it measured over its window is read by each pass (`Canaries.reading`): write latency, records not
acknowledged yet counted at their age (a stalled partition shows at once, not when its records finally
come back), and the delay from send to read, records not read yet counted at their age. Both are also
Prometheus histograms. A canary no pass asked about for a while stops by itself (its cluster went to another
operator replica, or is gone).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from krafty.clients.connection import Connection
from krafty.clients.errors import describe_error
from krafty.clients.kafka_admin import admin_config
from krafty.facts.observed import CanaryReading
from krafty.naming import CANARY_TOPIC
from krafty.telemetry import metrics

log = logging.getLogger(__name__)
CLIENT_ID = "krafty-operator-canary"
IDLE_STOP = 300.0  # seconds without a pass asking for figures before the canary stops
REFRESH = 15.0  # seconds between looks at the topic's partitions
WRITE_TIMEOUT_MS = 30000  # a write not acknowledged in this long fails (and holds a gated roll)
# The figures are of at most this many records of each kind (a short interval, a long window and many brokers
# would otherwise keep millions in memory)
MAX_SAMPLES = 50_000


@dataclass(frozen=True)
class CanarySettings:
    connection: Connection
    interval: float  # seconds between records to each partition
    window: float  # seconds of records the figures cover


def p99(values: list[float]) -> int | None:
    """The 99th percentile in milliseconds (nearest rank), or None of nothing."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)] * 1000)


class Canary:
    """One cluster's canary; `reading` is safe from any thread."""

    def __init__(self, namespace: str, cluster: str, settings: CanarySettings,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._labels = (namespace, cluster)
        self._clock = clock
        self._instance = uuid.uuid4().hex[:8]  # records of another canary (another operator replica) are not ours
        self._lock = threading.Lock()
        self._sequence = 0
        self._in_flight: dict[int, float] = {}  # sent, not acknowledged: sequence -> sent at
        self._unread: dict[int, float] = {}  # sent, not read (nor failed): sequence -> sent at, oldest first
        self._acknowledged: deque[tuple[float, float]] = deque(maxlen=MAX_SAMPLES)  # (when, latency s)
        self._read: deque[tuple[float, float]] = deque(maxlen=MAX_SAMPLES)  # (when, delay s)
        self._failed: deque[tuple[float, str]] = deque(maxlen=MAX_SAMPLES)  # (when, error)
        self._asked = clock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"canary-{namespace}/{cluster}", daemon=True)

    def start(self) -> Canary:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)

    def reading(self) -> CanaryReading:
        now = self._clock()
        horizon = now - self.settings.window
        with self._lock:
            self._asked = now
            for found in (self._acknowledged, self._read, self._failed):
                while found and found[0][0] < horizon:
                    found.popleft()
            # a record not read within the window stops counting: the end-to-end figure then says unknown
            # rather than growing without bound
            self._unread = {seq: sent for seq, sent in self._unread.items() if sent >= horizon}
            writes = [latency for _, latency in self._acknowledged] + [now - s for s in self._in_flight.values()]
            reads = [delay for _, delay in self._read] + [now - s for s in self._unread.values()]
            return CanaryReading(round(self.settings.window), len(self._acknowledged), len(self._failed),
                                 p99(writes), p99(reads), self._failed[-1][1] if self._failed else None)

    # -- the canary's own thread -------------------------------------------------------------
    def _run(self) -> None:
        config = admin_config(self.settings.connection, CLIENT_ID)
        producer = Producer({**config, "acks": "all", "linger.ms": 0, "message.timeout.ms": WRITE_TIMEOUT_MS})
        consumer = Consumer({**config, "group.id": CLIENT_ID, "enable.auto.commit": False,
                             "enable.auto.offset.store": False, "fetch.wait.max.ms": 50,
                             "allow.auto.create.topics": False})
        assigned = 0
        due = refresh = self._clock()
        try:
            while not self._stopping.is_set() and self._clock() - self._asked < IDLE_STOP:
                now = self._clock()
                if now >= refresh:
                    assigned = self._assign(consumer, assigned)
                    refresh = now + REFRESH
                if now >= due:
                    self._send(producer, assigned)
                    due = max(due + self.settings.interval, now)
                producer.poll(0)
                for message in consumer.consume(500, timeout=max(0.0, min(0.05, due - self._clock()))):
                    self._arrived(message)
        except KafkaException as error:
            log.warning("canary of %s/%s stopped: %s", *self._labels, describe_error(error))
        finally:
            consumer.close()
            producer.flush(1)
            for histogram in (metrics.CANARY_WRITE_SECONDS, metrics.CANARY_END_TO_END_SECONDS):
                histogram.remove(*self._labels)
            metrics.CANARY_FAILED.remove(*self._labels)

    def _assign(self, consumer: Consumer, assigned: int) -> int:
        """Reads the topic's partitions; new ones are read from their end, exactly (the high watermark, not
        OFFSET_END resolved later: a record sent meanwhile would never be read)."""
        try:
            topic = consumer.list_topics(CANARY_TOPIC, timeout=10).topics.get(CANARY_TOPIC)
        except KafkaException as error:
            log.info("canary of %s/%s: partitions unreadable: %s", *self._labels, describe_error(error))
            return assigned
        count = len(topic.partitions) if topic is not None and topic.error is None else 0
        if count <= assigned:
            return assigned
        fresh = []
        for partition in range(assigned, count):
            tp = TopicPartition(CANARY_TOPIC, partition)
            try:
                tp.offset = consumer.get_watermark_offsets(tp, timeout=10)[1]
            except KafkaException:
                tp.offset = OFFSET_END
            fresh.append(tp)
        consumer.incremental_assign(fresh)
        return count

    def _send(self, producer: Producer, partitions: int) -> None:
        for partition in range(partitions):
            with self._lock:
                self._sequence += 1
                sequence = self._sequence
                self._in_flight[sequence] = self._unread[sequence] = self._clock()
                if len(self._unread) > MAX_SAMPLES:  # never read (the consumer is stuck): the oldest goes
                    del self._unread[next(iter(self._unread))]
            try:
                producer.produce(CANARY_TOPIC, f"{self._instance}:{sequence}".encode(), partition=partition,
                                 on_delivery=functools.partial(self._delivered, sequence))
            except BufferError:  # librdkafka's queue is full: every broker has been away for a while
                self._failure(sequence, "the producer's queue is full")

    def _failure(self, sequence: int, error: str) -> None:
        with self._lock:
            self._in_flight.pop(sequence, None)
            self._unread.pop(sequence, None)
            self._failed.append((self._clock(), error))
        metrics.CANARY_FAILED.labels(*self._labels).inc()

    def _delivered(self, sequence: int, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failure(sequence, error.str())
            return
        now = self._clock()
        with self._lock:
            sent = self._in_flight.pop(sequence, now)
            latency = message.latency()
            latency = now - sent if latency is None else latency
            self._acknowledged.append((now, latency))
        metrics.CANARY_WRITE_SECONDS.labels(*self._labels).observe(latency)

    def _arrived(self, message: Message) -> None:
        if message.error() is not None:
            return  # end of partition and transient fetch errors: the consumer goes on by itself
        instance, _, sequence = (message.value() or b"").decode(errors="replace").partition(":")
        if instance != self._instance or not sequence.isdigit():
            return
        now = self._clock()
        with self._lock:
            sent = self._unread.pop(int(sequence), None)
            if sent is None:
                return  # out of the window already
            self._read.append((now, now - sent))
        metrics.CANARY_END_TO_END_SECONDS.labels(*self._labels).observe(now - sent)


class Canaries:
    """The canaries of the clusters this operator runs, by namespace and name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str], Canary] = {}

    def want(self, namespace: str, cluster: str, settings: CanarySettings | None) -> None:
        """Runs the cluster's canary with these settings (started again when they changed: new credentials, a
        new interval), or stops it (None)."""
        key = (namespace, cluster)
        with self._lock:
            found = self._running.get(key)
            if found is not None and found.running and found.settings == settings:
                return
            if found is not None:
                self._running.pop(key)
        if found is not None:
            found.stop()
        if settings is not None:
            with self._lock:
                self._running[key] = Canary(namespace, cluster, settings).start()
            log.info("canary of %s/%s started", namespace, cluster)

    def reading(self, namespace: str, cluster: str) -> CanaryReading | None:
        with self._lock:
            found = self._running.get((namespace, cluster))
        return found.reading() if found is not None and found.running else None
