"""Benchmark: 500 Topic resources through the operator, against one direct create_topics batch.

The real operator process (kopf, the scheduler, batched Admin calls, a status per resource) runs
against a real kube-apiserver and three real brokers; it reaches Kafka through
KRAFTY_KAFKA_BOOTSTRAP because pod DNS names do not resolve outside a cluster. Both sides end when
every topic exists in Kafka with the right configuration, checked the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from krafty.clients.connection import Connection
from krafty.clients.kafka_admin import KafkaAdmin
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

COUNT = 500
NAMESPACE = "bench"
CRDS = Path(__file__).resolve().parents[1] / "crds"

pytestmark = pytest.mark.bench


def all_configured(admin: KafkaAdmin, names: list[str]) -> int:
    """How many of the topics exist with their retention.ms override."""
    existing = set(admin.client.list_topics(timeout=30).topics)
    present = [n for n in names if n in existing]
    overrides = admin.topic_overrides(present) if present else {}
    return sum(1 for n in present if overrides.get(n, {}).get("retention.ms") == f"{3600000 + int(n[-3:])}")


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(3))


@pytest.fixture(scope="module")
def operator(apiserver: LocalApiServer, kafka: LocalKafkaCluster, tmp_path_factory) -> Iterator[subprocess.Popen]:
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", NAMESPACE)
    apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
                     "metadata": {"name": "bench", "namespace": NAMESPACE}, "spec": {"brokers": {"replicas": 3}}})
    log = (tmp_path_factory.mktemp("operator") / "operator.log").open("w")
    env = {**os.environ, "KUBECONFIG": str(apiserver.kubeconfig), "KRAFTY_KAFKA_BOOTSTRAP": kafka.bootstrap_servers}
    proc = subprocess.Popen([sys.executable, "-m", "krafty.main", "--namespace", NAMESPACE, "--metrics-port", "0",
                             "--health-port", "0"], env=env, stdout=log, stderr=subprocess.STDOUT)
    yield proc
    proc.terminate()
    proc.wait(30)


def test_500_topic_resources_against_one_create_topics_batch(apiserver, kafka, operator):
    admin = KafkaAdmin(Connection(kafka.bootstrap_servers))
    # The operator: 500 Topic resources applied at once
    names = [f"managed-{i:03d}" for i in range(COUNT)]
    docs = [{"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "Topic",
             "metadata": {"name": n, "namespace": NAMESPACE},
             "spec": {"clusterRef": {"name": "bench"}, "partitions": 1, "replicas": 3,
                      "config": {"retention.ms": 3600000 + i}}} for i, n in enumerate(names)]
    began = time.monotonic()
    apiserver.kubectl("apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))
    wait_for(lambda: all_configured(admin, names), lambda n: n == COUNT, 600, "all managed topics configured",
             interval=1)
    operator_seconds = time.monotonic() - began
    # The baseline: one Admin create_topics batch of 500 other topics, same settings
    direct = [f"direct-{i:03d}" for i in range(COUNT)]
    began = time.monotonic()
    futures = admin.client.create_topics([NewTopic(n, 1, 3, config={"retention.ms": str(3600000 + i)})
                                          for i, n in enumerate(direct)], operation_timeout=120)
    for future in futures.values():
        future.result(timeout=300)
    wait_for(lambda: all_configured(admin, direct), lambda n: n == COUNT, 600, "all direct topics configured",
             interval=1)
    direct_seconds = time.monotonic() - began
    assert operator.poll() is None, "the operator died during the benchmark"
    report_table(f"{COUNT} topics until all exist in Kafka with the right config (3 brokers, RF 3)",
                 ["path", "seconds", "topics/s", "ratio to direct"],
                 [["Topic resources through the operator", f"{operator_seconds:.1f}",
                   f"{COUNT / operator_seconds:.1f}", f"{direct_seconds / operator_seconds:.2f}"],
                  ["one Admin create_topics batch", f"{direct_seconds:.1f}", f"{COUNT / direct_seconds:.1f}", "1.00"]])
