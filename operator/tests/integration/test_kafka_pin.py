"""The operator, the CRD and the config catalogs agree with the Kafka pins (broker-image/kafka.env)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from krafty.model.kafka_configs import catalog
from krafty.model.versions import DEFAULT_KAFKA_VERSION, SUPPORTED_KAFKA_VERSIONS
from krafty_testkit.kafka_dist import pinned_kafka_versions, pinned_versions

from ..conftest import REPO


def test_default_version_is_the_pinned_one():
    pin = pinned_versions()["KAFKA_VERSION"]
    assert pin == DEFAULT_KAFKA_VERSION
    assert pinned_kafka_versions() == SUPPORTED_KAFKA_VERSIONS
    assert catalog().kafka_version == pin


@pytest.mark.parametrize("version", SUPPORTED_KAFKA_VERSIONS)
def test_config_catalog_matches_the_pinned_kafka(version: str, tmp_path: Path):
    # Given a committed catalog, When it is regenerated from that Kafka's own ConfigDefs, Then they are equal.
    fresh = tmp_path / "catalog.json"
    subprocess.run([str(REPO / "operator" / "tools" / "generate-config-catalog.sh"), version, str(fresh)],
                   check=True, timeout=300)
    committed = json.loads((REPO / "operator" / "src" / "krafty" / "data" / f"kafka-configs-{version}.json")
                           .read_text())
    assert json.loads(fresh.read_text()) == committed, f"run operator/tools/generate-config-catalog.sh {version}"
    assert catalog(version).kafka_version == version
