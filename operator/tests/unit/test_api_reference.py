"""docs/api.md is what the CRDs generate (scripts/api-reference.py): the reference cannot drift from the API."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import REPO


def test_the_api_reference_is_generated_from_the_crds():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "api-reference.py"), "--check"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_every_field_of_every_kind_is_in_the_reference():
    text = (REPO / "docs" / "api.md").read_text()
    for field in ("`brokers.storage.size`", "`brokers.configFromSecrets.<key>.name`", "`listeners[].external`",
                  "`authentication.type`", "`partitions`", "`conditions[].reason`"):
        assert f"| {field} |" in text, field
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## KafkaCluster", "## KafkaUser", "## Topic"]
