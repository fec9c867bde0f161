"""up, down and status of the single-node cluster.

up:   a no-op when everything runs and the node is Ready. When etcd is not running the cluster is made
      fresh: whatever an earlier cluster left behind is cleaned first. Otherwise only the programs that are
      not running are started (a crashed CoreDNS comes back; the cluster's state stays). Readiness is what
      the programs and the API server say, never a fixed sleep.
down: stops the API clients, the kubelet, every pod (through containerd), then the runtime and the
      control plane, and removes every mount, network namespace, link, iptables chain, cgroup and file
      the cluster made. The cache (programs, images) and pki/ + kubeconfig/ stay.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from krafty_testkit.waiting import wait_for

from . import addons, base_image, components, images, pki, procs, render, teardown
from . import settings as s
from .components import Component
from .settings import Settings

CONTROL_PLANE = ("etcd", "containerd", "kube-apiserver")
NODE = ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns", "local-path-provisioner",
        "csi-loop", "csi-provisioner", "csi-resizer")
# Started once the node is registered and Ready: kube-router exits when it cannot read its node.
NETWORK = ("kube-router",)
API_CLIENTS = ("kube-router", "csi-resizer", "csi-provisioner", "local-path-provisioner", "coredns", "kube-scheduler",
               "kube-controller-manager")
# The CSI sidecars exit at their first call after the driver's socket went away (upstream's choice: in a
# pod the kubelet restarts them), so a driver that `up` starts again takes fresh sidecars with it.
CSI_SIDECARS = ("csi-provisioner", "csi-resizer")
SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1",
           "net/bridge/bridge-nf-call-ip6tables": "1"}
PAUSE_DOCKERFILE = s.HERE / "images" / "pause" / "Dockerfile"


class ComponentFailed(RuntimeError):
    pass


def say(message: str) -> None:
    print(f"localkube: {message}", flush=True)


def _log_tail(cfg: Settings, name: str, lines: int = 25) -> str:
    path = cfg.logs / f"{name}.log"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"


def _observe(cfg: Settings, component: Component) -> str:
    if procs.pid_of(cfg.pids, component.name) is None:
        return "exited"
    return component.probe()


def _ready_or_raise(cfg: Settings, name: str, seen: str) -> bool:
    if seen == "exited":
        raise ComponentFailed(f"{name} exited; the end of {cfg.logs / name}.log:\n{_log_tail(cfg, name)}")
    return seen == "ok"


def wait_ready(cfg: Settings, component: Component, timeout: float = 120) -> None:
    wait_for(lambda: _observe(cfg, component), lambda seen: _ready_or_raise(cfg, component.name, seen),
             timeout, f"{component.name} to be ready (log: {cfg.logs / component.name}.log)", interval=0.2)


def start_missing(cfg: Settings, comps: dict[str, Component], names: tuple[str, ...]) -> None:
    started = [n for n in names if procs.pid_of(cfg.pids, n) is None]
    for name in started:
        procs.start(cfg.pids, cfg.logs, name, comps[name].argv)
    for name in names:
        wait_ready(cfg, comps[name])
    if started:
        say(f"started {', '.join(started)}")


def _prepare_host(cfg: Settings) -> None:
    for key, value in SYSCTLS.items():
        path = Path("/proc/sys") / key
        if path.exists() and path.read_text().strip() != value:
            path.write_text(value)
    for folder in (cfg.logs, cfg.pids, cfg.config, cfg.etcd_data, cfg.kubelet_root, cfg.pod_logs, cfg.volumes,
                   cfg.cni_conf_dir, cfg.cni_ipam_dir, cfg.run, cfg.containerd_root):
        folder.mkdir(parents=True, exist_ok=True)
    cfg.etcd_data.chmod(0o700)


def _write_configs(cfg: Settings, node_ip: str) -> None:
    files = {
        cfg.config / "containerd.toml": render.containerd_toml(cfg),
        cfg.cni_conf_dir / "10-krafty-localkube.conflist": render.cni_conflist(cfg),
        cfg.config / "kubelet.json": render.kubelet_config(cfg),
        cfg.config / "kube-proxy.json": render.kube_proxy_config(cfg),
        cfg.config / "Corefile": render.corefile(cfg, node_ip),
    }
    for path, text in files.items():
        if not path.exists() or path.read_text() != text:  # kube-proxy exits when its config file is written
            path.write_text(text)


def kubectl(cfg: Settings, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
    argv = [str(cfg.binary("kubectl")), "--kubeconfig", str(cfg.admin_kubeconfig), *args]
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _apply_addons(cfg: Settings, node_ip: str) -> None:
    objects = addons.dns(node_ip) + addons.storage(cfg) + addons.expandable_storage() + addons.network_policies()
    kubectl(cfg, "apply", "--server-side", "--force-conflicts", "--field-manager", "localkube", "-f", "-",
            stdin=json.dumps(addons.manifest(objects)))


def _system_images(cfg: Settings) -> None:
    """The sandbox image and the base image (local-path's helper pods run it) into containerd."""
    base_image.ensure(cfg)
    base_id = images.buildah_image_id(s.BASE_IMAGE)
    if base_id is None:
        raise RuntimeError(f"{s.BASE_IMAGE} is missing from buildah's storage")
    pause = images.ImageSpec(cfg.pause_image, PAUSE_DOCKERFILE, (cfg.tools_bin / "pause").resolve().parent)
    for name, image_id in ((cfg.pause_image, images.build(pause, [])), (s.BASE_IMAGE, base_id)):
        if images.import_image(cfg, name, image_id):
            say(f"imported {name} into containerd")


def _purge_containers(cfg: Settings) -> None:
    """Kills and deletes every container in containerd's k8s.io namespace (pods of this or an older cluster)."""
    ctr = ["ctr", "--address", str(cfg.containerd_socket), "--namespace", "k8s.io"]
    listed = subprocess.run([*ctr, "containers", "ls", "-q"], capture_output=True, text=True, timeout=30, check=False)
    ids = listed.stdout.split()
    for container in ids:
        subprocess.run([*ctr, "tasks", "rm", "-f", container], capture_output=True, timeout=60, check=False)
    if ids:
        subprocess.run([*ctr, "containers", "rm", *ids], capture_output=True, timeout=60, check=False)
    teardown.remove_cni_cache(ids)  # no CNI DEL ran for these sandboxes


def is_up(cfg: Settings) -> bool:
    names = CONTROL_PLANE + NODE + NETWORK
    if any(procs.pid_of(cfg.pids, n) is None for n in names):
        return False
    try:
        return components.node_ready(cfg) == "ok"
    except OSError:
        return False


def up() -> float:
    """Brings the cluster up (or keeps it up); returns the seconds it took."""
    began = time.monotonic()
    cfg = Settings.from_env()
    if is_up(cfg):
        say(f"already up; node {s.NODE_NAME} Ready")
        return time.monotonic() - began
    fresh = procs.pid_of(cfg.pids, "etcd") is None
    if fresh:
        down(quiet=True)
    node_ip = s.detect_node_ip()
    _prepare_host(cfg)
    pki.ensure(cfg, node_ip)
    _write_configs(cfg, node_ip)
    comps = components.components(cfg, node_ip)
    start_missing(cfg, comps, CONTROL_PLANE)
    if procs.pid_of(cfg.pids, "kubelet") is None:
        _purge_containers(cfg)
    _system_images(cfg)
    _apply_addons(cfg, node_ip)
    if procs.pid_of(cfg.pids, "csi-loop") is None:
        _stop_parallel(cfg, CSI_SIDECARS, 10)
    start_missing(cfg, comps, NODE)
    wait_for(lambda: components.node_ready(cfg), lambda seen: seen == "ok", 180, f"node {s.NODE_NAME} Ready")
    start_missing(cfg, comps, NETWORK)
    wait_for(lambda: components.default_service_account(cfg), lambda seen: seen == "ok", 60,
             "the default ServiceAccount")
    seconds = time.monotonic() - began
    say(f"up in {seconds:.1f}s; node {s.NODE_NAME} Ready; KUBECONFIG={cfg.admin_kubeconfig}")
    return seconds


def _stop_parallel(cfg: Settings, names: tuple[str, ...], timeout: float) -> None:
    pids = {n: procs.pid_of(cfg.pids, n) for n in names}
    for pid in pids.values():
        if pid is not None:
            procs.signal_term(pid)
    for name, pid in pids.items():
        if pid is not None:
            procs.stop_pid(pid, timeout)
        (cfg.pids / f"{name}.pid").unlink(missing_ok=True)


def down(quiet: bool = False) -> float:
    began = time.monotonic()
    cfg = Settings.from_env()
    _stop_parallel(cfg, API_CLIENTS, 10)
    _stop_parallel(cfg, ("kubelet", "csi-loop"), 15)
    if procs.pid_of(cfg.pids, "containerd") is not None:
        _purge_containers(cfg)
    _stop_parallel(cfg, ("containerd", "kube-proxy"), 15)
    _stop_parallel(cfg, ("kube-apiserver",), 15)
    _stop_parallel(cfg, ("etcd",), 15)
    teardown.clean(cfg)
    seconds = time.monotonic() - began
    if not quiet:
        say(f"down in {seconds:.1f}s")
    return seconds


def status() -> dict[str, object]:
    cfg = Settings.from_env()
    running = {n: procs.pid_of(cfg.pids, n) for n in CONTROL_PLANE + NODE + NETWORK}
    try:
        node = components.node_ready(cfg) if running["kube-apiserver"] else "API server not running"
    except OSError as error:
        node = f"{type(error).__name__}: {error}"
    state = "up" if all(running.values()) and node == "ok" else ("down" if not any(running.values()) else "degraded")
    return {"state": state, "node_ready": node == "ok", "node": node, "processes": running,
            "kubeconfig": str(cfg.admin_kubeconfig), "leftovers": teardown.leftovers(cfg) if state == "down" else {}}
