"""Who may connect: NetworkPolicy peers as the KafkaCluster spec names them (Kubernetes' own shape)."""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from krafty.model.common import Spec

LABEL_KEY = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
             r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class SelectorRequirement(Spec):
    key: str = Field(pattern=LABEL_KEY, max_length=316)
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values_match_operator(self) -> SelectorRequirement:
        wants_values = self.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
        if wants_values != bool(self.values):
            raise ValueError("In and NotIn need values; Exists and DoesNotExist take none")
        return self


class LabelSelector(Spec):
    match_labels: dict[str, str] = Field(default_factory=dict, max_length=20)
    match_expressions: tuple[SelectorRequirement, ...] = Field(default=(), max_length=20)

    @field_validator("match_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            if not re.match(LABEL_KEY, key) or not re.match(LABEL_VALUE, label):
                raise ValueError(f"{key}: {label} is not a valid label")
        return value


class IpBlock(Spec):
    cidr: str
    except_: tuple[str, ...] = Field(default=(), alias="except")

    @model_validator(mode="after")
    def _excepts_inside(self) -> IpBlock:
        block = ipaddress.ip_network(self.cidr, strict=False)
        for cidr in self.except_:
            inner = ipaddress.ip_network(cidr, strict=False)
            if inner.version != block.version or not inner.subnet_of(block):  # type: ignore[arg-type]
                raise ValueError(f"ipBlock.except {cidr} is not inside {self.cidr}")
        return self


class NetworkPolicyPeer(Spec):
    """Pods (of namespaces) or addresses allowed to connect; an empty list of peers allows everyone."""

    pod_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    ip_block: IpBlock | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> NetworkPolicyPeer:
        selectors = self.pod_selector is not None or self.namespace_selector is not None
        if self.ip_block is not None and selectors:
            raise ValueError("ipBlock cannot be combined with podSelector or namespaceSelector")
        if self.ip_block is None and not selectors:
            raise ValueError("a peer needs podSelector, namespaceSelector or ipBlock")
        return self

    def as_kubernetes(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, exclude_defaults=True, mode="json")


class UnnamedPeers(StrEnum):
    """Who may reach an internal listener, or the metrics port, that names no networkPolicyPeers."""

    NAMESPACE = "Namespace"  # the cluster's own namespace (and, for metrics, the install's monitoring peers)
    EVERYONE = "Everyone"  # every pod of every namespace


class NetworkPolicies(Spec):
    # One NetworkPolicy per cluster: the controller port only from the cluster's own pods and the operator,
    # the replication port only from its brokers and the operator, each client listener and the metrics
    # port from the peers named there, or else as unnamed_peers says.
    enabled: bool = True
    # None: what the cluster was created with (Namespace since this release; Everyone for clusters made before)
    unnamed_peers: UnnamedPeers | None = None
