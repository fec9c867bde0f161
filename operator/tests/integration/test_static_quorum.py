"""A static quorum (kraft.version 0, a cluster formatted as Kafka before 3.9 did) adopted by the operator and moved
to a dynamic one under acks=all load, against real KRaft processes and a real API server: its voters first
refused a change, then kraft.version raised by the pass, then the voters changed one at a time.

As in test_cluster_pass.py, the KafkaCluster, its StatefulSets and pods live in a real kube-apiserver with no
node (the test makes the pods a StatefulSet controller would and marks them ready; e2e/tests/test_30_scaling.py
changes a quorum's voters with real pods). Adopting it is what a user does: the node ConfigMap restored with the
cluster's id and `kraft-quorum: static`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from confluent_kafka import KafkaError, Message, Producer

from krafty import naming
from krafty.clients.connection import Connection
from krafty.clients.kube import Kube
from krafty.naming import Pool
from krafty.planning.cluster import Pace
from krafty.reconcile.cluster import ClusterReconciler, Endpoints, Settings
from krafty.reconcile.connection import Reached
from krafty_testkit import kafka_admin
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.waiting import wait_for

from ..conftest import CRDS, TEST_IMAGES, operator_kube

NS, CLUSTER = "adopted", "old"
SPEC = {"brokers": {"replicas": 3}, "controllers": {"mode": "dedicated", "replicas": 3}}


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.dedicated(3, 3), static_quorum=True)


@pytest.fixture(scope="module")
def kube(apiserver: LocalApiServer, kafka: LocalKafkaCluster) -> Kube:
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", NS, check=False)
    # Adopted: the nodes' volumes are there (their data), and the node ConfigMap restored with the cluster's id and
    # its static quorum
    for pool in Pool:
        for ordinal in range(3):
            apiserver.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             "metadata": {"name": naming.claim(CLUSTER, pool, ordinal), "namespace": NS,
                                          "labels": naming.labels(CLUSTER, pool)},
                             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    apiserver.apply({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": naming.config_map(CLUSTER), "namespace": NS,
                                  "labels": {naming.CLUSTER_LABEL: CLUSTER,
                                             naming.MANAGED_BY_LABEL: naming.MANAGED_BY}},
                     "data": {naming.CLUSTER_ID_KEY: kafka.cluster_id, naming.INITIAL_CONTROLLERS_KEY: "",
                              naming.KRAFT_QUORUM_KEY: "static"}})
    apiserver.apply({"apiVersion": naming.API_VERSION, "kind": naming.CLUSTER_KIND,
                     "metadata": {"name": CLUSTER, "namespace": NS}, "spec": SPEC})
    return Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))


@pytest.fixture(scope="module")
def reconciler(apiserver: LocalApiServer, kube: Kube, kafka: LocalKafkaCluster) -> ClusterReconciler:
    return ClusterReconciler(operator_kube(apiserver, (NS,)), Settings(TEST_IMAGES, endpoints=Endpoints(
        kafka.bootstrap_servers, kafka.controller_bootstrap_servers)), Reached(_never_read))


def _never_read(namespace: str, cluster: str) -> Connection:
    raise AssertionError(f"{namespace}/{cluster} was located from Kubernetes")


def _body(kube: Kube) -> dict[str, Any]:
    body = kube.get(naming.CLUSTER_KIND, CLUSTER, NS)
    assert body is not None
    return body


def _pass(reconciler: ClusterReconciler, kube: Kube, times: int = 1) -> None:
    for _ in range(times):
        reconciler.reconcile(_body(kube))


def _patch(apiserver: LocalApiServer, spec: dict[str, Any]) -> None:
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps({"spec": spec}))


def _described(kafka: LocalKafkaCluster) -> tuple[int, list[int]]:
    """(kraft.version, the voters) as kafka-features.sh and kafka-metadata-quorum.sh show them."""
    features = kafka.tool("kafka-features.sh", "--bootstrap-server", kafka.bootstrap_servers, "describe").stdout
    level = re.search(r"Feature: kraft.version\s.*?FinalizedVersionLevel: (\d+)", features)
    quorum = kafka.tool("kafka-metadata-quorum.sh", "--bootstrap-server", kafka.bootstrap_servers, "describe",
                        "--status").stdout
    line = next(line for line in quorum.splitlines() if line.startswith("CurrentVoters:"))
    ids = re.findall(r'"id":\s*(\d+)', line) or re.findall(r"(\d+)", line)  # (a static quorum's: bare ids)
    return int(level.group(1)) if level else 0, sorted(int(n) for n in ids)


@pytest.fixture
def load(kafka: LocalKafkaCluster) -> Iterator[dict[str, int]]:
    """An idempotent acks=all producer writing throughout the test: what it acknowledged and what failed."""
    kafka_admin.create_topic(kafka.admin(), "adopted-load", 3, 3)
    counts = {"acked": 0, "failed": 0}
    stop = threading.Event()

    def delivered(error: KafkaError | None, _: Message) -> None:
        counts["failed" if error else "acked"] += 1

    def produce() -> None:
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all", "enable.idempotence": True})
        while not stop.is_set():
            producer.produce("adopted-load", b"v", on_delivery=delivered)
            producer.poll(0.02)
        producer.flush(30)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    yield counts
    stop.set()
    thread.join(60)


def test_an_adopted_static_quorum_is_moved_to_a_dynamic_one_under_load_and_then_its_voters_change(
        apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler, kafka: LocalKafkaCluster,
        load: dict[str, int]):
    first = reconciler.reconcile(_body(kube))
    for pool in Pool:
        for ordinal in range(3):
            apiserver.ready_pod(NS, naming.pod(CLUSTER, pool, ordinal), naming.labels(CLUSTER, pool),
                                "krafty/kafka:test")
    assert first.pace is not Pace.CALM
    _pass(reconciler, kube, 3)
    # Given the adopted cluster: kraft.version 0, as the operator reads it and says in status
    assert _described(kafka) == (0, [1000, 1001, 1002])
    shown = {f["name"]: f for f in _body(kube)["status"]["features"]}
    assert shown["kraft.version"]["level"] == 0
    config = kube.get("ConfigMap", naming.config_map(CLUSTER), NS)
    assert config is not None
    assert config["data"][naming.KRAFT_QUORUM_KEY] == "static"
    assert "controller.quorum.voters=" in config["data"][naming.node_config_key(Pool.BROKER, 0)]
    # When the spec asks for one voter less, Then it is refused, naming what to do, and nothing changes
    _patch(apiserver, {"controllers": {"replicas": 1}})
    _pass(reconciler, kube)
    ready = next(c for c in _body(kube)["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "QuorumRefused", ready
    assert "set spec.features kraft.version: 1 first" in ready["message"]
    assert _described(kafka) == (0, [1000, 1001, 1002])
    # When the spec raises kraft.version with it, Then the pass raises it first, Kafka keeps the voters it had
    _patch(apiserver, {"features": {"kraft.version": 1}})
    _pass(reconciler, kube)
    assert _described(kafka) == (1, [1000, 1001, 1002])
    raised = [e["message"] for e in kube.list("Event", NS) if e["reason"] == "FeatureRaised"]
    assert any("raising kraft.version from 0 to 1" in m for m in raised), raised
    # And the nodes' configuration moves to the dynamic quorum's (they find it through the bootstrap servers)
    _pass(reconciler, kube)
    config = kube.get("ConfigMap", naming.config_map(CLUSTER), NS)
    assert config is not None
    assert config["data"][naming.KRAFT_QUORUM_KEY] == "dynamic"
    assert "controller.quorum.bootstrap.servers=" in config["data"][naming.node_config_key(Pool.BROKER, 0)]
    # And then the voters change one at a time: 1002 and 1001 removed while they run
    voters = wait_for(lambda: (_pass(reconciler, kube), _described(kafka)[1])[1], lambda v: v == [1000], 120,
                      "one voter left")
    assert voters == [1000]
    removed = {e["message"] for e in kube.list("Event", NS) if e["reason"] == "VoterRemoved"}
    assert {"controller 1002 removed from the KRaft voters", "controller 1001 removed from the KRaft voters"} <= \
        removed
    # And the load went on: every record acknowledged, none failed
    assert load["failed"] == 0, load
    assert load["acked"] > 100, load
