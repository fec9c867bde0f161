"""A kind cluster of one control plane and N workers, one zone each, on podman (or on Docker where its engine
answers): up, down, status, and the node faults the tests inject.

kind runs with KIND_EXPERIMENTAL_PROVIDER=podman on machines without a Docker engine (ours). Its node image is
built here from source (node_image.py); its network is kube-router, its storage local-path and csi-loop
(addons.py), its load balancer MetalLB (load_balancer.py). What these machines need from the host is set up
before kind starts: /lib/modules (kind mounts it into every node; podman refuses a missing path), and podman's
settings for our calls (settings.CONTAINERS_CONF: rlimits the machine allows, a network backend that resolves
the nodes' names).

Node faults act on the node's container from outside, as a machine fails:
- stop: SIGKILL to every process of the node at once (`podman kill`), like a power cut; start: the container
  boots again with its /var volume (kubelet state, images, local volumes), as a machine after a power cut
  (possibly with another address: kind's entrypoint rewrites the node's files, kube-router its routes);
- partition: the host end of the node's network link goes down, so every packet to or from the node is
  dropped while the node keeps running; heal: the link comes back up.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from . import base_image, load_balancer, node_image
from . import settings as s
from .progress import say, ticking, wait
from .settings import Settings

CLUSTER = "krafty"
NETWORK = "krafty-kind"  # the nodes' podman (or Docker) network; kind's default would be "kind"
MTU = 9000  # the frames of the nodes' network; kind/node/manifests/default-cni.yaml gives the pods' bridges the same
CLUSTER_LABEL = "io.x-k8s.kind.cluster"
ZONE_LABEL = "topology.kubernetes.io/zone"
DEFAULT_WORKERS = 3
NODE_ACTIONS = ("stop", "start", "partition", "heal")


def zone(index: int) -> str:
    """zone-a, zone-b, ... for workers 0, 1, ..."""
    return f"zone-{chr(ord('a') + index)}"


@functools.cache
def engine() -> str:
    """docker where a Docker engine answers, podman everywhere else."""
    try:
        answered = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                                  timeout=15, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        answered = False
    return "docker" if answered else "podman"


def configure_environment(cfg: Settings) -> None:
    """What every podman and kind call of this process runs with: our containers.conf, kind's provider and
    its network."""
    name = engine()
    os.environ.update({"CONTAINERS_CONF": str(cfg.containers_conf()), "KIND_EXPERIMENTAL_PROVIDER": name,
                       f"KIND_EXPERIMENTAL_{name.upper()}_NETWORK": NETWORK})


def kubeadm_patches(cfg: Settings) -> list[str]:
    """What these machines need of kubeadm, the kubelet and kube-proxy: our images; no oom_score_adj below 0
    and no rlimit above the hard limit (no CAP_SYS_RESOURCE); no image garbage collection (nothing could be
    pulled back); pods synced every 10 s, so a grown volume shows in its pod within seconds."""
    v = cfg.versions
    return [
        f"kind: ClusterConfiguration\nimageRepository: {s.KIND_IMAGE_REPOSITORY}\n"
        f"etcd:\n  local:\n    imageTag: {v['ETCD_VERSION']}\ndns:\n  imageTag: {v['COREDNS_VERSION']}\n",
        "kind: KubeletConfiguration\noomScoreAdj: 0\nmaxOpenFiles: 20000\nimageGCHighThresholdPercent: 100\n"
        "syncFrequency: 10s\n",
        "kind: KubeProxyConfiguration\noomScoreAdj: 0\n",
    ]


def config(cfg: Settings, workers: int, image: str) -> dict[str, Any]:
    """kind's cluster configuration: a control plane, and workers labelled zone-a, zone-b, ..."""
    nodes: list[dict[str, Any]] = [{"role": "control-plane", "image": image}]
    nodes += [{"role": "worker", "image": image, "labels": {ZONE_LABEL: zone(n)}} for n in range(workers)]
    return {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "name": CLUSTER,
            "networking": {"apiServerAddress": "127.0.0.1", "podSubnet": s.POD_CIDR,
                           "serviceSubnet": s.SERVICE_CIDR, "kubeProxyMode": "iptables"},
            "nodes": nodes, "kubeadmConfigPatches": kubeadm_patches(cfg)}


def _run(argv: list[str], timeout: float = 120, check: bool = True) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed ({result.returncode}): "
                           f"{(result.stderr or result.stdout).strip()[-3000:]}")
    return result.stdout


def _json_lines(out: str) -> list[dict[str, Any]]:
    """podman prints a JSON list, docker one JSON object a line."""
    text = out.strip()
    if not text:
        return []
    return list(json.loads(text)) if text.startswith("[") else [json.loads(line) for line in text.splitlines()]


def _node_containers() -> dict[str, dict[str, Any]]:
    found = _json_lines(_run([engine(), "ps", "-a", "--filter", f"label={CLUSTER_LABEL}={CLUSTER}",
                              "--format", "json"]))
    return {(c["Names"][0] if isinstance(c["Names"], list) else c["Names"]): c for c in found}


def containers() -> dict[str, str]:
    """The cluster's node containers and their state (running, exited, ...)."""
    return {name: str(c["State"]).lower() for name, c in _node_containers().items()}


def node_images() -> set[str]:
    """The images the cluster's node containers were made from."""
    return {str(c["Image"]) for c in _node_containers().values()}


def schedulable_nodes() -> list[str]:
    """The running nodes that take pods: the workers (kind keeps the control plane to itself when there are
    workers), so images go where pods can run them."""
    running = [name for name, state in containers().items() if state == "running"]
    workers = [name for name in running if not name.endswith("-control-plane")]
    return workers or running


def ctr(node: str) -> list[str]:
    """The command that reaches a node's containerd (k8s.io namespace), its standard input open."""
    return [engine(), "exec", "-i", node, "ctr", "--namespace", "k8s.io"]


def kubectl(cfg: Settings, *args: str, timeout: float = 60) -> str:
    return _run([str(cfg.binary("kubectl")), "--kubeconfig", str(cfg.admin_kubeconfig), *args], timeout=timeout)


def node_conditions(cfg: Settings) -> dict[str, str]:
    """Each node's Ready condition as the API server says it ("True", "False", "Unknown")."""
    items = json.loads(kubectl(cfg, "get", "nodes", "-o", "json", timeout=20))["items"]
    return {n["metadata"]["name"]: next((c["status"] for c in n["status"].get("conditions", [])
                                         if c["type"] == "Ready"), "Unknown") for n in items}


def _ready_nodes(cfg: Settings, expected: int) -> str:
    ready = sorted(n for n, v in node_conditions(cfg).items() if v == "True")
    return "ok" if len(ready) == expected else f"{len(ready)} of {expected} nodes Ready ({', '.join(ready) or 'none'})"


SYSTEM_NAMESPACES = ("kube-system", "local-path-storage")


def _system_pods_ready(cfg: Settings) -> str:
    """DNS, the network, kube-proxy and storage on every node: every pod of the system namespaces Ready."""
    waiting = []
    for namespace in SYSTEM_NAMESPACES:
        for pod in json.loads(kubectl(cfg, "get", "pods", "-n", namespace, "-o", "json", timeout=20))["items"]:
            conditions = (pod.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                waiting.append(pod["metadata"]["name"])
    return f"not Ready yet: {', '.join(sorted(waiting))}" if waiting else "ok"


def is_up(cfg: Settings, workers: int, image: str) -> bool:
    """Up with this shape, made from this node image, every node Ready."""
    found = containers()
    if len(found) != workers + 1 or any(state != "running" for state in found.values()):
        return False
    if node_images() != {image}:
        return False
    try:
        return _ready_nodes(cfg, workers + 1) == "ok"
    except (RuntimeError, subprocess.TimeoutExpired):
        return False


def up(workers: int = DEFAULT_WORKERS) -> float:
    """Brings the cluster up, or keeps it up when it has this shape, runs the current node image (the tree's
    programs and manifests) and every node is Ready."""
    began = time.monotonic()
    cfg = Settings.from_env()
    base_image.ensure(cfg)
    image = node_image.ensure(cfg, engine())
    if is_up(cfg, workers, image):
        say(f"already up: the control plane and {workers} workers Ready")
        if not _has_load_balancer(cfg):  # an earlier `up` stopped before MetalLB took its pool
            _install_load_balancer(cfg)
        return time.monotonic() - began
    if containers():
        say("a cluster of another shape, of an older node image, or with a node down, is here: deleting it first")
        down(quiet=True)
    Path("/lib/modules").mkdir(exist_ok=True)
    _make_network()
    config_file = cfg.cache / "kind-cluster.json"
    config_file.write_text(json.dumps(config(cfg, workers, image), indent=1))
    say(f"creating kind cluster {CLUSTER} on {engine()}: a control plane and {workers} workers in "
        f"{', '.join(zone(n) for n in range(workers))}")
    with ticking("kind create cluster"):
        result = subprocess.run([str(cfg.binary("kind")), "create", "cluster", "--name", CLUSTER, "--config",
                                 str(config_file), "--kubeconfig", str(cfg.admin_kubeconfig)],
                                capture_output=True, text=True, timeout=1200, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"kind create cluster failed:\n{result.stdout[-3000:]}{result.stderr[-6000:]}")
    wait(lambda: _ready_nodes(cfg, workers + 1), 300, f"{workers + 1} nodes Ready")
    wait(lambda: _system_pods_ready(cfg), 300, "the system pods (DNS, network, storage) Ready")
    _install_load_balancer(cfg)
    seconds = time.monotonic() - began
    say(f"up in {seconds:.1f} s; KUBECONFIG={cfg.admin_kubeconfig}")
    return seconds


def _make_network() -> None:
    """The nodes' network, made before kind would make it: the subnet the engine picks, with the nodes'
    addresses from its lower half only (the load balancer's pool is at its top)."""
    if NETWORK in _networks():
        _run([engine(), "network", "rm", NETWORK])
    _run([engine(), "network", "create", "-d=bridge", NETWORK])
    picked = subnet()
    _run([engine(), "network", "rm", NETWORK])
    _run([engine(), "network", "create", "-d=bridge", "--opt", f"mtu={MTU}", "--subnet", picked, "--ip-range",
          load_balancer.node_range(picked), NETWORK])


def subnet() -> str:
    """The nodes' network's IPv4 subnet."""
    found = _run([engine(), "network", "inspect", NETWORK, "--format", "{{range .Subnets}}{{.Subnet}} {{end}}"])
    return next(net for net in found.split() if "." in net)


def _install_load_balancer(cfg: Settings) -> None:
    """MetalLB, then its address pool once its webhook answers (it validates the pool)."""
    say("installing MetalLB (load balancer) with a layer-2 pool on the nodes' network")
    kubectl_stdin(cfg, load_balancer.manifest(cfg), "apply", "-f", "-", timeout=120)
    wait(lambda: _rolled_out(cfg), 300, "MetalLB's controller and speakers Ready")
    wait(lambda: _applied(cfg, load_balancer.pool_manifest(subnet())), 120, "MetalLB's webhook to take the pool")


def _has_load_balancer(cfg: Settings) -> bool:
    try:
        kubectl(cfg, "get", "ipaddresspools.metallb.io", load_balancer.POOL, "-n", load_balancer.NAMESPACE,
                timeout=20)
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
    return True


def _rolled_out(cfg: Settings) -> str:
    for workload in ("deployment/controller", "daemonset/speaker"):
        out = kubectl(cfg, "rollout", "status", "-n", load_balancer.NAMESPACE, workload, "--timeout=5s", timeout=30)
        if "successfully rolled out" not in out:
            return out.strip()
    return "ok"


def _applied(cfg: Settings, manifest: str) -> str:
    kubectl_stdin(cfg, manifest, "apply", "-f", "-", timeout=60)
    return "ok"


def kubectl_stdin(cfg: Settings, stdin: str, *args: str, timeout: float = 60) -> str:
    result = subprocess.run([str(cfg.binary("kubectl")), "--kubeconfig", str(cfg.admin_kubeconfig), *args],
                            input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()[-2000:]}")
    return result.stdout


def down(quiet: bool = False) -> float:
    """Deletes the node containers with their volumes, then the nodes' network."""
    began = time.monotonic()
    cfg = Settings.from_env()
    _run([str(cfg.binary("kind")), "delete", "cluster", "--name", CLUSTER, "--kubeconfig",
          str(cfg.admin_kubeconfig)], timeout=300)
    if NETWORK in _networks():
        _run([engine(), "network", "rm", NETWORK])
    seconds = time.monotonic() - began
    if not quiet:
        say(f"down in {seconds:.1f} s")
    return seconds


def _networks() -> list[str]:
    return _run([engine(), "network", "ls", "--format", "{{.Name}}"]).split()


def _node_volumes() -> list[str]:
    """kind labels each node's /var volume with the node's name as a key (podman filters on keys only)."""
    listed = _json_lines(_run([engine(), "volume", "ls", "--format", "json"]))
    return sorted(v["Name"] for v in listed
                  if any(key.startswith(f"{CLUSTER}-") for key in (v.get("Labels") or {})))


def leftovers() -> dict[str, list[str]]:
    """What a cluster could leave behind once down: node containers, their volumes, its network, and loop
    devices (csi-loop's volumes live in the nodes' volumes)."""
    loops = _run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"], check=False).splitlines()
    return {"containers": sorted(containers()), "volumes": _node_volumes(),
            "networks": [n for n in _networks() if n == NETWORK],
            "loop devices": [line.strip() for line in loops if "csi-loop" in line]}


def status() -> dict[str, Any]:
    cfg = Settings.from_env()
    runs = engine()
    if shutil.which(runs) is None:  # (a fresh machine before `make cluster-up`: nothing to ask)
        return {"state": "down", "engine": f"{runs}, not installed: `make cluster-up` installs it",
                "containers": {}, "nodes": {}, "kubeconfig": str(cfg.admin_kubeconfig), "leftovers": {}}
    found = containers()
    try:
        conditions = node_conditions(cfg) if found else {}
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        conditions = {"(API server)": str(error).splitlines()[0]}
    ready = set(conditions) == set(found) and all(v == "True" for v in conditions.values())
    state = "down" if not found else ("up" if ready and all(v == "running" for v in found.values()) else "degraded")
    return {"state": state, "engine": runs, "containers": found, "nodes": conditions,
            "kubeconfig": str(cfg.admin_kubeconfig), "leftovers": leftovers() if state == "down" else {}}


def _host_link(node: str) -> str:
    """The host end of the node's network link: the host interface whose index the node's eth0 names."""
    pid = _run([engine(), "inspect", "--format", "{{.State.Pid}}", node]).strip()
    # (ip in the node's network namespace: /sys there would still be the host's, which nsenter -n leaves)
    peer = json.loads(_run(["nsenter", "-t", pid, "-n", "ip", "-j", "link", "show", "eth0"]))[0]["link_index"]
    bridge = _run([engine(), "network", "inspect", NETWORK, "--format", "{{.NetworkInterface}}"]).strip()
    for link in json.loads(_run(["ip", "-j", "link", "show"])):
        if link["ifindex"] == peer:
            # Only ever the node's own veth on the nodes' bridge: never a link of the machine itself
            if link.get("master") != bridge:
                raise RuntimeError(f"{link['ifname']} (the peer of {node}'s eth0) is not on the bridge {bridge}")
            return str(link["ifname"])
    raise RuntimeError(f"no host interface has index {peer} (the peer of {node}'s eth0)")


def node_fault(action: str, node: str) -> None:
    found = containers()
    if node not in found:
        raise RuntimeError(f"no node {node} in cluster {CLUSTER} (its nodes: {', '.join(sorted(found))})")
    if action == "stop":
        _run([engine(), "kill", "--signal", "KILL", node])
    elif action == "start":
        _run([engine(), "start", node], timeout=300)
    elif action in ("partition", "heal"):
        _run(["ip", "link", "set", _host_link(node), "down" if action == "partition" else "up"])
    else:
        raise ValueError(f"unknown node action {action!r}; one of {', '.join(NODE_ACTIONS)}")
    say(f"node {node}: {action}")
