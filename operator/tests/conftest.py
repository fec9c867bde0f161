"""Shared helpers for the operator's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from krafty.model import KafkaClusterSpec
from krafty.model.context import ClusterContext, Voter

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"
EXAMPLES = CRDS / "examples"


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name).read_text())


def context(spec: dict[str, Any] | KafkaClusterSpec, name: str = "demo", namespace: str = "kafka") -> ClusterContext:
    parsed = spec if isinstance(spec, KafkaClusterSpec) else KafkaClusterSpec.model_validate(spec)
    voters = tuple(Voter(node_id, f"dir{node_id:019d}"[:22]) for node_id in _voter_ids(parsed))
    return ClusterContext(name=name, namespace=namespace, uid="uid-1234", spec=parsed,
                          cluster_id="clusterid0000000000000", initial_voters=voters, image="krafty/kafka:test")


def _voter_ids(spec: KafkaClusterSpec) -> list[int]:
    offset = 1000 if spec.controllers.mode == "dedicated" else 0
    return [offset + i for i in range(spec.controllers.replicas)]


@pytest.fixture
def combined_ctx() -> ClusterContext:
    return context(example("kafkacluster-combined.yaml")["spec"], name="small")


@pytest.fixture
def dedicated_ctx() -> ClusterContext:
    return context(example("kafkacluster-dedicated.yaml")["spec"], name="prod")
