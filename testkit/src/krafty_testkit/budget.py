"""The e2e tier's time budget: the minutes a make run has spent, less what its first builds took (a fresh
machine's venv, Kubernetes, the tools and the node image: built once, each noted in the run's ledger by
scripts/lib.sh, e2e/localkube/progress.sh and lk.progress.first_build), so that a fresh machine's `make test`
runs every test, and a warm one (CI's) is held to CI's time limit as before."""

from __future__ import annotations

import os
from pathlib import Path

LEDGER = "KRAFTY_RUN_BUILDS"  # the ledger's path (the Makefile sets it for each run)


def first_builds(ledger: str) -> float:
    """The seconds the run's first builds took, from its ledger's lines ("SECONDS WHAT")."""
    return sum(float(line.split(maxsplit=1)[0]) for line in ledger.splitlines() if line.strip())


def minutes_spent(started: float, now: float, ledger_path: str | None = None) -> tuple[float, float]:
    """The minutes counted against the budget since `started`, and the minutes of first builds left out."""
    path = ledger_path if ledger_path is not None else os.environ.get(LEDGER)
    built = first_builds(Path(path).read_text()) if path and Path(path).exists() else 0.0
    return (now - started - built) / 60, built / 60
