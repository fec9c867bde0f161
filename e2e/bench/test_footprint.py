"""Benchmark: the operator's resident memory and idle CPU with one cluster and 200 topics,
against an empty kopf operator (same image, same watches, no work) running alongside; the replica that
leads (the Lease's holder) does the work, a standby only watches and looks at the Lease.

Both processes are read from /proc inside their pods: VmRSS after the settle time, and CPU
seconds (utime + stime) used over the last measuring window, when nothing changes any more.
"""

from __future__ import annotations

import os
import time

import pytest
from footprint import operator_pods, pass_totals, proc_stats

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    OPERATOR_IMAGE,
    OPERATOR_NAMESPACE,
    KafkaClusterHandle,
    cluster_spec,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

pytestmark = [pytest.mark.bench, pytest.mark.timeout(1800)]
SETTLE_SECONDS = float(os.environ.get("KRAFTY_BENCH_SETTLE", "600"))
WINDOW_SECONDS = 120.0
TOPICS = 200

EMPTY_OPERATOR = '''
import kopf

@kopf.on.event("kafka.krafty.io", "v1alpha1", "kafkaclusters")
def cluster(**_): pass

@kopf.on.event("kafka.krafty.io", "v1alpha1", "topics")
def topic(**_): pass

@kopf.on.event("", "v1", "pods", labels={"app.kubernetes.io/managed-by": "krafty"})
def pod(**_): pass
'''


def empty_operator_pod(kube: KubeCluster) -> None:
    kube.apply([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "empty-kopf", "namespace": OPERATOR_NAMESPACE},
         "data": {"empty.py": EMPTY_OPERATOR}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty-kopf", "namespace": OPERATOR_NAMESPACE},
         "spec": {"serviceAccountName": "krafty", "enableServiceLinks": False,
                  "containers": [{"name": "kopf", "image": OPERATOR_IMAGE, "imagePullPolicy": "IfNotPresent",
                                  "command": ["kopf", "run", "--standalone", "--namespace", NAMESPACE,
                                              "/code/empty.py"],
                                  "volumeMounts": [{"name": "code", "mountPath": "/code"}]}],
                  "volumes": [{"name": "code", "configMap": {"name": "empty-kopf"}}]}},
    ])
    kube.kubectl("wait", "--for=condition=Ready", "pod/empty-kopf", "-n", OPERATOR_NAMESPACE, "--timeout=120s",
                 timeout=150)


def spent(passes: dict[str, tuple[float, float]], passes_after: dict[str, tuple[float, float]],
          before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> list[list[str]]:
    """A row per kind of pass that ran in the window, then the passes together and the rest of the process."""
    rows, total = [], 0.0
    for kind, (cpu, count) in sorted(passes_after.items()):
        used, ran = cpu - passes.get(kind, (0.0, 0.0))[0], count - passes.get(kind, (0.0, 0.0))[1]
        if ran:
            total += used
            rows.append([kind, f"{ran:.0f}", f"{1000 * used / ran:.1f}", f"{1000 * used / WINDOW_SECONDS:.2f}"])
    process = after["leader"][1] - before["leader"][1]
    rows.append(["all passes", "", "", f"{1000 * total / WINDOW_SECONDS:.2f}"])
    rows.append(["the rest (watches, Lease, status writes, HTTP, GC)", "", "",
                 f"{1000 * (process - total) / WINDOW_SECONDS:.2f}"])
    return rows


def test_operator_footprint_with_200_topics(operator: KubeCluster):
    handle = KafkaClusterHandle(operator, "footprint")
    handle.apply(cluster_spec("combined"))
    handle.wait_ready(900)
    operator.apply([topic_resource(f"fp-{i:03d}", "footprint", partitions=1, replicas=3) for i in range(TOPICS)])
    wait_for(lambda: [t for t in operator.kubectl_json("get", "topics", "-n", NAMESPACE)["items"]
                      if t["metadata"]["name"].startswith("fp-") and any(
                          c["type"] == "Ready" and c["status"] == "True"
                          for c in (t.get("status") or {}).get("conditions", []))],
             lambda ready: len(ready) == TOPICS, 900, f"{TOPICS} topics ready", interval=5)
    wait_topic_ready(operator, "fp-000")
    empty_operator_pod(operator)
    time.sleep(SETTLE_SECONDS - WINDOW_SECONDS)
    leader, standbys = operator_pods(operator)
    targets = {"leader": ["-n", OPERATOR_NAMESPACE, leader], "empty": ["-n", OPERATOR_NAMESPACE, "empty-kopf"],
               **{f"standby {pod}": ["-n", OPERATOR_NAMESPACE, pod] for pod in standbys}}
    before = {name: proc_stats(operator, target) for name, target in targets.items()}
    passes = pass_totals(operator)
    time.sleep(WINDOW_SECONDS)
    after = {name: proc_stats(operator, target) for name, target in targets.items()}
    passes_after = pass_totals(operator)
    assert operator_pods(operator)[0] == leader, "the leader changed while measuring"
    labels = {"leader": f"krafty operator, leading (1 cluster, {TOPICS} topics)",
              "empty": "empty kopf operator, same watches",
              **{f"standby {pod}": "krafty operator, standby" for pod in standbys}}
    rows = []
    for name, label in labels.items():
        cpu = (after[name][1] - before[name][1]) / WINDOW_SECONDS
        rows.append([label, f"{after[name][0]:.0f}", f"{cpu * 1000:.1f}"])
    report_table(f"Operator footprint after {SETTLE_SECONDS / 60:.0f} minutes (idle CPU over the last "
                 f"{WINDOW_SECONDS:.0f} s)", ["process", "RSS (MiB)", "CPU (millicores)"], rows)
    report_table("Where the leader's idle CPU went over that window (each pass's own thread)",
                 ["pass", "passes", "CPU per pass (ms)", "CPU (millicores)"],
                 spent(passes, passes_after, before, after))
    operator.kubectl("delete", "pod,configmap", "empty-kopf", "-n", OPERATOR_NAMESPACE, "--wait=false")
    operator.kubectl("delete", "topics", "-n", NAMESPACE, "--wait=false", *[f"fp-{i:03d}" for i in range(TOPICS)])
    handle.delete()
    assert after["leader"][0] > 0
