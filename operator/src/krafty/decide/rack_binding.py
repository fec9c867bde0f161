"""Rack awareness needs each broker to read its node's zone label, a cluster-scoped read.

The chart makes one ClusterRoleBinding (to a role that reads nodes, nothing else) and lets the operator
update that one binding alone (RBAC resourceNames): each rack-aware cluster's ServiceAccount is a subject
of it while the cluster is rack-aware, and leaves it when it is not, or is deleted. The operator cannot
create, change or delete any other binding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def account(namespace: str, name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def membership(subjects: Sequence[Mapping[str, Any]], member: Mapping[str, str], wanted: bool
               ) -> list[dict[str, Any]] | None:
    """The binding's subjects with `member` in (wanted) or out; None when they already are so."""
    current = [dict(s) for s in subjects]
    present = any(all(s.get(k) == v for k, v in member.items()) for s in current)
    if present == wanted:
        return None
    if wanted:
        return [*current, dict(member)]
    return [s for s in current if not all(s.get(k) == v for k, v in member.items())]
