"""The class-data sharing archive of the broker image's Kafka (broker-image/bin/kafka-class-archive.sh, built with
the distribution by fetch-kafka.sh as in the image's build): the tools and a node load Kafka's classes from it, and
a JVM whose options do not fit it runs as it would without it."""

from __future__ import annotations

import os
import subprocess

from krafty_testkit.kafka_dist import kafka_home, pinned_versions, tool_path
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster


def _topics_tool(*args: str, jvm_options: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKA_OPTS": jvm_options}
    return subprocess.run([str(tool_path("kafka-topics.sh")), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=True)


def test_a_tool_loads_kafkas_classes_from_the_archive() -> None:
    assert (kafka_home() / "kafka.jsa").is_file()
    loaded = _topics_tool("--version", jvm_options="-Xlog:class+load=info").stdout
    tool = next(line for line in loaded.splitlines() if "org.apache.kafka.tools.TopicCommand " in line)
    assert tool.endswith("source: shared objects file"), tool


def test_a_node_maps_the_archive(local_kafka) -> None:
    cluster: LocalKafkaCluster = local_kafka(Layout.combined(1))
    (pid,) = cluster.pids()
    with open(f"/proc/{pid}/maps") as maps:
        assert str(kafka_home() / "kafka.jsa") in maps.read()


def test_a_jvm_whose_options_do_not_fit_the_archive_runs_without_it_and_prints_nothing_more() -> None:
    # An archive is dumped with compressed object pointers: a JVM without them cannot map it
    plain = _topics_tool("--version").stdout
    unfit = _topics_tool("--version", jvm_options="-XX:-UseCompressedOops -Xlog:class+load=info").stdout
    tool = next(line for line in unfit.splitlines() if "org.apache.kafka.tools.TopicCommand " in line)
    assert "shared objects file" not in tool, tool
    assert plain.strip() == _topics_tool("--version", jvm_options="-XX:-UseCompressedOops").stdout.strip()
    assert plain.strip().startswith(pinned_versions()["KAFKA_VERSION"])
