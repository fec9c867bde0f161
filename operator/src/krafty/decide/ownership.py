"""Whether an object of a child's name is this cluster's: the cluster pass applies and deletes its own only.

A tenant (or another cluster, another tool) may own an object of the name a child would have: a Service made by
hand, a ConfigMap of another chart. Applying over it (server-side apply takes over every field) would rewrite it,
and deleting it would remove what someone else runs. A child is this cluster's when one of its owner references
names the cluster's uid, or, with no owner reference at all, when it carries the cluster's labels (the node
ConfigMap is kept without one beside volumes that outlive their cluster, for a cluster made again under its name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from krafty import naming


def stranger(existing: Mapping[str, Any] | None, cluster: str, uid: str) -> str | None:
    """Why the object found under a child's name is not this cluster's, or None (it is, or there is none)."""
    if existing is None:
        return None
    meta = existing.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    if any(ref.get("uid") == uid for ref in owners):
        return None
    if owners:
        owner = owners[0]
        return f"it belongs to {owner.get('kind', 'an object')} {owner.get('name', '')}".rstrip()
    labels = meta.get("labels") or {}
    if labels.get(naming.CLUSTER_LABEL) == cluster and labels.get(naming.MANAGED_BY_LABEL) == naming.MANAGED_BY:
        return None
    return "it was not made by the operator for this cluster (no owner reference, nor the cluster's labels)"
