"""One pass over all Topic resources of one KafkaCluster, with batched Admin calls.

Per pass: one metadata read, one config read, and at most one request per
kind of change (create, grow partitions, alter configs, reassign) for all
topics together, each first sent with validate_only so Kafka's own verdict
reaches the resource before anything changes. A slow or invalid topic only
marks its own resource.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from krafty import metrics, naming
from krafty.clients import kraft
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kafka_admin import KafkaAdmin
from krafty.clients.kube import Kube
from krafty.decide import topics
from krafty.decide.health import summarize
from krafty.decide.status import DEGRADED, PROGRESSING, READY, Condition
from krafty.model import DeletionPolicy, KafkaClusterSpec, TopicSpec
from krafty.model.common import spec_of
from krafty.reconcile import status as writer
from krafty.reconcile.connection import Locate

BUSY_INTERVAL = 5.0
CHECK_INTERVAL = 30.0


def _resource(body: dict[str, Any]) -> topics.TopicResource | None:
    meta = body["metadata"]
    spec = spec_of(TopicSpec, body)
    if spec is None:
        return None
    status = body.get("status") or {}
    created = status.get("createdWith") or {}
    return topics.TopicResource(
        meta["namespace"], meta["name"], meta.get("creationTimestamp") or "", spec, bool(status.get("topicName")),
        force_adopt=(meta.get("annotations") or {}).get(naming.ADOPT_ANNOTATION) == "force",
        created_with=(created["partitions"], created["replicationFactor"]) if created else None)


def paused(cluster: dict[str, Any] | None) -> bool:
    """Whether the KafkaCluster carries the pause annotation (its topics and users change nothing then)."""
    return ((cluster or {}).get("metadata", {}).get("annotations") or {}).get(naming.PAUSED_ANNOTATION) == "true"


class TopicReconciler:
    def __init__(self, kube: Kube, locate: Locate, admin: Callable[[Connection], KafkaAdmin]) -> None:
        self.kube = kube
        self.locate = locate
        self.admin = admin

    def cluster_spec(self, namespace: str, cluster: str) -> KafkaClusterSpec | None:
        return spec_of(KafkaClusterSpec, self.kube.get(naming.CLUSTER_KIND, cluster, namespace))

    def bodies(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        return [b for b in self.kube.list(naming.TOPIC_KIND, namespace)
                if (b.get("spec") or {}).get("clusterRef", {}).get("name") == cluster
                and not b["metadata"].get("deletionTimestamp")]

    # -- the pass ----------------------------------------------------------------
    def reconcile(self, namespace: str, cluster: str) -> float | None:
        bodies = self.bodies(namespace, cluster)
        if not bodies:
            return None
        cluster_body = self.kube.get(naming.CLUSTER_KIND, cluster, namespace)
        spec = spec_of(KafkaClusterSpec, cluster_body)
        resources = [r for r in map(_resource, bodies) if r is not None]
        if spec is None:
            self._report(bodies, topics.plan(resources, {}, None, []), {})
            return CHECK_INTERVAL
        try:
            admin = self.admin(self.locate(namespace, cluster))
            actual = self._actual(admin, {r.kafka_name for r in resources})
            brokers = admin.registered_brokers()
            ongoing = kraft.list_reassignments(admin.connection)
        except KafkaUnavailable as error:  # Kafka down: report it on every topic, retry soon
            self._unreachable(bodies, str(error))
            return BUSY_INTERVAL
        plan = topics.plan(resources, actual, spec, sorted(brokers), moving=len(ongoing))
        if paused(cluster_body):
            plan = topics.held(plan, f"KafkaCluster {cluster} is paused")
        self._execute(admin, plan, resources, spec.leader_balance.replication_throttle_bytes_per_second)
        touched = plan.touched()
        after = {**actual, **self._actual(admin, touched)} if touched else actual
        if plan.reassignments:
            ongoing = kraft.list_reassignments(admin.connection)
        self._report(bodies, plan, after, ongoing)
        metrics.COLLECTOR.set_topics(namespace, cluster, {
            name: (len(t.partitions), summarize(t.partitions).under_replicated) for name, t in after.items()})
        busy = any(v.progressing for v in plan.verdicts.values())
        return BUSY_INTERVAL if busy else CHECK_INTERVAL

    def _actual(self, admin: KafkaAdmin, names: set[str]) -> dict[str, topics.KafkaTopic]:
        described = admin.describe_topics(names)
        overrides = admin.topic_overrides(described)
        # A topic whose config could not be read yet (just created) is left for the next pass.
        return {name: topics.KafkaTopic(name, topic_id, partitions, overrides[name])
                for name, (topic_id, partitions) in described.items() if name in overrides}

    # -- acting ---------------------------------------------------------------------
    def _execute(self, admin: KafkaAdmin, plan: topics.TopicPlan, resources: list[topics.TopicResource],
                 throttle: int) -> None:
        by_topic = {r.kafka_name: r for r in resources if r.key in plan.verdicts and plan.verdicts[r.key].manage}
        creates = {t.name: (t.name, t.partitions, t.replicas, dict(t.config)) for t in plan.creates}
        for names in topics.by_request({t.name: topics.records_to_create(t) for t in plan.creates}):
            batch = [creates[n] for n in names]
            self._two_phase(plan, by_topic, partial(admin.create_topics, batch))
        for names in topics.by_request(plan.partition_counts):  # (a partition record each, the new ones fewer)
            counts = {n: plan.partition_counts[n] for n in names}
            self._two_phase(plan, by_topic, partial(admin.create_partitions, counts))
        self._two_phase(plan, by_topic, lambda v: admin.alter_topic_configs(plan.config_changes, validate_only=v))
        if plan.reassignments:
            # Throttled like scaling moves; the cluster pass removes the throttles once no move is in flight.
            moved = sorted({topic for topic, _ in plan.reassignments})
            admin.alter_dynamic_cluster_defaults(dict.fromkeys(naming.THROTTLE_RATE_KEYS, str(throttle)), [])
            admin.alter_topic_configs({t: dict.fromkeys(naming.THROTTLED_REPLICAS_KEYS, "*") for t in moved})
            errors = kraft.alter_reassignments(admin.connection, plan.reassignments)
            for (topic, partition), error in errors.items():
                self._fail(plan, by_topic, topic, "ReassignmentFailed", f"partition {partition}: {error}")

    def _two_phase(self, plan: topics.TopicPlan, by_topic: dict[str, topics.TopicResource],
                   call: Callable[[bool], dict[str, str | None]]) -> None:
        """Validate everything first (Kafka's own checks), then apply what passed."""
        errors = call(True)
        for topic, error in errors.items():
            if error:
                self._fail(plan, by_topic, topic, "InvalidConfig", f"Kafka refused it: {error}")
        if any(error is None for error in errors.values()):
            for topic, error in call(False).items():
                if error and errors.get(topic) is None:
                    self._fail(plan, by_topic, topic, "ApplyFailed", error)

    @staticmethod
    def _fail(plan: topics.TopicPlan, by_topic: dict[str, topics.TopicResource], topic: str, reason: str,
              message: str) -> None:
        resource = by_topic.get(topic)
        if resource is not None:
            plan.verdicts[resource.key] = topics.Verdict(False, reason, message, events=((reason, message, True),))

    # -- reporting ------------------------------------------------------------------
    def _unreachable(self, bodies: list[dict[str, Any]], error: str) -> None:
        writer.for_each(bodies, lambda body: self._status(
            body, {}, [Condition(READY, False, "KafkaUnreachable", f"Kafka cannot be asked: {error}")]))

    def _report(self, bodies: list[dict[str, Any]], plan: topics.TopicPlan, actual: dict[str, topics.KafkaTopic],
                ongoing: dict[tuple[str, int], Any] | None = None) -> None:
        writer.for_each(bodies, lambda body: self._report_one(body, plan, actual, ongoing or {}))

    def _report_one(self, body: dict[str, Any], plan: topics.TopicPlan, actual: dict[str, topics.KafkaTopic],
                    ongoing: dict[tuple[str, int], Any]) -> None:
        resource = _resource(body)
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        verdict = plan.verdicts.get(key) or topics.Verdict(False, "InvalidSpec", "the spec cannot be parsed",
                                                            manage=False)
        status: dict[str, Any] = {}
        kafka_topic = actual.get(resource.kafka_name) if resource else None
        if resource is not None and verdict.reason == "Creating":
            # Created in this pass: ours from now on, even before every broker describes it.
            status = {"topicName": resource.kafka_name}
            verdict = replace(verdict, events=(("TopicCreated", f"created {resource.kafka_name}", False),))
        if kafka_topic is not None and verdict.manage:
            status = topics.partition_report(kafka_topic)
            status["reassignment"] = self._reassignment(verdict, kafka_topic, ongoing)
            if verdict.reason == "Creating":
                verdict = replace(verdict, reason="Created", message=f"created {kafka_topic.name}")
        if key in plan.created_with and verdict.manage:
            partitions, replicas = plan.created_with[key]
            status["createdWith"] = {"partitions": partitions, "replicationFactor": replicas}
        for reason, message, warning in verdict.events:
            self.kube.event(body, naming.TOPIC_KIND, reason, message, warning=warning)
        self._status(body, status, self._conditions(verdict, status))

    @staticmethod
    def _reassignment(verdict: topics.Verdict, topic: topics.KafkaTopic,
                      ongoing: dict[tuple[str, int], Any]) -> dict[str, int] | None:
        """A replication-factor change in progress: partitions at the target length and not moving."""
        if verdict.target_replicas is None:
            return None
        done = sum(len(p.replicas) == verdict.target_replicas and (topic.name, p.partition) not in ongoing
                   for p in topic.partitions)
        if done == len(topic.partitions):
            return None
        return {"targetReplicas": verdict.target_replicas, "partitionsDone": done,
                "partitionsTotal": len(topic.partitions)}

    @staticmethod
    def _conditions(verdict: topics.Verdict, status: dict[str, Any]) -> list[Condition]:
        ready = verdict.ready or verdict.reason == "Created"
        problems = [f"{status.get(k)} {label}" for k, label in (("offlinePartitions", "offline"),
                                                                ("underMinIsrPartitions", "under min ISR"),
                                                                ("underReplicatedPartitions", "under-replicated"))
                    if status.get(k)]
        return [
            Condition(READY, ready, verdict.reason, verdict.message),
            Condition(PROGRESSING, verdict.progressing, "Updating" if verdict.progressing else "Idle",
                      verdict.message if verdict.progressing else "nothing to change"),
            Condition(DEGRADED, bool(problems), "PartitionsUnhealthy" if problems else "AsExpected",
                      ("partitions " + ", ".join(problems)) if problems else "all partitions in sync"),
        ]

    def _status(self, body: dict[str, Any], status: dict[str, Any], conditions: list[Condition]) -> None:
        writer.write(self.kube, naming.TOPIC_KIND, body, status, conditions, writer.now())

    # -- deletion ----------------------------------------------------------------------
    def delete(self, body: dict[str, Any]) -> str:
        """Handles a Topic resource's deletion; returns what happened, raises Held to wait."""
        resource = _resource(body)
        meta = body["metadata"]
        if resource is None or not resource.managed:
            return "the operator never managed a Kafka topic for this resource: nothing to delete"
        if resource.spec.deletion_policy is DeletionPolicy.RETAIN:
            self.kube.event(body, naming.TOPIC_KIND, "TopicRetained",
                            f"{resource.kafka_name} stays in Kafka (deletionPolicy Retain)")
            return "retained"
        cluster = self.kube.get(naming.CLUSTER_KIND, resource.spec.cluster_ref.name, meta["namespace"])
        if cluster is not None and cluster["metadata"].get("deletionTimestamp"):
            return "the KafkaCluster is being deleted: its topics go with it (their data stays on kept volumes)"
        spec = spec_of(KafkaClusterSpec, cluster)
        if spec is None:
            return "the KafkaCluster is gone: nothing to delete"
        try:
            admin = self.admin(self.locate(meta["namespace"], resource.spec.cluster_ref.name))
        except KafkaUnavailable as unreachable:
            raise Held(f"cannot reach the cluster to delete {resource.kafka_name}: {unreachable}") from unreachable
        confirmed = (meta.get("annotations") or {}).get(naming.CONFIRM_DELETION_ANNOTATION) == "true"
        readers = [] if confirmed else admin.groups_reading(resource.kafka_name)
        if readers:
            message = (f"deletion of {resource.kafka_name} is held: consumer groups {', '.join(readers)} are still "
                       f"reading it. Stop them, or annotate {naming.CONFIRM_DELETION_ANNOTATION}=true to delete anyway")
            self.kube.event(body, naming.TOPIC_KIND, "DeletionBlocked", message, warning=True)
            self._status(body, {}, [Condition(READY, False, "DeletionBlocked", message)])
            raise Held(message)
        error = admin.delete_topics([resource.kafka_name]).get(resource.kafka_name)
        if error and "UNKNOWN_TOPIC" not in error:
            raise Held(f"deleting {resource.kafka_name} failed: {error}")
        self.kube.event(body, naming.TOPIC_KIND, "TopicDeleted", f"deleted {resource.kafka_name} from Kafka")
        return "deleted"


class Held(RuntimeError):
    """The deletion must wait (the kopf handler retries later)."""
