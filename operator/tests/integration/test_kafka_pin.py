"""The operator, the CRD and the config catalog agree with the one Kafka pin (broker-image/kafka.env)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from krafty.kafka_configs import catalog
from krafty.model.cluster import DEFAULT_KAFKA_VERSION, SUPPORTED_KAFKA_VERSIONS
from krafty_testkit.kafka_dist import pinned_versions

from ..conftest import REPO


def test_default_version_is_the_pinned_one():
    pin = pinned_versions()["KAFKA_VERSION"]
    assert pin == DEFAULT_KAFKA_VERSION
    assert pin in SUPPORTED_KAFKA_VERSIONS
    assert catalog().kafka_version == pin


def test_config_catalog_matches_the_pinned_kafka(tmp_path: Path):
    # Given the committed catalog, When it is regenerated from the pinned Kafka's own ConfigDefs, Then they are equal.
    fresh = tmp_path / "catalog.json"
    subprocess.run([str(REPO / "operator" / "tools" / "generate-config-catalog.sh"), str(fresh)], check=True,
                   timeout=300)
    committed = json.loads((REPO / "operator" / "src" / "krafty" / "data" / "kafka-configs.json").read_text())
    assert json.loads(fresh.read_text()) == committed, "run operator/tools/generate-config-catalog.sh"
