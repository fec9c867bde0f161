"""Benchmark: Kafka's JVMs started from the class-data sharing archive that the broker image and the test kit's
distribution carry (broker-image/bin/kafka-class-archive.sh), against the same JVMs without it: the JDK's own
archive of its classes, as every JVM had before.

ROUNDS times each way, alternately: 3 combined nodes as local processes started until ready (every node voting, every
broker registered), then the tools a user or a test runs most, each timed from launch to exit. Without the archive
the launcher is pointed at the JDK's default archive (KAFKA_OPTS comes last on its command line, so it wins).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from krafty_testkit.bench_size import sized
from krafty_testkit.kafka_dist import kafka_home, tool_path
from krafty_testkit.local_kafka import Layout, running_cluster
from krafty_testkit.plugin import report_table

pytestmark = pytest.mark.bench
ROUNDS = sized(5, 1)
WAYS = ("with the archive", "without (the JDK's own)")


def _jdk_archive() -> Path:
    settings = subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                              check=True).stderr
    match = re.search(r"^\s*java\.home = (.+)$", settings, re.M)
    assert match, settings
    archive = Path(match.group(1)) / "lib" / "server" / "classes.jsa"
    assert archive.is_file(), archive
    return archive


def _timed(env: dict[str, str], tool: str, *args: str) -> float:
    began = time.monotonic()
    subprocess.run([str(tool_path(tool)), *args], env=env, capture_output=True, text=True, timeout=120, check=True)
    return time.monotonic() - began


def test_kafkas_jvms_start_from_the_archive_against_the_jdks_own(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    assert (kafka_home() / "kafka.jsa").is_file()
    options = {WAYS[0]: "", WAYS[1]: f"-XX:SharedArchiveFile={_jdk_archive()}"}
    tools = {"kafka-topics --create": ("kafka-topics.sh", "--create", "--topic", "t-{round}", "--partitions", "3",
                                       "--replication-factor", "3"),
             "kafka-configs --describe": ("kafka-configs.sh", "--describe", "--entity-type", "brokers",
                                          "--entity-name", "1"),
             "kafka-consumer-groups --list": ("kafka-consumer-groups.sh", "--list")}
    figures: dict[str, dict[str, list[float]]] = {way: {"ready": [], **{t: [] for t in tools}} for way in WAYS}
    for round_ in range(ROUNDS):
        for way in WAYS:
            monkeypatch.setenv("KAFKA_OPTS", options[way])
            with running_cluster(Layout.combined(3), tmp_path / f"{round_}-{WAYS.index(way)}") as cluster:
                figures[way]["ready"].append(cluster.ready_seconds or 0.0)
                env = dict(os.environ)  # (KAFKA_OPTS set above)
                bootstrap = ("--bootstrap-server", cluster.bootstrap_servers)
                for label, (tool, *args) in tools.items():
                    figures[way][label].append(
                        _timed(env, tool, *bootstrap, *(arg.format(round=round_) for arg in args)))
    with_it, without = (figures[way] for way in WAYS)
    rows = []
    for label in ("ready", *tools):
        mine, base = statistics.median(with_it[label]), statistics.median(without[label])
        name = "3 combined nodes started until ready" if label == "ready" else label
        rows.append([name, f"{mine:.2f}", f"{base:.2f}", f"{mine / base:.2f}"])
    report_table(f"Kafka's JVMs from the class-data sharing archive ({ROUNDS} rounds each way, alternately; "
                 "medians, s)", ["what", WAYS[0], WAYS[1], "ratio"], rows)
