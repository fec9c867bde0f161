"""The local cluster's pure parts: kind's configuration (a control plane and N workers, one zone each, what
these machines need of kubeadm) and the storage kind installs (local-path by default, csi-loop's `expandable`
provisioning each node's volumes on that node)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e" / "localkube"))  # lk is no installed package

from lk import addons, cluster
from lk.settings import Settings


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("KRAFTY_CACHE", str(tmp_path))
    return Settings.from_env()


@pytest.mark.parametrize("workers", [1, 3, 5])
def test_a_control_plane_and_one_worker_per_zone(cfg: Settings, workers: int):
    # When kind's configuration is made for N workers
    made = cluster.config(cfg, workers, "localhost/krafty-kind/node:test")
    # Then there is one control plane and N workers labelled zone-a, zone-b, ... all on the node image
    roles = [node["role"] for node in made["nodes"]]
    assert roles == ["control-plane"] + ["worker"] * workers
    assert [node.get("labels", {}).get(cluster.ZONE_LABEL) for node in made["nodes"][1:]] == [
        f"zone-{letter}" for letter in "abcde"[:workers]]
    assert {node["image"] for node in made["nodes"]} == {"localhost/krafty-kind/node:test"}


def test_kubeadm_runs_the_images_built_here_within_the_limits_of_these_machines(cfg: Settings):
    patches = "\n".join(cluster.kubeadm_patches(cfg))
    versions = cfg.versions
    assert "imageRepository: localhost/krafty-kind" in patches
    assert f"imageTag: {versions['ETCD_VERSION']}" in patches
    assert f"imageTag: {versions['COREDNS_VERSION']}" in patches
    # No process may lower its oom_score_adj here, nor raise nofile above 20000
    assert patches.count("oomScoreAdj: 0") == 2
    assert "maxOpenFiles: 20000" in patches


def _objects(cfg: Settings) -> list[dict[str, Any]]:
    return list(json.loads(addons.default_storage(cfg, "localhost/krafty-kind/csi-loop:test"))["items"])


def test_local_path_is_the_default_class_and_expandable_grows_on_the_pods_node(cfg: Settings):
    objects = _objects(cfg)
    classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "StorageClass"}
    # Then local-path is the default, and `expandable` grows, both binding where the first pod lands
    assert classes["standard"]["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert classes["expandable"]["allowVolumeExpansion"] is True
    assert {c["volumeBindingMode"] for c in classes.values()} == {"WaitForFirstConsumer"}
    # And csi-loop runs on every node beside a provisioner for that node's volumes only, and a resizer
    daemonset = next(o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "csi-loop")
    containers = {c["name"]: c for c in daemonset["spec"]["template"]["spec"]["containers"]}
    assert "--node-deployment=true" in containers["csi-provisioner"]["command"]
    assert "--leader-election=true" in containers["csi-resizer"]["command"]
    assert containers["csi-loop"]["securityContext"] == {"privileged": True}
    kubelet = next(m for m in containers["csi-loop"]["volumeMounts"] if m["mountPath"] == "/var/lib/kubelet")
    assert kubelet["mountPropagation"] == "Bidirectional"
    # And nothing is ever pulled
    assert {c["imagePullPolicy"] for o in objects if o["kind"] in ("Deployment", "DaemonSet")
            for c in o["spec"]["template"]["spec"]["containers"]} == {"Never"}
