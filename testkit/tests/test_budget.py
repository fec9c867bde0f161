"""The e2e tier's time budget leaves out the first builds a run waited for: each build step notes its seconds in
the run's ledger (the shell scripts' progress and note_first_build, localkube's first_build), and the budget
subtracts their sum."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from krafty_testkit import budget

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "e2e" / "localkube"))  # lk is no installed package

from lk import progress  # noqa: E402


def test_the_minutes_spent_leave_out_the_first_builds(tmp_path: Path):
    ledger = tmp_path / "run.builds"
    ledger.write_text("300 building kube-apiserver\n600 the node image\n\n")
    assert budget.minutes_spent(1000.0, 1000.0 + 3600, str(ledger)) == (45.0, 15.0)
    # A warm run built nothing: every minute counts, as before
    assert budget.minutes_spent(1000.0, 1000.0 + 3600, str(tmp_path / "none.builds")) == (60.0, 0.0)


def test_each_kind_of_build_step_notes_its_seconds_and_keeps_its_outcome(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    ledger = tmp_path / "run.builds"
    env = {"PATH": "/usr/bin:/bin", "KRAFTY_RUN_BUILDS": str(ledger)}
    # Given the shell scripts' build steps, When one succeeds after a second and another fails
    ok = subprocess.run(["bash", "-c", f"source {REPO}/e2e/localkube/progress.sh; progress 'building kind' sleep 1"],
                        env=env, capture_output=True, text=True, timeout=30, check=False)
    failed = subprocess.run(["bash", "-c", f"source {REPO}/e2e/localkube/progress.sh; progress 'building etcd' false"],
                            env=env, capture_output=True, text=True, timeout=30, check=False)
    venv = subprocess.run(["bash", "-c", f"source {REPO}/scripts/lib.sh; note_first_build 58 'the Python venv'"],
                          env=env, capture_output=True, text=True, timeout=30, check=False)
    # And localkube's own
    monkeypatch.setenv("KRAFTY_RUN_BUILDS", str(ledger))
    with progress.first_build("the node image"):
        pass
    # Then each kept its outcome and noted its seconds
    assert (ok.returncode, failed.returncode, venv.returncode) == (0, 1, 0), (ok.stderr, failed.stderr)
    noted = [line.split(maxsplit=1) for line in ledger.read_text().splitlines()]
    assert [what for _, what in noted] == ["building kind", "building etcd", "the Python venv", "the node image"]
    assert [int(seconds) for seconds, _ in noted][:3] in ([1, 0, 58], [2, 0, 58], [1, 1, 58], [2, 1, 58])
    assert budget.first_builds(ledger.read_text()) >= 59
