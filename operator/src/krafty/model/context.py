"""One cluster as rendering and deciding need it: the spec, the identity persisted once, and the
sizes to run this pass (their own value: the spec is never rewritten to mean something else)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from krafty import naming
from krafty.model.cluster import ControllerMode, KafkaClusterSpec, Listener, NodePool, Storage
from krafty.model.network import NetworkPolicyPeer, UnnamedPeers
from krafty.naming import Pool


class QuorumKind(StrEnum):
    """How the nodes find the controller quorum."""

    DYNAMIC = "dynamic"  # kraft.version 1 (KIP-853): the voters live in the metadata log; nodes bootstrap from any
    STATIC = "static"  # kraft.version 0: every node names the voters (controller.quorum.voters), fixed


@dataclass(frozen=True)
class Voter:
    node_id: int
    directory_id: str


@dataclass(frozen=True)
class Sizes:
    """How many brokers and dedicated controllers (0 when combined) the StatefulSets run."""

    brokers: int
    controllers: int

    @classmethod
    def of(cls, spec: KafkaClusterSpec) -> Sizes:
        """What the spec asks for."""
        dedicated = spec.controllers.mode == ControllerMode.DEDICATED
        return cls(spec.brokers.replicas, spec.controllers.replicas if dedicated else 0)

    @classmethod
    def running(cls, spec: KafkaClusterSpec, statefulset_replicas: Mapping[Pool, int]) -> Sizes:
        """What the StatefulSets run now (the spec's size for a pool not created yet)."""
        wanted = cls.of(spec)
        return cls(statefulset_replicas.get(Pool.BROKER, wanted.brokers),
                   statefulset_replicas.get(Pool.CONTROLLER, wanted.controllers) if wanted.controllers else 0)

    def of_pool(self, pool: Pool) -> int:
        return self.controllers if pool is Pool.CONTROLLER else self.brokers


@dataclass(frozen=True)
class OperatorPeer:
    """The operator's own pods, which the cluster's NetworkPolicy lets in to the internal ports."""

    namespace: str
    labels: Mapping[str, str]

    @classmethod
    def parse(cls, namespace: str, selector: str) -> OperatorPeer:
        """From the chart's "key=value,key=value" selector of the operator pods."""
        pairs = [part.split("=", 1) for part in selector.split(",") if part.strip()]
        if not pairs or any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"the operator pod selector {selector!r} is not key=value[,key=value]")
        return cls(namespace, {key.strip(): value.strip() for key, value in pairs})


@dataclass(frozen=True)
class Endpoint:
    """Where clients outside Kubernetes reach one broker on a nodeport or loadbalancer listener."""

    host: str  # for a nodeport listener by default naming.NODE_ADDRESS_PLACEHOLDER: the pod's node, at its start
    port: int


@dataclass(frozen=True)
class ClusterContext:
    name: str
    namespace: str
    uid: str
    spec: KafkaClusterSpec
    cluster_id: str
    initial_voters: tuple[Voter, ...]
    image: str
    cluster_domain: str = "cluster.local"
    operator: OperatorPeer | None = None  # None: the operator runs outside the cluster
    sizes: Sizes | None = None  # to run this pass; None: what the spec asks for
    internal_tls: bool = True  # mutual TLS between the nodes: fixed when the cluster was created
    # Who a listener or the metrics port naming no peers admits unless the spec says: fixed when the cluster was
    # created (krafty.decide.identity.unnamed_peers)
    created_unnamed_peers: UnnamedPeers = UnnamedPeers.NAMESPACE
    quorum: QuorumKind = QuorumKind.DYNAMIC  # static for a cluster formatted before KIP-853 until it moves
    monitoring_peers: tuple[NetworkPolicyPeer, ...] = ()  # the install's Prometheus (the chart's metricsFrom)
    certificates: str = ""  # what the pods run with (krafty.decide.certificates.running_marker)
    config_secrets: str = ""  # a digest of the Secrets spec.brokers.configFromSecrets names, as read this pass
    clients_ca: str = ""  # a digest of the clients CA bundle (brokers with authentication tls listeners trust it)
    # The client listeners applications are sent to (status.listeners; krafty.decide.listeners); empty: the spec's
    announced_listeners: tuple[Listener, ...] = ()
    broker_images: Mapping[str, str] = field(default_factory=dict)  # the operator's image of each Kafka version
    # The size in each existing StatefulSet's claim template: Kubernetes never changes a template's claims, so it
    # keeps the size the pool was created with, and the operator grows the claims themselves (krafty.decide.volumes)
    claim_sizes: Mapping[Pool, str] = field(default_factory=dict)
    # (listener, broker ordinal) -> its external address, for brokers whose address is known (decide/external.py)
    external_endpoints: Mapping[tuple[str, int], Endpoint] = field(default_factory=dict)

    def version_of(self, image: str | None) -> str | None:
        """The Kafka release a pod's image carries: the operator's image of a version, or spec.image (which
        carries spec.version, the user says); None for any other."""
        if image is not None and image == self.spec.image:
            return self.spec.version
        return next((version for version, known in self.broker_images.items() if known == image), None)

    @property
    def unnamed_peers(self) -> UnnamedPeers:
        """Who a listener or the metrics port naming no peers admits: the spec's choice, else the cluster's own."""
        return self.spec.network_policies.unnamed_peers or self.created_unnamed_peers

    @property
    def running_sizes(self) -> Sizes:
        return self.sizes or Sizes.of(self.spec)

    @property
    def dedicated(self) -> bool:
        return self.spec.controllers.mode == ControllerMode.DEDICATED

    @property
    def voter_pool(self) -> Pool:
        return Pool.CONTROLLER if self.dedicated else Pool.BROKER

    def pools(self) -> list[Pool]:
        return [Pool.CONTROLLER, Pool.BROKER] if self.dedicated else [Pool.BROKER]

    def pool_spec(self, pool: Pool) -> NodePool:
        """A pool's settings: in combined mode the controllers are brokers and take the brokers' settings."""
        return self.spec.controllers if pool is Pool.CONTROLLER else self.spec.brokers

    def storage(self, pool: Pool) -> Storage | None:
        """The pool's data volumes as the spec asks for them; None: an emptyDir."""
        return self.pool_spec(pool).storage

    def replicas(self, pool: Pool) -> int:
        """Nodes of the pool to run this pass."""
        return self.running_sizes.of_pool(pool)

    def voter_ids(self) -> list[int]:
        return [naming.node_id(self.voter_pool, i) for i in range(self.spec.controllers.replicas)]

    def roles(self, pool: Pool, ordinal: int) -> tuple[str, ...]:
        if pool is Pool.CONTROLLER:
            return ("controller",)
        if not self.dedicated and ordinal < self.spec.controllers.replicas:
            return ("broker", "controller")
        return ("broker",)

    def host(self, pool: Pool, ordinal: int) -> str:
        return naming.pod_host(self.name, self.namespace, pool, ordinal, self.cluster_domain)

    @property
    def listeners_by_port(self) -> tuple[Listener, ...]:
        """The spec's client listeners in port order, which pods, Services and server.properties are rendered
        from: putting another listener first only moves applications (krafty.decide.listeners), no restart."""
        return tuple(sorted(self.spec.listeners, key=lambda listener: listener.port))

    @property
    def published_listeners(self) -> tuple[Listener, ...]:
        return self.announced_listeners or self.spec.listeners

    def bootstrap_servers(self, listener: Listener | None = None) -> str:
        """The bootstrap address of a listener; by default of the first one applications are sent to."""
        port = (listener or self.published_listeners[0]).port
        return naming.bootstrap_address(self.name, self.namespace, self.cluster_domain, port)

    def controller_bootstrap_servers(self, count: int | None = None) -> str:
        """The controllers' addresses: the first `count` of them, or as many as the spec asks for."""
        pool = self.voter_pool
        number = self.spec.controllers.replicas if count is None else count
        return ",".join(f"{self.host(pool, i)}:{naming.CONTROLLER_PORT}" for i in range(number))

    def static_voters(self) -> str:
        """controller.quorum.voters of a static quorum (id@host:port,...): the voters the spec names."""
        return ",".join(f"{node}@{self.host(*naming.pool_and_ordinal(node))}:{naming.CONTROLLER_PORT}"
                        for node in self.voter_ids())

    def initial_controllers_arg(self) -> str:
        """The --initial-controllers value for `kafka-storage format` (id@host:port:directory-id,...)."""
        parts = []
        for voter in self.initial_voters:
            pool, ordinal = naming.pool_and_ordinal(voter.node_id)
            parts.append(f"{voter.node_id}@{self.host(pool, ordinal)}:{naming.CONTROLLER_PORT}:{voter.directory_id}")
        return ",".join(parts)

    def owner_reference(self) -> dict[str, object]:
        return {"apiVersion": naming.API_VERSION, "kind": naming.CLUSTER_KIND, "name": self.name, "uid": self.uid,
                "controller": True, "blockOwnerDeletion": True}

    def metadata(self, name: str, pool: Pool | None = None) -> dict[str, object]:
        return {"name": name, "namespace": self.namespace, "labels": naming.labels(self.name, pool),
                "ownerReferences": [self.owner_reference()]}
