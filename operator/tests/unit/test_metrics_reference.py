"""docs/metrics.md is what the operator's registry and the chart's rules generate (scripts/metrics-reference.py),
and every operator series an alert reads is one the operator exports."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from ..conftest import REPO

RULES = REPO / "charts" / "krafty-operator" / "files" / "prometheus-rules.yaml"


def test_the_metrics_reference_is_generated_from_the_registry_and_the_rules():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "metrics-reference.py"), "--check"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_every_operator_series_an_alert_reads_is_exported_and_every_alert_is_listed():
    text = (REPO / "docs" / "metrics.md").read_text()
    listed = set(re.findall(r"^\| `(krafty_[a-z_]+)` \|", text, re.M))
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    read = {re.sub(r"_(bucket|count|sum)$", "", name) for rule in rules
            for name in re.findall(r"\bkrafty_[a-z_]+", rule["expr"])}
    assert read
    assert read <= listed, read - listed
    assert {rule["alert"] for rule in rules} == set(re.findall(r"^\| `([A-Za-z]+)` \| krafty\.", text, re.M))
