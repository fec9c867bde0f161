"""Moving a running cluster from plaintext to TLS, the steps a user takes, on real pods (the first, adding the TLS
listener under load, is in test_15_tls.py). small serves plain and tls; then:
1. the spec puts tls first: nothing restarts, and the connection ConfigMap sends applications to TLS at once,
   since every broker serves it; a Spark job that reads the ConfigMap (and the CA Secret its pods mount)
   consumes over TLS;
2. the spec drops plain: the brokers roll under an acks=all producer on TLS that loses nothing, and the
   plaintext port is closed afterwards."""

from __future__ import annotations

import json
import time

import pytest
from page_views import events
from reaching import PLAIN_LISTENER, TLS_LISTENER, published, reachable, tls_address

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


@pytest.mark.usefixtures("small_tls")
def test_clients_move_to_tls_without_a_restart_and_a_spark_job_follows(small: KafkaClusterHandle, client: ClientPod,
                                                                       spark_ready: KubeCluster):
    wait_for(lambda: published(small), lambda names: names == ["plain", "tls"], 900, "plain and tls published")
    uids = [p["metadata"]["uid"] for p in small.pods("broker")]
    assert small.connection()["security.protocol"] == "PLAINTEXT"
    # When the spec puts the TLS listener first
    small.patch_spec({"listeners": [TLS_LISTENER, PLAIN_LISTENER]})
    # Then the connection ConfigMap sends applications to it, naming the CA Secret to trust, and no broker restarts
    moved = wait_for(small.connection, lambda data: data["security.protocol"] == "SSL", 120,
                     "the connection ConfigMap on TLS")
    assert moved["bootstrap.servers"] == tls_address(small)
    assert moved["ssl.truststore.secret"] == "small-cluster-ca-cert"
    assert published(small) == ["tls", "plain"]
    # And a Spark job reading the ConfigMap and the mounted CA Secret consumes and produces over TLS
    spark_ready.apply([topic_resource("switch-views", "small", partitions=3, replicas=3),
                       topic_resource("switch-view-counts", "small", partitions=3, replicas=3,
                                      config={"cleanup.policy": "compact"})])
    wait_topic_ready(spark_ready, "switch-views")
    wait_topic_ready(spark_ready, "switch-view-counts")
    ca = client.trust_cluster_ca(small)
    lines, expected = events()
    address = moved["bootstrap.servers"]
    assert client.cli("--ca", ca, "produce-lines", address, "switch-views",
                      stdin="\n".join(lines))["acked"] == len(lines)
    submit_spark(spark_ready, NAMESPACE, "small", "switch-e2e",
                 "--job-name", "switch-e2e", "--input-topics", "switch-views", "--output-topic", "switch-view-counts",
                 "--checkpoint", f"/data/switch-e2e/{int(time.time())}/checkpoint", "--trigger", "available-now",
                 "--window", "1m", "--watermark", "2m")
    phase = wait_for(lambda: driver_phase(spark_ready, NAMESPACE, "switch-e2e"),
                     lambda p: p in ("Succeeded", "Failed"), 900, "the Spark driver to finish", interval=5)
    drivers = sorted((p for p in spark_ready.kubectl_json("get", "pods", "-n", NAMESPACE, "-l",
                                                          "spark-role=driver")["items"]
                      if p["metadata"]["name"].startswith("switch-e2e-")),
                     key=lambda p: p["metadata"]["creationTimestamp"])
    log = spark_ready.kubectl("logs", "-n", NAMESPACE, drivers[-1]["metadata"]["name"])
    assert phase == "Succeeded", log[-4000:]
    assert "security.protocol = SSL" in log  # Kafka's client logs its configuration
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
    assert produced["failed"] == {}
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    # And nothing answers on the plaintext port any more
    assert not reachable(client, small, PLAIN_LISTENER["port"])
