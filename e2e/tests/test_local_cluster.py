"""The e2e cluster itself: real pods on a real kubelet, images built here, DNS, Services, volumes,
graceful termination, and a machine left clean by `down`.

Run: python -m pytest -q e2e/tests/test_local_cluster.py   (as root; see docs/local-cluster.md)
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from krafty_testkit.kube import ROOT, Image, KubeCluster, LocalCluster
from krafty_testkit.waiting import wait_for

ECHO = Image("krafty-e2e/echo:1", ROOT / "e2e" / "tests" / "images" / "echo" / "Dockerfile")
PORT = 7000
GRACE_SECONDS = 6
PRESTOP_SECONDS = 1
CLUSTER_PROGRAMS = {"etcd", "containerd", "containerd-shim-runc-v2", "runc", "kube-apiserver",
                    "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns",
                    "local-path-provisioner", "csi-loop", "csi-provisioner", "csi-resizer"}


# What the machine holds, seen independently of localkube's own bookkeeping

def _cluster_processes() -> set[str]:
    found = set()
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            name = os.path.basename(os.readlink(proc / "exe"))
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
            if name in CLUSTER_PROGRAMS and "krafty-localkube" in cmdline:
                found.add(f"{proc.name} {cmdline[:100]}")
    for procs_file in Path("/sys/fs/cgroup").glob("*/kubepods/**/cgroup.procs"):
        found |= {f"{pid} (in {procs_file.parent})" for pid in procs_file.read_text().split()}
    return found


def _lines(*argv: str) -> list[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()


def _iptables_chains() -> set[str]:
    chains = set()
    for tool in ("iptables-save", "ip6tables-save"):
        table = ""
        for line in _lines(tool):
            table = line[1:] if line.startswith("*") else table
            if line.startswith(":") and line.split()[1] == "-":  # user-defined chains have no policy
                chains.add(f"{tool}/{table}/{line[1:].split()[0]}")
    return chains


def machine_snapshot() -> dict[str, set[str]]:
    """Everything a cluster could leave behind that can be told apart from other users' things."""
    mounts = {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}
    ours = ("/run/netns/cni-", "/var/lib/kubelet/", "/run/containerd/")
    rules = _lines("iptables-save") + _lines("ip6tables-save")
    return {
        "processes": _cluster_processes(),
        "mounts": {m for m in mounts if "krafty-localkube" in m or m.startswith(ours)},
        "netns": {ns.split()[0] for ns in _lines("ip", "netns", "list") if ns.startswith("cni-")},  # containerd's names
        "bridge and veths": {line.split(":")[1].strip() for line in _lines("ip", "-o", "link", "show")
                             if "krafty0" in line},
        "iptables chains": {c for c in _iptables_chains() if "/KUBE-" in c},
        "iptables rules": {r for r in rules if "krafty-localkube" in r or "10.244." in r},
        "cgroups": {str(p) for p in Path("/sys/fs/cgroup").glob("*/kubepods")},
        "files": {str(p) for p in (Path("/var/lib/kubelet"),) if p.exists()}
                 | {str(p) for p in Path("/var/lib/cni/results").glob("*") if "cni-loopback" in p.name
                    or "krafty-localkube" in p.name}
                 | {str(p) for p in Path("/var/log/containers").glob("*")},
    }


def assert_clean(cluster: LocalCluster) -> None:
    leftovers = cluster.leftovers()
    assert all(not items for items in leftovers.values()), leftovers
    seen = machine_snapshot()
    assert all(not items for items in seen.values()), seen


@pytest.mark.cluster_lifecycle
def test_up_down_cycles_leave_the_machine_clean(kube_cluster: KubeCluster,
                                                cluster_timings: list[tuple[str, float]]) -> None:
    assert isinstance(kube_cluster, LocalCluster)
    # Given the local cluster is up, with a pod on the pod network behind a host port
    kube_cluster.load_images([ECHO])
    _run_pod_with_host_port(kube_cluster)
    # When it goes down
    cluster_timings.append(("local: down (with a running pod)", kube_cluster.down()))
    # Then nothing of it is left: no process, mount, netns, bridge, veth, iptables chain or cgroup
    assert_clean(kube_cluster)
    for cycle in (1, 2):
        # When it comes up again and goes down again
        up_seconds = kube_cluster.up()
        cluster_timings.append((f"local: up (fresh cluster, cached programs and images), cycle {cycle}", up_seconds))
        kube_cluster.wait_for_ready_node(timeout=30)
        _run_pod_with_host_port(kube_cluster)
        cluster_timings.append((f"local: down, cycle {cycle}", kube_cluster.down()))
        # Then again nothing of it is left
        assert_clean(kube_cluster)
    # And it is left up for the tests after this one; a second up is a quick no-op
    cluster_timings.append(("local: up (fresh cluster)", kube_cluster.up()))
    noop = kube_cluster.up()
    cluster_timings.append(("local: up (already up)", noop))
    print(f"\nup/down durations: {cluster_timings}")
    assert noop < 10


def _run_pod_with_host_port(cluster: KubeCluster) -> None:
    cluster.apply([{
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lifecycle-probe", "namespace": "default"},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "echo", "image": ECHO.name, "imagePullPolicy": "Never",
            "ports": [{"containerPort": PORT, "hostPort": 17000}]}]},
    }])
    cluster.kubectl("wait", "--for=condition=Ready", "pod/lifecycle-probe", "--timeout=120s", timeout=150)


def test_the_node_is_ready_with_room_for_ten_small_pods(kube_cluster: KubeCluster) -> None:
    # Given the cluster is up
    # When we read its node
    node = kube_cluster.kubectl_json("get", "nodes")["items"][0]
    # Then it is Ready and its allocatable resources fit ten pods of 100m CPU and 256Mi memory
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    allocatable = node["status"]["allocatable"]
    print(f"\nnode {node['metadata']['name']}: allocatable {allocatable}")
    assert conditions["Ready"] == "True"
    assert _millicores(allocatable["cpu"]) >= 10 * 100
    assert _mebibytes(allocatable["memory"]) >= 10 * 256
    assert int(allocatable["pods"]) >= 10


def _millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def _mebibytes(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([A-Za-z]*)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "": 1}[unit] // 1024**2


@pytest.fixture(scope="module")
def echo_image(kube_cluster: KubeCluster) -> str:
    kube_cluster.load_images([ECHO])
    return ECHO.name


@pytest.fixture(scope="module")
def namespace(kube_cluster: KubeCluster) -> Iterator[str]:
    name = f"e2e-cluster-{uuid.uuid4().hex[:6]}"
    kube_cluster.kubectl("create", "namespace", name)
    wait_for(lambda: kube_cluster.kubectl("get", "serviceaccount", "default", "-n", name), bool, 60,
             f"the default ServiceAccount in {name}")
    yield name
    kube_cluster.kubectl("delete", "namespace", name, "--wait=false")


def test_a_pod_from_a_locally_built_image_runs(kube_cluster: KubeCluster, echo_image: str, namespace: str) -> None:
    # Given an image built on this machine (never pulled: imagePullPolicy Never)
    # When a pod runs it
    kube_cluster.apply([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "echo"}, "spec": {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "echo", "image": echo_image, "imagePullPolicy": "Never"}]}}], namespace)
    kube_cluster.kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/echo", "--timeout=120s", timeout=150)
    # Then its server answers and its log says it started
    assert _ask(kube_cluster, namespace, "echo", "localhost", "hello") == "echo hello"
    assert "started" in kube_cluster.kubectl("logs", "-n", namespace, "echo")


def _ask(cluster: KubeCluster, namespace: str, pod: str, host: str, text: str) -> str:
    return cluster.kubectl("exec", "-n", namespace, pod, "--", "python3", "/app/echo_server.py", "ask", host,
                           str(PORT), text, timeout=60).strip()


def _statefulset(image: str) -> list[dict[str, Any]]:
    labels = {"app": "echo-set"}
    note = ["python3", "/app/echo_server.py", "note", "prestop", "--data", "/data"]
    container = {
        "name": "echo", "image": image, "imagePullPolicy": "Never",
        "args": ["serve", "--data", "/data", "--ignore-term"],
        "ports": [{"name": "echo", "containerPort": PORT}],
        "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 1},
        "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", f"{' '.join(note)} && sleep {PRESTOP_SECONDS}"]}}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo-set"},
         "spec": {"clusterIP": "None", "selector": labels, "ports": [{"name": "echo", "port": PORT}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo-any"},
         "spec": {"selector": labels, "ports": [{"name": "echo", "port": PORT}]}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "echo-set"}, "spec": {
            "serviceName": "echo-set", "replicas": 3, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "terminationGracePeriodSeconds": GRACE_SECONDS, "containers": [container]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}}]}},
    ]


@pytest.fixture(scope="module")
def echo_set(kube_cluster: KubeCluster, echo_image: str, namespace: str) -> str:
    kube_cluster.apply(_statefulset(echo_image), namespace)
    kube_cluster.kubectl("rollout", "status", "-n", namespace, "statefulset/echo-set", "--timeout=300s", timeout=330)
    return namespace


def test_statefulset_pods_find_each_other_by_dns_name_and_talk_over_tcp(kube_cluster: KubeCluster,
                                                                       echo_set: str) -> None:
    # Given three pods of a StatefulSet behind a headless Service
    # When each asks every other by its stable name pod-N.<service>.<namespace>.svc.cluster.local
    # Then the named pod answers over TCP
    for me in range(3):
        for other in range(3):
            host = f"echo-set-{other}.echo-set.{echo_set}.svc.cluster.local"
            answer = wait_for(lambda me=me, host=host: _ask(kube_cluster, echo_set, f"echo-set-{me}", host, "hi"),
                              lambda got, other=other: got == f"echo-set-{other} hi", 60, f"echo-set-{me} -> {host}")
            assert answer == f"echo-set-{other} hi"


def test_a_cluster_ip_service_routes_to_every_pod(kube_cluster: KubeCluster, echo_set: str) -> None:
    # Given a ClusterIP Service in front of the three pods
    service_ip = kube_cluster.kubectl("get", "service", "-n", echo_set, "echo-any", "-o",
                                      "jsonpath={.spec.clusterIP}").strip()
    answered: set[str] = set()

    def ask_once() -> set[str]:
        answered.add(_ask(kube_cluster, echo_set, "echo-set-0", service_ip, "via-service").split()[0])
        return answered

    # When a pod connects to it again and again (by IP; its DNS name resolves to the same)
    wait_for(ask_once, lambda seen: len(seen) == 3, 120, f"answers from all three pods through {service_ip}",
             interval=0.1)
    # Then every pod has answered, and the Service's DNS name points at its ClusterIP
    assert answered == {"echo-set-0", "echo-set-1", "echo-set-2"}
    assert _ask(kube_cluster, echo_set, "echo-set-1", f"echo-any.{echo_set}.svc.cluster.local", "x").endswith(" x")


def _events(cluster: KubeCluster, namespace: str, pod: str) -> list[tuple[str, float]]:
    text = cluster.kubectl("exec", "-n", namespace, pod, "--", "cat", "/data/events")
    return [(line.split()[0], float(line.split()[1])) for line in text.splitlines() if line.strip()]


def test_deleting_a_pod_runs_prestop_and_sigterm_kills_at_the_grace_period_and_keeps_its_volume(
        kube_cluster: KubeCluster, echo_set: str, cluster_timings: list[tuple[str, float]]) -> None:
    # Given pod echo-set-1 with data on its PersistentVolumeClaim (bound through the default StorageClass)
    pod = "echo-set-1"
    pvc = kube_cluster.kubectl_json("get", "pvc", "-n", echo_set, "data-echo-set-1")
    assert pvc["status"]["phase"] == "Bound"
    assert pvc["spec"]["storageClassName"] == "standard"
    marker = uuid.uuid4().hex
    kube_cluster.kubectl("exec", "-n", echo_set, pod, "--", "sh", "-c", f"echo {marker} > /data/marker")
    old_uid = kube_cluster.kubectl("get", "pod", "-n", echo_set, pod, "-o", "jsonpath={.metadata.uid}")
    # When the pod is deleted (its process ignores SIGTERM)
    deleted_at = time.time()
    kube_cluster.kubectl("delete", "pod", "-n", echo_set, pod, "--wait=false")
    # Then the StatefulSet makes it again, Ready, on the same volume
    wait_for(lambda: kube_cluster.kubectl_json("get", "pod", "-n", echo_set, pod),
             lambda p: p["metadata"]["uid"] != old_uid and any(
                 c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])),
             120, f"{pod} to come back Ready")
    assert kube_cluster.kubectl("exec", "-n", echo_set, pod, "--", "cat", "/data/marker").strip() == marker
    # And the old process saw preStop, then SIGTERM, and was killed when the grace period ran out
    events = [(e, t) for e, t in _events(kube_cluster, echo_set, pod) if t >= deleted_at - 1]
    first = {event: at for event, at in reversed(events)}
    killed_at = first["last-heartbeat"]
    print(f"\ndelete -> preStop {first['prestop'] - deleted_at:.2f}s, -> SIGTERM {first['sigterm'] - deleted_at:.2f}s,"
          f" -> SIGKILL {killed_at - deleted_at:.2f}s (terminationGracePeriodSeconds {GRACE_SECONDS})")
    cluster_timings.append((f"pod delete -> SIGKILL of a process ignoring SIGTERM (grace {GRACE_SECONDS}s, "
                            f"preStop {PRESTOP_SECONDS}s)", killed_at - deleted_at))
    assert deleted_at <= first["prestop"] < first["sigterm"] < killed_at
    assert first["sigterm"] - first["prestop"] >= PRESTOP_SECONDS - 0.1
    assert GRACE_SECONDS - 0.5 <= killed_at - deleted_at <= GRACE_SECONDS + 3
