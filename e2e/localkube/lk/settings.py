"""Where everything lives and how the cluster is addressed: one frozen value built from the environment.

Three places, on purpose:
- the cache ($KRAFTY_CACHE/localkube): built programs, the base image tarball and containerd's image
  store; survives `down`, so the next `up` costs seconds;
- the state dir (LOCALKUBE_STATE_DIR, default /var/lib/krafty-localkube): one cluster's life (etcd data,
  kubelet root, pod logs, volumes, process logs and PID files); wiped by `down` except pki/ and
  kubeconfig/, which stay so a KUBECONFIG pointing here keeps working across down/up;
- the run dir (/run/krafty-localkube): containerd's sockets and runtime state.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # e2e/localkube

NODE_NAME = "localkube"
NETWORK_NAME = "krafty-localkube"  # CNI network name: tags every CNI iptables rule this cluster makes
BRIDGE = "krafty0"
CLUSTER_DOMAIN = "cluster.local"
POD_CIDR = "10.244.0.0/16"
NODE_POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
DNS_SERVICE_IP = "10.96.0.10"

ETCD_CLIENT_PORT = 12379  # not etcd's defaults: other test processes on a shared machine may use those
ETCD_PEER_PORT = 12380
APISERVER_PORT = 16443
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
CONTROLLER_MANAGER_PORT = 10257
SCHEDULER_PORT = 10259
KUBE_PROXY_HEALTHZ_PORT = 10256
KUBE_PROXY_METRICS_PORT = 10249
COREDNS_PORT = 1053  # on the node IP; the kube-dns Service maps 53 to it
COREDNS_HEALTH_PORT = 18080
COREDNS_READY_PORT = 18181
KUBE_ROUTER_HEALTH_PORT = 20244

PAUSE_IMAGE = "localhost/krafty-localkube/pause"  # tagged with PAUSE_VERSION
BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
CSI_DRIVER = "loop.csi.localkube"  # our driver (csi-loop/): the provisioner of the StorageClass "expandable"


def read_versions(path: Path = HERE / "versions.env") -> dict[str, str]:
    versions = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


def detect_node_ip() -> str:
    """The source address of the default route: what the API server advertises and the kubelet serves on."""
    override = os.environ.get("LOCALKUBE_NODE_IP")
    if override:
        return override
    out = subprocess.run(["ip", "-4", "-o", "route", "get", "1.1.1.1"], check=True,
                         capture_output=True, text=True).stdout.split()
    return out[out.index("src") + 1]


@dataclass(frozen=True)
class Settings:
    cache: Path
    k8s_bin: Path
    state: Path
    run: Path
    versions: dict[str, str]

    @classmethod
    def from_env(cls) -> Settings:
        krafty_cache = Path(os.environ.get("KRAFTY_CACHE", Path.home() / ".cache" / "krafty"))
        versions = read_versions()
        return cls(
            cache=krafty_cache / "localkube",
            k8s_bin=krafty_cache / "k8s" / versions["K8S_VERSION"] / "bin",
            state=Path(os.environ.get("LOCALKUBE_STATE_DIR", "/var/lib/krafty-localkube")),
            run=Path(os.environ.get("LOCALKUBE_RUN_DIR", "/run/krafty-localkube")),
            versions=versions,
        )

    # The cache
    @property
    def tools_bin(self) -> Path:
        return self.cache / "bin"

    @property
    def containerd_root(self) -> Path:
        return self.cache / "containerd"

    # The state dir: kept across down
    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def kubeconfigs(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.kubeconfigs / "admin.conf"

    # The state dir: one cluster's life
    @property
    def cluster(self) -> Path:
        return self.state / "cluster"

    @property
    def logs(self) -> Path:
        return self.cluster / "logs"

    @property
    def pids(self) -> Path:
        return self.cluster / "pids"

    @property
    def config(self) -> Path:
        return self.cluster / "config"

    @property
    def etcd_data(self) -> Path:
        return self.cluster / "etcd"

    @property
    def kubelet_root(self) -> Path:
        return self.cluster / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.cluster / "pod-logs"

    @property
    def volumes(self) -> Path:
        return self.cluster / "local-path"

    @property
    def csi_volumes(self) -> Path:
        """The backing files of the volumes of csi-loop (one sparse file per volume)."""
        return self.cluster / "csi-loop"

    @property
    def csi_socket(self) -> Path:
        return self.kubelet_root / "plugins" / CSI_DRIVER / "csi.sock"

    @property
    def plugins_registry(self) -> Path:
        """Where the kubelet looks for plugins' registration sockets."""
        return self.kubelet_root / "plugins_registry"

    @property
    def cni_conf_dir(self) -> Path:
        return self.cluster / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.cluster / "cni" / "ipam"

    # The run dir
    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.run / "runc"

    def binary(self, name: str) -> Path:
        """A Kubernetes component or a localkube tool by name; Debian's binaries come from PATH."""
        for folder in (self.k8s_bin, self.tools_bin):
            if (folder / name).exists():
                return folder / name
        return Path(name)

    @property
    def pause_image(self) -> str:
        return f"{PAUSE_IMAGE}:{self.versions['PAUSE_VERSION']}"

    def owned_paths(self) -> tuple[Path, ...]:
        """Every folder under which this cluster mounts things or keeps processes' files."""
        return (self.state, self.run, self.containerd_root)
