"""The Secrets of a cluster's PKI: each CA (certificate and key), the trust bundle clients read, every
node's certificate and key, the operator's own client certificate; and each KafkaUser's credential."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from krafty import naming
from krafty.model.context import ClusterContext


def secret(ctx: ClusterContext, name: str, data: Mapping[str, str], annotations: Mapping[str, str] | None = None,
           kind: str = "Opaque") -> dict[str, Any]:
    return _secret(ctx.metadata(name), data, annotations, kind)


def _secret(metadata: dict[str, object], data: Mapping[str, str], annotations: Mapping[str, str] | None,
            kind: str) -> dict[str, Any]:
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": kind,
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in sorted(data.items())}}


def user_secret(user: Mapping[str, Any], cluster: str, data: Mapping[str, str], annotations: Mapping[str, str],
                kind: str) -> dict[str, Any]:
    """A KafkaUser's credential, owned by the KafkaUser (deleted with it)."""
    meta = user["metadata"]
    owner = {"apiVersion": naming.API_VERSION, "kind": naming.USER_KIND, "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
    metadata = {"name": naming.user_secret(meta["name"]), "namespace": meta["namespace"],
                "labels": {**naming.labels(cluster), "app.kubernetes.io/component": "user"},
                "ownerReferences": [owner]}
    return _secret(metadata, data, annotations, kind)


def owned_by(body: Mapping[str, Any] | None, owner: Mapping[str, Any]) -> bool:
    """Whether the object names `owner` (by uid) among its owners."""
    uid = owner["metadata"]["uid"]
    return any(ref.get("uid") == uid for ref in ((body or {}).get("metadata") or {}).get("ownerReferences") or [])


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
