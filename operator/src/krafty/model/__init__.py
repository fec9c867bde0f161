"""Typed, frozen specs of the KafkaCluster and Topic resources.

crds/*.yaml is the source of truth; these models parse the same documents
(same camelCase names, same defaults) and forbid unknown fields. A test
walks both and fails when they differ.
"""

from krafty.model.cluster import (
    ControllerMode,
    Controllers,
    KafkaClusterSpec,
    LeaderBalanceMode,
    Listener,
    NodePool,
)
from krafty.model.common import format_bytes, parse_quantity
from krafty.model.topic import DeletionPolicy, TopicSpec

__all__ = [
    "ControllerMode",
    "Controllers",
    "DeletionPolicy",
    "KafkaClusterSpec",
    "LeaderBalanceMode",
    "Listener",
    "NodePool",
    "TopicSpec",
    "format_bytes",
    "parse_quantity",
]
