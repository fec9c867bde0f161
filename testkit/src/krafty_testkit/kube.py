"""A Kubernetes cluster for e2e tests, whichever kind this machine offers.

The tests see one interface (kubeconfig, kubectl(), load_images(), helm) and never ask which kind:
- "local": the real single-node cluster of e2e/localkube (upstream kubelet, API server, containerd,
  no Docker engine and no registry needed). The default when no Docker engine answers.
- "kind": a kind cluster, when a Docker engine answers (`docker info`). Images are built with
  `docker build` from the same Dockerfiles and copied in with `kind load docker-image`.
  NOT exercised on the project's test VMs (they have no Docker engine); kept small on purpose.
- "existing": the current context of $KUBECONFIG, with KRAFTY_E2E_CLUSTER=existing. Nothing is
  created or deleted; images must already be available to that cluster under the names the tests use
  (load_images only reports them).
KRAFTY_E2E_CLUSTER=local|kind|existing forces a kind.

kubectl and helm are the versions pinned in e2e/localkube/versions.env, built from source into the
cache (e2e/localkube/build-tools.sh). Every call has a timeout; a call that fails or runs out of time
raises KubeError with what the command printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from krafty_testkit.waiting import wait_for

ROOT = Path(os.environ.get("KRAFTY_ROOT", Path(__file__).resolve().parents[3]))
LOCALKUBE = ROOT / "e2e" / "localkube"
KIND_CLUSTER_NAME = "krafty-e2e"


class KubeError(RuntimeError):
    pass


@dataclass(frozen=True)
class Image:
    """An image the tests need: built from a Dockerfile that also builds with plain `docker build`."""

    name: str
    dockerfile: Path
    context: Path | None = None
    build_args: tuple[str, ...] = ()  # ARG=VALUE

    @property
    def build_context(self) -> Path:
        return self.context or self.dockerfile.parent

    def spec(self) -> str:
        return ";".join([f"{self.name}={self.dockerfile}:{self.build_context}", *self.build_args])


def run(argv: Sequence[str], timeout: float, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
    """Runs a command; KubeError with its output when it fails or outlives timeout seconds."""
    try:
        result = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=timeout,
                                env={**os.environ, **(env or {})}, check=False)
    except subprocess.TimeoutExpired as expired:
        seen = f"{expired.stdout or ''}{expired.stderr or ''}"
        raise KubeError(f"timed out after {timeout}s: {' '.join(argv)}; last output: {seen[-2000:]}") from None
    if result.returncode != 0:
        raise KubeError(f"exit {result.returncode}: {' '.join(argv)}\n{result.stdout[-2000:]}{result.stderr[-3000:]}")
    return result.stdout


def tools_dir(*tools: str) -> Path:
    """The cache folder holding kubectl, helm (and kind), building the ones asked for if missing."""
    run([str(LOCALKUBE / "build-tools.sh"), *tools], timeout=3600)
    cache = Path(os.environ.get("KRAFTY_CACHE", Path.home() / ".cache" / "krafty"))
    return cache / "localkube" / "bin"


class KubeCluster:
    """What the tests use. Subclasses say how the cluster comes up and how images get into it."""

    kind = "abstract"

    def __init__(self, kubeconfig: Path, tools: Path) -> None:
        self.kubeconfig = kubeconfig
        self.tools = tools

    @property
    def helm(self) -> Path:
        return self.tools / "helm"

    def up(self) -> float:
        """Makes sure the cluster is up and its node Ready; returns the seconds that took."""
        raise NotImplementedError

    def down(self) -> float:
        raise NotImplementedError

    def is_up(self) -> bool:
        raise NotImplementedError

    def load_images(self, images: Sequence[Image]) -> None:
        raise NotImplementedError

    def kill_container(self, namespace: str, pod: str, signal: str = "KILL") -> None:
        """Sends a signal to a pod's main container from outside it (a real SIGKILL, not a pod deletion:
        a signal from inside would not reach PID 1)."""
        status = self.kubectl_json("get", "pod", pod, "-n", namespace)["status"]
        container_id = status["containerStatuses"][0]["containerID"].split("://", 1)[1]
        self._signal_container(container_id, signal)

    def _signal_container(self, container_id: str, signal: str) -> None:
        raise NotImplementedError

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        return run([str(self.tools / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args], timeout, stdin)

    def kubectl_json(self, *args: str, timeout: float = 120) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", timeout=timeout))

    def apply(self, objects: Sequence[dict[str, Any]], namespace: str | None = None, timeout: float = 120) -> None:
        ns = ["--namespace", namespace] if namespace else []
        manifest = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        self.kubectl("apply", *ns, "-f", "-", stdin=json.dumps(manifest), timeout=timeout)

    def run_helm(self, *args: str, timeout: float = 600) -> str:
        return run([str(self.helm), "--kubeconfig", str(self.kubeconfig), *args], timeout)

    def wait_for_ready_node(self, timeout: float = 180) -> None:
        def ready_nodes() -> list[str]:
            nodes = self.kubectl_json("get", "nodes")["items"]
            return [n["metadata"]["name"] for n in nodes
                    if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])]

        wait_for(ready_nodes, bool, timeout, "a Ready node")


class LocalCluster(KubeCluster):
    kind = "local"

    def __init__(self) -> None:
        super().__init__(Path(self._localkube("kubeconfig", timeout=60).strip()), tools_dir("kubectl", "helm"))

    @staticmethod
    def _localkube(*args: str, timeout: float) -> str:
        return run([str(LOCALKUBE / "localkube"), *args], timeout)

    def up(self) -> float:
        began = time.monotonic()
        self._localkube("up", timeout=3600)
        return time.monotonic() - began

    def down(self) -> float:
        began = time.monotonic()
        self._localkube("down", timeout=300)
        return time.monotonic() - began

    def status(self) -> dict[str, Any]:
        """`localkube status --json` (it exits 1 when the cluster is not up: its output is the answer)."""
        argv = [str(LOCALKUBE / "localkube"), "status", "--json"]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except subprocess.TimeoutExpired:
            raise KubeError(f"timed out after 60s: {' '.join(argv)}") from None
        if result.returncode not in (0, 1):
            raise KubeError(f"exit {result.returncode}: {' '.join(argv)}\n{result.stderr[-3000:]}")
        return json.loads(result.stdout)

    def is_up(self) -> bool:
        return self.status()["state"] == "up"

    def leftovers(self) -> dict[str, list[str]]:
        return self.status()["leftovers"]

    def load_images(self, images: Sequence[Image]) -> None:
        self._localkube("load-images", *(image.spec() for image in images), timeout=3600)

    def _signal_container(self, container_id: str, signal: str) -> None:
        socket = Path(os.environ.get("LOCALKUBE_RUN_DIR", "/run/krafty-localkube")) / "containerd.sock"
        run(["ctr", "--address", str(socket), "-n", "k8s.io", "tasks", "kill", "-s", f"SIG{signal}", container_id],
            timeout=30)


class KindCluster(KubeCluster):
    """kind on a Docker engine. Not exercised on the project's VMs: they have no Docker engine."""

    kind = "kind"

    def __init__(self) -> None:
        cache = Path(os.environ.get("KRAFTY_CACHE", Path.home() / ".cache" / "krafty"))
        super().__init__(cache / "kind" / f"{KIND_CLUSTER_NAME}.kubeconfig", tools_dir("kubectl", "helm", "kind"))

    def _kind(self, *args: str, timeout: float = 600) -> str:
        return run([str(self.tools / "kind"), *args], timeout)

    def is_up(self) -> bool:
        return KIND_CLUSTER_NAME in self._kind("get", "clusters").split()

    def up(self) -> float:
        began = time.monotonic()
        if not self.is_up():
            self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
            self._kind("create", "cluster", "--name", KIND_CLUSTER_NAME, "--kubeconfig", str(self.kubeconfig),
                       "--wait", "300s", timeout=900)
        self._kind("export", "kubeconfig", "--name", KIND_CLUSTER_NAME, "--kubeconfig", str(self.kubeconfig))
        self.wait_for_ready_node()
        return time.monotonic() - began

    def down(self) -> float:
        began = time.monotonic()
        self._kind("delete", "cluster", "--name", KIND_CLUSTER_NAME)
        return time.monotonic() - began

    def load_images(self, images: Sequence[Image]) -> None:
        for image in images:
            args = [f"--build-arg={arg}" for arg in image.build_args]
            run(["docker", "build", *args, "-t", image.name, "-f", str(image.dockerfile), str(image.build_context)],
                3600)
            self._kind("load", "docker-image", "--name", KIND_CLUSTER_NAME, image.name, timeout=900)

    def _signal_container(self, container_id: str, signal: str) -> None:
        run(["docker", "exec", f"{KIND_CLUSTER_NAME}-control-plane", "ctr", "-n", "k8s.io", "tasks", "kill", "-s",
             f"SIG{signal}", container_id], timeout=30)


class ExistingCluster(KubeCluster):
    """The current context of $KUBECONFIG (or ~/.kube/config). Never created, changed or deleted here."""

    kind = "existing"

    def __init__(self) -> None:
        default = Path.home() / ".kube" / "config"
        super().__init__(Path(os.environ.get("KUBECONFIG", default).split(os.pathsep)[0]), tools_dir("kubectl", "helm"))

    def is_up(self) -> bool:
        return True

    def up(self) -> float:
        began = time.monotonic()
        self.wait_for_ready_node()
        return time.monotonic() - began

    def down(self) -> float:
        raise KubeError("an existing cluster is never taken down by the tests")

    def load_images(self, images: Sequence[Image]) -> None:
        names = ", ".join(image.name for image in images)
        print(f"existing cluster: expecting these images to be available to it already: {names}")


def docker_engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              timeout=15, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def chosen_kind() -> str:
    """KRAFTY_E2E_CLUSTER if set, else "kind" when a Docker engine answers, else "local"."""
    choice = os.environ.get("KRAFTY_E2E_CLUSTER", "auto")
    if choice == "auto":
        return "kind" if docker_engine_answers() else "local"
    if choice not in ("local", "kind", "existing"):
        raise KubeError(f"KRAFTY_E2E_CLUSTER must be local, kind or existing, not {choice!r}")
    return choice


def detect() -> KubeCluster:
    """The cluster for this machine (see chosen_kind)."""
    return {"local": LocalCluster, "kind": KindCluster, "existing": ExistingCluster}[chosen_kind()]()
