"""kopf registrations: thin handlers that hand every KafkaCluster to the scheduler.

Level-based: whatever changed (spec, pods, Kafka itself), each pass reads the
whole state again, so the handlers only say "look at this one now".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import kopf

from krafty import naming
from krafty.clients import kube as kube_client
from krafty.reconcile.cluster import ClusterReconciler, Settings
from krafty.scheduler import Scheduler

log = logging.getLogger(__name__)

BUSY_INTERVAL = 5.0
IDLE_INTERVAL = 30.0
ERROR_INTERVAL = 15.0


class Operator:
    """Process-wide state: the API client, the reconcilers and the scheduler."""

    def __init__(self) -> None:
        kube_client.load_config()
        self.kube = kube_client.Kube()
        settings = Settings(broker_image=os.environ.get("KRAFTY_BROKER_IMAGE", "krafty/kafka:latest"),
                            cluster_domain=os.environ.get("KRAFTY_CLUSTER_DOMAIN", "cluster.local"))
        self.clusters = ClusterReconciler(self.kube, settings)
        self.scheduler = Scheduler(self.run_cluster)

    def run_cluster(self, key: Any) -> float | None:
        namespace, name = key
        body = self.kube.get(naming.CLUSTER_KIND, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        try:
            outcome = self.clusters.reconcile(body)
        except Exception:
            log.exception("KafkaCluster %s/%s: reconcile failed", namespace, name)
            return ERROR_INTERVAL
        return BUSY_INTERVAL if outcome.busy else IDLE_INTERVAL


OPERATOR: Operator | None = None


def _operator() -> Operator:
    if OPERATOR is None:
        raise kopf.TemporaryError("the operator is still starting", delay=2)
    return OPERATOR


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global OPERATOR  # noqa: PLW0603 - one operator per process, built when kopf starts
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=naming.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=naming.GROUP, key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    OPERATOR = Operator()
    OPERATOR.scheduler.start()


@kopf.on.cleanup()
def stop(**_: Any) -> None:
    if OPERATOR is not None:
        OPERATOR.scheduler.stop()


@kopf.on.resume(naming.GROUP, naming.VERSION, naming.CLUSTER_PLURAL)
@kopf.on.create(naming.GROUP, naming.VERSION, naming.CLUSTER_PLURAL)
@kopf.on.update(naming.GROUP, naming.VERSION, naming.CLUSTER_PLURAL)
def cluster_changed(namespace: str | None, name: str, **_: Any) -> None:
    _operator().scheduler.poke((namespace, name))


@kopf.on.delete(naming.GROUP, naming.VERSION, naming.CLUSTER_PLURAL, optional=True)
def cluster_deleted(namespace: str | None, name: str, **_: Any) -> None:
    _operator().scheduler.forget((namespace, name))


@kopf.on.event("", "v1", "pods", labels={"app.kubernetes.io/managed-by": "krafty"})
def kafka_pod_event(namespace: str | None, labels: Mapping[str, str], **_: Any) -> None:
    """A Kafka pod changed (ready, deleted, drained): look at its cluster now."""
    cluster = labels.get(naming.CLUSTER_LABEL)
    if cluster and OPERATOR is not None:
        OPERATOR.scheduler.poke((namespace, cluster))


@kopf.on.probe(id="scheduler")
def scheduler_alive(**_: Any) -> str:
    return "running" if OPERATOR is not None else "starting"
