"""What the cluster pass last applied of each child, so a calm pass sends only what changed.

A child is applied (or deleted) when what the spec makes of it differs from what this process last applied,
and at least every RESYNC_SECONDS anyway: that puts back what someone changed or deleted behind the operator's
back (Strimzi's full reconciliation runs every two minutes too). A failed apply, a process start and a cluster
created again under the same name (another uid) all apply everything.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from krafty.render.cluster import Child

RESYNC_SECONDS = 120.0


def _digest(desired: dict[str, Any] | None) -> str:
    return hashlib.sha256(json.dumps(desired, sort_keys=True, default=str).encode()).hexdigest()


def cluster_key(body: dict[str, Any]) -> tuple[str, str, str]:
    """A KafkaCluster as Applied knows it: namespace, name and uid (another uid: a cluster made again)."""
    meta = body["metadata"]
    return meta["namespace"], meta["name"], str(meta.get("uid"))


class Applied:
    def __init__(self, resync: float = RESYNC_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._resync = resync
        self._clock = clock
        self._lock = threading.Lock()
        # (namespace, cluster) -> the cluster's uid and, per child, the digest applied and when
        self._clusters: dict[tuple[str, str], tuple[str, dict[tuple[str, str], tuple[str, float]]]] = {}

    def _children(self, namespace: str, cluster: str, uid: str) -> dict[tuple[str, str], tuple[str, float]]:
        held = self._clusters.get((namespace, cluster))
        if held is None or held[0] != uid:
            held = self._clusters[(namespace, cluster)] = (uid, {})
        return held[1]

    def _last(self, namespace: str, cluster: str, uid: str, child: Child) -> tuple[str, float] | None:
        with self._lock:
            return self._children(namespace, cluster, uid).get((child.kind, child.name))

    def due(self, namespace: str, cluster: str, uid: str, child: Child) -> bool:
        """Whether the child must be sent: changed since this process last sent it, or sent too long ago."""
        if self.changed(namespace, cluster, uid, child):
            return True
        last = self._last(namespace, cluster, uid, child)
        return last is not None and self._clock() - last[1] >= self._resync

    def sent(self, namespace: str, cluster: str, uid: str, child: Child) -> bool:
        """Whether this process has sent the child before (then the object of its name is the cluster's own)."""
        return self._last(namespace, cluster, uid, child) is not None

    def changed(self, namespace: str, cluster: str, uid: str, child: Child) -> bool:
        """Whether the child differs from what this process last sent (or was never sent by it)."""
        last = self._last(namespace, cluster, uid, child)
        return last is None or last[0] != _digest(child.desired)

    def done(self, namespace: str, cluster: str, uid: str, child: Child) -> None:
        """The API server took the child as desired."""
        with self._lock:
            self._children(namespace, cluster, uid)[(child.kind, child.name)] = (_digest(child.desired), self._clock())

    def failed(self, namespace: str, cluster: str, uid: str, child: Child) -> None:
        """The API server refused it: the next pass sends it again."""
        with self._lock:
            self._children(namespace, cluster, uid).pop((child.kind, child.name), None)

    def forget(self, namespace: str, cluster: str) -> None:
        with self._lock:
            self._clusters.pop((namespace, cluster), None)
