"""The generated pages are what their sources generate: docs/reference/api.md from the CRDs (scripts/api-reference.py),
docs/reference/metrics.md from the operator's registry and the chart's rules (scripts/metrics-reference.py),
docs/reference/reasons.md from the one list of reasons (scripts/reasons-reference.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ...conftest import REPO


@pytest.mark.parametrize("script", ["api-reference.py", "metrics-reference.py", "reasons-reference.py"])
def test_each_page_is_what_its_script_makes_of_its_sources(script: str):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--check"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
