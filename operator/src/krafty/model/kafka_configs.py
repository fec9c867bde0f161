"""The configuration catalog of each Kafka version the operator runs (data/kafka-configs-<version>.json).

Generated from Kafka's own ConfigDefs by operator/tools/generate-config-catalog.sh:
every broker and topic key, its type, default, validator and, for brokers,
whether Kafka can change it at runtime ("cluster-wide"), only per broker, or
only with a restart ("read-only").
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from krafty.model.versions import DEFAULT_KAFKA_VERSION


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    mode: str
    default: str | None
    validator: str | None

    @property
    def dynamic_cluster_wide(self) -> bool:
        return self.mode == "cluster-wide"


@dataclass(frozen=True)
class Catalog:
    kafka_version: str
    broker: dict[str, ConfigKey]
    topic: dict[str, ConfigKey]


@functools.cache
def catalog(version: str = DEFAULT_KAFKA_VERSION) -> Catalog:
    raw = json.loads(resources.files("krafty").joinpath(f"data/kafka-configs-{version}.json").read_text())

    def keys(section: str) -> dict[str, ConfigKey]:
        return {name: ConfigKey(name=name, **entry) for name, entry in raw[section].items()}

    return Catalog(raw["kafkaVersion"], keys("broker"), keys("topic"))
