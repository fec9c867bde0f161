"""What rendering needs besides the spec: identity and facts persisted once."""

from __future__ import annotations

from dataclasses import dataclass

from krafty import naming
from krafty.model import ControllerMode, KafkaClusterSpec
from krafty.naming import Pool


@dataclass(frozen=True)
class Voter:
    node_id: int
    directory_id: str


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
    rack_cluster_role: str = naming.RACK_CLUSTER_ROLE

    @property
    def dedicated(self) -> bool:
        return self.spec.controllers.mode == ControllerMode.DEDICATED

    @property
    def voter_pool(self) -> Pool:
        return Pool.CONTROLLER if self.dedicated else Pool.BROKER

    def pools(self) -> list[Pool]:
        return [Pool.CONTROLLER, Pool.BROKER] if self.dedicated else [Pool.BROKER]

    def replicas(self, pool: Pool) -> int:
        return self.spec.controllers.replicas if pool is Pool.CONTROLLER else self.spec.brokers.replicas

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

    def bootstrap_servers(self) -> str:
        listener = self.spec.listeners[0]
        return f"{naming.bootstrap_service(self.name)}.{self.namespace}.svc.{self.cluster_domain}:{listener.port}"

    def controller_bootstrap_servers(self) -> str:
        pool = self.voter_pool
        return ",".join(f"{self.host(pool, i)}:{naming.CONTROLLER_PORT}" for i in range(self.spec.controllers.replicas))

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
