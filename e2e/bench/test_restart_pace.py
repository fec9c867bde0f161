"""Benchmark: how soon a restarted Kafka pod is Ready again, its start-up probe looking each second (as the operator
renders it) against every 5 s (as it rendered it before).

The same hand-written StatefulSet of 3 combined nodes (raw.py: the operator's rendering applied with kubectl into a
namespace the operator does not watch), its template patched to one period or the other before each round; a round
deletes the three pods in turn, each once the one before is Ready again, and times the deletion to the new pod Ready
(Kafka's controlled shutdown, the new container, the JVM and the node starting, the probes). The rounds alternate
between the two periods, so that each meets the same machine.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import pytest
from raw import RAW, fresh_namespace, raw_manifests

from krafty_testkit.k8s_kafka import cluster_spec
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

pytestmark = pytest.mark.bench
ROUNDS = 3
PERIODS = (5, 1)  # seconds between start-up probes: before, and as rendered now


def restart(kube: KubeCluster, pod: str) -> float:
    """Deletes a pod and returns the seconds until its successor is Ready."""
    before = kube.kubectl_json("get", "pod", pod, "-n", RAW)["metadata"]["uid"]
    began = time.monotonic()
    kube.kubectl("delete", "pod", pod, "-n", RAW, "--wait=false")

    def successor_ready(body: dict[str, Any]) -> bool:
        ready = [c for c in (body.get("status") or {}).get("conditions", []) if c["type"] == "Ready"]
        return bool(body["metadata"]["uid"] != before and ready and ready[0]["status"] == "True")

    wait_for(lambda: kube.kubectl_json("get", "pod", pod, "-n", RAW), successor_ready, 600,
             f"{pod} restarted and Ready", interval=0.2)
    return time.monotonic() - began


def test_a_restarted_pod_is_ready_sooner_with_the_start_up_probe_each_second(operator: KubeCluster):
    fresh_namespace(operator)
    seconds: dict[int, list[float]] = {period: [] for period in PERIODS}
    try:
        operator.apply(raw_manifests(cluster_spec("combined")))
        operator.kubectl("wait", "--for=jsonpath={.status.readyReplicas}=3", "statefulset/raw-broker", "-n", RAW,
                         "--timeout=900s", timeout=960)
        for _ in range(ROUNDS):
            for period in PERIODS:
                template = {"spec": {"template": {"spec": {"containers": [
                    {"name": "kafka", "startupProbe": {"periodSeconds": period,
                                                       "failureThreshold": 3600 // period}}]}}}}
                operator.kubectl("patch", "statefulset", "raw-broker", "-n", RAW, "-p", json.dumps(template))
                seconds[period] += [restart(operator, f"raw-broker-{ordinal}") for ordinal in range(3)]
    finally:
        operator.kubectl("delete", "namespace", RAW, "--wait=false")
    before = statistics.median(seconds[PERIODS[0]])
    report_table(f"A Kafka pod deleted → its successor Ready (3 combined nodes, {ROUNDS} rounds of 3 restarts "
                 "each way, alternating)",
                 ["start-up probe", "median (s)", "min (s)", "max (s)", "ratio"],
                 [[f"every {period} s{' (as rendered)' if period == 1 else ' (before)'}",
                   f"{statistics.median(seconds[period]):.1f}", f"{min(seconds[period]):.1f}",
                   f"{max(seconds[period]):.1f}", f"{statistics.median(seconds[period]) / before:.2f}x"]
                  for period in PERIODS])
