"""Benchmark: a calm KafkaCluster pass (nothing to change: the pass every cluster gets every 30 s), sending every
child again against sending only what changed.

One KafkaCluster of 3 dedicated controllers and 3 brokers run as local processes (reached through the operator's
endpoint setting), its pods made Ready by hand on a real kube-apiserver (it has no kubelet), brought to calm by its
first passes. Then ROUNDS calm passes each way, alternately: every child and CA Secret sent each pass, as the
operator did before reconcile/applied.py (a resync interval of 0), against only what changed (now: nothing, until
the two-minute resync). Per pass: the pass's own CPU time (its thread: the API client's encoding and decoding,
the wire client's reads), the API server's (etcd and kube-apiserver), the wall time and the API requests.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from typing import Any

import kubernetes
import pytest
from prometheus_client import REGISTRY

from krafty import naming
from krafty.clients.kube import Kube
from krafty.naming import Pool
from krafty.planning.cluster import Pace
from krafty.reconcile.applied import Applied
from krafty.reconcile.cluster import ClusterReconciler, Endpoints, Settings
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.bench_size import sized
from krafty_testkit.kafka_dist import REPO_ROOT
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.plugin import report_table

NAMESPACE = "calm"
CLUSTER = "calm"
IMAGE = "krafty/kafka:bench"  # the newest version's (a node's version is read from its image: one per version)
ROUNDS = sized(15, 2)

pytestmark = pytest.mark.bench


def _requests() -> Counter[str]:
    out: Counter[str] = Counter()
    for metric in REGISTRY.collect():
        if metric.name == "krafty_kube_requests":
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    out[sample.labels["verb"]] += int(sample.value)
    return out


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.dedicated(3, 3))


@pytest.fixture(scope="module")
def reconciler(apiserver: LocalApiServer, kafka: LocalKafkaCluster) -> tuple[ClusterReconciler, Kube]:
    """The cluster brought to calm: children made, pods Ready, quorum formed, dynamic config applied."""
    apiserver.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds"))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", NAMESPACE, check=False)
    apiserver.apply({"apiVersion": naming.API_VERSION, "kind": naming.CLUSTER_KIND,
                     "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
                     "spec": {"brokers": {"replicas": 3}, "controllers": {"mode": "dedicated", "replicas": 3}}})
    kube = Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))
    reconciler = ClusterReconciler(kube, Settings({"4.2.2": f"{IMAGE}-4.2.2", "4.3.1": IMAGE}, endpoints=Endpoints(
        kafka.bootstrap_servers, kafka.controller_bootstrap_servers)))
    reconciler.reconcile(_body(kube))
    for pool in Pool:
        for ordinal in range(3):
            apiserver.ready_pod(NAMESPACE, naming.pod(CLUSTER, pool, ordinal), naming.labels(CLUSTER, pool), IMAGE)
    for _ in range(10):
        if reconciler.reconcile(_body(kube)).pace is Pace.CALM:
            return reconciler, kube
    raise AssertionError("the cluster never became calm")


def _body(kube: Kube) -> dict[str, Any]:
    body = kube.get(naming.CLUSTER_KIND, CLUSTER, NAMESPACE)
    assert body is not None
    return body


def test_a_calm_pass_sending_every_child_against_only_what_changed(
        reconciler: tuple[ClusterReconciler, Kube], apiserver: LocalApiServer):
    passes, kube = reconciler
    # Both ways as a running operator has them, each having sent every child once: one resending them each pass,
    # one remembering what it sent (the two-minute resync is accounted for below)
    resending, remembered = Applied(resync=0.0), Applied(resync=3600.0)
    for applied in (resending, remembered):
        passes.applied = applied
        passes.reconcile(_body(kube))
    figures: dict[str, dict[str, list[float]]] = {way: {"cpu": [], "server": [], "wall": [], "sent": [], "reads": []}
                                                  for way in ("every child", "what changed")}
    for _ in range(ROUNDS):
        for way in figures:
            passes.applied = resending if way == "every child" else remembered
            body = _body(kube)
            before, server, cpu, wall = _requests(), apiserver.cpu_seconds(), time.thread_time(), time.monotonic()
            outcome = passes.reconcile(body)
            took = {"cpu": time.thread_time() - cpu, "server": apiserver.cpu_seconds() - server,
                    "wall": time.monotonic() - wall}
            requests = _requests() - before
            assert outcome.pace is Pace.CALM, outcome
            for key, value in took.items():
                figures[way][key].append(value)
            figures[way]["sent"].append(requests["apply"] + requests["delete"])
            figures[way]["reads"].append(requests["get"] + requests["list"])
    every, changed = (figures[way] for way in ("every child", "what changed"))
    assert statistics.mean(changed["sent"]) == 0  # nothing changed: nothing sent
    assert statistics.mean(every["sent"]) > 10  # the children and the CA Secrets

    def row(way: str) -> list[str]:
        f = figures[way]
        label = {"every child": "every child (before)", "what changed": "what changed (now, between resyncs)"}
        return [label[way], f"{statistics.mean(f['sent']):.0f}", f"{statistics.mean(f['reads']):.0f}",
                f"{statistics.median(f['cpu']) * 1000:.1f}", f"{statistics.median(f['server']) * 1000:.0f}",
                f"{statistics.median(f['wall']) * 1000:.0f}"]

    # A calm pass every 30 s and a resync every 120 s: one pass in four sends every child
    resynced = {key: (3 * statistics.median(changed[key]) + statistics.median(every[key])) / 4
                for key in ("cpu", "server", "wall")}
    ratio = [f"{resynced[key] / statistics.median(every[key]):.2f}" for key in ("cpu", "server", "wall")]
    report_table(f"A calm cluster pass (3 controllers + 3 brokers, {ROUNDS} passes each way, alternately; medians)",
                 ["calm pass", "children sent", "API reads", "pass CPU (ms)", "API server CPU (ms)", "wall (ms)"],
                 [row("every child"), row("what changed"),
                  ["now, with a resync every 4th pass", "", "",
                   *(f"{resynced[key] * 1000:.1f}" for key in ("cpu", "server", "wall"))],
                  ["ratio (now / before)", "", "", *ratio]])
