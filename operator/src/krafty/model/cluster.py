"""The KafkaCluster spec (crds/kafkaclusters.kafka.krafty.io.yaml)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, model_validator

from krafty import naming
from krafty.model.common import ConfigValue, ObjectName, Quantity, Spec
from krafty.model.network import NetworkPolicies, NetworkPolicyPeer
from krafty.model.versions import (
    DEFAULT_KAFKA_VERSION,
    METADATA_VERSION_PATTERN,
    KafkaVersion,
)

RESERVED_PORTS = {9090: "reserved", 9091: "replication", 9093: "controller", 9404: "metrics"}


class ControllerMode(StrEnum):
    COMBINED = "combined"
    DEDICATED = "dedicated"


class LeaderBalanceMode(StrEnum):
    OPERATOR = "Operator"
    KAFKA = "Kafka"
    DISABLED = "Disabled"


class Resources(Spec):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class Jvm(Spec):
    heap: Quantity | None = None
    options: tuple[str, ...] = ()


class Storage(Spec):
    size: Quantity
    storage_class_name: str = ""
    delete_claim: bool = False


class PodTemplate(Spec):
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: dict[str, Any] | None = None
    tolerations: tuple[dict[str, Any], ...] = ()
    topology_spread_constraints: tuple[dict[str, Any], ...] = ()
    priority_class_name: str | None = None


class NodePool(Spec):
    """Settings shared by the broker pool and the dedicated controller pool."""

    resources: Resources = Field(default_factory=Resources)
    jvm: Jvm = Field(default_factory=Jvm)
    storage: Storage | None = None
    template: PodTemplate = Field(default_factory=PodTemplate)


class SecretKeyRef(Spec):
    """One key of a Secret in the cluster's namespace."""

    name: ObjectName
    key: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")


class Brokers(NodePool):
    replicas: int = Field(ge=1, le=100)
    config: dict[str, ConfigValue] = Field(default_factory=dict, max_length=200)
    # Settings whose value is a secret (Kafka's PASSWORD type): read by Kafka from the mounted Secret
    config_from_secrets: dict[str, SecretKeyRef] = Field(default_factory=dict, max_length=50)


class Controllers(NodePool):
    mode: ControllerMode = ControllerMode.COMBINED
    replicas: Literal[1, 3, 5] = 3


class ClientAuthentication(StrEnum):
    NONE = "none"
    TLS = "tls"  # a client certificate signed by the clients CA; the principal is its common name
    SCRAM_SHA_512 = "scram-sha-512"  # a SCRAM credential the brokers hold


class SecurityProtocol(StrEnum):
    """Kafka's security.protocol of a listener."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @classmethod
    def of(cls, tls: bool, sasl: bool) -> SecurityProtocol:
        return {(False, False): cls.PLAINTEXT, (True, False): cls.SSL, (False, True): cls.SASL_PLAINTEXT,
                (True, True): cls.SASL_SSL}[(tls, sasl)]


SCRAM_MECHANISM = "SCRAM-SHA-512"


class ListenerType(StrEnum):
    """Where clients of a listener are: inside the Kubernetes cluster, or outside it."""

    INTERNAL = "internal"  # ClusterIP bootstrap and headless per-pod names
    NODEPORT = "nodeport"  # a NodePort Service per broker (and one to bootstrap); brokers advertise their node
    LOADBALANCER = "loadbalancer"  # a LoadBalancer Service per broker (and one to bootstrap)


HOST_PATTERN = (r"^(([0-9]{1,3}\.){3}[0-9]{1,3}|[0-9a-fA-F:]*:[0-9a-fA-F:.]+|"
                r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*)$")


class ExternalBroker(Spec):
    """What one broker's external address is made of, where the defaults do not fit."""

    broker: int = Field(ge=0, le=99)
    node_port: int | None = Field(default=None, ge=1, le=65535)  # nodeport: this node port (else Kubernetes picks)
    advertised_host: str | None = Field(default=None, pattern=HOST_PATTERN, max_length=253)
    advertised_port: int | None = Field(default=None, ge=1, le=65535)


class External(Spec):
    """A nodeport or loadbalancer listener's Services and addresses."""

    bootstrap_node_port: int | None = Field(default=None, ge=1, le=65535)
    brokers: tuple[ExternalBroker, ...] = Field(default=(), max_length=100)
    annotations: dict[str, str] = Field(default_factory=dict, max_length=50)  # on each of its Services

    @model_validator(mode="after")
    def _one_entry_per_broker(self) -> External:
        ids = [b.broker for b in self.brokers]
        if len(set(ids)) != len(ids):
            raise ValueError("external.brokers names a broker twice")
        ports = [p for p in (self.bootstrap_node_port, *(b.node_port for b in self.brokers)) if p is not None]
        if len(set(ports)) != len(ports):
            raise ValueError("external node ports must be unique")
        return self

    def of(self, broker: int) -> ExternalBroker:
        return next((b for b in self.brokers if b.broker == broker), ExternalBroker(broker=broker))


class Listener(Spec):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,14}$")
    port: int = Field(ge=1024, le=65535)
    type: ListenerType = ListenerType.INTERNAL
    tls: bool = False
    authentication: ClientAuthentication = ClientAuthentication.NONE
    network_policy_peers: tuple[NetworkPolicyPeer, ...] = Field(default=(), max_length=20)
    external: External | None = None

    @model_validator(mode="after")
    def _certificates_need_tls(self) -> Listener:
        if self.authentication is ClientAuthentication.TLS and not self.tls:
            raise ValueError(f"listener {self.name}: authentication tls needs tls: true")
        if self.external is not None and self.type is ListenerType.INTERNAL:
            raise ValueError(f"listener {self.name}: external applies to type nodeport or loadbalancer only")
        if self.name in naming.RESERVED_LISTENER_NAMES:
            raise ValueError("replication and controller are the nodes' own listeners: give the listener another name")
        if self.name == naming.NOT_EXTERNAL_LISTENER_NAME and self.type is not ListenerType.INTERNAL:
            raise ValueError("a nodeport or loadbalancer listener named kafka would make <cluster>-kafka-bootstrap, "
                             "the cluster's own bootstrap Service: give it another name")
        if self.type is ListenerType.LOADBALANCER and self.external is not None and (
                self.external.bootstrap_node_port is not None or any(b.node_port for b in self.external.brokers)):
            raise ValueError(f"listener {self.name}: node ports apply to type nodeport only")
        return self

    @property
    def outside(self) -> External | None:
        """How clients outside the cluster reach it (its external settings), or None for an internal one."""
        return None if self.type is ListenerType.INTERNAL else self.external or External()

    @property
    def kafka_name(self) -> str:
        return self.name.upper()

    @property
    def protocol(self) -> SecurityProtocol:
        return SecurityProtocol.of(self.tls, self.authentication is ClientAuthentication.SCRAM_SHA_512)


class Validity(Spec):
    """How long certificates are valid, and how long before they expire the operator renews them."""

    validity_days: int = Field(default=365, ge=2, le=36500)
    renewal_days: int = Field(default=30, ge=1, le=36499)

    @model_validator(mode="after")
    def _renewal_inside_validity(self) -> Validity:
        if self.renewal_days >= self.validity_days:
            raise ValueError("renewalDays must be less than validityDays")
        return self


class CertificateAuthority(Validity):
    # A kubernetes.io/tls Secret holding the user's own self-signed CA (cert-manager can issue it); the
    # operator then never renews the CA itself, and moves to a new one found in the Secret.
    secret_name: ObjectName | None = None


class ClientsCertificateAuthority(CertificateAuthority):
    # During a renewal of the clients CA: how long every user's new certificate is in its Secret before the
    # previous clients CA is no longer trusted (clients read their new certificate meanwhile).
    handover_seconds: int = Field(default=300, ge=0, le=2592000)


class Tls(Spec):
    # Mutual TLS between the nodes (controller and replication listeners). None: on for a new cluster;
    # a running cluster keeps what it was created with.
    internal: bool | None = None
    cluster_ca: CertificateAuthority = Field(default_factory=CertificateAuthority)
    clients_ca: ClientsCertificateAuthority = Field(default_factory=ClientsCertificateAuthority)
    certificates: Validity = Field(default_factory=Validity)


class Authorization(Spec):
    """Kafka's StandardAuthorizer: a request no ACL allows is denied. The nodes and the operator are super
    users through their certificates of the cluster CA; `superUsers` names users (KafkaUser names) who are too."""

    enabled: bool = False
    super_users: tuple[ObjectName, ...] = Field(default=(), max_length=20)


class TopicDefaults(Spec):
    replication_factor: int = Field(default=3, ge=1, le=10)
    min_insync_replicas: int = Field(default=2, ge=1, le=10)
    partitions: int = Field(default=3, ge=1, le=10000)


class CanaryGate(Spec):
    """The roll restarts no running node while what the canary measured over its window is above either
    threshold set here."""

    produce_p99_milliseconds: int | None = Field(default=None, ge=1, le=600000)
    end_to_end_p99_milliseconds: int | None = Field(default=None, ge=1, le=600000)

    @model_validator(mode="after")
    def _one_threshold(self) -> CanaryGate:
        if self.produce_p99_milliseconds is None and self.end_to_end_p99_milliseconds is None:
            raise ValueError("canaryGate needs produceP99Milliseconds, endToEndP99Milliseconds or both")
        return self


class Restarts(Spec):
    grace_period_seconds: int = Field(default=300, ge=30, le=86400)
    node_ready_timeout_seconds: int = Field(default=900, ge=60, le=86400)
    canary_gate: CanaryGate | None = None
    # Brokers restarted at once: 1, "zone" (every broker of one zone, on a rack-aware cluster) or a number
    # (krafty.decide.restart_groups); controllers always go one at a time
    parallelism: int | Literal["zone"] = Field(default=1)

    @model_validator(mode="after")
    def _parallelism(self) -> Restarts:
        if isinstance(self.parallelism, int) and not 1 <= self.parallelism <= 100:
            raise ValueError("restarts.parallelism is a number of brokers from 1 to 100, or zone")
        return self


class Canary(Spec):
    """The operator's own producer and consumer on a small topic with a partition led by each broker: what an
    acks=all client feels, measured all the time."""

    enabled: bool = False
    interval_milliseconds: int = Field(default=200, ge=20, le=60000)  # a record to every partition this often
    window_seconds: int = Field(default=30, ge=5, le=3600)  # the p99s are of the records of this long


class Upgrade(Spec):
    """How a version change finishes: metadata.version is raised (finalized) to the new release's once every
    node runs it and the cluster stayed healthy for finalize_after_seconds; or, when metadata_version is set,
    held at that (a release line such as 4.2, or a level name such as 4.2-IV1) until the user changes it."""

    metadata_version: str | None = Field(default=None, pattern=METADATA_VERSION_PATTERN)
    finalize_after_seconds: int = Field(default=600, ge=0, le=604800)


class LeaderBalance(Spec):
    mode: LeaderBalanceMode = LeaderBalanceMode.OPERATOR
    imbalance_threshold_percent: int = Field(default=10, ge=0, le=100)
    check_interval_seconds: int = Field(default=30, ge=5, le=3600)
    replication_throttle_bytes_per_second: int = Field(default=52428800, ge=1048576)


class Metrics(Spec):
    enabled: bool = True
    network_policy_peers: tuple[NetworkPolicyPeer, ...] = Field(default=(), max_length=20)


class Rack(Spec):
    topology_key: str = Field(min_length=1)


def _default_listeners() -> tuple[Listener, ...]:
    return (Listener(name="plain", port=9092),)


class KafkaClusterSpec(Spec):
    version: KafkaVersion = DEFAULT_KAFKA_VERSION
    image: str | None = Field(default=None, min_length=1)
    brokers: Brokers
    controllers: Controllers = Field(default_factory=Controllers)
    listeners: tuple[Listener, ...] = Field(default_factory=_default_listeners, min_length=1, max_length=4)
    tls: Tls = Field(default_factory=Tls)
    authorization: Authorization = Field(default_factory=Authorization)
    topic_defaults: TopicDefaults = Field(default_factory=TopicDefaults)
    restarts: Restarts = Field(default_factory=Restarts)
    canary: Canary = Field(default_factory=Canary)
    upgrade: Upgrade = Field(default_factory=Upgrade)
    # KRaft feature levels by name (share.version: 1, ...): unset, a new cluster gets its release's default and a
    # running one keeps what it has (krafty.decide.features); metadata.version is spec.upgrade's
    features: dict[str, int] = Field(default_factory=dict, max_length=16)
    leader_balance: LeaderBalance = Field(default_factory=LeaderBalance)
    metrics: Metrics = Field(default_factory=Metrics)
    network_policies: NetworkPolicies = Field(default_factory=NetworkPolicies)
    rack: Rack | None = None

    @model_validator(mode="after")
    def _mirror_crd_rules(self) -> KafkaClusterSpec:
        """The CRD's CEL rules that do not compare with the old object, so that
        models built in code hold the same invariants as objects from the API server."""
        problems = self._combined_mode_problems()
        if self.topic_defaults.min_insync_replicas > self.topic_defaults.replication_factor:
            problems.append("topicDefaults.minInsyncReplicas cannot exceed replicationFactor")
        if self.topic_defaults.replication_factor > self.brokers.replicas:
            problems.append("topicDefaults.replicationFactor cannot exceed brokers.replicas")
        ports = [listener.port for listener in self.listeners]
        if len(set(ports)) != len(ports) or len({lst.name for lst in self.listeners}) != len(self.listeners):
            problems.append("listener names and ports must be unique")
        if any(port in RESERVED_PORTS for port in ports):
            problems.append("listener ports 9090, 9091, 9093 and 9404 are reserved")
        if self.authorization.enabled and self.tls.internal is False:
            problems.append("authorization needs TLS between the nodes (tls.internal)")
        if self.restarts.canary_gate is not None and not self.canary.enabled:
            problems.append("restarts.canaryGate needs canary.enabled: the roll would wait for figures nothing "
                            "measures")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _combined_mode_problems(self) -> list[str]:
        if self.controllers.mode != ControllerMode.COMBINED:
            return []
        problems = []
        if self.brokers.replicas < self.controllers.replicas:
            problems.append("in combined mode brokers.replicas must be at least controllers.replicas")
        pool = self.controllers
        if pool.storage or pool.resources != Resources() or pool.jvm != Jvm() or pool.template != PodTemplate():
            problems.append("storage, resources, jvm and template apply to dedicated controllers only")
        return problems
