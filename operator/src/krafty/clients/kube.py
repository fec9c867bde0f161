"""The Kubernetes API as the operator uses it: server-side apply with one field
manager, reads, deletes, status patches, Events and the leader's Lease.

Every call is bounded (REQUEST_TIMEOUT): an API server that stops answering
fails a pass after seconds instead of holding its worker thread forever.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from krafty import naming
from krafty.telemetry import metrics

_API_VERSIONS = {
    "ServiceAccount": "v1", "ConfigMap": "v1", "Secret": "v1", "Service": "v1", "Pod": "v1", "Event": "v1",
    "Node": "v1",
    "PersistentVolumeClaim": "v1", "StatefulSet": "apps/v1", "PodDisruptionBudget": "policy/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1", "NetworkPolicy": "networking.k8s.io/v1",
    "Lease": "coordination.k8s.io/v1", "StorageClass": "storage.k8s.io/v1",
    naming.CLUSTER_KIND: naming.API_VERSION, naming.TOPIC_KIND: naming.API_VERSION,
    naming.USER_KIND: naming.API_VERSION, naming.PLAN_KIND: naming.API_VERSION,
}
REQUEST_TIMEOUT = (5.0, 30.0)  # seconds to connect, seconds to wait for the answer
# Connections kept open to the API server: one for each thread that may call at once (the scheduler's workers, the
# status writers, the leader election, the plan API). The client's default (5 per core) drops those beyond it once
# answered, and the next call opens a new TLS connection.
CONNECTIONS = 24
EVENTS_LOG = logging.getLogger("krafty.events")


class KindNotServed(Exception):
    """The API server serves no such kind: its CRD is not installed (or not served yet)."""


# What a call raises when the API server refuses, fails, does not answer in time or serves no such kind
API_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, KindNotServed)


# What the API server answers when it refuses an object as the spec made it: invalid (400, 422), or forbidden by
# admission, a quota or a policy (403)
REFUSED_STATUSES = (400, 403, 422)


class Refused(ApiException):
    """The API server refused an object as the spec made it: the spec (or a policy) must change, and retrying
    the same request changes nothing. Raised by apply and merge_patch in place of their ApiException."""

    def __init__(self, error: ApiException) -> None:
        super().__init__(status=error.status, reason=error.reason)
        self.body, self.headers = error.body, error.headers


def _refused(error: ApiException) -> ApiException:
    return Refused(error) if error.status in REFUSED_STATUSES else error


def api_message(error: ApiException) -> str:
    """The API server's own message for a refused request."""
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except ValueError:
        return str(error.reason)


def load_config() -> None:
    """In a pod: its ServiceAccount; elsewhere: the current kubeconfig context. Clients made after it keep
    CONNECTIONS connections."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    configuration = kubernetes.client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = CONNECTIONS
    kubernetes.client.Configuration.set_default(configuration)


class Kube:
    def __init__(self, api_client: kubernetes.client.ApiClient | None = None) -> None:
        self.api_client = api_client or kubernetes.client.ApiClient()
        self._dynamic: DynamicClient | None = None
        self._resources: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _resource(self, kind: str) -> Any:
        with self._lock:
            if self._dynamic is None:
                self._dynamic = DynamicClient(self.api_client)
            if kind not in self._resources:
                try:
                    self._resources[kind] = self._dynamic.resources.get(api_version=_API_VERSIONS[kind], kind=kind)
                except ResourceNotFoundError as error:  # (not remembered: asked again once the CRD is there)
                    raise KindNotServed(f"the API server serves no {kind} of {_API_VERSIONS[kind]}: is its CRD "
                                        "installed?") from error
            return self._resources[kind]

    def apply(self, body: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply as the operator's field manager (taking over conflicting fields). dry_run: the
        object as the API server would store it (defaults filled in, admission run), nothing stored."""
        meta = body["metadata"]
        metrics.KUBE_REQUESTS.labels("apply", body["kind"]).inc()
        try:
            result = self._resource(body["kind"]).server_side_apply(
                body=body, name=meta["name"], namespace=meta.get("namespace"), field_manager=naming.FIELD_MANAGER,
                force_conflicts=True, _request_timeout=REQUEST_TIMEOUT, serialize=False,
                **({"dry_run": "All"} if dry_run else {}))
        except ApiException as error:
            raise _refused(error) from error
        return _json(result)

    def get(self, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        metrics.KUBE_REQUESTS.labels("get", kind).inc()
        try:
            return _json(self._resource(kind).get(name=name, namespace=namespace, serialize=False,
                                                  _request_timeout=REQUEST_TIMEOUT))
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def list(self, kind: str, namespace: str | None, selector: dict[str, str] | None = None) -> list[dict[str, Any]]:
        label_selector = ",".join(f"{k}={v}" for k, v in (selector or {}).items()) or None
        metrics.KUBE_REQUESTS.labels("list", kind).inc()
        found = _json(self._resource(kind).get(namespace=namespace, label_selector=label_selector, serialize=False,
                                               _request_timeout=REQUEST_TIMEOUT))
        return list(found["items"])

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """Creates the object; ApiException 409 when it exists already."""
        metrics.KUBE_REQUESTS.labels("create", body["kind"]).inc()
        result = self._resource(body["kind"]).create(body=body, namespace=body["metadata"].get("namespace"),
                                                     _request_timeout=REQUEST_TIMEOUT)
        return dict(result.to_dict())

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        """Replaces the object if its resourceVersion is still the one read; ApiException 409 when it changed."""
        meta = body["metadata"]
        metrics.KUBE_REQUESTS.labels("replace", body["kind"]).inc()
        result = self._resource(body["kind"]).replace(body=body, name=meta["name"], namespace=meta.get("namespace"),
                                                      _request_timeout=REQUEST_TIMEOUT)
        return dict(result.to_dict())

    def delete(self, kind: str, name: str, namespace: str | None, grace_seconds: int | None = None) -> bool:
        """Deletes if present; returns whether something was deleted."""
        body = {"gracePeriodSeconds": grace_seconds} if grace_seconds is not None else None
        metrics.KUBE_REQUESTS.labels("delete", kind).inc()
        try:
            self._resource(kind).delete(name=name, namespace=namespace, body=body, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    def add_finalizer(self, kind: str, body: dict[str, Any], finalizer: str) -> bool:
        """Adds the finalizer unless the object has it; returns whether it was added. Only to the version read:
        a body read from a watch may be older than the object (another finalizer added since, which the
        patch would replace), and then nothing changes until a pass sees the newer one."""
        meta = body["metadata"]
        present = meta.get("finalizers") or []
        if finalizer in present:
            return False
        patch = ([{"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}] if present else
                 [{"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}])
        return self._json_patch(kind, meta, [{"op": "test", "path": "/metadata/resourceVersion",
                                              "value": meta["resourceVersion"]}, *patch])

    def remove_finalizer(self, kind: str, body: dict[str, Any], finalizer: str) -> bool:
        """Removes the finalizer (only where the object read still holds it there); returns whether it did."""
        meta = body["metadata"]
        present = meta.get("finalizers") or []
        if finalizer not in present:
            return False
        path = f"/metadata/finalizers/{present.index(finalizer)}"
        return self._json_patch(kind, meta, [{"op": "test", "path": path, "value": finalizer},
                                             {"op": "remove", "path": path}])

    def _json_patch(self, kind: str, meta: dict[str, Any], patch: Sequence[dict[str, Any]]) -> bool:
        """Applies the patch; False when the object is gone or changed since it was read (a test op failed)."""
        metrics.KUBE_REQUESTS.labels("patch", kind).inc()
        try:
            self._resource(kind).patch(body=list(patch), name=meta["name"], namespace=meta.get("namespace"),
                                       content_type="application/json-patch+json", _request_timeout=REQUEST_TIMEOUT)
        except ApiException as error:
            if error.status in (404, 422):
                return False
            raise
        return True

    def merge_patch(self, kind: str, name: str, namespace: str, patch: dict[str, Any]) -> None:
        """Changes only the fields the patch names (a claim's requested size: the rest of it is not ours)."""
        metrics.KUBE_REQUESTS.labels("patch", kind).inc()
        try:
            self._resource(kind).patch(body=patch, name=name, namespace=namespace,
                                       content_type="application/merge-patch+json", _request_timeout=REQUEST_TIMEOUT)
        except ApiException as error:
            raise _refused(error) from error

    def patch_status(self, kind: str, name: str, namespace: str, status: dict[str, Any]) -> None:
        resource = self._resource(kind)
        metrics.KUBE_REQUESTS.labels("patch-status", kind).inc()
        resource.status.patch(body={"status": status}, name=name, namespace=namespace,
                              content_type="application/merge-patch+json", _request_timeout=REQUEST_TIMEOUT)

    def event(self, involved: dict[str, Any], kind: str, reason: str, message: str, warning: bool = False,
              node: str | None = None) -> None:
        """Records a Kubernetes Event on the object (same reason and message: counted, not repeated), and the
        same decision in the operator's log, with its cluster, object, node (if one) and reason as fields."""
        meta = involved["metadata"]
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        digest = hashlib.sha256(f"{meta['uid']}{reason}{message}".encode()).hexdigest()[:12]
        name = f"{meta['name']}.{digest}"
        # Created at once (one request: most decisions are new); the same one told again is counted
        metrics.KUBE_REQUESTS.labels("create", "Event").inc()
        repeated = False
        try:
            self._resource("Event").create(namespace=meta["namespace"], _request_timeout=REQUEST_TIMEOUT, body={
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": meta["namespace"]},
                "involvedObject": {"apiVersion": involved.get("apiVersion", naming.API_VERSION), "kind": kind,
                                   "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
                "reason": reason, "message": message[:1024], "type": "Warning" if warning else "Normal",
                "source": {"component": naming.FIELD_MANAGER}, "count": 1,
                "firstTimestamp": now, "lastTimestamp": now,
            })
        except ApiException as error:
            repeated = error.status == 409
            if not repeated:
                raise
        finally:
            _log_event(involved, kind, reason, message, warning, node, repeated=repeated)
        if repeated:
            self._count_again(name, meta["namespace"], now)

    def _count_again(self, name: str, namespace: str, now: str) -> None:
        existing = self.get("Event", name, namespace) or {}
        metrics.KUBE_REQUESTS.labels("patch", "Event").inc()
        self._resource("Event").patch(body={"count": int(existing.get("count") or 1) + 1, "lastTimestamp": now},
                                      name=name, namespace=namespace, content_type="application/merge-patch+json",
                                      _request_timeout=REQUEST_TIMEOUT)


def _json(response: Any) -> dict[str, Any]:
    """The answer's JSON as plain dicts (the dynamic client's own objects, built and converted back, took
    0.47 ms per Topic of a list of 2,000 against 0.06 ms). The answer must be read whole: an unread one keeps its
    connection from the pool, and the next request opens another."""
    return dict(json.loads(response.data))


def _log_event(involved: dict[str, Any], kind: str, reason: str, message: str, warning: bool, node: str | None,
               repeated: bool) -> None:
    """A new decision at INFO (WARNING for a refusal or failure); one already told, counted again, at DEBUG."""
    meta = involved["metadata"]
    cluster = meta["name"] if kind == naming.CLUSTER_KIND else ((involved.get("spec") or {}).get("clusterRef")
                                                                 or {}).get("name")
    level = logging.DEBUG if repeated else logging.WARNING if warning else logging.INFO
    EVENTS_LOG.log(level, "%s %s/%s: %s: %s", kind, meta.get("namespace"), meta["name"], reason, message,
                   extra={"namespace": meta.get("namespace"), "kind": kind, "object": meta["name"],
                          "cluster": cluster, "node": node, "reason": reason})
