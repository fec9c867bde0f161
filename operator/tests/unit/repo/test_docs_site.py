"""The documentation site builds in strict mode (MkDocs: no broken link or anchor, no page left out of the nav),
as `make docs` builds it, and the README stays short."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ...conftest import REPO


def test_the_site_builds_with_no_warning(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").is_file()
    assert (tmp_path / "site" / "quickstart.yaml").is_file()


def test_the_readme_is_short():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    assert max(len(line) for line in lines) <= 200
