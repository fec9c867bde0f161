"""The Secrets of a cluster's PKI: each CA (certificate and key), the trust bundle clients read, every
node's certificate and key, and the operator's own client certificate."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from krafty import naming
from krafty.model.context import ClusterContext


def secret(ctx: ClusterContext, name: str, data: Mapping[str, str], annotations: Mapping[str, str] | None = None,
           kind: str = "Opaque") -> dict[str, Any]:
    metadata = ctx.metadata(name)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": kind,
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in sorted(data.items())}}


def decoded(body: Mapping[str, Any] | None) -> dict[str, str]:
    """A Secret's data as text ({} for a Secret that does not exist)."""
    data = (body or {}).get("data") or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def annotations_of(body: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((body or {}).get("metadata") or {}).get("annotations") or {})


def tls_secret(ctx: ClusterContext, name: str, cert: str, key: str, ca: str) -> dict[str, Any]:
    """A kubernetes.io/tls Secret, the shape cert-manager and most tools read."""
    return secret(ctx, name, {naming.TLS_CERT_KEY: cert, naming.TLS_KEY_KEY: key, naming.CA_CERT_KEY: ca},
                  kind="kubernetes.io/tls")
