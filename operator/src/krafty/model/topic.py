"""The Topic spec (crds/topics.kafka.krafty.io.yaml)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from krafty.model.common import ConfigValue, Spec


class DeletionPolicy(StrEnum):
    DELETE = "Delete"
    RETAIN = "Retain"


class ClusterRef(Spec):
    name: str = Field(min_length=1, max_length=63)


class TopicSpec(Spec):
    cluster_ref: ClusterRef
    topic_name: str | None = Field(default=None, min_length=1, max_length=249, pattern=r"^[a-zA-Z0-9._-]+$")
    partitions: int | None = Field(default=None, ge=1, le=100000)
    replicas: int | None = Field(default=None, ge=1, le=32)
    config: dict[str, ConfigValue] = Field(default_factory=dict, max_length=100)
    deletion_policy: DeletionPolicy = DeletionPolicy.DELETE
