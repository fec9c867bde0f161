"""What the operator observed of a cluster: frozen facts the decisions work on.

Built once per pass by krafty.reconcile.observe from the Kubernetes API and the
Kafka APIs (pods parsed by krafty.facts.pods); every decision module takes these and
nothing else, so each can be tested with a table of situations.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from krafty.model.cluster import ClientAuthentication, SecurityProtocol
from krafty.model.user import AclEffect, AclOperation, AclPatternType, AclResourceType
from krafty.naming import Pool


@dataclass(frozen=True, order=True)
class Acl:
    """One ACL binding as Kafka holds it."""

    principal: str  # User:<name>
    resource_type: AclResourceType
    name: str
    pattern: AclPatternType
    operation: AclOperation
    effect: AclEffect
    host: str

    def describe(self) -> str:
        return (f"{self.effect.value} {self.operation.value} on {self.resource_type.value} {self.name}"
                f"{' (prefix)' if self.pattern is AclPatternType.PREFIX else ''} from {self.host}")


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1 when offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int
    elr: tuple[int, ...] = ()  # eligible leader replicas (KIP-966): out of the ISR, every committed record held

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def leader_candidates(self, stopping: Collection[int] = ()) -> tuple[int, ...]:
        """Who Kafka may make leader if `stopping` stop: the in-sync replicas left, else (ELR) the eligible
        ones left. (The roll asks only while every broker runs, so none of them is fenced.)"""
        in_sync = tuple(b for b in self.isr if b not in stopping)
        return in_sync or tuple(b for b in self.elr if b not in stopping)

    @property
    def eligible_leaders_only(self) -> bool:
        """Its ISR is empty and eligible replicas wait to lead (ELR): back without an unclean election as soon
        as one of them is."""
        return not self.isr and bool(self.elr)

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


class PodPhase(StrEnum):
    """Where a node's pod is in its life, as the roll needs to know it."""

    MISSING = "Missing"  # no pod: not created yet, or deleted and not re-created yet
    TERMINATING = "Terminating"  # being deleted (a restart in flight)
    STARTING = "Starting"  # created recently, its container not running yet
    DOWN = "Down"  # not running, and will not start by itself (crash loop, unschedulable) or not for too long
    WARMING_UP = "WarmingUp"  # running, not ready yet, created recently
    NOT_READY = "NotReady"  # running, not ready for longer than a start takes
    READY = "Ready"  # running and ready

    @property
    def exists(self) -> bool:
        return self is not PodPhase.MISSING

    @property
    def running(self) -> bool:
        return self in (PodPhase.WARMING_UP, PodPhase.NOT_READY, PodPhase.READY)

    @property
    def starting(self) -> bool:
        return self in (PodPhase.STARTING, PodPhase.WARMING_UP)


class ChangeKind(StrEnum):
    """What differs between a node's pod and the template it should run."""

    CONFIG = "config"  # a restart-only server.properties key
    CERTIFICATES = "certificates"  # the trusted CAs or the node certificates (see krafty.decide.certificates)
    CLIENTS_CA = "clients-ca"  # the clients CA certificates brokers trust on listeners with authentication tls
    SECRETS = "secrets"  # a value of a Secret spec.brokers.configFromSecrets names
    IMAGE = "image"
    CONTAINER = "container"  # resources, environment (JVM options, heap)
    POD = "pod"  # scheduling and lifecycle fields of the pod


@dataclass(frozen=True)
class PendingChange:
    kind: ChangeKind
    field: str  # the config key or the field's name
    before: str | None  # None: unset (a config key at its default)
    after: str | None

    def describe(self) -> str:
        if self.kind is ChangeKind.CONFIG:
            return f"{self.field}={self.after if self.after is not None else '(default)'}"
        if self.kind is ChangeKind.CERTIFICATES:
            return f"certificates (trusted CAs/generation) {self.before or '(none)'} -> {self.after}"
        if self.kind is ChangeKind.CLIENTS_CA:
            return f"trusted clients CA certificates {self.before or '(none)'} -> {self.after or '(none)'}"
        if self.kind is ChangeKind.SECRETS:
            return "a Secret named by configFromSecrets changed"
        if self.kind is ChangeKind.IMAGE:
            return f"image {self.before} -> {self.after}"
        if self.kind is ChangeKind.CONTAINER:
            return f"container {self.field} changed"
        return f"pod {self.field} {self.before} -> {self.after}"


@dataclass(frozen=True)
class ServedListener:
    """A client listener a running pod serves, as its static config says."""

    name: str  # Kafka's (upper-case) listener name
    port: int
    protocol: SecurityProtocol
    authentication: ClientAuthentication


class RestartRequest(StrEnum):
    """What a pod's manual-restart annotation asks (kubectl krafty restart)."""

    NONE = "none"
    SAFE = "safe"  # when the roll allows it: every other node back, no partition or quorum put at risk
    FORCED = "forced"  # once every other node's pod is ready, whatever Kafka would say (a cluster that refuses the
    # operator: its Kafka checks cannot be asked)


@dataclass(frozen=True)
class NodeState:
    """One Kafka node as Kubernetes and Kafka see it."""

    node_id: int
    pool: Pool
    pod: str
    roles: tuple[str, ...]
    phase: PodPhase
    revision_current: bool  # the pod runs the StatefulSet's current template
    restart_requested: RestartRequest = RestartRequest.NONE  # the pod's manual-restart annotation
    resize_waiting: str | None = None  # its volume grew and its file system grows only at a restart: why
    registered: bool = False  # brokers: registered and unfenced
    pending: tuple[PendingChange, ...] = ()  # how the pod differs from the current template
    trouble: str | None = None  # why the pod does not start, when it will not by itself
    requests: Mapping[str, str] = field(default_factory=dict)  # what its running pod requests (cpu, memory)
    listeners: frozenset[ServedListener] = frozenset()  # the client listeners its running pod serves
    version: str | None = None  # the Kafka release its pod runs (from its image); None: no pod, or a foreign image
    host: str | None = None  # the Kubernetes node its pod was scheduled on
    host_down: str | None = None  # why that Kubernetes node cannot run it (not Ready, gone); None: it can
    host_address: str | None = None  # that Kubernetes node's address (the pod's hostIP)
    # Combined mode, where its roles may be in flux (the voters change): whether its controller listener answers,
    # that is whether it runs as a controller now; None: not asked (it runs the roles its configuration gives)
    controller_running: bool | None = None

    @property
    def template_pending(self) -> bool:
        """Its pod template changed (image, JVM, resources, scheduling), not only what Kafka reads."""
        return any(c.kind in (ChangeKind.IMAGE, ChangeKind.CONTAINER, ChangeKind.POD) for c in self.pending)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def exists(self) -> bool:
        return self.phase.exists

    @property
    def running(self) -> bool:
        return self.phase.running

    @property
    def ready(self) -> bool:
        return self.phase is PodPhase.READY

    @property
    def terminating(self) -> bool:
        return self.phase is PodPhase.TERMINATING

    @property
    def serving(self) -> bool:
        """Ready, and (for a broker) registered with the controller."""
        return self.ready and (self.registered or not self.is_broker)

    @property
    def roles_pending(self) -> bool:
        """It runs as a controller and should not, or the other way round: it restarts into its roles."""
        return self.controller_running is not None and self.controller_running != self.is_controller

    @property
    def stuck(self) -> bool:
        """Runs the current template but is not back, and will not come back by waiting."""
        return self.revision_current and self.phase in (PodPhase.DOWN, PodPhase.NOT_READY)

    @property
    def needs_restart(self) -> bool:
        return self.exists and not self.terminating and (
            not self.revision_current or self.restart_requested is not RestartRequest.NONE
            or self.resize_waiting is not None or self.roles_pending)


@dataclass(frozen=True)
class BrokerRegistration:
    node_id: int
    fenced: bool
    rack: str | None = None  # broker.rack, as the broker registered it (its zone on a rack-aware cluster)


class PreflightOutcome(StrEnum):
    RUNNING = "Running"  # scheduled or being scheduled, pulling, starting
    PASSED = "Passed"  # the JVM started with the node's options and printed Kafka's version
    FAILED = "Failed"  # unschedulable, image not pulled, JVM refused to start, or out of time


@dataclass(frozen=True)
class Preflight:
    """A pod that tried a StatefulSet's new template before any node restarts into it."""

    name: str
    pool: Pool
    revision: str
    outcome: PreflightOutcome
    message: str


class VolumeResize(StrEnum):
    """Where a data claim's growth stands, from its status (allocatedResourceStatuses and conditions)."""

    AT_SIZE = "AtSize"  # it has what it asks for
    EXPANDING = "Expanding"  # the storage driver grows the volume
    FILE_SYSTEM_PENDING = "FileSystemResizePending"  # the volume grew; its file system grows when the node expands it
    INFEASIBLE = "Infeasible"  # the driver refused the new size; the volume keeps the old one
    FAILING = "Failing"  # the driver's last try failed; it tries again


@dataclass(frozen=True)
class VolumeState:
    """One data PersistentVolumeClaim of the cluster."""

    claim: str
    requested: int  # bytes it asks for (spec.resources.requests.storage)
    capacity: int | None  # bytes it has (status.capacity); None: not bound yet
    storage_class: str | None  # its StorageClass; None: none named
    resize: VolumeResize = VolumeResize.AT_SIZE
    since: datetime.datetime | None = None  # when the resize reached its state
    message: str = ""  # what the driver or the kubelet said of it


@dataclass(frozen=True)
class StorageClassState:
    name: str
    expandable: bool  # allowVolumeExpansion


@dataclass(frozen=True)
class ExternalServiceState:
    """A Service of a nodeport or loadbalancer listener, as Kubernetes has it."""

    name: str
    node_port: int | None = None  # the node port Kubernetes gave the listener's port
    address: str | None = None  # the load balancer's address (its ingress IP or host name), once it has one
    created: datetime.datetime | None = None  # when Kubernetes made it


@dataclass(frozen=True)
class CanaryReading:
    """What the operator's canary measured over its window (krafty.clients.canary)."""

    window_seconds: int
    written: int  # records acknowledged in the window
    failed: int  # records whose write failed in the window
    produce_p99_ms: int | None  # acks=all write latency, unacknowledged records at their age; None: no record yet
    end_to_end_p99_ms: int | None  # send to read, unread records at their age; None: no record yet
    last_error: str | None = None  # the latest failed write's error, in the window


@dataclass(frozen=True)
class FeatureLevel:
    """One KRaft feature (metadata.version, kraft.version, group.version, ...): the level the cluster finalized (0:
    not finalized, off) and the (min, max) the brokers' release supports (None: it does not know the feature)."""

    name: str
    finalized: int
    supported: tuple[int, int] | None


@dataclass(frozen=True)
class ClusterObservation:
    """Everything one pass knows, read once at its start."""

    nodes: tuple[NodeState, ...]
    partitions: tuple[PartitionState, ...] | None  # None: Kafka could not be asked
    quorum: QuorumState | None  # None: the quorum could not be described
    kafka_error: str | None = None
    quorum_error: str | None = None
    statefulset_replicas: Mapping[Pool, int] = field(default_factory=dict)  # pools whose StatefulSet exists
    reassignments: Mapping[tuple[str, int], object] | None = field(default_factory=dict)  # None: cannot be listed
    registrations: tuple[BrokerRegistration, ...] = ()  # every registered broker, fenced ones too
    cluster_defaults: Mapping[str, str] | None = None  # dynamic cluster-wide broker config; None: unread
    throttled_topics: frozenset[str] | None = frozenset()  # topics with replication throttles; None: unread
    volumes: tuple[VolumeState, ...] = ()  # the cluster's PersistentVolumeClaims
    storage_classes: Mapping[str, StorageClassState | None] = field(default_factory=dict)  # None: no such class
    claim_templates: Mapping[Pool, str] = field(default_factory=dict)  # each StatefulSet's claim size, as created
    controller_servers: str = ""  # where the controllers were asked (every one that runs or is wanted)
    revisions: Mapping[Pool, str] = field(default_factory=dict)  # each StatefulSet's update revision
    templates: Mapping[Pool, Mapping[str, Any]] = field(default_factory=dict)  # each StatefulSet's pod template
    preflights: tuple[Preflight, ...] = ()
    external_services: Mapping[str, ExternalServiceState] = field(default_factory=dict)  # by name
    metadata_level: int | None = None  # the finalized metadata.version; None: unread
    features: tuple[FeatureLevel, ...] = ()  # every feature finalized or supported, by name; (): unread
    # The groups of each type a feature the spec turns off is used by (share, consumer, streams); read only then
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    canary: CanaryReading | None = None  # None: the canary does not run
    observed_at: datetime.datetime | None = None

    @property
    def claims(self) -> frozenset[str]:
        """The cluster's PersistentVolumeClaims, by name."""
        return frozenset(v.claim for v in self.volumes)

    def node(self, node_id: int) -> NodeState | None:
        return next((n for n in self.nodes if n.node_id == node_id), None)

    @property
    def registered(self) -> set[int]:
        """Brokers registered and not fenced."""
        return {r.node_id for r in self.registrations if not r.fenced}
