"""The latest body of each object of one kind that kopf's watch has delivered, kept in memory.

A topic pass looks at every Topic of its cluster every 30 seconds: listing thousands of them from the API
server each time was most of a calm pass (the answer read and decoded again, though nothing had changed).
The watch already brings every change, the operator's own status writes too, so the pass reads them here.
The topic, lag and disk passes read their KafkaCluster here too (the lag pass looked it up every 10 s);
the cluster pass reads its own from the API server.

A body may be a moment older than the API server's (a write whose event has not arrived yet): a pass
writes status by merge patch, which a stale body cannot undo, and adds a finalizer only to the version it
read (krafty.clients.kube.Kube.add_finalizer). Right after the operator starts, the watch's first listing may not be
complete when a pass runs: that pass looks at fewer objects, and each one that arrives asks for another.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any


class Watched:
    def __init__(self) -> None:
        self._bodies: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def saw(self, body: Mapping[str, Any]) -> None:
        """An event's body (its managedFields left out: nothing reads them, and they are most of its size)."""
        meta = body["metadata"]
        kept = {**body, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
        with self._lock:
            self._bodies[(meta["namespace"], meta["name"])] = kept

    def gone(self, namespace: str, name: str) -> None:
        with self._lock:
            self._bodies.pop((namespace, name), None)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._bodies.get((namespace, name))

    def in_namespace(self, namespace: str) -> list[dict[str, Any]]:
        with self._lock:
            return [body for (ns, _), body in self._bodies.items() if ns == namespace]


class ServingBrokers:
    """How many brokers each KafkaCluster's status counted serving at its last event: when that changes, Topics
    and KafkaUsers that waited for brokers to place their replicas on can go on."""

    def __init__(self) -> None:
        self._serving: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def changed(self, body: Mapping[str, Any], deleted: bool) -> bool:
        """Whether this event counts other brokers serving than the cluster's last one did."""
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")))
        serving = None if deleted else (body.get("status") or {}).get("readyBrokers")
        with self._lock:
            before = self._serving.pop(key, None)
            if serving is not None:
                self._serving[key] = serving
        return serving is not None and before is not None and serving != before
