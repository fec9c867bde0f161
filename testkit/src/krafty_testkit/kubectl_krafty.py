"""`kubectl krafty` as users run it: the operator's Python package installed with pip (its console script
kubectl-krafty on PATH), found and run by the cluster's own kubectl.

The package is built from a copy of operator/ (nothing is written into the work tree) into a folder of this
test run, once per run.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from krafty_testkit.k8s_kafka import KafkaClusterHandle, repo_path
from krafty_testkit.kube import KubeCluster, run


@functools.cache
def installed() -> Path:
    """The bin folder holding kubectl-krafty, as `pip install` of the operator's package made it."""
    work = Path(tempfile.mkdtemp(prefix="kubectl-krafty-"))
    source = work / "operator"
    shutil.copytree(repo_path("operator"), source, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                                                 "__pycache__"))
    run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--prefix",
         str(work / "prefix"), str(source)], timeout=300)
    bin_dir = work / "prefix" / "bin"
    assert (bin_dir / "kubectl-krafty").is_file(), f"pip installed no kubectl-krafty into {bin_dir}"
    return bin_dir


def kubectl_krafty(cluster: KubeCluster, *args: str, stdin: str | None = None, timeout: float = 180) -> str:
    """`kubectl krafty ARGS` against the cluster (its kubeconfig as KUBECONFIG: kubectl hands no flags to a
    plugin), that kubectl on PATH as a user's is (the plugin port-forwards with it)."""
    return run([str(cluster.tools / "kubectl"), "krafty", *args], timeout, stdin,
               env={"KUBECONFIG": str(cluster.kubeconfig),
                    "PATH": os.pathsep.join([str(installed()), str(cluster.tools), os.environ.get("PATH", "")])})


def merged(document: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386) applied to a document, as `kubectl patch --type merge` does."""
    if not isinstance(patch, dict):
        return patch
    out = dict(document) if isinstance(document, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


def plan(handle: KafkaClusterHandle, patch: dict[str, Any]) -> dict[str, Any]:
    """`kubectl krafty plan -o json` of the cluster's spec with a merge patch applied (what patch_spec would
    make of it)."""
    current = handle.get()
    proposed = {"apiVersion": current["apiVersion"], "kind": current["kind"],
                "metadata": {"name": handle.name, "namespace": handle.namespace},
                "spec": merged(current["spec"], patch)}
    answer = kubectl_krafty(handle.kube, "plan", handle.name, "-n", handle.namespace, "-f", "-", "-o", "json",
                            stdin=json.dumps(proposed))
    return dict(json.loads(answer))


def planned_restarts(preview: dict[str, Any]) -> list[tuple[str, str]]:
    """(pod, Event reason) of each restart a plan lists, in its order: the form restart Events take."""
    return [(r["pod"], f"Restart{r['reason']}") for r in preview["restarts"]]
