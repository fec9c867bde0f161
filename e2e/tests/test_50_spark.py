"""Spark on the cluster: spark-submit (k8s:// master, cluster mode) starts driver and executor pods
that consume a topic the test produced; the output topic holds the right counts."""

from __future__ import annotations

import json
import time

import pytest
from page_views import events

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    driver_phase,
    submit_spark,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for


@pytest.fixture(scope="module")
def page_view_topics(spark_ready: KubeCluster, prod: KafkaClusterHandle) -> None:
    operator = spark_ready
    operator.apply([topic_resource("page-views", "prod", partitions=3, replicas=3),
                    topic_resource("page-view-counts", "prod", partitions=3, replicas=3,
                                   config={"cleanup.policy": "compact"})])
    wait_topic_ready(operator, "page-views")
    wait_topic_ready(operator, "page-view-counts")


# CI runs Spark with a KafkaUser's Secret through the Spark operator (test_52): this plaintext run, like
# spark-submit resuming over TLS (test_55), is in the full set
@pytest.mark.full
@pytest.mark.usefixtures("page_view_topics")
def test_spark_submit_runs_driver_and_executor_pods_that_count_right(spark_ready: KubeCluster, client: ClientPod,
                                                                     prod: KafkaClusterHandle):
    lines, expected = events()
    assert client.cli("produce-lines", prod.bootstrap, "page-views", stdin="\n".join(lines))["acked"] == len(lines)
    # (a fresh checkpoint: the volume outlives test runs, and an old checkpoint belongs to an older topic)
    checkpoint = f"/data/pageviews-e2e/{int(time.time())}/checkpoint"
    submit_spark(spark_ready, NAMESPACE, "prod", "pageviews-e2e",
                 "--job-name", "pageviews-e2e", "--input-topics", "page-views", "--output-topic", "page-view-counts",
                 "--checkpoint", checkpoint, "--trigger", "available-now",
                 "--window", "1m", "--watermark", "2m")

    phase = wait_for(lambda: driver_phase(spark_ready, NAMESPACE, "pageviews-e2e"),
                     lambda p: p in ("Succeeded", "Failed"), 900, "the Spark driver to finish", interval=5)
    assert phase == "Succeeded", spark_ready.kubectl("logs", "-n", NAMESPACE, "-l", "spark-role=driver",
                                                     "--tail=80")
    scheduled = spark_ready.kubectl_json("get", "events", "-n", NAMESPACE, "--field-selector", "reason=Scheduled")
    assert any("-exec-" in e["involvedObject"]["name"] for e in scheduled["items"]), "no executor pod ran"
    counts = client.cli("last-values", prod.bootstrap, "page-view-counts")["values"]
    got = {(v["page"], v["window_start"]): v["views"] for v in map(json.loads, counts.values())}
    assert got == dict(expected)
    # The job's progress is visible as consumer-group lag: it committed everything it read
    described = prod.kafka_tool("kafka-consumer-groups.sh", "--describe", "--group", "spark-pageviews-e2e")
    lags = [line.split()[5] for line in described.splitlines()[1:] if line.strip() and "page-views" in line]
    assert lags
    assert set(lags) == {"0"}
