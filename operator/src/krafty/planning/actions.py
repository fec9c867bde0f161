"""The actions of a KafkaCluster pass: what krafty.planning.cluster decides and krafty.reconcile.act carries out,
in order, each a frozen value saying what to do and why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from krafty.decide import canary, features, roll
from krafty.decide.configs import ConfigDiff
from krafty.facts.observed import NodeState, VoterState
from krafty.render.cluster import Child


@dataclass(frozen=True)
class ApplyChildren:
    children: tuple[Child, ...]


@dataclass(frozen=True)
class Announce:
    """An Event (and a log line) for something decided without an action of its own."""

    reason: str
    message: str
    warning: bool = False


@dataclass(frozen=True)
class SetClusterDefaults:
    changes: ConfigDiff


@dataclass(frozen=True)
class MoveReplicas:
    reassign: Mapping[tuple[str, int], list[int]]
    throttle_rate: int  # bytes/s per broker while the replicas move
    message: str

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({topic for topic, _ in self.reassign}))


@dataclass(frozen=True)
class RemoveThrottles:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class RemoveVoter:
    voter: VoterState


@dataclass(frozen=True)
class AddVoter:
    voter: VoterState  # a caught-up observer
    host: str  # its controller listener's address, as the other voters will reach it


@dataclass(frozen=True)
class Unregister:
    brokers: tuple[int, ...]


@dataclass(frozen=True)
class DeleteVolumes:
    claims: tuple[str, ...]


@dataclass(frozen=True)
class ExpandVolumes:
    claims: tuple[tuple[str, str], ...]  # (claim, size)


@dataclass(frozen=True)
class StartPreflight:
    pod: Mapping[str, Any]
    message: str


@dataclass(frozen=True)
class DeletePreflights:
    pods: tuple[str, ...]


@dataclass(frozen=True)
class RestartNode:
    node: NodeState
    reason: roll.RestartReason
    message: str


@dataclass(frozen=True)
class ElectLeaders:
    partitions: tuple[tuple[str, int], ...]
    message: str


@dataclass(frozen=True)
class FinalizeMetadata:
    """Raise metadata.version: every node runs the release that finalizes it."""

    level: int
    message: str


@dataclass(frozen=True)
class UpdateFeature:
    """Raise or lower one KRaft feature as spec.features asks (krafty.decide.features)."""

    change: features.FeatureChange


@dataclass(frozen=True)
class ChangeCanaryTopic:
    topic: canary.CanaryTopic


# Actions on Kubernetes objects (and Announce, which only tells), and actions on Kafka
KubernetesAction = (ApplyChildren | Announce | DeleteVolumes | ExpandVolumes | StartPreflight | DeletePreflights
                    | RestartNode)
FeatureAction = FinalizeMetadata | UpdateFeature  # feature levels: metadata.version, and spec.features
KafkaAction = (SetClusterDefaults | MoveReplicas | RemoveThrottles | RemoveVoter | AddVoter | Unregister | ElectLeaders
               | FeatureAction | ChangeCanaryTopic)
Action = KubernetesAction | KafkaAction
