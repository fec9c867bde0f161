"""docs/reference/metrics.md, generated from the operator's registry and the chart's rules
(test_generated_pages.py keeps it so): every operator series an alert reads is one the operator exports."""

from __future__ import annotations

import re

import yaml

from ...conftest import REPO

RULES = REPO / "charts" / "krafty-operator" / "files" / "prometheus-rules.yaml"


def test_every_operator_series_an_alert_reads_is_exported_and_every_alert_is_listed():
    text = (REPO / "docs" / "reference" / "metrics.md").read_text()
    listed = set(re.findall(r"^\| `(krafty_[a-z_]+)` \|", text, re.M))
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    read = {re.sub(r"_(bucket|count|sum)$", "", name) for rule in rules
            for name in re.findall(r"\bkrafty_[a-z_]+", rule["expr"])}
    assert read
    assert read <= listed, read - listed
    assert {rule["alert"] for rule in rules} == set(re.findall(r"^\| `([A-Za-z]+)` \| krafty\.", text, re.M))
