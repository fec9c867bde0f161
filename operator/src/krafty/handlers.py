"""kopf registrations: thin handlers that hand every KafkaCluster to the scheduler.

Level-based: whatever changed (spec, pods, Kafka itself), each pass reads the
whole state again, so the handlers only say "look at this one now".
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

import kopf

from krafty import metrics, naming
from krafty.clients import kube as kube_client
from krafty.decide.lag import partition_lag
from krafty.reconcile.cluster import ClusterReconciler, Settings
from krafty.reconcile.topics import Held, TopicReconciler, in_cluster_bootstrap
from krafty.scheduler import Scheduler

log = logging.getLogger(__name__)

BUSY_INTERVAL = 5.0
IDLE_INTERVAL = 30.0
LAG_INTERVAL = 10.0


class Operator:
    """Process-wide state: the API client, the reconcilers and the scheduler."""

    def __init__(self) -> None:
        kube_client.load_config()
        self.kube = kube_client.Kube()
        settings = Settings(broker_image=os.environ.get("KRAFTY_BROKER_IMAGE", "krafty/kafka:latest"),
                            cluster_domain=os.environ.get("KRAFTY_CLUSTER_DOMAIN", "cluster.local"),
                            rack_cluster_role=os.environ.get("KRAFTY_RACK_CLUSTER_ROLE", naming.RACK_CLUSTER_ROLE))
        self.clusters = ClusterReconciler(self.kube, settings)
        # Outside the cluster (development, benchmarks) pod DNS names do not resolve: KRAFTY_KAFKA_BOOTSTRAP
        # points the topic and lag passes at a Kafka the operator can reach.
        override = os.environ.get("KRAFTY_KAFKA_BOOTSTRAP")
        bootstrap = (lambda _ns, _name, _spec: override) if override else in_cluster_bootstrap(settings.cluster_domain)
        self.topics = TopicReconciler(self.kube, bootstrap, self.clusters.admin)
        self.scheduler = Scheduler(self.run)

    def run(self, key: Any) -> float | None:
        kind, namespace, name = key
        jobs = {"cluster": self.run_cluster, "topics": self.topics.reconcile, "lag": self.run_lag}
        started = time.monotonic()
        try:
            delay = jobs[kind](namespace, name)
        except Exception:
            metrics.RECONCILE_ERRORS.labels(kind).inc()
            metrics.RECONCILES.labels(kind, "error").inc()
            raise
        finally:
            metrics.RECONCILE_SECONDS.labels(kind).observe(time.monotonic() - started)
        if kind != "cluster":  # cluster passes count themselves, by outcome
            metrics.RECONCILES.labels(kind, "ok" if delay is not None else "gone").inc()
        return delay

    def run_lag(self, namespace: str, cluster: str) -> float | None:
        """Consumer lag of every group (Spark jobs' included: their listener commits offsets)."""
        spec = self.topics.cluster_spec(namespace, cluster)
        if spec is None:
            return None
        admin = self.clusters.admin(self.topics.bootstrap(namespace, cluster, spec))
        committed = admin.committed_offsets()
        logs = admin.log_offsets({tp for offsets in committed.values() for tp in offsets})
        metrics.COLLECTOR.set_lag(namespace, cluster, partition_lag(committed, logs))
        return LAG_INTERVAL

    def run_cluster(self, namespace: str, name: str) -> float | None:
        body = self.kube.get(naming.CLUSTER_KIND, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            metrics.COLLECTOR.set_cluster(namespace, name, None)
            self.clusters.release(namespace, name)
            return None
        outcome = self.clusters.reconcile(body)
        metrics.RECONCILES.labels("cluster", outcome.result).inc()
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
    # Our own finalizer name: kopf's default one is shared by every kopf operator, and one that watches
    # Topics without a deletion handler removes it as fast as we add it (a write storm on every Topic).
    settings.persistence.finalizer = naming.TOPIC_FINALIZER
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
    for job in ("cluster", "topics", "lag"):
        _operator().scheduler.poke((job, namespace, name))


@kopf.on.delete(naming.GROUP, naming.VERSION, naming.CLUSTER_PLURAL, optional=True)
def cluster_deleted(namespace: str | None, name: str, **_: Any) -> None:
    for job in ("cluster", "topics", "lag"):
        _operator().scheduler.forget((job, namespace, name))


@kopf.on.event(naming.GROUP, naming.VERSION, naming.TOPIC_PLURAL)
def topic_changed(namespace: str | None, spec: Mapping[str, Any], **_: Any) -> None:
    """Topics are reconciled per cluster, all together, so any event looks at the cluster's topics
    (a plain event handler: no per-object bookkeeping writes, which matters with hundreds of topics)."""
    cluster = (spec.get("clusterRef") or {}).get("name")
    if cluster:
        _operator().scheduler.poke(("topics", namespace, cluster))


@kopf.on.delete(naming.GROUP, naming.VERSION, naming.TOPIC_PLURAL)
def topic_deleted(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    """deletionPolicy Delete removes the Kafka topic (held while consumer groups read it); Retain keeps it."""
    try:
        outcome = _operator().topics.delete(dict(body))
    except Held as held:
        raise kopf.TemporaryError(str(held), delay=15) from held
    logger.info("Topic deleted: %s", outcome)


@kopf.on.event("", "v1", "pods", labels={"app.kubernetes.io/managed-by": "krafty"})
def kafka_pod_event(namespace: str | None, labels: Mapping[str, str], **_: Any) -> None:
    """A Kafka pod changed (ready, deleted, drained): look at its cluster now."""
    cluster = labels.get(naming.CLUSTER_LABEL)
    if cluster and OPERATOR is not None:
        OPERATOR.scheduler.poke(("cluster", namespace, cluster))


@kopf.on.probe(id="scheduler")
def scheduler_alive(**_: Any) -> str:
    return "running" if OPERATOR is not None else "starting"
