"""The page-view job run by the real Kubeflow Spark operator (v2.4.0, built from its Go module, installed with its own
Helm chart, its image made from the krafty Spark image) from spark/k8s/spark-application.yaml: a long-running stream
(a micro-batch every 5 s) whose file output, read back with Spark, equals the reference computed in plain Python;
the driver serving Spark's own Prometheus metrics of the query; and (full set) the same through a deleted driver
pod, a SIGKILLed executor and a roll of the brokers under a steady producer, with the lag group back near zero."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from page_views import closing, events, numbered
from test_40_metrics import behind, firing, start_prometheus

from krafty_testkit import spark_operator
from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    SPARK_IMAGE,
    ClientPod,
    KafkaClusterHandle,
    repo_path,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

READER = "spark-output-reader"

# Reads the job's file output with Spark (which follows the sink's _spark_metadata log, so files of a batch that
# never committed are not read), until it holds `want` rows or `timeout` seconds passed; prints the rows.
READ_OUTPUT = """
import json, sys, time
from pyspark.sql import SparkSession, functions as F
from pyspark.errors import AnalysisException
path, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
deadline = time.monotonic() + timeout
while True:
    try:
        df = spark.read.parquet(path)
        rows = df.select("page", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), "views").collect()
    except AnalysisException:  # no committed batch has written a file yet
        rows = []
    if len(rows) >= want or time.monotonic() > deadline:
        break
    time.sleep(2)
print(json.dumps([list(row) for row in rows]))
"""


@pytest.fixture(scope="module")
def spark_operator_installed(spark_ready: KubeCluster,
                             cluster_timings: list[tuple[str, float]]) -> Iterator[KubeCluster]:
    """The Spark operator, watching the test namespace; uninstalled at the end (its CRDs stay)."""
    began = time.monotonic()
    spark_ready.load_images([spark_operator.image()])  # (after spark_ready's Spark image: it is built from it)
    built = time.monotonic()
    spark_operator.install(spark_ready, (NAMESPACE,))
    cluster_timings.append(("Spark operator: binary (cached) and image built, loaded", built - began))
    cluster_timings.append(("Spark operator: helm upgrade --install --wait", time.monotonic() - built))
    yield spark_ready
    spark_operator.uninstall(spark_ready, (NAMESPACE,))


@pytest.fixture(scope="module")
def reader(spark_ready: KubeCluster) -> Iterator[str]:
    """A pod of the Spark image with the job's data volume, to read its output with Spark."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": READER, "namespace": NAMESPACE},
           "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 185, "runAsGroup": 185, "fsGroup": 185},
                    "containers": [{"name": "reader", "image": SPARK_IMAGE.name, "imagePullPolicy": "IfNotPresent",
                                    "args": ["sleep", "infinity"],
                                    "resources": {"requests": {"cpu": "50m", "memory": "512Mi"}},
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "krafty-spark-data"}}],
                    "terminationGracePeriodSeconds": 1}}
    spark_ready.apply([pod])
    spark_ready.kubectl("wait", "--for=condition=Ready", f"pod/{READER}", "-n", NAMESPACE, "--timeout=180s",
                        timeout=200)
    yield READER
    spark_ready.kubectl("delete", "pod", READER, "-n", NAMESPACE, "--ignore-not-found", "--wait=true")


@dataclass
class Job:
    """One run of the page-view job as a SparkApplication, on its own topic, volume folder and lag group."""

    kube: KubeCluster
    prod: KafkaClusterHandle
    name: str
    topic: str
    applied_at: float = 0.0

    @property
    def folder(self) -> str:
        return f"/data/{self.name}"

    @property
    def group(self) -> str:
        return f"spark-{self.name}"

    def create_topic(self, partitions: int = 3, config: dict[str, str] | None = None) -> None:
        self.kube.apply([topic_resource(self.topic, self.prod.name, partitions=partitions, replicas=3,
                                        config={"min.insync.replicas": "2", **(config or {})})])
        wait_topic_ready(self.kube, self.topic)

    def apply(self, output_topic: str | None = None) -> dict[str, Any]:
        """Runs the job, writing files (exactly-once), or to `output_topic` (at-least-once) when given."""
        app = spark_operator.application(self.name, self.prod.name, SPARK_IMAGE.name, {
            "--job-name": self.name, "--input-topics": self.topic, "--checkpoint": f"{self.folder}/checkpoint",
            "--output-path": None if output_topic else f"{self.folder}/output", "--output-topic": output_topic})
        self.kube.apply([app], namespace=NAMESPACE)
        self.applied_at = time.monotonic()
        return app

    def state(self) -> dict[str, Any]:
        return spark_operator.state(self.kube, NAMESPACE, self.name)

    def driver(self) -> dict[str, Any]:
        running = spark_operator.pods(self.kube, NAMESPACE, self.name, "driver")
        assert running, f"no running driver pod; application status: {self.state()}"
        return running[-1]

    def lag(self) -> dict[int, int | None]:
        """The lag group's lag per partition of the topic (None: nothing committed for it yet)."""
        described = self.prod.kafka_tool("kafka-consumer-groups.sh", "--describe", "--group", self.group)
        lags: dict[int, int | None] = {}
        for line in described.splitlines():
            fields = line.split()
            if len(fields) >= 6 and fields[0] == self.group and fields[1] == self.topic:
                lags[int(fields[2])] = None if fields[5] == "-" else int(fields[5])
        return lags

    def committed(self) -> dict[int, int]:
        """The lag group's committed offset per partition (those it committed)."""
        described = self.prod.kafka_tool("kafka-consumer-groups.sh", "--describe", "--group", self.group)
        return {int(f[2]): int(f[3]) for f in (line.split() for line in described.splitlines())
                if len(f) >= 6 and f[0] == self.group and f[1] == self.topic and f[3].isdigit()}

    def log_starts(self) -> dict[int, int]:
        """The oldest offset each partition of the topic still holds."""
        shown = self.prod.kafka_tool("kafka-get-offsets.sh", "--topic", self.topic, "--time", "-2")
        return {int(p): int(o) for p, o in re.findall(rf"^{re.escape(self.topic)}:(\d+):(\d+)$", shown, re.M)}

    def record_time(self, partition: int, offset: int) -> float:
        """The timestamp (s) Kafka holds for one record of the topic."""
        shown = self.prod.kafka_tool("kafka-console-consumer.sh", "--topic", self.topic, "--partition", str(partition),
                                     "--offset", str(offset), "--max-messages", "1", "--timeout-ms", "30000",
                                     "--property", "print.timestamp=true")
        return int(re.search(r"CreateTime:(\d+)", shown).group(1)) / 1000  # type: ignore[union-attr]

    def committed_total(self) -> int:
        """Records the job has durably processed (the lag group's offsets summed), 0 before its first commit."""
        return sum(self.committed().values())

    def wait_lag(self, partitions: int, at_most: int, timeout: float, what: str) -> dict[int, int | None]:
        """Waits until the lag group has an offset on every partition and its lag over all of them is at most
        `at_most` records."""
        def low(lags: dict[int, int | None]) -> bool:
            known = [lag for lag in lags.values() if lag is not None]
            return len(known) == partitions and sum(known) <= at_most

        return wait_for(self.lag, low, timeout, f"the lag group {self.group} {what}", interval=3)

    def read_output(self, want: int, timeout: float = 300) -> list[tuple[str, str, int]]:
        """The file output read with Spark in the reader pod, once it holds `want` rows (or at the timeout)."""
        out = self.kube.kubectl("exec", "-i", "-n", NAMESPACE, READER, "--", "python", "-", f"{self.folder}/output",
                                str(want), str(timeout), stdin=READ_OUTPUT, timeout=timeout + 180)
        return [(page, start, int(views)) for page, start, views in json.loads(out.strip().splitlines()[-1])]

    def metrics(self) -> dict[str, float]:
        text = spark_operator.driver_metrics(self.kube, NAMESPACE, self.driver()["metadata"]["name"])
        return spark_operator.prometheus_samples(text)

    def clean_up(self, reader_pod: str) -> None:
        spark_operator.delete(self.kube, NAMESPACE, self.name)
        self.kube.kubectl("exec", "-n", NAMESPACE, reader_pod, "--", "rm", "-rf", self.folder)
        self.prod.kafka_tool("kafka-consumer-groups.sh", "--delete", "--group", self.group)
        self.kube.kubectl("delete", "topic", self.topic, "-n", NAMESPACE, "--ignore-not-found", "--wait=true",
                          timeout=120)


@pytest.fixture
def new_job(spark_operator_installed: KubeCluster, prod: KafkaClusterHandle, reader: str) -> Iterator[
        Callable[[str], Job]]:
    """Makes fresh jobs: pageviews-NAME on the topic page-views-NAME (what an earlier run left of it removed first:
    application, output, lag group, topic), cleaned up after the test."""
    made: list[Job] = []

    def make(name: str) -> Job:
        run = Job(spark_operator_installed, prod, f"pageviews-{name}", f"page-views-{name}")
        run.clean_up(reader)
        made.append(run)
        return run

    yield make
    for run in made:
        run.clean_up(reader)


def as_reference(rows: list[tuple[str, str, int]]) -> Counter[tuple[str, str]]:
    """File rows as views per (page, window start); a window written twice would show as one key too many rows."""
    keys = Counter((page, start) for page, start, _ in rows)
    assert max(keys.values(), default=1) == 1, f"windows written more than once: {keys.most_common(3)}"
    return Counter({(page, start): views for page, start, views in rows})


# The streaming query's series on the driver (spark.metrics.namespace is the app name, the query is named after it)
def query_series(job_name: str) -> dict[str, str]:
    prefix = f"metrics_{job_name.replace('-', '_')}_driver_spark_streaming_{job_name.replace('-', '_')}"
    return {what: f'{prefix}_{what}_Value{{type="gauges"}}'
            for what in ("inputRate_total", "processingRate_total", "latency", "eventTime_watermark")}


def test_the_spark_operator_runs_the_application_as_a_stream_whose_files_equal_the_reference_and_serves_its_metrics(
        new_job: Callable[[str], Job], client: ClientPod, prod: KafkaClusterHandle) -> None:
    job = new_job("stream")
    # Given a topic with five minutes of page views
    job.create_topic()
    lines, expected = events()
    assert client.cli("produce-lines", prod.bootstrap, job.topic, stdin="\n".join(lines))["acked"] == len(lines)

    # When the SparkApplication is applied, Then the Spark operator runs its driver and an executor
    job.apply()
    status = spark_operator.wait_running(job.kube, NAMESPACE, job.name)
    running = time.monotonic() - job.applied_at
    assert status["state"]["state"] == "RUNNING"
    driver = job.driver()
    assert driver["metadata"]["labels"]["sparkoperator.k8s.io/launched-by-spark-operator"] == "true"
    # (the webhook mounted the connection ConfigMap, CA, KafkaUser Secret and data volume, and set the annotations)
    mounts = {m["name"]: m["mountPath"] for m in driver["spec"]["containers"][0]["volumeMounts"]}
    assert {name: mounts.get(name) for name in ("kafka-connection", "kafka-ca", "kafka-user", "data")} == {
        "kafka-connection": "/etc/krafty/kafka-connection", "kafka-ca": "/etc/krafty/kafka-ca",
        "kafka-user": "/etc/krafty/kafka-user", "data": "/data"}
    assert driver["metadata"]["annotations"]["prometheus.io/path"] == "/metrics/prometheus"

    # And its first micro-batch reads them all: the lag group it commits to reaches the end of the topic
    job.wait_lag(3, 0, 600, "at 0")
    first_batch = time.monotonic() - job.applied_at

    # When a later view arrives while the stream runs, Then it closes every window, and the files equal the reference
    last = datetime(2026, 1, 1, 0, 4, 59, tzinfo=UTC)
    assert client.cli("produce-lines", prod.bootstrap, job.topic, stdin=closing(last + timedelta(minutes=3)))[
        "acked"] == 1
    got = as_reference(job.read_output(len(expected)))
    output = time.monotonic() - job.applied_at
    assert got == expected
    job.wait_lag(3, 0, 120, "at 0 after the closing view")

    # And the driver serves the query's input rate, processing rate, batch duration and watermark to Prometheus
    series = query_series(job.name)
    watermark = (last + timedelta(minutes=1)).timestamp() * 1000  # the closing view's time minus 2 minutes
    metrics = wait_for(job.metrics, lambda m: set(series.values()) <= set(m)
                       and m[series["eventTime_watermark"]] == watermark, 120, "the query's metrics, at its watermark")
    assert metrics[series["latency"]] > 0
    # And a Prometheus scraping the driver has them, as the dashboard's Spark panels ask for them
    prometheus = start_prometheus(job.kube)
    for expr in spark_panel_queries():
        shown = wait_for(lambda e=expr: prometheus.query(e), bool, 120, f"the dashboard's {expr}")
        assert {r["metric"]["spark_job"] for r in shown} == {job.name.replace("-", "_")}, shown
    report_table("The page-view job run by the Spark operator", ["from applying the SparkApplication to", "s"],
                 [["RUNNING (driver and executor pods up)", f"{running:.0f}"],
                  ["the first micro-batch committed (600 views)", f"{first_batch:.0f}"],
                  ["every window in the files", f"{output:.0f}"]])


@dataclass
class PageViewProducer:
    """Produces numbered page views in order, a chunk every second, from the client pod (acks=all, idempotent),
    and keeps the reference of what was acknowledged."""

    client: ClientPod
    bootstrap: str
    topic: str
    chunk: int = 20
    produced: int = 0
    expected: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            lines, expected = numbered(self.produced, self.chunk)
            try:
                report = self.client.cli("produce-lines", self.bootstrap, self.topic, stdin="\n".join(lines))
            except Exception as error:  # noqa: BLE001 - recorded, and the test fails on it
                self.errors.append(f"chunk from {self.produced}: {error}")
                return
            if report["acked"] != len(lines):
                self.errors.append(f"chunk from {self.produced}: {report}")
                return
            self.produced += len(lines)
            self.expected.update(expected)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=300)

    def last_time(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + (self.produced - 1) * timedelta(milliseconds=500)


def restart_drivers(*runs: Job) -> tuple[dict[str, Any], dict[str, Any]]:
    """Deletes the driver pod of each run and waits until the Spark operator has started each again; returns the
    first run's old driver (metadata) and new driver pod."""
    drivers = {run.name: run.driver()["metadata"] for run in runs}
    for run in runs:
        run.kube.kubectl("delete", "pod", drivers[run.name]["name"], "-n", NAMESPACE, "--wait=true", timeout=180)
    new = {run.name: wait_for(run.driver, lambda d, r=run: d["metadata"]["uid"] != drivers[r.name]["uid"], 600,
                              f"a new driver pod of {run.name}") for run in runs}
    for run in runs:
        spark_operator.wait_running(run.kube, NAMESPACE, run.name)
    return drivers[runs[0].name], new[runs[0].name]


def last_counts(client: ClientPod, prod: KafkaClusterHandle, topic: str) -> dict[tuple[str, str], int]:
    """The last count of each (page, window start) in the job's output topic."""
    values = client.cli("last-values", prod.bootstrap, topic)["values"]
    return {(v["page"], v["window_start"]): v["views"] for v in map(json.loads, values.values())}


def broker_uids(prod: KafkaClusterHandle) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in prod.pods("broker")}


def wait_progress(job: Job, beyond: int, timeout: float, what: str) -> float:
    """Waits until the job has committed more than `beyond` records; returns the seconds it took."""
    began = time.monotonic()
    wait_for(job.committed_total, lambda total: total > beyond, timeout, f"{job.name} to commit past {beyond} ({what})",
             interval=3)
    return time.monotonic() - began


@pytest.mark.full  # about 10 minutes: drivers restarted, an executor replaced and three brokers rolled
@pytest.mark.timeout(1800)
@pytest.mark.local_faults
def test_the_stream_keeps_exactly_once_files_and_catches_up_through_a_deleted_driver_a_killed_executor_and_a_roll(
        new_job: Callable[[str], Job], client: ClientPod, prod: KafkaClusterHandle) -> None:
    job = new_job("faults")
    # Given the job running as a stream under a steady producer, writing files, and a second run of it on the same
    # topic writing its counts to a compacted topic
    job.create_topic()
    counting = new_job("faults-topic")
    counting.topic = job.topic
    counts = "page-view-counts-faults"
    job.kube.apply([topic_resource(counts, prod.name, partitions=3, replicas=3, config={"cleanup.policy": "compact"})])
    wait_topic_ready(job.kube, counts)
    job.apply()
    counting.apply(output_topic=counts)
    for run in (job, counting):
        spark_operator.wait_running(run.kube, NAMESPACE, run.name)
    producer = PageViewProducer(client, prod.bootstrap, job.topic)
    producer.start()
    try:
        wait_progress(job, 0, 300, "its first batches")
        series = query_series(job.name)
        wait_for(job.metrics, lambda m: m.get(series["inputRate_total"], 0) > 0
                 and m.get(series["processingRate_total"], 0) > 0, 120, "input and processing rates above 0")

        # When their driver pods are deleted, Then the operator starts them again and they resume from their
        # checkpoints
        driver, new_driver = restart_drivers(job, counting)
        driver_back = wait_progress(job, producer.produced, 600, "after the driver was deleted")
        wait_progress(counting, producer.produced, 600, "after the driver was deleted")
        # (and its metrics keep their names: they are named after the app, not its id, which is new)
        wait_for(job.metrics, lambda m: m.get(series["processingRate_total"], 0) > 0, 120,
                 "the new driver's processing rate above 0")

        # When its executor is SIGKILLed, Then Spark replaces it and the stream goes on
        executor = spark_operator.pods(job.kube, NAMESPACE, job.name, "executor")[-1]["metadata"]
        job.kube.kill_container(NAMESPACE, executor["name"])
        wait_for(lambda: [p["metadata"]["uid"] for p in spark_operator.pods(job.kube, NAMESPACE, job.name, "executor")],
                 lambda uids: bool(uids) and executor["uid"] not in uids, 300, "a new executor pod")
        executor_back = wait_progress(job, producer.produced, 600, "after the executor was killed")

        # When the brokers roll for a config change, Then the stream goes on through it
        before = broker_uids(prod)
        current = (prod.get()["spec"]["brokers"].get("config") or {}).get("socket.send.buffer.bytes")
        prod.patch_spec({"brokers": {"config": {"socket.send.buffer.bytes": 229376 if current == 262144 else 262144}}})
        began = time.monotonic()
        wait_for(prod.summary, lambda _: all(broker_uids(prod).get(p) not in (None, uid) for p, uid in before.items())
                 and prod.status().get("roll") is None, 1200, "every broker restarted", interval=5)
        rolled = time.monotonic() - began
        prod.wait_ready(600)

        # And the lag returns near zero while the producer still runs (under 300 views: about 20 s of them)
        job.wait_lag(3, 300, 600, "back near zero after the faults")
        assert new_driver["metadata"]["name"] == driver["name"]  # (the operator's: <app>-driver)
    finally:
        producer.stop()
    assert producer.errors == []

    # Then, once a later view closes every window, the files equal the reference exactly: no loss, no duplicates
    assert client.cli("produce-lines", prod.bootstrap, job.topic,
                      stdin=closing(producer.last_time() + timedelta(minutes=4)))["acked"] == 1
    got = as_reference(job.read_output(len(producer.expected), timeout=600))
    assert got == producer.expected
    lags = job.wait_lag(3, 0, 300, "at 0")
    # And the counts topic, read to its end, holds the right count as the last value of every window (replays
    # after the faults, if any, are byte-identical duplicates: at-least-once)
    counting.wait_lag(3, 0, 300, "at 0")
    closing_view = json.loads(closing(producer.last_time() + timedelta(minutes=4)))
    expected = producer.expected + Counter({(closing_view["page"], closing_view["ts"][:17] + "00.000Z"): 1})
    assert last_counts(client, prod, counts) == dict(expected)
    job.kube.kubectl("delete", "topic", counts, "-n", NAMESPACE, "--ignore-not-found", "--wait=true", timeout=120)
    report_table("The page-view stream through faults (Spark operator)", ["what", "value"],
                 [["page views produced under the faults", producer.produced],
                  ["driver deleted: back to committing in", f"{driver_back:.0f} s"],
                  ["executor killed: back to committing in", f"{executor_back:.0f} s"],
                  ["brokers rolled in", f"{rolled:.0f} s"],
                  ["lag at the end", sum(v or 0 for v in lags.values())]])


def spark_panel_queries() -> list[str]:
    """The queries of the dashboard's Spark panels (input, processed, micro-batch duration)."""
    dashboard = json.loads(repo_path("charts", "krafty-operator", "files", "dashboards", "krafty.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] if p["title"].startswith("Spark") for t in p["targets"]]
    assert len(queries) == 3, queries
    return queries


def failed_on_data_loss(job: Job) -> bool:
    """The driver said the query stopped because records it had not read were gone (its log, while the pod is
    there: the Spark operator starts it again after onFailureRetryInterval)."""
    try:
        shown = job.kube.kubectl("logs", f"{job.name}-driver", "-n", NAMESPACE, "--tail=2000")
    except Exception:  # noqa: BLE001 - no driver pod at this moment
        return False
    return "Some data may have been lost" in shown


@pytest.mark.full  # about 12 minutes: Kafka's retention check runs every 5 minutes
@pytest.mark.timeout(1800)
def test_a_paused_job_falls_behind_in_seconds_is_alerted_before_retention_deletes_and_fails_loudly_after(
        new_job: Callable[[str], Job], client: ClientPod, prod: KafkaClusterHandle) -> None:
    job = new_job("retention")
    prometheus = start_prometheus(job.kube)
    # Given the job streaming from a topic that keeps records 5 minutes (in segments of 10 s) under a steady producer
    # (at risk once less than half of that is left: the alert fires about 3.5 minutes after the pause, and Kafka,
    # checking retention every 5 minutes, deletes between 5 and 10 minutes after it)
    job.create_topic(config={"retention.ms": "300000", "segment.ms": "10000"})
    job.apply()
    spark_operator.wait_running(job.kube, NAMESPACE, job.name)
    producer = PageViewProducer(client, prod.bootstrap, job.topic)
    producer.start()
    rows: list[list[object]] = []
    try:
        wait_progress(job, 0, 300, "its first batches")
        # When the job is paused (its SparkApplication deleted; the checkpoint stays on its volume)
        spark_operator.delete(job.kube, NAMESPACE, job.name)
        paused = time.time()
        committed = job.committed()
        first_unread = min(job.record_time(partition, offset) for partition, offset in committed.items())
        print(f"\npaused at {paused:.1f}, committed {committed}, first unread record stamped {first_unread:.1f}")
        # Then its lag in seconds is the age of the first record it has not read, by Kafka's timestamp, and grows
        # with the wall clock while the time left before retention may delete it falls as fast
        samples = []
        for _ in range(2):
            samples.append(wait_for(lambda: behind(prometheus, job.prod.name, job.group, job.topic),
                                    lambda b: b[2] > paused + 20, 120, "the lag in seconds sampled after the pause"))
            age, _, sampled = samples[-1]
            assert sampled - first_unread - 16 <= age <= sampled - first_unread + 1, (age, sampled, first_unread)
            time.sleep(30)
        grown, fallen = samples[1][0] - samples[0][0], samples[0][1] - samples[1][1]
        assert 15 <= grown <= 45, samples
        assert 15 <= fallen <= 45, samples
        # And the data-loss alert fires in Prometheus, and the KafkaCluster says so, before retention deletes
        # any record the job has not read
        wait_for(lambda: [a for a in firing(prometheus, "KafkaConsumerDataLossForecast")
                          if a["metric"]["group"] == job.group], bool, 300, "KafkaConsumerDataLossForecast firing")
        alerted = time.time()
        starts = job.log_starts()
        assert all(starts[p] <= offset for p, offset in committed.items()), (starts, committed)
        [told] = [e["message"] for e in prod.events("DataLossForecast") if job.group in e["message"]]
        # When retention deletes records it has not read
        starts = wait_for(job.log_starts, lambda s: any(s[p] > offset for p, offset in committed.items()), 900,
                          "retention to delete records the paused job has not read", interval=5)
        deleted = time.time()
        lost = wait_for(lambda: [e["message"] for e in prod.events("ConsumerDataLost") if job.group in e["message"]],
                        bool, 120, "the KafkaCluster's ConsumerDataLost Event")
    finally:
        producer.stop()
    assert producer.errors == []
    # Then the job, resumed, fails loudly rather than skip what is gone (failOnDataLoss)
    job.apply()
    wait_for(lambda: failed_on_data_loss(job), bool, 600, "the resumed job failing on the records lost", interval=3)
    rows += [["lag in seconds 30 s apart (by the first unread record's timestamp)",
              f"{samples[0][0]:.0f} -> {samples[1][0]:.0f} s"],
             ["retention left 30 s apart", f"{samples[0][1]:.0f} -> {samples[1][1]:.0f} s"],
             ["paused to KafkaConsumerDataLossForecast firing", f"{alerted - paused:.0f} s"],
             [f"paused to unread records deleted (oldest offsets {json.dumps(starts)})", f"{deleted - paused:.0f} s"],
             ["Event DataLossForecast", told], ["Event ConsumerDataLost", lost[0]]]
    report_table("A paused Spark job on a topic keeping records 5 minutes", ["what", "value"], rows)
