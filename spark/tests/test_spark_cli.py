"""The job as Kubernetes runs it: spark-submit, the mounted connection ConfigMap, a crash, a resume."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from pageview_data import EventFactory, expected_results, minutes
from spark_harness import file_results, mount_configmap, produce

from krafty_spark.session import SPARK_DIR, connector_jars
from krafty_testkit import kafka_admin
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.waiting import wait_for

SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
JOB = SPARK_DIR / "jobs" / "pageviews.py"


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(1))


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spark_submit(log: Path, *job_args: str) -> subprocess.Popen[bytes]:
    """spark-submit in client mode on local[2], as the image's entrypoint runs the driver.

    Scratch space goes next to the log: a SIGKILLed driver cannot clean up after itself.
    """
    scratch = log.parent / "scratch"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "TMPDIR": str(scratch)}
    command = [str(SPARK_SUBMIT), "--master", "local[2]", "--driver-memory", "1g",
               "--driver-java-options", f"-Djava.io.tmpdir={scratch}", "--jars", ",".join(connector_jars()),
               "--conf", f"spark.local.dir={scratch}", "--conf", "spark.sql.shuffle.partitions=2",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
               str(JOB), *job_args]
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, preexec_fn=_die_with_parent)  # noqa: PLW1509 - prctl only


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def committed_batches(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))


def log_tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def test_missing_bootstrap_address_is_a_clear_error(tmp_path):
    # Given neither a mounted connection ConfigMap nor --bootstrap-servers
    result = subprocess.run(
        [sys.executable, "-m", "krafty_spark", "--input-topics", "views", "--output-path", str(tmp_path / "out"),
         "--checkpoint", str(tmp_path / "ck"), "--connection-dir", str(tmp_path / "absent")],
        capture_output=True, text=True, timeout=60, check=False)
    # Then the job exits 2 before starting Spark, saying what to pass or mount
    assert result.returncode == 2
    assert "no Kafka bootstrap address" in result.stderr
    assert "--bootstrap-servers" in result.stderr
    assert f"{tmp_path / 'absent'} does not exist" in result.stderr


def test_killed_driver_resumed_with_available_now_writes_every_window_once(spark, kafka, tmp_path):
    # Given the connection ConfigMap mounted as a directory, and 600 page views over two minutes
    connection = mount_configmap(tmp_path / "kafka-connection", {
        "bootstrap.servers": kafka.bootstrap_servers + "\n", "security.protocol": "PLAINTEXT"})
    kafka_admin.create_topic(kafka.admin(), "cli-views", 3, 1)
    make = EventFactory(seed=5)
    first = make.between(600, minutes(0), minutes(1.99))
    produce(kafka.bootstrap_servers, "cli-views", first)
    checkpoint, output, log = tmp_path / "checkpoint", tmp_path / "output", tmp_path / "driver.log"
    common = ["--job-name", "cli", "--connection-dir", str(connection), "--input-topics", "cli-views",
              "--output-path", str(output), "--checkpoint", str(checkpoint)]
    # When the driver, reading 100 records per batch, is SIGKILLed after two committed batches
    driver = spark_submit(log, *common, "--trigger", "1s", "--max-offsets-per-trigger", "100")
    try:
        wait_for(lambda: committed_batches(checkpoint) if driver.poll() is None else f"exited: {log_tail(log)}",
                 lambda batches: isinstance(batches, list) and len(batches) >= 2, 180, "two committed batches")
    finally:
        kill_group(driver)
    # And, after newer events arrive, the job is run again from its checkpoint with trigger availableNow
    second = make.between(60, minutes(6), minutes(6.99))
    produce(kafka.bootstrap_servers, "cli-views", second)
    resumed = spark_submit(log, *common, "--trigger", "available-now")
    try:
        code = resumed.wait(300)
    finally:
        kill_group(resumed)
    assert code == 0, log_tail(log)
    # Then every final window is in the files exactly once, with the reference's counts
    expected = expected_results([first, second])
    assert file_results(spark, output) == sorted(expected.files.items())
    # And the job's lag group shows lag 0 at the topic's end: the last batch was committed before exit
    described = kafka.tool("kafka-consumer-groups.sh", "--bootstrap-server", kafka.bootstrap_servers,
                           "--describe", "--group", "spark-cli").stdout
    rows = [line.split() for line in described.splitlines() if line.startswith("spark-cli ")]
    assert len(rows) == 3, described
    assert sum(int(row[4]) for row in rows) == 660
    assert all(row[3] == row[4] and row[5] == "0" for row in rows), described
