"""Moving a running cluster from plaintext to TLS, the steps a user takes, on real pods (the first, adding the TLS
listener under load, is in test_15_tls.py). small serves plain and tls; then:
1. the spec puts tls first: nothing restarts, and the connection ConfigMap sends applications to TLS at once,
   since every broker serves it; the Spark job, which counted the events before over plaintext, reads the
   new ConfigMap (and the CA Secret its pods mount) at its next run and resumes from its checkpoint over TLS;
2. the spec drops plain: the brokers roll under an acks=all producer on TLS that loses nothing, and the
   plaintext port is closed afterwards."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from page_views import events
from reaching import PLAIN_LISTENER, TLS_LISTENER, published, reachable, tls_address

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    assert_written,
    submit_spark,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for


def drivers(kube: KubeCluster, job: str) -> list[dict[str, Any]]:
    """The job's Spark driver pods, oldest first."""
    pods = kube.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", "spark-role=driver")["items"]
    return sorted((p for p in pods if p["metadata"]["name"].startswith(f"{job}-")),
                  key=lambda p: p["metadata"]["creationTimestamp"])


def run_spark(kube: KubeCluster, job: str, checkpoint: str) -> str:
    """One available-now run of the page-view job on small (from its checkpoint); its driver's log."""
    before = {p["metadata"]["name"] for p in drivers(kube, job)}
    submit_spark(kube, NAMESPACE, "small", job, "--job-name", job, "--input-topics", "switch-views",
                 "--output-topic", "switch-view-counts", "--checkpoint", checkpoint, "--trigger", "available-now",
                 "--window", "1m", "--watermark", "2m")

    def finished() -> dict[str, Any] | None:
        new = [p for p in drivers(kube, job) if p["metadata"]["name"] not in before]
        return new[-1] if new and new[-1]["status"].get("phase") in ("Succeeded", "Failed") else None

    driver = wait_for(finished, lambda found: found is not None, 900, f"a new {job} driver to finish", interval=5)
    assert driver is not None
    log = kube.kubectl("logs", "-n", NAMESPACE, driver["metadata"]["name"])
    assert driver["status"]["phase"] == "Succeeded", log[-4000:]
    return log


@pytest.mark.full  # about two and a half minutes with the Spark run: CI adds the TLS listener in test_15_tls.py
@pytest.mark.usefixtures("small_tls")
def test_clients_move_to_tls_without_a_restart_and_the_spark_job_resumes_over_tls(
        small: KafkaClusterHandle, client: ClientPod, spark_ready: KubeCluster):
    wait_for(lambda: published(small), lambda names: names == ["plain", "tls"], 900, "plain and tls published")
    uids = [p["metadata"]["uid"] for p in small.pods("broker")]
    spark_ready.apply([topic_resource("switch-views", "small", partitions=3, replicas=3),
                       topic_resource("switch-view-counts", "small", partitions=3, replicas=3,
                                      config={"cleanup.policy": "compact"})])
    wait_topic_ready(spark_ready, "switch-views")
    wait_topic_ready(spark_ready, "switch-view-counts")
    lines, expected = events()
    half = len(lines) // 2
    checkpoint = f"/data/switch-e2e/{int(time.time())}/checkpoint"
    # Given the page-view job counting the first half of the events, connected as the ConfigMap says: plaintext
    assert small.connection()["security.protocol"] == "PLAINTEXT"
    assert client.cli("produce-lines", small.bootstrap, "switch-views",
                      stdin="\n".join(lines[:half]))["acked"] == half
    assert "security.protocol = PLAINTEXT" in run_spark(spark_ready, "switch-e2e", checkpoint)
    # When the spec puts the TLS listener first
    small.patch_spec({"listeners": [TLS_LISTENER, PLAIN_LISTENER]})
    # Then the connection ConfigMap sends applications to it, naming the CA Secret to trust, and no broker restarts
    moved = wait_for(small.connection, lambda data: data["security.protocol"] == "SSL", 120,
                     "the connection ConfigMap on TLS")
    assert moved["bootstrap.servers"] == tls_address(small)
    assert moved["ssl.truststore.secret"] == "small-cluster-ca-cert"
    assert published(small) == ["tls", "plain"]
    # And the job's next run reads the new connection and the mounted CA Secret, resumes from its checkpoint
    # over TLS (Kafka's client logs its configuration), and its counts cover both halves exactly
    ca = client.trust_cluster_ca(small)
    address = moved["bootstrap.servers"]
    assert client.cli("--ca", ca, "produce-lines", address, "switch-views",
                      stdin="\n".join(lines[half:]))["acked"] == len(lines) - half
    assert "security.protocol = SSL" in run_spark(spark_ready, "switch-e2e", checkpoint)
    counts = client.cli("--ca", ca, "last-values", address, "switch-view-counts")["values"]
    got = {(v["page"], v["window_start"]): v["views"] for v in map(json.loads, counts.values())}
    assert got == dict(expected)
    assert [p["metadata"]["uid"] for p in small.pods("broker")] == uids


@pytest.fixture
def clients_on_tls(small_tls: KafkaClusterHandle) -> KafkaClusterHandle:
    """small with its TLS listener first (the test above puts it there; here when it did not run)."""
    if small_tls.connection()["security.protocol"] != "SSL":
        small_tls.patch_spec({"listeners": [TLS_LISTENER, PLAIN_LISTENER]})
        wait_for(small_tls.connection, lambda data: data["security.protocol"] == "SSL", 120, "clients on TLS")
    return small_tls


@pytest.mark.full  # a roll under load, about five minutes: CI keeps the roll that adds the TLS listener
@pytest.mark.usefixtures("clients_on_tls")
def test_the_plaintext_listener_goes_under_tls_load_and_its_port_closes(small: KafkaClusterHandle, client: ClientPod,
                                                                        operator: KubeCluster):
    operator.apply([topic_resource("switch-tls", "small", partitions=3, replicas=3,
                                   config={"min.insync.replicas": "2"})])
    wait_topic_ready(operator, "switch-tls")
    ca = client.trust_cluster_ca(small)
    address = tls_address(small)
    before = {p["metadata"]["uid"] for p in small.pods("broker")}
    protocols: set[str] = set()

    def replaced() -> int:
        """Brokers restarted since the change (sampling where applications are sent meanwhile)."""
        protocols.add(small.connection()["security.protocol"])
        return sum(1 for p in small.pods("broker") if p["metadata"]["uid"] not in before)

    # Given an acks=all producer on TLS
    with client.steady_producer(address, "switch-tls", rate=50, ca=ca) as produced:
        time.sleep(5)
        # When the spec drops the plaintext listener
        small.patch_spec({"listeners": [TLS_LISTENER]})
        # Then the brokers roll it away while applications stay sent to TLS
        wait_for(replaced, lambda count: count == len(before), 900, "every broker restarted", interval=2)
        small.wait_ready(900)
        time.sleep(5)
    verified = client.verify(address, "switch-tls", ca=ca)
    print(f"\nplaintext listener removed under TLS load: producer {produced}; verified {verified}")
    assert published(small) == ["tls"]
    assert protocols == {"SSL"}
    assert_written(produced)
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    # And nothing answers on the plaintext port any more
    assert not reachable(client, small, PLAIN_LISTENER["port"])
