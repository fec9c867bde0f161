"""A listener's nodeport or loadbalancer Service as the API server has it: its node port, its load
balancer's address and when it was made."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from krafty.facts.observed import ExternalServiceState
from krafty.model.common import parse_time


def external_service(service: Mapping[str, Any]) -> ExternalServiceState | None:
    """A nodeport or loadbalancer Service as it stands (None for a Service of another type)."""
    spec = service.get("spec") or {}
    if spec.get("type") not in ("NodePort", "LoadBalancer"):
        return None
    node_port = next((int(p["nodePort"]) for p in spec.get("ports") or [] if p.get("nodePort")), None)
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or [{}]
    return ExternalServiceState(service["metadata"]["name"], node_port,
                                ingress[0].get("ip") or ingress[0].get("hostname") or None,
                                parse_time(service["metadata"].get("creationTimestamp")))
