"""A real kube-apiserver (with etcd) as local processes: API tests without a node.

CRD validation (OpenAPI schema, CEL rules), server-side apply and dry runs
need the real API server, not a node: this starts etcd and kube-apiserver on
free loopback ports in a few seconds. The binaries are the ones the local
cluster uses (e2e/localkube/build-k8s.sh, cached), etcd is Debian's.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import yaml

from krafty_testkit import procfs
from krafty_testkit.kafka_dist import REPO_ROOT
from krafty_testkit.waiting import wait_for

BUILD_K8S = REPO_ROOT / "e2e" / "localkube" / "build-k8s.sh"


def k8s_bin_dir() -> Path:
    """Builds (once) and returns the directory holding kube-apiserver and kubectl."""
    versions = dict(line.split("=", 1) for line in (REPO_ROOT / "e2e" / "localkube" / "versions.env").read_text()
                    .splitlines() if line and not line.startswith("#"))
    cache = Path(os.environ.get("KRAFTY_CACHE", Path.home() / ".cache" / "krafty"))
    bin_dir = cache / "k8s" / versions["K8S_VERSION"] / "bin"
    if not (bin_dir / "kube-apiserver").exists():
        subprocess.run([str(BUILD_K8S)], check=True)
    return bin_dir


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalApiServer:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.bin_dir = k8s_bin_dir()
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.kubeconfig = workdir / "kubeconfig"
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(self, timeout: float = 90) -> None:
        etcd_client, etcd_peer = free_port(), free_port()
        self._spawn("etcd", ["etcd", "--data-dir", str(self.workdir / "etcd"),
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_client}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_client}",
                             "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
                             "--initial-cluster", f"default=http://127.0.0.1:{etcd_peer}",
                             "--unsafe-no-fsync"])
        sa_key = self.workdir / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
        (self.workdir / "tokens.csv").write_text(f"{self.token},admin,admin,system:masters\n")
        self._spawn("kube-apiserver", [
            str(self.bin_dir / "kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{etcd_client}",
            "--bind-address", "127.0.0.1", "--secure-port", str(self.port),
            "--cert-dir", str(self.workdir / "certs"),
            "--token-auth-file", str(self.workdir / "tokens.csv"),
            "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(sa_key),
            "--service-account-signing-key-file", str(sa_key),
            "--service-cluster-ip-range", "10.96.0.0/16",
            "--disable-admission-plugins", "ServiceAccount",
        ])
        self._write_kubeconfig()
        wait_for(lambda: self.kubectl("get", "--raw", "/readyz", check=False),
                 lambda proc: proc.returncode == 0, timeout, "kube-apiserver /readyz", interval=0.5)
        # Namespaces are created by a controller normally; the API server alone has none but its own.
        wait_for(lambda: self.kubectl("get", "namespace", "default", check=False), lambda p: p.returncode == 0,
                 timeout, "the default namespace")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self._procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "local",
            "clusters": [{"name": "local", "cluster": {"server": f"https://127.0.0.1:{self.port}",
                                                       "insecure-skip-tls-verify": True}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                              capture_output=True, text=True, input=input, timeout=60, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def apply(self, manifest: dict[str, object] | str, *extra: str,
              check: bool = True) -> subprocess.CompletedProcess[str]:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        return self.kubectl("apply", "--server-side", "--field-manager", "krafty-tests", "-f", "-", *extra,
                            check=check, input=text)

    def ready_pod(self, namespace: str, name: str, labels: dict[str, str], image: str) -> None:
        """What a StatefulSet controller and a kubelet would make of one pod: created, running and Ready (this
        server has no node)."""
        self.apply({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace, "labels": labels},
                    "spec": {"containers": [{"name": "kafka", "image": image}]}})
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                  "containerStatuses": [{"name": "kafka", "ready": True, "restartCount": 0, "image": image,
                                         "imageID": "", "state": {"running": {"startedAt": "2026-11-23T00:00:00Z"}}}]}
        self.kubectl("patch", "pod", name, "-n", namespace, "--subresource=status", "--type=merge",
                     "-p", json.dumps({"status": status}))

    def cpu_seconds(self) -> float:
        """CPU time used so far by etcd and kube-apiserver together."""
        return sum(procfs.cpu_seconds(Path(f"/proc/{proc.pid}/stat").read_text()) for proc in self._procs)

    def stop(self) -> None:
        for proc in reversed(self._procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        self._procs.clear()


@contextlib.contextmanager
def running_apiserver(workdir: Path) -> Iterator[LocalApiServer]:
    if shutil.which("etcd") is None:
        raise RuntimeError("etcd is not installed: run scripts/setup-system.sh (installs Debian's etcd-server)")
    server = LocalApiServer(workdir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
