"""ruff, mypy (strict) and the import-linter contract run as part of the tests."""

import subprocess
import sys
from pathlib import Path

import pytest

OPERATOR = Path(__file__).resolve().parents[3]
ROOT = OPERATOR.parent
PYTHON_TREES = ["operator/src", "operator/tests", "testkit", "spark", "e2e", "bench", "scripts"]


@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "ruff", "check", *PYTHON_TREES],
    [sys.executable, "-m", "mypy", "--config-file", "operator/pyproject.toml"],
    ["lint-imports", "--config", "operator/pyproject.toml"],
], ids=["ruff", "mypy", "import-linter"])
def test_static_check_passes(command):
    result = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
