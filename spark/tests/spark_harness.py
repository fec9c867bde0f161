"""Producing page views, reading the job's results and observing its progress in tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from pageview_data import WindowKey

from krafty_spark.events import PageView
from krafty_testkit import traffic
from krafty_testkit.waiting import wait_for


def produce(bootstrap: str, topic: str, events: Iterable[PageView | bytes]) -> int:
    """Writes events (or raw values) with acks=all and waits for every acknowledgement."""
    from confluent_kafka import Producer

    producer = Producer(traffic.durable_producer_config(bootstrap))
    errors: list[str] = []
    sent = 0
    for event in events:
        value = event if isinstance(event, bytes) else event.to_json()
        producer.produce(topic, value=value, on_delivery=lambda err, _m: err and errors.append(err.name()))
        sent += 1
        producer.poll(0)
    producer.flush(60)
    assert not errors, errors
    return sent


def file_results(spark: Any, path: Path, fmt: str = "parquet") -> list[tuple[WindowKey, int]]:
    """Rows of the file sink as Spark reads them (following _spark_metadata), duplicates kept."""
    rows = spark.read.format(fmt).load(str(path)).collect()
    return sorted(((row["page"], _utc(row["window_start"])), row["views"]) for row in rows)


def _utc(ts: datetime) -> datetime:
    from datetime import UTC

    # The session time zone is UTC; Spark hands back naive datetimes in the driver's zone.
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def kafka_results(bootstrap: str, topic: str, timeout: float = 60) -> list[tuple[str, dict[str, Any]]]:
    """Every (key, value) of the output topic up to its current end, in offset order per partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(traffic.client_config(bootstrap, **{
        "group.id": f"read-{topic}", "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
        records: list[tuple[str, dict[str, Any]]] = []
        positions = dict.fromkeys(ends, 0)

        def read() -> dict[int, int]:
            for msg in consumer.consume(1000, timeout=1):
                if msg.error() is None:
                    records.append((msg.key().decode(), json.loads(msg.value())))
                    positions[msg.partition()] = msg.offset() + 1
            return positions

        wait_for(read, lambda seen: all(seen[p] >= end for p, end in ends.items()), timeout,
                 f"{topic} read up to its end offsets {ends}", interval=0)
        return records
    finally:
        consumer.close()


def wait_watermark(query: Any, watermark: str, timeout: float = 90) -> None:
    """Waits until a finished micro-batch of the query ran with this watermark (ISO, UTC)."""

    def reached(seen: list[tuple[int, int, str | None]]) -> bool:
        error = query.exception()
        if error is not None:
            raise AssertionError(f"query {query.name} failed: {error}")
        return any(w == watermark for _, _, w in seen)

    wait_for(lambda: progress_summary(query), reached, timeout,
             f"a batch of {query.name} with watermark {watermark} (batch, rows, watermark)")


def progress_summary(query: Any) -> list[tuple[int, int, str | None]]:
    """(batch id, input rows, watermark) of the query's recent micro-batches."""
    return [(p.batchId, p.numInputRows, p.eventTime.get("watermark")) for p in query.recentProgress]


def topic_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(traffic.client_config(bootstrap, **{"group.id": f"offsets-{topic}"}))
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def processed_offsets(query: Any, topic: str) -> dict[int, int]:
    """partition → end offset of the query's last finished micro-batch."""
    progress = query.lastProgress
    if progress is None:
        return {}
    ends = [json.loads(source.endOffset) for source in progress.sources if source.endOffset]
    return {int(p): offset for end in ends for p, offset in end.get(topic, {}).items()}


def wait_all_processed(query: Any, bootstrap: str, topic: str, timeout: float = 90) -> None:
    """Waits until a finished micro-batch has read the topic up to its current end."""
    ends = topic_end_offsets(bootstrap, topic)
    wait_for(lambda: processed_offsets(query, topic), lambda seen: seen == ends, timeout,
             f"{query.name} to process {topic} up to {ends}")


def mount_configmap(directory: Path, data: dict[str, str]) -> Path:
    """Lays out `data` the way the kubelet mounts a ConfigMap: key -> ..data/key -> ..<timestamp>/key."""
    stamp = directory / "..2026_01_01_00_00_00.000000001"
    stamp.mkdir(parents=True)
    for key, value in data.items():
        (stamp / key).write_text(value)
    (directory / "..data").symlink_to(stamp.name)
    for key in data:
        (directory / key).symlink_to(f"..data/{key}")
    return directory
