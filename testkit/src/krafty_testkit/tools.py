"""Paths of the command-line tools the tests drive, built (once) by the project's scripts."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from krafty_testkit.kafka_dist import REPO_ROOT


def _cache() -> Path:
    return Path(os.environ.get("KRAFTY_CACHE", Path.home() / ".cache" / "krafty"))


@functools.cache
def helm() -> Path:
    """helm, built from source at the pinned version by e2e/localkube/build-tools.sh."""
    subprocess.run([str(REPO_ROOT / "e2e" / "localkube" / "build-tools.sh"), "helm"], check=True)
    return _cache() / "localkube" / "bin" / "helm"


@functools.cache
def checkov() -> Path:
    """checkov (Kubernetes manifest checks), installed into its own venv by scripts/setup-checkov.sh."""
    out = subprocess.run([str(REPO_ROOT / "scripts" / "setup-checkov.sh")], check=True, capture_output=True,
                         text=True).stdout
    return Path(out.strip().splitlines()[-1])
