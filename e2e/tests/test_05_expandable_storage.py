"""The local cluster's StorageClass `expandable` (the loop-file CSI driver of e2e/localkube/csi-loop, on every
node): a claim binds on the node where its pod lands, grows while its pod runs, and a deleted claim leaves
neither its backing file (in that node) nor its loop device (on this machine) behind.

Run: python -m pytest -q e2e/tests/test_05_expandable_storage.py   (as root; see docs/local-cluster.md; with
another kind of cluster it is deselected, like the cluster_lifecycle tests)
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for

STORAGE_CLASS = "expandable"
IMAGE = "docker.io/library/debian:bookworm-slim"  # the base image every node of localkube holds
GI = 2**30
TOPOLOGY_KEY = "topology.loop.csi.localkube/node"
VOLUMES_IN_NODE = "/var/lib/csi-loop"  # where csi-loop keeps a node's backing files


# It looks for the volume's file in its node's container and its loop device on this machine
pytestmark = pytest.mark.local_cluster


@pytest.fixture
def namespace(kube_cluster: KubeCluster) -> Iterator[str]:
    name = f"e2e-expand-{uuid.uuid4().hex[:6]}"
    kube_cluster.kubectl("create", "namespace", name)
    yield name
    kube_cluster.kubectl("delete", "namespace", name, "--wait=false")


def _claim_and_pod() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                  "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"}, "spec": {
            "terminationGracePeriodSeconds": 1,
            # Not root, like a broker: the volume is writable through fsGroup.
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
            "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                            "command": ["sleep", "infinity"],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}},
    ]


def _df_size(cluster: KubeCluster, namespace: str) -> int:
    shown = cluster.kubectl("exec", "-n", namespace, "user", "--", "df", "-B1", "--output=size", "/data")
    return int(shown.split()[-1])


def _loop_devices(volume: str) -> list[str]:
    """The loop devices of this machine attached to this volume's file."""
    return [f"/dev/{backing.parent.parent.name}" for backing in Path("/sys/block").glob("loop*/loop/backing_file")
            if Path(backing.read_text().strip().removesuffix(" (deleted)")).name == f"{volume}.img"]


def _files_in_node(node: str) -> list[str]:
    return subprocess.run(["podman", "exec", node, "ls", VOLUMES_IN_NODE], capture_output=True, text=True,
                          timeout=30, check=True).stdout.split()


@pytest.mark.full  # about 90 s: CI grows the broker volumes through the same driver under load in test_27_volumes.py
def test_a_claim_binds_on_its_pods_node_grows_from_1gi_to_2gi_while_the_pod_runs_and_leaves_nothing_when_deleted(
        kube_cluster: KubeCluster, namespace: str, cluster_timings: list[tuple[str, float]]) -> None:
    # Given a pod using a 1Gi claim of the class `expandable`, with data on it
    kube_cluster.apply(_claim_and_pod(), namespace)
    kube_cluster.kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/user", "--timeout=90s", timeout=100)
    assert 0.9 * GI < _df_size(kube_cluster, namespace) <= GI
    kube_cluster.kubectl("exec", "-n", namespace, "user", "--", "sh", "-c", "echo kept > /data/marker")
    pod = kube_cluster.kubectl_json("get", "pod", "-n", namespace, "user")
    pod_uid, node = pod["metadata"]["uid"], pod["spec"]["nodeName"]
    volume = kube_cluster.kubectl("get", "pvc", "-n", namespace, "data", "-o", "jsonpath={.spec.volumeName}")
    # Then the volume lives on the node where the pod landed, and only there
    terms = kube_cluster.kubectl_json("get", "pv", volume)["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": TOPOLOGY_KEY, "operator": "In", "values": [node]}]}]
    assert f"{volume}.img" in _files_in_node(node)
    assert all(f"{volume}.img" not in _files_in_node(other) for other in kube_cluster.workers() if other != node)
    assert len(_loop_devices(volume)) == 1, _loop_devices(volume)
    # When the claim asks for 2Gi
    patched = time.monotonic()
    kube_cluster.kubectl("patch", "pvc", "-n", namespace, "data", "-p",
                         '{"spec": {"resources": {"requests": {"storage": "2Gi"}}}}')
    # Then the claim has 2Gi, and so has the file system inside the running pod
    wait_for(lambda: kube_cluster.kubectl_json("get", "pvc", "-n", namespace, "data")["status"],
             lambda status: status.get("capacity", {}).get("storage") == "2Gi", 60, "the claim's capacity at 2Gi")
    size = wait_for(lambda: _df_size(kube_cluster, namespace), lambda bytes_: bytes_ > 1.8 * GI, 30,
                    "`df` in the pod showing about 2Gi")
    grown_after = time.monotonic() - patched
    print(f"\nclaim patched to 2Gi -> `df` in the pod {size} bytes after {grown_after:.1f}s")
    cluster_timings.append(("expandable claim patched 1Gi -> 2Gi: `df` in the running pod shows it", grown_after))
    assert size <= 2 * GI
    # And the pod is the same one, never restarted, its data kept, with room for more than the old size
    pod = kube_cluster.kubectl_json("get", "pod", "-n", namespace, "user")
    assert pod["metadata"]["uid"] == pod_uid
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    assert kube_cluster.kubectl("exec", "-n", namespace, "user", "--", "cat", "/data/marker").strip() == "kept"
    kube_cluster.kubectl("exec", "-n", namespace, "user", "--", "fallocate", "-l", "1100M", "/data/more")
    # When the pod and the claim are deleted
    kube_cluster.kubectl("delete", "pod", "-n", namespace, "user", "--wait=true", timeout=60)
    kube_cluster.kubectl("delete", "pvc", "-n", namespace, "data", "--wait=true", timeout=60)
    # Then the volume, its backing file and its loop device are gone
    wait_for(lambda: kube_cluster.kubectl("get", "pv", "--ignore-not-found", volume), lambda out: not out.strip(),
             60, f"PersistentVolume {volume} deleted")
    assert f"{volume}.img" not in _files_in_node(node)
    assert _loop_devices(volume) == []
