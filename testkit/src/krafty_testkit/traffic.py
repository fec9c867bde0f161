"""Producing and verifying real traffic with confluent-kafka (librdkafka).

Every record carries its key and a per-key sequence number, so a reader can
tell exactly which acknowledged records were lost, duplicated or reordered.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_quiet = logging.getLogger("krafty_testkit.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False
# Security settings every client of this process uses (none: plaintext); see use_tls.
_security: dict[str, str] = {}


def use_tls(ca_file: str) -> None:
    """Every client made after this speaks TLS, trusting the CA certificates in `ca_file` (PEM)."""
    _security.update({"security.protocol": "SSL", "ssl.ca.location": ca_file})


def use_certificate(cert_file: str, key_file: str) -> None:
    """Every client made after this presents this client certificate (PEM files; after use_tls)."""
    _security.update({"ssl.certificate.location": cert_file, "ssl.key.location": key_file})


def use_scram(username: str, password: str) -> None:
    """Every client made after this authenticates with SASL SCRAM-SHA-512 (over TLS after use_tls). librdkafka
    before 2.6.1 cannot: Kafka 4 refuses the nonce it sends (confluentinc/librdkafka#4895)."""
    tls = _security.get("security.protocol") == "SSL"
    _security.update({"security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                      "sasl.username": username, "sasl.password": password})


def client_config(bootstrap_servers: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings for tests: its connection-refused chatter goes to a silent logger."""
    return {"bootstrap.servers": bootstrap_servers, "logger": _quiet, **_security, **extra}


def durable_producer_config(bootstrap_servers: str, **extra: Any) -> dict[str, Any]:
    """acks=all with idempotence: an acknowledged record is on every in-sync replica, exactly once."""
    return client_config(bootstrap_servers, **{
        "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "message.timeout.ms": 60000, **extra})


@dataclass
class ProduceReport:
    acked: list[tuple[str, int]] = field(default_factory=list)
    failed: Counter[str] = field(default_factory=Counter)
    ack_times: list[float] = field(default_factory=list)
    # (wall-clock time a record was handed to the client, seconds until its outcome, True if acknowledged)
    outcomes: list[tuple[float, float, bool]] = field(default_factory=list)

    @property
    def failures(self) -> int:
        return sum(self.failed.values())

    def longest_ack_gap(self) -> float:
        """The longest time between two consecutive acknowledgements (seconds)."""
        return self.ack_gaps(1)[0][0] if self.ack_times else 0.0

    def ack_gaps(self, count: int = 3) -> list[tuple[float, float]]:
        """The longest gaps between acknowledgements: (seconds, wall-clock time the gap ended)."""
        times = sorted(self.ack_times)
        offset = time.time() - time.monotonic()
        gaps = sorted(((b - a, b + offset) for a, b in itertools.pairwise(times)), reverse=True)
        return gaps[:count] or [(0.0, 0.0)]


def run_prefix() -> str:
    """A key prefix unique to one producer run, so runs sharing a topic never look like duplicates."""
    return f"r{time.time_ns() % 10**9}-"


def produce_sequences(bootstrap_servers: str, topic: str, count: int, keys: int = 10,
                      start: int = 0, **config: Any) -> ProduceReport:
    """Sends `count` records round-robin over `keys` keys and waits for every outcome."""
    from confluent_kafka import Producer

    producer = Producer(durable_producer_config(bootstrap_servers, **config))
    report = ProduceReport()
    prefix = run_prefix()
    for i in range(start, start + count):
        key = f"{prefix}k{i % keys}"
        _send(producer, report, topic, key, i // keys)
    producer.flush(120)
    return report


def _send(producer: Any, report: ProduceReport, topic: str, key: str, seq: int, size: int = 0) -> None:
    """One record: its value is the sequence number, padded with spaces to `size` bytes (int() ignores them)."""
    sent_wall, sent = time.time(), time.monotonic()

    def delivered(err: Any, msg: Any) -> None:
        now = time.monotonic()
        report.outcomes.append((sent_wall, now - sent, err is None))
        if err is None:
            report.acked.append((key, seq))
            report.ack_times.append(now)
        else:
            report.failed[err.name()] += 1

    while True:
        try:
            producer.produce(topic, key=key, value=str(seq).encode().ljust(size), on_delivery=delivered)
            break
        except BufferError:
            producer.poll(0.1)
    producer.poll(0)


# librdkafka's idempotent producer can write a record twice when a partition's leader changes while several of its
# requests are in flight (an OutOfOrderSequence on a later one bumps the producer epoch and re-sends: librdkafka
# issue #4953, open; seen here once in a CI upgrade roll, 1 duplicate in 32,779). The steady producer runs through
# rolls to prove the operator loses nothing and duplicates nothing, so it keeps one request in flight: the client's
# own flaw cannot show up as the operator's.
STEADY_IN_FLIGHT = {"max.in.flight.requests.per.connection": 1}


class ProducerFailed(RuntimeError):
    """The steady producer stopped producing before it was told to: its report would say less than was meant."""


class SteadyProducer(threading.Thread):
    """Produces at a steady rate until stopped; the report says what was acknowledged. stop() raises
    ProducerFailed when the producing thread died or did not end, rather than return what it had."""

    def __init__(self, bootstrap_servers: str, topic: str, rate: float = 200, keys: int = 10, size: int = 0,
                 **config: Any) -> None:
        super().__init__(daemon=True)
        self.bootstrap_servers, self.topic, self.rate, self.keys = bootstrap_servers, topic, rate, keys
        self.size = size  # bytes of each record's value (0: just the sequence number)
        self.config = config
        self.report = ProduceReport()
        self._stop_event = threading.Event()
        self.sent = 0
        self.seconds = 0.0  # how long it produced
        self.error: BaseException | None = None
        self.prefix = run_prefix()

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as error:  # noqa: BLE001 (stop() raises it in the test's thread)
            self.error = error

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(durable_producer_config(self.bootstrap_servers, **{**STEADY_IN_FLIGHT, **self.config}))
        seqs: Counter[str] = Counter()
        started = time.monotonic()
        while not self._stop_event.is_set():
            key = f"{self.prefix}k{self.sent % self.keys}"
            _send(producer, self.report, self.topic, key, seqs[key], self.size)
            seqs[key] += 1
            self.sent += 1
            wait = started + self.sent / self.rate - time.monotonic()
            if wait > 0:
                producer.poll(wait)
        self.seconds = time.monotonic() - started
        if producer.flush(120):
            raise ProducerFailed(f"records to {self.topic} still without an outcome after 120 s")

    def stop(self) -> ProduceReport:
        self._stop_event.set()
        self.join(150)
        if self.is_alive():
            raise ProducerFailed(f"the producer to {self.topic} did not end within 150 s of being stopped")
        if self.error is not None:
            raise ProducerFailed(f"the producer to {self.topic} died: {self.error!r}") from self.error
        return self.report


def consume_all(bootstrap_servers: str, topic: str, idle_seconds: float = 5.0,
                timeout: float = 120.0, **config: Any) -> list[tuple[str, int]]:
    """Reads the topic from the beginning until nothing new arrives for idle_seconds
    (counted from the moment the partitions are assigned, not from the start)."""
    from confluent_kafka import Consumer

    consumer = Consumer(client_config(bootstrap_servers, **{
        "group.id": f"verify-{topic}-{time.monotonic_ns()}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed", **config}))
    assigned = threading.Event()
    consumer.subscribe([topic], on_assign=lambda _c, partitions: partitions and assigned.set())
    records: list[tuple[str, int]] = []
    deadline = time.monotonic() + timeout
    last = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if assigned.is_set() and last is None:
                last = time.monotonic()
            if msg is not None and not msg.error():
                records.append((msg.key().decode(), int(msg.value())))
                last = time.monotonic()
            if last is not None and time.monotonic() - last >= idle_seconds:
                break
    finally:
        consumer.close()
    return records


@dataclass(frozen=True)
class Verification:
    acked: int
    consumed: int
    lost: list[tuple[str, int]]
    duplicated: list[tuple[str, int]]
    out_of_order: list[str]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.out_of_order)

    def __str__(self) -> str:
        return (f"acked={self.acked} consumed={self.consumed} lost={len(self.lost)} {self.lost[:5]} "
                f"duplicated={len(self.duplicated)} {self.duplicated[:5]} out_of_order_keys={self.out_of_order[:5]}")


def verify(acked: Iterable[tuple[str, int]], consumed: list[tuple[str, int]]) -> Verification:
    """Every acknowledged record read back, none twice, each key's sequence increasing.
    Only the keys of the acknowledged run are compared (other runs may share the topic)."""
    acked_set = set(acked)
    keys = {key for key, _ in acked_set}
    consumed = [record for record in consumed if record[0] in keys]
    counts = Counter(consumed)
    lost = sorted(acked_set - set(counts))
    duplicated = sorted(r for r, n in counts.items() if n > 1)
    last: dict[str, int] = {}
    out_of_order = []
    for key, seq in consumed:
        if seq <= last.get(key, -1) and key not in out_of_order:
            out_of_order.append(key)
        last[key] = max(seq, last.get(key, -1))
    return Verification(len(acked_set), len(consumed), lost, duplicated, out_of_order)
