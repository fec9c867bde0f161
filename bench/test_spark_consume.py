"""Reading 1,000,000 page views from one topic: the Spark job against Kafka's own and librdkafka consumers.

All readers run in the same session over the same preloaded topic (4
partitions, lz4-compressed batches of ~100-byte JSON page views) of a local
single-node KRaft cluster, one after the other:
  (a) the Spark job's read+parse path (Kafka source, from_json with the job's
      schema, dropping unparseable records), trigger availableNow, local[2];
  (b) kafka-consumer-perf-test.sh (Java consumer, no parsing);
  (c) a plain confluent-kafka consumer (no parsing);
  (d) the same consumer plus json.loads per record (parsing, as (a) does).
Seconds are from the start of consuming to the last record: Spark's include
query start and planning, but not the SparkSession start (a second row shows
only the micro-batches' execution, from the query's progress); the perf
tool's are its own elapsed time (group join included), not JVM start.
Only sanity is asserted (every record read); the table is printed (-s).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from krafty_spark.config import parse_args
from krafty_spark.events import PageView
from krafty_spark.pageviews import parse_events, read_records
from krafty_spark.session import build_session
from krafty_testkit import kafka_admin, traffic
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster

RECORDS = 1_000_000
TOPIC = "bench-page-views"
PARTITIONS = 4


@pytest.fixture(scope="module")
def loaded(local_kafka_module, tmp_path_factory) -> LocalKafkaCluster:
    """A cluster whose topic holds RECORDS page views, written by kafka-producer-perf-test.sh."""
    kafka = local_kafka_module(Layout.combined(1), heap="1g")
    kafka_admin.create_topic(kafka.admin(), TOPIC, PARTITIONS, 1)
    payloads = tmp_path_factory.mktemp("bench") / "page-views.jsonl"
    start = datetime(2026, 1, 1, tzinfo=UTC)
    events = (PageView(f"e{i}", f"u{i % 977}", f"/page/{i % 50}", start + timedelta(milliseconds=37 * i))
              for i in range(20_000))
    payloads.write_bytes(b"\n".join(e.to_json() for e in events))
    out = kafka.tool("kafka-producer-perf-test.sh", "--topic", TOPIC, "--num-records", str(RECORDS),
                     "--payload-file", str(payloads), "--throughput", "-1",
                     "--command-property", f"bootstrap.servers={kafka.bootstrap_servers}", "acks=1", "linger.ms=20",
                     "batch.size=262144", "compression.type=lz4", timeout=600)
    assert f"{RECORDS} records sent" in out.stdout, out.stdout
    return kafka


def spark_read_parse(kafka: LocalKafkaCluster, workdir: Path) -> tuple[tuple[int, float], tuple[int, float]]:
    """The job's source and parser, availableNow; counts parsed events per batch (all fields used).

    Returns (records, seconds) from query start to its end, and (records, seconds) of the
    micro-batches' own execution as the query's progress reports it (without planning and start-up).
    """
    from pyspark.sql import functions as F

    spark = build_session("bench-read-parse", master="local[2]", conf={
        "spark.driver.memory": "1g", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    options = parse_args(["--bootstrap-servers", kafka.bootstrap_servers, "--input-topics", TOPIC,
                          "--output-path", str(workdir / "unused"), "--checkpoint", str(workdir / "checkpoint"),
                          "--trigger", "available-now"], mounted={})
    parsed: list[int] = []

    def count(batch, _batch_id: int) -> None:
        row = batch.agg(F.count("event_id").alias("ids"), F.count("user").alias("users"),
                        F.count("page").alias("pages"), F.count("ts").alias("stamps")).collect()[0]
        assert row["ids"] == row["users"] == row["pages"] == row["stamps"]
        parsed.append(row["ids"])

    try:
        started = time.monotonic()
        query = (parse_events(read_records(spark, options)).writeStream.foreachBatch(count)
                 .option("checkpointLocation", options.checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        elapsed = time.monotonic() - started
        executing = sum(p.durationMs.get("triggerExecution", 0) for p in query.recentProgress) / 1000
        return (sum(parsed), elapsed), (sum(p.numInputRows for p in query.recentProgress), executing)
    finally:
        spark.stop()


def perf_test_tool(kafka: LocalKafkaCluster) -> tuple[int, float]:
    """kafka-consumer-perf-test.sh: records and seconds as the tool itself reports them."""
    out = kafka.tool("kafka-consumer-perf-test.sh", "--bootstrap-server", kafka.bootstrap_servers, "--topic", TOPIC,
                     "--num-records", str(RECORDS), "--timeout", "60000", timeout=600).stdout
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("start.time"))
    header, values = lines[at], lines[at + 1]
    row = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in values.split(",")], strict=True))
    records = int(row["data.consumed.in.nMsg"])
    return records, records / float(row["nMsg.sec"])


def confluent_consumer(kafka: LocalKafkaCluster, parse: Callable[[bytes], object] | None) -> tuple[int, float]:
    """A plain librdkafka consumer assigned to every partition from the beginning."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(traffic.client_config(kafka.bootstrap_servers, **{
        "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False}))
    try:
        started = time.monotonic()
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        read = 0
        deadline = started + 300
        while read < RECORDS and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error() is None:
                    read += 1
                    if parse is not None:
                        parse(message.value())
        return read, time.monotonic() - started
    finally:
        consumer.close()


def table(results: dict[str, tuple[int, float]]) -> str:
    rates = {name: records / seconds for name, (records, seconds) in results.items()}
    best = max(rates.values())
    width = max(map(len, results))
    lines = [f"{'reader':<{width}} {'records':>9} {'seconds':>8} {'records/s':>11} {'of best':>8} {'best is':>8}"]
    for name, (records, seconds) in results.items():
        rate = rates[name]
        lines.append(f"{name:<{width}} {records:>9,} {seconds:>8.2f} {rate:>11,.0f} {rate / best:>8.2f} "
                     f"{best / rate:>7.1f}x")
    return "\n".join(lines)


@pytest.mark.bench
@pytest.mark.timeout(1800)
def test_spark_read_parse_against_kafka_consumers(loaded, tmp_path):
    spark_total, spark_batches = spark_read_parse(loaded, tmp_path)
    results = {
        "(a) Spark job read+parse, availableNow, local[2]": spark_total,
        "    the same, micro-batch execution only": spark_batches,
        "(b) kafka-consumer-perf-test.sh": perf_test_tool(loaded),
        "(c) confluent-kafka consumer": confluent_consumer(loaded, None),
        "(d) confluent-kafka consumer + json.loads": confluent_consumer(loaded, json.loads),
    }
    print(f"\n{RECORDS:,} page views ({PARTITIONS} partitions, lz4) on a local single-node KRaft cluster\n"
          + table(results))
    for name, (records, _) in results.items():
        assert records == RECORDS, f"{name} read {records} of {RECORDS} records"
