"""The operator's replicas measured from inside their pods: which one leads, and its RSS and CPU time."""

from __future__ import annotations

import re

from krafty_testkit import procfs
from krafty_testkit.k8s_kafka import OPERATOR_NAMESPACE, leader_metrics_text
from krafty_testkit.kube import KubeCluster


def proc_stats(kube: KubeCluster, target: list[str]) -> tuple[float, float]:
    """(RSS in MiB, CPU seconds so far) of PID 1 of a pod."""
    return (procfs.rss_mib(kube.kubectl("exec", *target, "--", "cat", "/proc/1/status")),
            procfs.cpu_seconds(kube.kubectl("exec", *target, "--", "cat", "/proc/1/stat")))


def operator_pods(kube: KubeCluster) -> tuple[str, list[str]]:
    """The operator's pods: the one holding the Lease (its identity is the pod's name and a mark), the others."""
    holder = kube.kubectl_json("get", "lease", "krafty", "-n", OPERATOR_NAMESPACE)["spec"]["holderIdentity"]
    leader = holder.rsplit("_", 1)[0]
    pods = [p["metadata"]["name"] for p in kube.kubectl_json("get", "pods", "-n", OPERATOR_NAMESPACE)["items"]
            if p["metadata"]["name"].startswith("krafty-") and p["status"].get("phase") == "Running"]
    assert leader in pods, (holder, pods)
    return leader, [pod for pod in pods if pod != leader]


def pass_totals(kube: KubeCluster) -> dict[str, tuple[float, float]]:
    """(CPU seconds, passes) so far of each kind of pass, from the leader's /metrics."""
    text = leader_metrics_text(kube)
    cpu = dict(re.findall(r'^krafty_reconcile_cpu_seconds_total\{kind="(\w+)"\} (\S+)$', text, re.M))
    count = dict(re.findall(r'^krafty_reconcile_duration_seconds_count\{kind="(\w+)"\} (\S+)$', text, re.M))
    return {kind: (float(cpu.get(kind, 0)), float(count[kind])) for kind in count}
