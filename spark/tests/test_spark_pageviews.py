"""The page-view job in local Spark against a real KRaft cluster: results, restarts, lag."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pageview_data import WINDOW, EventFactory, Expected, expected_results, four_phases, minutes
from spark_harness import (
    file_results,
    kafka_results,
    processed_offsets,
    produce,
    progress_summary,
    wait_all_processed,
    wait_watermark,
)

from krafty_spark.config import JobOptions, parse_args
from krafty_spark.events import iso_millis
from krafty_spark.job import RunningJob, start
from krafty_spark.lag import LagCommitter
from krafty_spark.pageviews import PARSER_FUNCTION, parse_events
from krafty_testkit import kafka_admin
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.waiting import wait_for

PARTITIONS = 3


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(1))


def new_topic(kafka: LocalKafkaCluster, name: str, partitions: int = PARTITIONS) -> str:
    kafka_admin.create_topic(kafka.admin(), name, partitions, 1)
    return name


def job_options(kafka: LocalKafkaCluster, topic: str, workdir: Path, *extra: str) -> JobOptions:
    return parse_args(["--job-name", topic, "--bootstrap-servers", kafka.bootstrap_servers, "--input-topics", topic,
                       "--checkpoint", str(workdir / "checkpoint"), "--trigger", "500ms",
                       "--window", "1m", "--watermark", "2m", *extra], mounted={})


def finish(job: RunningJob) -> None:
    job.stop()
    job.close()


def run_phases(kafka: LocalKafkaCluster, job: RunningJob, topic: str, phases: list[Any], expected: Expected,
               first: int = 0) -> None:
    """Produces each phase once the job has processed the phases before it and reported their watermark."""
    for number in range(first, len(phases)):
        produce(kafka.bootstrap_servers, topic, phases[number])
        settle(kafka, job, topic, expected, number)


def settle(kafka: LocalKafkaCluster, job: RunningJob, topic: str, expected: Expected, phase: int) -> None:
    """Waits until the job has read everything produced and a batch has run with the phase's watermark."""
    wait_all_processed(job.query, kafka.bootstrap_servers, topic)
    wait_watermark(job.query, expected.watermark_text(phase))


def stop_after_batches(job: RunningJob, batches: int, timeout: float = 90) -> None:
    """Stops the query once it has finished `batches` more micro-batches with input (usually mid-batch)."""
    before = {b for b, rows, _ in progress_summary(job.query) if rows}
    wait_for(lambda: {b for b, rows, _ in progress_summary(job.query) if rows} - before,
             lambda new: len(new) >= batches, timeout, f"{batches} more batches of {job.query.name}")
    finish(job)


def test_each_record_is_parsed_once_and_only_complete_page_views_are_kept(spark):
    values = [b'{"event_id":"e1","user":"u1","page":"/cart","ts":"2026-01-01T00:01:05.250Z"}', b"not json", None,
              b'{"page":"/cart"}', b'{"page":null,"ts":"2026-01-01T00:00:00Z"}', b"[1,2]",
              b'{"page":"/cart","ts":"yesterday"}', b'{"page":{"a":1},"ts":"2026-01-01T00:00:00Z"}',
              b'{"page":"/a","ts":"2026-01-01T00:00:00Z"} trailing', b'{"page":"/a","ts":"2026-01-01T00:00:00Z"',
              b'{"page":"/a","ts":99999999999999999}',
              # what Spark's own from_json accepted, read the same way: another zone, no zone (UTC), seconds since
              # the epoch, a number as page, nested fields skipped, the last of a duplicated key
              b'{"page":"/zone","ts":"2026-01-01T01:00:00.5+01:00"}', b'{"page":"/utc","ts":"2026-01-01 00:00:07"}',
              b'{"page":"/epoch","ts":1767225600}', b'{"page":42,"ts":"2026-01-01T00:00:00Z"}',
              b'{"x":{"page":"/inner","y":[{"ts":1}]},"page":"/outer","ts":"2026-01-01T00:00:00Z"}',
              b'{"page":"/first","page":"/last","ts":"2026-01-01T00:00:00Z"}',
              '{"page":"/caf\u00e9","ts":"2026-01-01T00:00:00Z"}'.encode()]
    parsed = parse_events(spark.createDataFrame([(v,) for v in values], "value binary"))
    # The optimizer must not copy the parse into the filter (it did with from_json: three parses per record)
    assert str(parsed._jdf.queryExecution().optimizedPlan()).count(f"{PARSER_FUNCTION}(") == 1
    assert parsed.columns == ["page", "ts"]
    midnight = datetime(2026, 1, 1)
    assert [tuple(row) for row in parsed.collect()] == [
        ("/cart", datetime(2026, 1, 1, 0, 1, 5, 250000)), ("/zone", datetime(2026, 1, 1, 0, 0, 0, 500000)),
        ("/utc", datetime(2026, 1, 1, 0, 0, 7)), ("/epoch", midnight), ("42", midnight), ("/outer", midnight),
        ("/last", midnight), ("/café", midnight)]


def test_file_sink_holds_each_final_window_once_and_drops_late_events(spark, kafka, tmp_path):
    # Given page views in four phases, some later than the watermark allows, plus records that are not page views
    topic = new_topic(kafka, "views-files")
    phases = four_phases(seed=1)
    expected = expected_results(phases)
    assert expected.dropped > 0
    assert 0 < len(expected.files) < len(expected.kafka)
    produce(kafka.bootstrap_servers, topic, [b"not json", b'{"event_id": "x", "page": "/home"}'])
    # When the job writes files while the phases arrive
    output = tmp_path / "output"
    job = start(spark, job_options(kafka, topic, tmp_path, "--output-path", str(output)))
    try:
        run_phases(kafka, job, topic, phases, expected)
    finally:
        finish(job)
    # Then the files hold exactly the final windows, with the counts of the reference
    assert file_results(spark, output) == sorted(expected.files.items())


def test_file_sink_stopped_mid_stream_and_restarted_counts_nothing_twice(spark, kafka, tmp_path):
    # Given the job writing files in small batches (20 records each)
    topic = new_topic(kafka, "views-files-restart")
    phases = four_phases(seed=2)
    expected = expected_results(phases)
    output = tmp_path / "output"
    options = job_options(kafka, topic, tmp_path, "--output-path", str(output), "--max-offsets-per-trigger", "20")
    job = start(spark, options)
    try:
        run_phases(kafka, job, topic, phases[:1], expected)
        produce(kafka.bootstrap_servers, topic, phases[1])
    finally:
        # When it is stopped in the middle of phase 2, while batches are still being processed
        stop_after_batches(job, 2)
    # And restarted from its checkpoint
    job = start(spark, options)
    try:
        settle(kafka, job, topic, expected, 1)
        run_phases(kafka, job, topic, phases, expected, first=2)
    finally:
        finish(job)
    # Then every final window is in the files exactly once, with the counts of the reference
    assert file_results(spark, output) == sorted(expected.files.items())


def test_kafka_sink_restarted_mid_stream_ends_with_the_right_count_per_key(spark, kafka, tmp_path):
    # Given the job writing updated counts to a Kafka topic in small batches
    topic = new_topic(kafka, "views-kafka")
    results = new_topic(kafka, "views-kafka-counts")
    phases = four_phases(seed=3)
    expected = expected_results(phases)
    options = job_options(kafka, topic, tmp_path, "--output-topic", results, "--max-offsets-per-trigger", "20")
    job = start(spark, options)
    try:
        run_phases(kafka, job, topic, phases[:1], expected)
        produce(kafka.bootstrap_servers, topic, phases[1])
    finally:
        # When it is stopped mid-stream and restarted from its checkpoint
        stop_after_batches(job, 2)
    job = start(spark, options)
    try:
        settle(kafka, job, topic, expected, 1)
        run_phases(kafka, job, topic, phases, expected, first=2)
    finally:
        finish(job)
    # Then the last record per key carries the reference's count, for every window that got an event
    records = kafka_results(kafka.bootstrap_servers, results)
    last = {key: value for key, value in records}
    want = {f"{page}|{iso_millis(begins)}": views for (page, begins), views in expected.kafka.items()}
    assert {key: value["views"] for key, value in last.items()} == want
    # And each key's counts only grow (a replayed batch repeats the same record, never an older count)
    for key in last:
        counts = [value["views"] for k, value in records if k == key]
        assert counts == sorted(counts), (key, counts)
    # And every value describes its key's window
    for key, value in last.items():
        begins = datetime.fromisoformat(value["window_start"])
        assert key == f"{value['page']}|{value['window_start']}"
        assert datetime.fromisoformat(value["window_end"]) - begins == WINDOW


def admin_lag(kafka: LocalKafkaCluster, group: str, topic: str) -> dict[int, int]:
    """partition → log end offset minus the group's committed offset, from the Admin API."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = kafka.admin()
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    committed = {tp.partition: tp.offset for tp in listed.topic_partitions if tp.topic == topic and tp.offset >= 0}
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    ends = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions})
    return {tp.partition: future.result(timeout=30).offset - committed.get(tp.partition, 0)
            for tp, future in ends.items()}


def tool_lag(kafka: LocalKafkaCluster, group: str, topic: str) -> dict[int, tuple[int, int, int]]:
    """partition → (current offset, log end offset, lag), from kafka-consumer-groups.sh --describe."""
    out = kafka.tool("kafka-consumer-groups.sh", "--bootstrap-server", kafka.bootstrap_servers,
                     "--describe", "--group", group).stdout
    rows = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0] == group and fields[1] == topic:
            rows[int(fields[2])] = (int(fields[3]), int(fields[4]), int(fields[5]))
    return rows


def test_lag_group_shows_what_the_job_has_not_processed(spark, kafka, tmp_path):
    # Given a job that has processed every record of its topic
    topic = new_topic(kafka, "views-lag")
    make = EventFactory(seed=4)
    produce(kafka.bootstrap_servers, topic, make.between(90, minutes(0), minutes(1)))
    options = job_options(kafka, topic, tmp_path, "--output-path", str(tmp_path / "output"),
                          "--lag-group", "pageviews-lag")
    job = start(spark, options)
    try:
        wait_for(lambda: admin_lag(kafka, "pageviews-lag", topic), lambda lag: lag and not any(lag.values()), 60,
                 "lag 0 per partition (Admin API)")
        # Then the real tool shows lag 0, at exactly the offsets Spark reports as processed
        processed = processed_offsets(job.query, topic)
        assert sum(processed.values()) == 90
        assert tool_lag(kafka, "pageviews-lag", topic) == {p: (end, end, 0) for p, end in processed.items()}
    finally:
        finish(job)
    # When 57 records arrive while the job is stopped
    produce(kafka.bootstrap_servers, topic, make.between(57, minutes(1), minutes(2)))
    # Then both the tool and the Admin API show a lag of exactly 57
    assert sum(lag for _, _, lag in tool_lag(kafka, "pageviews-lag", topic).values()) == 57
    assert sum(admin_lag(kafka, "pageviews-lag", topic).values()) == 57
    # And once the job is back and has caught up, the lag is 0 again
    job = start(spark, options)
    try:
        wait_for(lambda: tool_lag(kafka, "pageviews-lag", topic),
                 lambda rows: len(rows) == PARTITIONS and all(lag == 0 for _, _, lag in rows.values()), 60,
                 "lag 0 per partition (kafka-consumer-groups.sh)")
        assert sum(end for _, end, _ in tool_lag(kafka, "pageviews-lag", topic).values()) == 147
    finally:
        finish(job)
    assert not any(admin_lag(kafka, "pageviews-lag", topic).values())


def test_lag_committer_never_moves_the_group_backwards(kafka):
    # Given a committer that has committed offset 10 of a partition
    topic = new_topic(kafka, "views-monotonic", partitions=1)
    committer = LagCommitter("q", "monotonic", {"bootstrap.servers": kafka.bootstrap_servers})
    try:
        assert committer.commit({(topic, 0): 10}, "spark query=q batch=7") == {(topic, 0): 10}
        # When an older progress event arrives late, and then a newer one
        assert committer.commit({(topic, 0): 4}, "spark query=q batch=3") == {}
        assert committer.commit({(topic, 0): 12}, "spark query=q batch=8") == {(topic, 0): 12}
    finally:
        committer.close()
    # Then the group holds the newest offset, with the batch that produced it
    from confluent_kafka import ConsumerGroupTopicPartitions

    listed = kafka.admin().list_consumer_group_offsets([ConsumerGroupTopicPartitions("monotonic")])["monotonic"]
    [partition] = listed.result(timeout=30).topic_partitions
    assert (partition.offset, partition.metadata) == (12, "spark query=q batch=8")
    assert committer.commit({(topic, 0): 20}) == {}
