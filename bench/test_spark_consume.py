"""Reading 1,000,000 and 10,000,000 page views: the Spark job against Kafka's own and librdkafka consumers.

All readers run in the same session over the same preloaded topic (4
partitions, lz4-compressed batches of ~100-byte JSON page views) of a local
single-node KRaft cluster, one after the other, for each size:
  (a) the Spark job's read+parse path (its Kafka source and options, its
      parser of page and ts, dropping records that are not page views),
      trigger availableNow, local[2]: first as the session's first query
      (cold: class loading, code generation and the JIT's warm-up included,
      what a job that starts pays), then the same query again in the same
      session (warm, what a running stream sees), and once more warm at
      Kafka's default of 500 records per poll (the job asks for 5,000);
  (a'') the job's parse before its parser: Spark's from_json, of the same
      two fields (page, ts; the job parsed all four before), warm, on the
      same source;
  (a') the job's Kafka source alone, counting records without parsing (warm):
      what Spark's reading costs before the job's own work;
  (b) kafka-consumer-perf-test.sh (Java consumer, no parsing): the baseline;
  (c) a plain confluent-kafka consumer (no parsing);
  (d) the same consumer plus json.loads per record (parsing, as (a) does).
Seconds are from the start of consuming to the last record: Spark's include
query start and planning, but not the SparkSession start (a second row shows
only the micro-batches' execution, from the query's progress); the perf
tool's are its own elapsed time (group join included), not JVM start.
Only sanity is asserted (every record read); the table is printed at the end of the run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from krafty_spark.config import parse_args
from krafty_spark.events import PageView
from krafty_spark.pageviews import parse_events, read_records
from krafty_spark.session import build_session
from krafty_testkit import kafka_admin, traffic
from krafty_testkit.bench_size import sized
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.plugin import report_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SIZES = sized((1_000_000, 10_000_000), (10_000,))
PARTITIONS = 4


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(1), heap="1g")


@pytest.fixture(params=SIZES, ids=lambda n: f"{n:_}")
def loaded(request, kafka: LocalKafkaCluster, tmp_path_factory) -> tuple[LocalKafkaCluster, str, int]:
    """(cluster, topic, records): a topic holding `records` page views, written by kafka-producer-perf-test.sh."""
    records: int = request.param
    topic = f"bench-page-views-{records}"
    kafka_admin.create_topic(kafka.admin(), topic, PARTITIONS, 1)
    payloads = tmp_path_factory.mktemp("bench") / "page-views.jsonl"
    start = datetime(2026, 1, 1, tzinfo=UTC)
    events = (PageView(f"e{i}", f"u{i % 977}", f"/page/{i % 50}", start + timedelta(milliseconds=37 * i))
              for i in range(20_000))
    payloads.write_bytes(b"\n".join(e.to_json() for e in events))
    out = kafka.tool("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", str(records),
                     "--payload-file", str(payloads), "--throughput", "-1",
                     "--command-property", f"bootstrap.servers={kafka.bootstrap_servers}", "acks=1", "linger.ms=20",
                     "batch.size=262144", "compression.type=lz4", timeout=1200)
    assert f"{records} records sent" in out.stdout, out.stdout
    return kafka, topic, records


Result = tuple[int, float]  # (records, seconds)


def from_json_events(records: DataFrame) -> DataFrame:
    """The job's parse before its own parser: Spark's from_json, parsed once (inline), of the same two fields."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    schema = StructType([StructField("page", StringType()), StructField("ts", TimestampType())])
    event = F.from_json(F.col("value").cast("string"), schema)
    return records.select(F.inline(F.array(event))).where(F.col("page").isNotNull() & F.col("ts").isNotNull())


def spark_read_parse(kafka: LocalKafkaCluster, topic: str, workdir: Path) -> dict[str, Result]:
    """The job's source and parser, availableNow, counting parsed events (both fields used): cold, then warm.

    For each run: (records, seconds) from query start to its end, and (records, seconds) of the
    micro-batches' own execution as the query's progress reports it (without planning and start-up).
    """
    from pyspark.sql import functions as F

    spark = build_session("bench-read-parse", master="local[2]", conf={
        "spark.driver.memory": "1g", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")

    def run(checkpoint: Path, *extra: str,
            parse: Callable[[DataFrame], DataFrame] | None = parse_events) -> tuple[Result, Result]:
        options = parse_args(["--bootstrap-servers", kafka.bootstrap_servers, "--input-topics", topic,
                              "--output-path", str(workdir / "unused"), "--checkpoint", str(checkpoint),
                              "--trigger", "available-now", *extra], mounted={})
        parsed: list[int] = []

        def count(batch, _batch_id: int) -> None:
            if parse is None:
                parsed.append(batch.count())
                return
            row = batch.agg(F.count("page").alias("pages"), F.count("ts").alias("stamps")).collect()[0]
            assert row["pages"] == row["stamps"]
            parsed.append(row["pages"])

        started = time.monotonic()
        records = read_records(spark, options)
        query = ((parse(records) if parse else records).writeStream.foreachBatch(count)
                 .option("checkpointLocation", options.checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        elapsed = time.monotonic() - started
        executing = sum(p.durationMs.get("triggerExecution", 0) for p in query.recentProgress) / 1000
        return (sum(parsed), elapsed), (sum(p.numInputRows for p in query.recentProgress), executing)

    try:
        cold, cold_batches = run(workdir / "cold")
        warm, warm_batches = run(workdir / "warm")
        kafkas_default, _ = run(workdir / "poll-500", "--max-poll-records", "500")
        before = run(workdir / "from-json", parse=from_json_events)[0]
        unparsed, _ = run(workdir / "unparsed", parse=None)
    finally:
        spark.stop()
    return {
        "(a) Spark job read+parse, availableNow, local[2], cold": cold,
        "    its micro-batch execution only": cold_batches,
        "(a) the same query again in that session, warm": warm,
        "    its micro-batch execution only, warm": warm_batches,
        "(a) once more, warm, at Kafka's default max.poll.records (500)": kafkas_default,
        "(a'') the same two fields by Spark's from_json, warm": before,
        "(a') the job's Kafka source alone, no parsing, warm": unparsed,
    }


def perf_test_tool(kafka: LocalKafkaCluster, topic: str, records: int) -> Result:
    """kafka-consumer-perf-test.sh: records and seconds as the tool itself reports them."""
    out = kafka.tool("kafka-consumer-perf-test.sh", "--bootstrap-server", kafka.bootstrap_servers, "--topic", topic,
                     "--num-records", str(records), "--timeout", "60000", timeout=1200).stdout
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("start.time"))
    header, values = lines[at], lines[at + 1]
    row = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in values.split(",")], strict=True))
    consumed = int(row["data.consumed.in.nMsg"])
    return consumed, consumed / float(row["nMsg.sec"])


def confluent_consumer(kafka: LocalKafkaCluster, topic: str, records: int,
                       parse: Callable[[bytes], object] | None) -> Result:
    """A plain librdkafka consumer assigned to every partition from the beginning."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(traffic.client_config(kafka.bootstrap_servers, **{
        "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False}))
    try:
        started = time.monotonic()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        read = 0
        deadline = started + 1200
        while read < records and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error() is None:
                    read += 1
                    if parse is not None:
                        parse(message.value())
        return read, time.monotonic() - started
    finally:
        consumer.close()


def table_rows(results: dict[str, Result], baseline: str) -> list[list[object]]:
    rates = {name: records / seconds for name, (records, seconds) in results.items()}
    return [[name, f"{records:,}", f"{seconds:.2f}", f"{rates[name]:,.0f}", f"{rates[name] / rates[baseline]:.2f}x"]
            for name, (records, seconds) in results.items()]


@pytest.mark.bench
@pytest.mark.timeout(3600)
def test_spark_read_parse_against_kafka_consumers(loaded, tmp_path):
    kafka, topic, records = loaded
    baseline = "(b) kafka-consumer-perf-test.sh"
    results = {
        **spark_read_parse(kafka, topic, tmp_path),
        baseline: perf_test_tool(kafka, topic, records),
        "(c) confluent-kafka consumer": confluent_consumer(kafka, topic, records, None),
        "(d) confluent-kafka consumer + json.loads": confluent_consumer(kafka, topic, records, json.loads),
    }
    report_table(f"{records:,} page views ({PARTITIONS} partitions, lz4) on a local single-node KRaft cluster",
                 ["reader", "records", "seconds", "records/s", "of (b)"], table_rows(results, baseline))
    for name, (read, _) in results.items():
        assert read == records, f"{name} read {read} of {records} records"
