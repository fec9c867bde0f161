"""The KafkaClusterPlan spec (crds/kafkaclusterplans.kafka.krafty.io.yaml): a cluster of the plan's namespace, and
the KafkaCluster spec to plan for, kept as written (what cannot work is the plan's to say, not a parse error)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from krafty.model.common import Spec
from krafty.model.topic import ClusterRef


class KafkaClusterPlanSpec(Spec):
    cluster_ref: ClusterRef
    spec: dict[str, Any] = Field(default_factory=dict)
