"""docs/reference/api.md, generated from the CRDs (test_generated_pages.py keeps it so), lists every kind and
field."""

from __future__ import annotations

from ...conftest import REPO


def test_every_field_of_every_kind_is_in_the_reference():
    text = (REPO / "docs" / "reference" / "api.md").read_text()
    for field in ("`brokers.storage.size`", "`brokers.configFromSecrets.<key>.name`", "`listeners[].external`",
                  "`authentication.type`", "`partitions`", "`conditions[].reason`",
                  "`clusterRef.name`", "`plan`"):
        assert f"| {field} |" in text, field
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## KafkaCluster", "## KafkaClusterPlan", "## KafkaUser", "## Topic"]
