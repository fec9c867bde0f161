"""What the operator observed of a cluster: frozen facts the decisions work on.

Built by krafty.reconcile.observe from the Kubernetes API and the Kafka APIs;
every decision module takes these and nothing else, so each can be tested
with a table of situations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from krafty.naming import Pool


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1 when offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else -1

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def under_min_isr(self) -> bool:
        return len(self.isr) < self.min_isr

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True)
class VoterState:
    node_id: int
    directory_id: str
    lag: int  # offsets behind the leader's high watermark; -1 when unknown


@dataclass(frozen=True)
class QuorumState:
    leader_id: int
    leader_epoch: int
    voters: tuple[VoterState, ...]
    observers: tuple[VoterState, ...] = ()

    def voter_ids(self) -> set[int]:
        return {v.node_id for v in self.voters}

    def caught_up(self, max_lag: int) -> set[int]:
        return {v.node_id for v in self.voters if 0 <= v.lag <= max_lag}


@dataclass(frozen=True)
class NodeState:
    """One Kafka node as Kubernetes and Kafka see it."""

    node_id: int
    pool: Pool
    pod: str
    roles: tuple[str, ...]
    pod_exists: bool
    pod_ready: bool
    pod_running: bool
    revision_current: bool  # the pod runs the StatefulSet's current template
    restart_requested: bool = False  # the pod carries the manual-restart annotation
    terminating: bool = False  # the pod is being deleted (a restart in flight)
    starting: bool = False  # a recently created pod that is not running and ready yet
    registered: bool = False  # brokers: registered and unfenced
    pending_reasons: tuple[str, ...] = ()  # why the pod differs from the current template

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def needs_restart(self) -> bool:
        return self.pod_exists and not self.terminating and (not self.revision_current or self.restart_requested)


@dataclass(frozen=True)
class ClusterObservation:
    nodes: tuple[NodeState, ...]
    partitions: tuple[PartitionState, ...] | None  # None: Kafka could not be asked
    quorum: QuorumState | None  # None: the quorum could not be described
    kafka_error: str | None = None
    quorum_error: str | None = None
    errors: tuple[str, ...] = field(default=())

    def node(self, node_id: int) -> NodeState | None:
        return next((n for n in self.nodes if n.node_id == node_id), None)


@dataclass(frozen=True)
class PartitionLag:
    """How far a consumer group is behind on one partition."""

    group: str
    topic: str
    partition: int
    lag: int  # records between the committed offset and the log end
    headroom: float  # (committed - log start) / (log end - log start): near 0, retention deletes unread records
