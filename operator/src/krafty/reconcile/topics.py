"""One pass over all Topic resources of one KafkaCluster, with batched Admin calls.

Per pass: one metadata read, one config read, and one request per kind of
change (create, grow partitions, alter configs, reassign) for all topics
together (split only where Kafka bounds a request), each first sent with
validate_only so Kafka's own verdict reaches the resource before anything
changes. A slow or invalid topic only marks its own resource.

A pass looks at every Topic at least every CHECK_INTERVAL (drift, Kafka's
partitions, a topic deleted behind the operator's back). The passes a burst of
new Topics pokes in between look only at what changed since: Topics not Ready
in the last pass, or new or changed since (their uid, generation or adoption
annotation), as long as none of them names a topic Kafka had then, two Topics
claim it, or the cluster changed; otherwise the pass looks at all of them. So
applying N Topics costs Kafka work for N topics, not N for each pass.

The pass also holds each Topic's finalizer and lets deleted ones go, the Kafka
topics of those with deletionPolicy Delete deleted first in one request; kopf
only watches, so a new Topic costs the API server no writes of kopf's own. The
Topics are read from what that watch has delivered (krafty.runtime.watched), not listed.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from krafty import naming
from krafty.clients import kraft
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kafka_admin import KafkaAdmin
from krafty.clients.kube import Kube
from krafty.decide import topics
from krafty.decide.status import DEGRADED, PROGRESSING, READY, Condition
from krafty.decide.verdicts import Refusal
from krafty.model import DeletionPolicy, KafkaClusterSpec, TopicSpec
from krafty.model.common import deleting, spec_of
from krafty.reconcile import writer
from krafty.reconcile.batched import BUSY_INTERVAL, CHECK_INTERVAL, add_finalizers, settled, unreachable
from krafty.reconcile.connection import Locate
from krafty.reconcile.topic_memory import Parsed, Quiet, TopicMemory
from krafty.telemetry import metrics

CREATED_RETRIES, CREATED_WAIT = 3, 0.3  # a new topic not described yet: asked again, so many times, seconds apart
DELETION_RETRY = 15.0  # a deletion held by readers, or by an unreachable Kafka, is asked again


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
        created_with=(created["partitions"], created["replicationFactor"]) if created else None,
        settled=settled(body))


@dataclass(frozen=True)
class Report:
    """What a pass writes about one Topic: its Events (reason, message, warning), then its status (None: as is)."""
    body: dict[str, Any]
    events: tuple[tuple[str, str, bool], ...]
    status: dict[str, Any] | None


class TopicReconciler:
    def __init__(self, kube: Kube, locate: Locate, admin: Callable[[Connection], KafkaAdmin],
                 watched: Callable[[str], list[dict[str, Any]]] | None = None,
                 watched_cluster: Callable[[str, str], dict[str, Any] | None] | None = None,
                 look_at_all_every: float = CHECK_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        """`watched`: a namespace's Topics, `watched_cluster`: a KafkaCluster (namespace, name), as the operator's
        watch has them (krafty.runtime.watched); without them each pass reads them from the API server.
        `look_at_all_every`: seconds between passes that look at every Topic (0: every pass does)."""
        self.kube = kube
        self.locate = locate
        self.admin = admin
        self.watched = watched or (lambda namespace: kube.list(naming.TOPIC_KIND, namespace))
        self._watched_cluster = watched_cluster
        self._clock = clock
        self._memory = TopicMemory(look_at_all_every)

    def cluster_body(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A KafkaCluster as the watch delivered it, or from the API server while the watch has not: right after
        the operator starts a Topic's event can come before its cluster's, and a cluster taken for gone would let
        deleted Topics go without deleting their Kafka topics."""
        seen = self._watched_cluster(namespace, name) if self._watched_cluster else None
        return seen if seen is not None else self.kube.get(naming.CLUSTER_KIND, name, namespace)

    def bodies(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        """The cluster's Topic resources, those being deleted too."""
        return [b for b in self.watched(namespace)
                if (b.get("spec") or {}).get("clusterRef", {}).get("name") == cluster]

    # -- the pass ----------------------------------------------------------------
    def reconcile(self, namespace: str, cluster: str) -> float | None:
        bodies = self.bodies(namespace, cluster)
        if not bodies:
            self._memory.forget((namespace, cluster))
            return None
        live = [b for b in bodies if not deleting(b)]
        add_finalizers(self.kube, naming.TOPIC_KIND, naming.TOPIC_FINALIZER, live)
        cluster_body = self.cluster_body(namespace, cluster)
        waiting = self._let_go([b for b in bodies if deleting(b)], namespace, cluster, cluster_body)
        retry = DELETION_RETRY if waiting else None
        if not live:
            return retry
        spec = None if deleting(cluster_body) else spec_of(KafkaClusterSpec, cluster_body)
        parsed = self._memory.parse((namespace, cluster), live, _resource)
        resources = [r for _, r in parsed if r is not None]
        if spec is None:  # gone or going (its Topics are looked at again when it comes back), or not parseable
            self._report((namespace, cluster), parsed, topics.plan(resources, {}, None, []), {})
            return retry if cluster_body is None or deleting(cluster_body) else CHECK_INTERVAL
        key, began, state = (namespace, cluster), self._clock(), (spec, naming.paused(cluster_body))
        focus = self._memory.focus(key, state, parsed, began)
        if focus is not None and not focus:  # nothing changed since the last pass
            return self._memory.next(key, began, retry or CHECK_INTERVAL)
        try:
            admin = self.admin(self.locate(namespace, cluster))
            looking = resources if focus is None else focus
            actual = self._actual(admin, {r.kafka_name for r in looking})
            if focus is not None and actual:  # a new Topic names a topic Kafka has: look at every Topic
                focus, looking = None, resources
                actual = self._actual(admin, {r.kafka_name for r in looking})
            brokers = admin.registered_brokers()
            ongoing = kraft.list_reassignments(admin.connection)
        except KafkaUnavailable as error:  # Kafka down: report it on every topic, retry soon
            return unreachable(self.kube, naming.TOPIC_KIND, live, error, writer.now())
        plan = topics.plan(looking, actual, spec, sorted(brokers), moving=len(ongoing))
        if state[1]:
            plan = topics.withhold(plan, f"KafkaCluster {cluster} is paused")
        try:
            refused = self._execute(admin, plan, spec.leader_balance.replication_throttle_bytes_per_second)
        except KafkaUnavailable as error:  # a request Kafka never answered: as when it cannot be read
            return unreachable(self.kube, naming.TOPIC_KIND, live, error, writer.now())
        touched = plan.touched()
        after = {**actual, **self._described(admin, touched, topics.created(plan, refused))} if touched else actual
        plan = topics.settle(plan, refused, looking, after, spec, sorted(brokers))
        if plan.reassignments:
            ongoing = kraft.list_reassignments(admin.connection)
        keys = {r.key for r in looking}
        self._report(key, [(b, r) for b, r in parsed if r is None or r.key in keys], plan, after, ongoing)
        looked = self._memory.remember(key, focus is None, began, state, parsed, plan, after)
        metrics.COLLECTOR.set_topics(namespace, cluster, looked.counts)
        busy = any(v.progressing for v in plan.verdicts.values())
        return BUSY_INTERVAL if busy else self._memory.next(key, began, retry or CHECK_INTERVAL)

    def _described(self, admin: KafkaAdmin, touched: set[str], created: set[str]) -> dict[str, topics.KafkaTopic]:
        """The topics the pass changed, read again; one it created that the brokers do not describe yet is asked
        again a moment later (a few times), so that its first status is whole and not written twice."""
        found = self._actual(admin, touched)
        for _ in range(CREATED_RETRIES):
            missing = created - found.keys()
            if not missing:
                break
            time.sleep(CREATED_WAIT)
            found.update(self._actual(admin, missing))
        return found

    def _actual(self, admin: KafkaAdmin, names: set[str]) -> dict[str, topics.KafkaTopic]:
        # (a topic whose config could not be read yet, just created, is left for the next pass)
        return {name: topics.KafkaTopic(name, topic_id, partitions, overrides)
                for name, (topic_id, partitions, overrides) in admin.describe_topics(names).items()}

    # -- acting ---------------------------------------------------------------------
    def _execute(self, admin: KafkaAdmin, plan: topics.TopicPlan, throttle: int) -> dict[str, Refusal[topics.Refused]]:
        """Carries the plan out as it is; returns what Kafka refused, by Kafka topic (the last refusal of each)."""
        refused: dict[str, Refusal[topics.Refused]] = {}
        creates = {t.name: (t.name, t.partitions, t.replicas, dict(t.config)) for t in plan.creates}
        for names in topics.by_request({t.name: topics.records_to_create(t) for t in plan.creates}):
            batch = [creates[n] for n in names]
            refused.update(self._two_phase(partial(admin.create_topics, batch)))
        for names in topics.by_request(plan.partition_counts):  # (a partition record each, the new ones fewer)
            counts = {n: plan.partition_counts[n] for n in names}
            refused.update(self._two_phase(partial(admin.create_partitions, counts)))
        changes = {topic: dict(change) for topic, change in plan.config_changes.items()}
        refused.update(self._two_phase(lambda v: admin.alter_topic_configs(changes, validate_only=v)))
        if plan.reassignments:
            # Throttled like scaling moves; the cluster pass removes the throttles once no move is in flight.
            moved = sorted({topic for topic, _ in plan.reassignments})
            admin.alter_dynamic_cluster_defaults(dict.fromkeys(naming.THROTTLE_RATE_KEYS, str(throttle)), [])
            admin.alter_topic_configs({t: dict.fromkeys(naming.THROTTLED_REPLICAS_KEYS, "*") for t in moved})
            errors = kraft.alter_reassignments(admin.connection, plan.reassignments)
            for (topic, partition), error in errors.items():
                refused[topic] = Refusal(topics.Refused.REASSIGNMENT, f"partition {partition}: {error}")
        return refused

    @staticmethod
    def _two_phase(call: Callable[[bool], dict[str, str | None]]) -> dict[str, Refusal[topics.Refused]]:
        """Validate everything first (Kafka's own checks), then apply what passed; returns what Kafka refused."""
        errors = call(True)
        refused = {topic: Refusal(topics.Refused.INVALID, f"Kafka refused it: {error}")
                   for topic, error in errors.items() if error}
        if any(error is None for error in errors.values()):
            refused.update({topic: Refusal(topics.Refused.APPLY, error) for topic, error in call(False).items()
                            if error and errors.get(topic) is None})
        return refused

    # -- reporting ------------------------------------------------------------------
    def _report(self, cluster_key: tuple[str, str], parsed: Parsed,
                plan: topics.TopicPlan, actual: dict[str, topics.KafkaTopic],
                ongoing: dict[tuple[str, int], Any] | None = None) -> None:
        """Each resource's Events and status, decided in line; only those with something to write are written
        (at once: krafty.reconcile.writer.for_each)."""
        moment, quiet = writer.now(), self._memory.quiet(cluster_key)
        reports = (self._report_one(body, resource, plan, actual, ongoing or {}, moment, quiet)
                   for body, resource in parsed)
        writer.for_each([r for r in reports if r.events or r.status is not None], self._write)

    def _report_one(self, body: dict[str, Any], resource: topics.TopicResource | None, plan: topics.TopicPlan,
                    actual: dict[str, topics.KafkaTopic], ongoing: dict[tuple[str, int], Any],
                    moment: datetime.datetime, quiet: dict[tuple[str, str], Quiet]) -> Report:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        verdict = plan.verdicts.get(key) or topics.Verdict(False, "InvalidSpec", "the spec cannot be parsed",
                                                            manage=False)
        kafka_topic = actual.get(resource.kafka_name) if resource else None
        made_of = Quiet(body["metadata"].get("resourceVersion"), kafka_topic, verdict, plan.created_with.get(key))
        if quiet.get(key) == made_of:  # as in the last pass, which wrote nothing
            return Report(body, (), None)
        status: dict[str, Any] = {}
        if resource is not None and verdict.reason == "Creating":
            # Created in this pass: ours from now on, even before every broker describes it.
            status = {"topicName": resource.kafka_name}
        if kafka_topic is not None and verdict.manage:
            status = topics.partition_report(kafka_topic)
            status["reassignment"] = self._reassignment(verdict, kafka_topic, ongoing)
        if key in plan.created_with and verdict.manage:
            partitions, replicas = plan.created_with[key]
            status["createdWith"] = {"partitions": partitions, "replicationFactor": replicas}
        written = writer.pending(body, status, self._conditions(verdict, status), moment)
        moving = verdict.target_replicas is not None  # (a move's progress is not in made_of)
        if written is None and not verdict.events and not moving:
            quiet[key] = made_of
        else:
            quiet.pop(key, None)
        return Report(body, verdict.events, written)

    def _write(self, report: Report) -> None:
        for reason, message, warning in report.events:
            self.kube.event(report.body, naming.TOPIC_KIND, reason, message, warning=warning)
        if report.status is not None:
            meta = report.body["metadata"]
            self.kube.patch_status(naming.TOPIC_KIND, meta["name"], meta["namespace"], report.status)

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
        problems = [f"{status.get(k)} {label}" for k, label in (("offlinePartitions", "offline"),
                                                                ("underMinIsrPartitions", "under min ISR"),
                                                                ("underReplicatedPartitions", "under-replicated"))
                    if status.get(k)]
        return [
            Condition(READY, verdict.ready, verdict.reason, verdict.message),
            Condition(PROGRESSING, verdict.progressing, "Updating" if verdict.progressing else "Idle",
                      verdict.message if verdict.progressing else "nothing to change"),
            Condition(DEGRADED, bool(problems), "PartitionsUnhealthy" if problems else "AsExpected",
                      ("partitions " + ", ".join(problems)) if problems else "all partitions in sync"),
        ]

    def _status(self, body: dict[str, Any], status: dict[str, Any], conditions: list[Condition]) -> None:
        writer.write(self.kube, naming.TOPIC_KIND, body, status, conditions, writer.now())

    # -- deletion ----------------------------------------------------------------------
    def _let_go(self, deleted: list[dict[str, Any]], namespace: str, cluster: str,
                cluster_body: dict[str, Any] | None) -> int:
        """Deleted Topic resources: deletionPolicy Delete removes the Kafka topic first (held while consumer groups
        read it, unless confirmed), Retain keeps it; then their finalizer goes. Returns how many must wait."""
        doomed: list[tuple[dict[str, Any], str]] = []  # (resource, its Kafka topic)
        for body in deleted:
            if naming.TOPIC_FINALIZER not in (body["metadata"].get("finalizers") or []):
                continue  # (someone else's finalizer keeps it)
            farewell = _farewell(_resource(body), cluster_body)
            if isinstance(farewell, str):
                doomed.append((body, farewell))
            else:
                self.kube.event(body, naming.TOPIC_KIND, *farewell)
                self._release(body)
        if not doomed:
            return 0
        try:
            admin = self.admin(self.locate(namespace, cluster))
            gone = self._delete_from_kafka(admin, doomed)
        except KafkaUnavailable as unreachable:
            for body, name in doomed:
                self._wait(body, "DeletionPending", f"cannot reach the cluster to delete {name}: {unreachable}")
            return len(doomed)
        for body in gone:
            self._release(body)
        return len(doomed) - len(gone)

    def _delete_from_kafka(self, admin: KafkaAdmin, doomed: list[tuple[dict[str, Any], str]]
                           ) -> list[dict[str, Any]]:
        """Deletes the topics no live consumer group reads (or whose deletion is confirmed); returns the resources
        whose topic is gone."""
        asked = {name for body, name in doomed if not _confirmed(body)}
        readers = admin.groups_reading(asked) if asked else {}
        going = []
        for body, name in doomed:
            if readers.get(name):
                self._wait(body, "DeletionBlocked", f"deletion of {name} is held: consumer groups "
                           f"{', '.join(readers[name])} are still reading it. Stop them, or annotate "
                           f"{naming.CONFIRM_DELETION_ANNOTATION}=true to delete anyway")
            else:
                going.append((body, name))
        errors: dict[str, str | None] = {}
        for names in topics.by_request({name: 1 for _, name in going}):  # (a record per topic)
            errors.update(admin.delete_topics(names))
        gone = []
        for body, name in going:
            error = errors.get(name)
            if error and "UNKNOWN_TOPIC" not in error:
                self._wait(body, "DeletionPending", f"deleting {name} failed: {error}")
            else:
                self.kube.event(body, naming.TOPIC_KIND, "TopicDeleted", f"deleted {name} from Kafka")
                gone.append(body)
        return gone

    def _wait(self, body: dict[str, Any], reason: str, message: str) -> None:
        self.kube.event(body, naming.TOPIC_KIND, reason, message, warning=True)
        self._status(body, {}, [Condition(READY, False, reason, message)])

    def _release(self, body: dict[str, Any]) -> None:
        self.kube.remove_finalizer(naming.TOPIC_KIND, body, naming.TOPIC_FINALIZER)


def _confirmed(body: dict[str, Any]) -> bool:
    return (body["metadata"].get("annotations") or {}).get(naming.CONFIRM_DELETION_ANNOTATION) == "true"


def _farewell(resource: topics.TopicResource | None, cluster: dict[str, Any] | None) -> tuple[str, str] | str:
    """A deleted Topic resource let go without asking Kafka (the Event's reason and message), or the name of its
    Kafka topic, to be deleted first."""
    if resource is None or not resource.managed:
        return "TopicNotManaged", "the operator never managed a Kafka topic for this resource: nothing to delete"
    if resource.spec.deletion_policy is DeletionPolicy.RETAIN:
        return "TopicRetained", f"{resource.kafka_name} stays in Kafka (deletionPolicy Retain)"
    if deleting(cluster):
        return ("TopicLeftToCluster", f"KafkaCluster {resource.spec.cluster_ref.name} is being deleted: "
                f"{resource.kafka_name} goes with it (its data stays on kept volumes)")
    if spec_of(KafkaClusterSpec, cluster) is None:
        return "ClusterNotFound", f"KafkaCluster {resource.spec.cluster_ref.name} is gone: nothing to delete"
    return resource.kafka_name
