"""A Kubernetes cluster for e2e tests.

The tests see one interface (kubeconfig, kubectl(), load_images(), helm, node faults) and never ask which:
- "local" (the default): the kind cluster of e2e/localkube on this machine, a control plane and three
  workers in three zones, built from source (podman as kind's provider where no Docker engine answers,
  Docker where one does; no registry needed). Images are built with buildah and imported into every node.
- "existing": the current context of $KUBECONFIG, with KRAFTY_E2E_CLUSTER=existing. Nothing is
  created or deleted; images must already be available to that cluster under the names the tests use
  (load_images only reports them), and node faults cannot be injected.

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
ZONE_LABEL = "topology.kubernetes.io/zone"


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
    """The cache folder holding kubectl and helm, building the ones asked for if missing."""
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
        """Makes sure the cluster is up and its nodes Ready; returns the seconds that took."""
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
        found = self.kubectl_json("get", "pod", pod, "-n", namespace)
        container_id = found["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
        self._signal_container(found["spec"]["nodeName"], container_id, signal)

    def _signal_container(self, node: str, container_id: str, signal: str) -> None:
        raise NotImplementedError

    def limit_cpu(self, namespace: str, pod: str, percent: int | None) -> None:
        """Caps a pod's main container at this share of one CPU (its cgroup's CFS quota), as a CPU limit it
        outgrew or a noisy neighbour would; None lifts the cap. The pod does not restart and Kubernetes does not
        know."""
        self._cpu_cgroup(*self._main_container(namespace, pod), "cpu", "cpu.cfs_quota_us",
                         str(-1 if percent is None else percent * 1000))

    def cpu_seconds(self, namespace: str, pod: str) -> float:
        """The CPU time a pod's main container has used so far (its cgroup's cpuacct)."""
        return int(self._cpu_cgroup(*self._main_container(namespace, pod), "cpuacct", "cpuacct.usage")) / 1e9

    def _main_container(self, namespace: str, pod: str) -> tuple[str, str]:
        found = self.kubectl_json("get", "pod", pod, "-n", namespace)
        return found["spec"]["nodeName"], found["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]

    def _cpu_cgroup(self, node: str, container_id: str, controller: str, name: str, value: str | None = None) -> str:
        """Reads (or, with a value, writes) a file of a container's cgroup."""
        raise NotImplementedError

    def node_fault(self, action: str, node: str) -> None:
        """stop (power cut), start, partition (all its traffic dropped) or heal a node."""
        raise NotImplementedError

    def workers(self) -> dict[str, str]:
        """The nodes pods may run on, with their zones ("" when a node has none)."""
        nodes = self.kubectl_json("get", "nodes")["items"]
        return {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE_LABEL, "") for n in nodes
                if not any(t.get("effect") == "NoSchedule" for t in n["spec"].get("taints", []))}

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

    def ready_nodes(self) -> list[str]:
        nodes = self.kubectl_json("get", "nodes")["items"]
        return sorted(n["metadata"]["name"] for n in nodes
                      if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]))

    def wait_for_ready_node(self, timeout: float = 180) -> None:
        wait_for(self.ready_nodes, bool, timeout, "a Ready node")


class LocalCluster(KubeCluster):
    """The kind cluster of e2e/localkube on this machine."""

    kind = "local"

    def __init__(self) -> None:
        super().__init__(Path(self._localkube("kubeconfig", timeout=60).strip()), tools_dir("kubectl", "helm"))

    @staticmethod
    def _localkube(*args: str, timeout: float) -> str:
        return run([str(LOCALKUBE / "localkube"), *args], timeout)

    @staticmethod
    def _localkube_shown(*args: str, timeout: float) -> None:
        """A localkube command whose progress is shown as it goes (what it builds, every 15 s while it lasts)."""
        argv = [str(LOCALKUBE / "localkube"), *args]
        try:
            returncode = subprocess.run(argv, timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            raise KubeError(f"timed out after {timeout:.0f}s: {' '.join(argv)}") from None
        if returncode != 0:
            raise KubeError(f"exit {returncode}: {' '.join(argv)} (its output is above)")

    def up(self) -> float:
        """`localkube up`, its progress shown as it goes (a first build takes many minutes)."""
        began = time.monotonic()
        self._localkube_shown("up", timeout=3600)
        return time.monotonic() - began

    def down(self) -> float:
        began = time.monotonic()
        self._localkube("down", timeout=600)
        return time.monotonic() - began

    def status(self) -> dict[str, Any]:
        """`localkube status --json` (it exits 1 when the cluster is not up: its output is the answer)."""
        argv = [str(LOCALKUBE / "localkube"), "status", "--json"]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        except subprocess.TimeoutExpired:
            raise KubeError(f"timed out after 120s: {' '.join(argv)}") from None
        if result.returncode not in (0, 1):
            raise KubeError(f"exit {result.returncode}: {' '.join(argv)}\n{result.stderr[-3000:]}")
        return dict(json.loads(result.stdout))

    def is_up(self) -> bool:
        return self.status()["state"] == "up"

    def leftovers(self) -> dict[str, list[str]]:
        return dict(self.status()["leftovers"])

    def load_images(self, images: Sequence[Image]) -> None:
        """Builds and loads the images, saying which one it builds or imports (a first build takes minutes)."""
        self._localkube_shown("load-images", *(image.spec() for image in images), timeout=3600)

    def node_fault(self, action: str, node: str) -> None:
        self._localkube("node", action, node, timeout=600)

    def _signal_container(self, node: str, container_id: str, signal: str) -> None:
        engine = self.status()["engine"]
        run([engine, "exec", node, "ctr", "-n", "k8s.io", "tasks", "kill", "-s", f"SIG{signal}", container_id],
            timeout=30)

    def _cpu_cgroup(self, node: str, container_id: str, controller: str, name: str, value: str | None = None) -> str:
        # cgroup v1 (the machines' notes): the container's cgroup of that controller, found from its main process
        script = ('pid=$(ctr -n k8s.io tasks ls | awk -v id="$1" \'$1 == id {print $2}\') && '
                  'path=$(sed -n "s/^[0-9]*:$2:\\(.*\\)$/\\1/p" /proc/$pid/cgroup) && '
                  'file=/sys/fs/cgroup/$2$path/$3 && '
                  'if [ -n "$4" ]; then echo "$4" > "$file"; else cat "$file"; fi')
        return run([self.status()["engine"], "exec", node, "sh", "-c", script, "cgroup", container_id, controller, name,
                    value or ""], timeout=30).strip()


class ExistingCluster(KubeCluster):
    """The current context of $KUBECONFIG (or ~/.kube/config). Never created, changed or deleted here."""

    kind = "existing"

    def __init__(self) -> None:
        default = Path.home() / ".kube" / "config"
        super().__init__(Path(os.environ.get("KUBECONFIG", default).split(os.pathsep)[0]), tools_dir("kubectl", "helm"))

    def is_up(self) -> bool:
        """Whether its API server answers as ready (an unreachable or stopped cluster is not up)."""
        try:
            return self.kubectl("get", "--raw", "/readyz", timeout=30).strip() == "ok"
        except KubeError:
            return False

    def up(self) -> float:
        began = time.monotonic()
        self.wait_for_ready_node()
        return time.monotonic() - began

    def down(self) -> float:
        raise KubeError("an existing cluster is never taken down by the tests")

    def load_images(self, images: Sequence[Image]) -> None:
        names = ", ".join(image.name for image in images)
        print(f"existing cluster: expecting these images to be available to it already: {names}")


def chosen_kind() -> str:
    """KRAFTY_E2E_CLUSTER if set (local or existing), else local."""
    choice = os.environ.get("KRAFTY_E2E_CLUSTER", "local")
    if choice not in ("local", "existing"):
        raise KubeError(f"KRAFTY_E2E_CLUSTER must be local or existing, not {choice!r}")
    return choice


def detect() -> KubeCluster:
    """The cluster for this machine (see chosen_kind)."""
    return {"local": LocalCluster, "existing": ExistingCluster}[chosen_kind()]()
