"""kopf registrations: thin handlers that hand every KafkaCluster, its Topics, KafkaUsers and plans to the scheduler.

Level-based: whatever changed (spec, pods, Kafka itself), each pass reads the
whole state again, so the handlers only say "look at this one now". Both kinds
are watched the same way, as plain events: no per-object bookkeeping writes,
and only a change of what a user sets (generation, annotations, deletion)
pokes a pass, never the operator's own status writes.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

import kopf

from krafty import naming
from krafty.clients import kube as kube_client
from krafty.clients.connection import Connection
from krafty.clients.kafka_admin import AdminPool, KafkaAdmin
from krafty.clients.kafka_users import UserAdmin
from krafty.decide.leadership import Role
from krafty.model import KafkaClusterSpec
from krafty.model.common import spec_of
from krafty.planning.cluster import PassResult
from krafty.reconcile import connection
from krafty.reconcile.cluster import ClusterReconciler, Endpoints, Intervals, Settings
from krafty.reconcile.disks import DiskPass
from krafty.reconcile.lag import LagPass
from krafty.reconcile.plans import PlanPass
from krafty.reconcile.topics import TopicReconciler
from krafty.reconcile.users import UserReconciler
from krafty.runtime.failing import CLUSTER_PASSES, FailingPasses
from krafty.runtime.leadership import Elector, NamespaceClaims
from krafty.runtime.scheduler import Scheduler
from krafty.runtime.settings import OperatorSettings
from krafty.runtime.watched import ServingBrokers, Watched
from krafty.telemetry import metrics

WORKERS = 8  # passes running at once, of every cluster
FOLLOWING_INTERVAL = 1.0  # at least, and at least as long as the pass took: never more than half the time in passes
BUSY_INTERVAL = 5.0
IDLE_INTERVAL = 30.0
REFUSED_INTERVAL = 30.0  # a namespace another install operates: look again this often
JOBS = CLUSTER_PASSES  # each cluster's passes (a KafkaClusterPlan's is "plan")


def _cluster_of(key: Any) -> tuple[str, str]:
    """A pass's key is (job, namespace, cluster)."""
    return (key[1], key[2])


def _stop_acting() -> None:
    """Leadership lost: end the process before another pass writes (Kubernetes starts it again, as a standby)."""
    logging.shutdown()
    sys.stdout.flush()
    os._exit(1)


class Operator:
    """Process-wide state: the API client, the passes and the scheduler (kept in kopf's memo)."""

    def __init__(self, config: OperatorSettings) -> None:
        kube_client.load_config()
        self.kube = kube_client.Kube()
        self.config = config
        # Outside the cluster (development, benchmarks) pod DNS names do not resolve: KRAFTY_KAFKA_BOOTSTRAP
        # points the topic and lag passes at a Kafka the operator can reach, and with KRAFTY_KAFKA_CONTROLLERS
        # the cluster pass too.
        override = config.kafka_bootstrap
        endpoints = (Endpoints(override, config.kafka_controllers)
                     if isinstance(override, str) and config.kafka_controllers else None)
        settings = Settings(broker_images=config.broker_images or {}, cluster_domain=config.cluster_domain,
                            rack_binding=config.rack_binding, operator=config.operator, endpoints=endpoints,
                            monitoring_peers=config.monitoring_peers)
        if override:
            locate, reached = connection.fixed(override), None
        else:
            reached = connection.Reached(connection.in_cluster(self.kube, settings.cluster_domain))
            locate = reached.locate
        self.clusters = ClusterReconciler(self.kube, settings, reached)
        self.topic_admins = AdminPool(KafkaAdmin)
        self.watched_topics = Watched()
        self.watched_clusters = Watched()
        self.serving = ServingBrokers()
        self.topics = TopicReconciler(self.kube, locate, self.topic_admins.get, self.watched_topics.in_namespace,
                                      self.watched_clusters.get)
        self.user_admins = AdminPool(UserAdmin)
        self.users = UserReconciler(self.kube, locate, self.user_admins.get, cluster_domain=settings.cluster_domain)
        self.lag = LagPass(self.kafka_connection, self.tell_cluster, config.lag_groups)
        self.disks = DiskPass(self.kafka_connection)
        self.plans = PlanPass(self.kube, self.clusters.preview)
        lease = config.lease
        # Each cluster's passes (cluster, topics, users, lag, disks) use at most two workers at once
        self.failing = FailingPasses(self.kube)
        self.scheduler = Scheduler(self.run, workers=WORKERS, leading=lease is None, group=_cluster_of, per_group=2,
                                   told=self.failing.told)
        self.elector = None if lease is None else Elector(self.kube, lease, self.scheduler.lead, _stop_acting)
        # The install (its namespace and Lease), not the pod: another install watching a namespace it claims
        # leaves that namespace alone
        self.claims = None if lease is None else NamespaceClaims(self.kube, f"{lease.namespace}/{lease.name}")
        self._told: set[tuple[str, str, str | None]] = set()
        self._seen: dict[tuple[str, str, str], tuple[Any, ...]] = {}

    def start(self) -> None:
        self.scheduler.start()
        if self.elector is not None:
            self.elector.start()

    def stop(self) -> None:
        """Finishes the passes under way, then lets go of the namespaces and the Lease (a standby takes over
        at once)."""
        self.scheduler.stop()
        if self.claims is not None and self.role is Role.LEADER:
            self.claims.release()
        if self.elector is not None:
            self.elector.stop()

    def acts_in(self, namespace: str) -> bool:
        """This replica leads and its install holds the namespace."""
        return self.role is Role.LEADER and (self.claims is None or self.claims.check(namespace).ours)

    def _refused(self, kind: str, namespace: str, name: str) -> bool:
        """Another install operates this namespace: say so once (log, and an Event on the cluster)."""
        if self.claims is None:
            return False
        claim = self.claims.check(namespace)
        if claim.ours:
            return False
        metrics.RECONCILES.labels(kind, "refused").inc()
        told = (namespace, name, claim.holder)
        if told not in self._told:
            self._told.add(told)
            told_kind = naming.PLAN_KIND if kind == "plan" else naming.CLUSTER_KIND
            body = self.kube.get(told_kind, name, namespace)
            if body is not None:
                self.kube.event(body, told_kind, "NamespaceClaimed", claim.reason, warning=True)
        return True

    @property
    def role(self) -> Role:
        return Role.LEADER if self.elector is None else self.elector.role

    def run(self, key: Any) -> float | None:
        kind, namespace, name = key
        jobs = {"cluster": self.run_cluster, "topics": self.topics.reconcile, "users": self.users.reconcile,
                "lag": self.lag.reconcile, "disks": self.disks.reconcile, "plan": self.plans.reconcile}
        if self._refused(kind, namespace, name):
            return REFUSED_INTERVAL
        try:
            with metrics.timed_pass(kind):
                delay = jobs[kind](namespace, name)
        except Exception:
            metrics.RECONCILE_ERRORS.labels(kind).inc()
            metrics.RECONCILES.labels(kind, "error").inc()
            if kind == "cluster":
                metrics.COLLECTOR.set_pass(namespace, name, PassResult.ERROR.value, time.time())
            raise
        if kind != "cluster":  # cluster passes count themselves, by outcome
            metrics.RECONCILES.labels(kind, "ok" if delay is not None else "gone").inc()
        return delay

    def kafka_connection(self, namespace: str, cluster: str) -> Connection | None:
        """How the lag and disk passes reach a cluster's brokers; None once the cluster is gone."""
        spec = spec_of(KafkaClusterSpec, self.topics.cluster_body(namespace, cluster))
        return None if spec is None else self.topics.locate(namespace, cluster)

    def tell_cluster(self, namespace: str, cluster: str, reason: str, message: str, warning: bool) -> None:
        """An Event on a KafkaCluster (and its log line) from a pass that does not hold its body."""
        body = self.kube.get(naming.CLUSTER_KIND, cluster, namespace)
        if body is not None:
            self.kube.event(body, naming.CLUSTER_KIND, reason, message, warning=warning)

    def run_cluster(self, namespace: str, name: str) -> float | None:
        body = self.kube.get(naming.CLUSTER_KIND, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            if body is not None and self.clusters.teardown(body):  # its brokers are still stopping
                return BUSY_INTERVAL
            metrics.COLLECTOR.set_cluster(namespace, name, None)
            self.clusters.release(namespace, name)
            self.topic_admins.release(namespace, name)
            self.user_admins.release(namespace, name)
            self.lag.release(namespace, name)
            return None
        began = time.monotonic()
        outcome = self.clusters.reconcile(body)
        metrics.RECONCILES.labels("cluster", outcome.result.value).inc()
        metrics.COLLECTOR.set_pass(namespace, name, outcome.result.value, time.time())
        following = max(FOLLOWING_INTERVAL, time.monotonic() - began)
        return outcome.next_pass(Intervals(following, BUSY_INTERVAL, IDLE_INTERVAL))

    def changed(self, kind: str, body: Mapping[str, Any], deleted: bool) -> bool:
        """Whether what a user sets on the object changed since the last event (the operator's own
        status writes change none of it)."""
        meta = body.get("metadata") or {}
        key = (kind, str(meta.get("namespace")), str(meta.get("name")))
        if deleted:
            self._seen.pop(key, None)
            return True
        seen = (meta.get("generation"), dict(meta.get("annotations") or {}), meta.get("deletionTimestamp"))
        if self._seen.get(key) == seen:
            return False
        self._seen[key] = seen
        return True


def _operator(memo: kopf.Memo) -> Operator:
    found = getattr(memo, "operator", None)
    if not isinstance(found, Operator):
        raise kopf.TemporaryError("the operator is still starting", delay=2)
    return found


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # kopf only watches (no change handlers: it writes nothing to our resources); its finalizer is named apart from
    # the ones the passes hold, and from kopf's default one that every kopf operator shares
    settings.persistence.finalizer = naming.KOPF_FINALIZER
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    memo.operator = Operator(OperatorSettings.from_environment())
    memo.operator.start()


@kopf.on.cleanup()
def stop(memo: kopf.Memo, **_: Any) -> None:
    operator = getattr(memo, "operator", None)
    if isinstance(operator, Operator):
        operator.stop()


@kopf.on.event(naming.GROUP, naming.VERSION, naming.CLUSTER_PLURAL)
def cluster_event(type: str | None, body: kopf.Body, namespace: str | None, name: str, memo: kopf.Memo,
                  **_: Any) -> None:
    """A KafkaCluster appeared, changed or went: its cluster, topic, user, lag and disk passes look now (or stop;
    the user pass lets its users' deletions go)."""
    operator = _operator(memo)
    deleted = type == "DELETED"
    if deleted:
        operator.watched_clusters.gone(str(namespace), name)
    else:
        operator.watched_clusters.saw(body)
    if operator.serving.changed(body, deleted):  # new topics and users wait for brokers to place them on
        for job in ("topics", "users"):
            operator.scheduler.poke((job, namespace, name))
    if not operator.changed(naming.CLUSTER_KIND, body, deleted):
        return
    if deleted or body.get("metadata", {}).get("deletionTimestamp"):  # the cluster pass tears it down in order
        operator.scheduler.forget(("lag", namespace, name))
        operator.scheduler.forget(("disks", namespace, name))
        for job in ("cluster", "topics", "users"):  # (the topic and user passes let their deletions go)
            operator.scheduler.poke((job, namespace, name))
        return
    for job in JOBS:
        operator.scheduler.poke((job, namespace, name))


def _look_at_cluster_of(memo: kopf.Memo, kind: str, job: str, type: str | None, body: kopf.Body,
                        spec: Mapping[str, Any], namespace: str | None) -> None:
    """Topics and KafkaUsers are reconciled per cluster, all together: a change to one looks at all of its
    cluster's (a deletion too: the topic and user passes hold their finalizers)."""
    operator = _operator(memo)
    cluster = (spec.get("clusterRef") or {}).get("name")
    if cluster and operator.changed(kind, body, type == "DELETED"):
        operator.scheduler.poke((job, namespace, cluster))


@kopf.on.event(naming.GROUP, naming.VERSION, naming.TOPIC_PLURAL)
def topic_event(type: str | None, body: kopf.Body, spec: Mapping[str, Any], namespace: str | None, name: str,
                memo: kopf.Memo, **_: Any) -> None:
    """Every event, the operator's own status writes too, keeps the topic pass's view (krafty.runtime.watched)
    current."""
    watched = _operator(memo).watched_topics
    if type == "DELETED":
        watched.gone(str(namespace), name)
    else:
        watched.saw(body)
    _look_at_cluster_of(memo, naming.TOPIC_KIND, "topics", type, body, spec, namespace)


@kopf.on.event(naming.GROUP, naming.VERSION, naming.USER_PLURAL)
def user_event(type: str | None, body: kopf.Body, spec: Mapping[str, Any], namespace: str | None,
               memo: kopf.Memo, **_: Any) -> None:
    _look_at_cluster_of(memo, naming.USER_KIND, "users", type, body, spec, namespace)


@kopf.on.event(naming.GROUP, naming.VERSION, naming.PLAN_PLURAL)
def plan_event(type: str | None, body: kopf.Body, namespace: str | None, name: str, memo: kopf.Memo,
               **_: Any) -> None:
    """A KafkaClusterPlan appeared or its spec changed: the plan pass plans it (once per generation)."""
    operator = _operator(memo)
    if type == "DELETED":
        operator.changed(naming.PLAN_KIND, body, True)
        operator.scheduler.forget(("plan", namespace, name))
    elif operator.changed(naming.PLAN_KIND, body, False):
        operator.scheduler.poke(("plan", namespace, name))


@kopf.on.event("", "v1", "pods", labels={naming.MANAGED_BY_LABEL: naming.MANAGED_BY})
def kafka_pod_event(namespace: str | None, labels: Mapping[str, str], memo: kopf.Memo, **_: Any) -> None:
    """A Kafka pod changed (ready, deleted, drained): look at its cluster now."""
    cluster = labels.get(naming.CLUSTER_LABEL)
    operator = getattr(memo, "operator", None)
    if cluster and isinstance(operator, Operator):
        operator.scheduler.poke(("cluster", namespace, cluster))


# (the probes are coroutines: kopf runs them in its loop, where a plain function would cost a thread pool's hop on
# every kubelet probe)
@kopf.on.probe(id="scheduler")
async def scheduler_alive(memo: kopf.Memo, **_: Any) -> str:
    return "running" if isinstance(getattr(memo, "operator", None), Operator) else "starting"


@kopf.on.probe(id="role")
async def role(memo: kopf.Memo, **_: Any) -> str:
    """leader or standby: /healthz says which replica acts."""
    operator = getattr(memo, "operator", None)
    return operator.role.value if isinstance(operator, Operator) else "starting"
