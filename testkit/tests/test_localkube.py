"""The local cluster's pure parts: kind's configuration (a control plane and N workers, one zone each, what
these machines need of kubeadm) and the storage kind installs (local-path by default, csi-loop's `expandable`
provisioning each node's volumes on that node)."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e" / "localkube"))  # lk is no installed package

from lk import addons, cluster, images, load_balancer, progress
from lk.settings import Settings

from krafty_testkit.waiting import wait_for


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


def test_the_load_balancer_pool_is_the_top_of_the_nodes_subnet():
    assert load_balancer.address_range("10.89.0.0/24") == ("10.89.0.205", "10.89.0.254")
    pool, advertisement = load_balancer.pool("10.89.0.205", "10.89.0.254")
    assert pool["spec"] == {"addresses": ["10.89.0.205-10.89.0.254"]}
    assert advertisement["spec"] == {"ipAddressPools": [pool["metadata"]["name"]]}
    with pytest.raises(RuntimeError, match="no room"):
        load_balancer.address_range("10.89.0.0/28")


def test_metallb_runs_the_images_built_here(cfg: Settings):
    # Given MetalLB's native manifest where build-tools.sh keeps it, next to its programs
    version = cfg.versions["METALLB_VERSION"]
    folder = cfg.cache / "localkube" / "tools" / f"metallb-{version}"
    folder.mkdir(parents=True)
    (folder / "controller").write_text("")
    cfg.tools_bin.mkdir(parents=True, exist_ok=True)
    (cfg.tools_bin / "metallb-controller").symlink_to(folder / "controller")
    (folder / "metallb-native.yaml").write_text(
        f"spec:\n  containers:\n      - args: [--port=9120]\n        image: quay.io/metallb/controller:{version}\n"
        f"---\n      - args: [--port=9120]\n        image: quay.io/metallb/speaker:{version}\n")
    # Then its two images are the ones the nodes preload, started by their path in them
    made = load_balancer.manifest(cfg)
    assert "quay.io" not in made
    assert f"image: localhost/krafty-kind/metallb-speaker:{version}\n        command: [/usr/local/bin/speaker]" in made
    # And a manifest that names other images is refused rather than run with images nobody built
    (folder / "metallb-native.yaml").write_text("image: quay.io/metallb/controller:v0.0.1\n")
    with pytest.raises(RuntimeError, match="does not name"):
        load_balancer.manifest(cfg)


def test_nodes_take_addresses_from_the_lower_half_of_their_subnet_and_the_pool_is_at_its_top():
    assert load_balancer.node_range("10.89.1.0/24") == "10.89.1.0/25"
    first, last = load_balancer.address_range("10.89.1.0/24")
    assert ipaddress.ip_address(first) not in ipaddress.ip_network(load_balancer.node_range("10.89.1.0/24"))
    assert last == "10.89.1.254"


def test_a_long_step_says_what_it_is_at_with_each_line(capsys: pytest.CaptureFixture[str]):
    out: list[str] = []

    def said() -> list[str]:
        out.extend(capsys.readouterr().out.splitlines())
        return [line for line in out if line.startswith("localkube: building x: ")]

    # Given a long step, When it tells what it is at once it has spoken
    with progress.ticking("building x", every=0.05) as at:
        wait_for(said, lambda lines: len(lines) >= 1, 30, "a first line", interval=0.01)
        at("STEP 2/5: RUN pip install")
        # Then its lines name that step from then on
        wait_for(said, lambda lines: lines[-1].endswith("s so far, at STEP 2/5: RUN pip install"), 30,
                 "a line naming the step", interval=0.01)
    # And none did before it was told
    assert "STEP" not in said()[0]


@pytest.mark.parametrize(("line", "step"), [
    ("STEP 1/9: FROM debian:bookworm-slim\n", "STEP 1/9: FROM debian:bookworm-slim"),
    ("STEP 12/14: RUN " + "x" * 200, ("STEP 12/14: RUN " + "x" * 200)[:images.STEP_CHARS]),
    ("Collecting kopf==1.45.2\n", None),
    ("--> 3c1e2f0a9b\n", None),
])
def test_a_build_step_read_off_buildahs_line(line: str, step: str | None):
    assert images.step_of(line) == step


def test_status_on_a_machine_without_the_container_engine_says_so(tmp_path: Path):
    # Given a machine where neither docker nor podman is installed yet (a fresh one, before `make cluster-up`)
    lk = Path(__file__).resolve().parents[2] / "e2e" / "localkube"
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(lk), "KRAFTY_CACHE": str(tmp_path)}
    # When the cluster's state is asked for, Then it is down and names what is missing (it was a traceback:
    # FileNotFoundError: 'podman')
    result = subprocess.run([sys.executable, "-m", "lk", "status"], env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert (result.returncode, result.stderr) == (1, ""), result.stderr
    assert result.stdout.startswith("state: down (podman, not installed: `make cluster-up` installs it)")
    # And the JSON form, read by the test fixtures, says the same
    answer = subprocess.run([sys.executable, "-m", "lk", "status", "--json"], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    assert json.loads(answer.stdout)["state"] == "down"
