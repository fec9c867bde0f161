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
from collections import Counter
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
from krafty.decide.health import summarize
from krafty.decide.status import DEGRADED, PROGRESSING, READY, Condition
from krafty.model import DeletionPolicy, KafkaClusterSpec, TopicSpec
from krafty.model.common import deleting, spec_of
from krafty.reconcile import status as writer
from krafty.reconcile.connection import Locate
from krafty.telemetry import metrics

BUSY_INTERVAL = 5.0
CHECK_INTERVAL = 30.0
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
        created_with=(created["partitions"], created["replicationFactor"]) if created else None)


@dataclass
class Looked:
    """What the passes of one cluster's Topics saw: when they last looked at all of them, with which cluster spec,
    each Topic Ready then (by its marker), the Kafka topics known to exist, and each one's partitions and
    under-replicated partitions (the metrics)."""
    at: float
    cluster: tuple[KafkaClusterSpec, bool]  # the spec and whether paused
    ready: dict[tuple[str, str], tuple[str, int, bool]]
    existing: set[str]
    counts: dict[str, tuple[int, int]]


def _marker(body: dict[str, Any]) -> tuple[str, int, bool]:
    """What changes when a user changes a Topic (not the operator's status writes): made again (another uid), its
    spec (generation), or the adoption annotation."""
    meta = body["metadata"]
    return (str(meta.get("uid")), int(meta.get("generation") or 0),
            (meta.get("annotations") or {}).get(naming.ADOPT_ANNOTATION) == "force")


@dataclass(frozen=True)
class Quiet:
    """What a Topic's report is made of, but for a move's progress: the resource (its resourceVersion), Kafka's
    topic, the verdict and the sizes it was created with."""
    version: str | None
    kafka_topic: topics.KafkaTopic | None
    verdict: topics.Verdict
    created_with: tuple[int, int] | None


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
        self._look_at_all_every = look_at_all_every
        self._clock = clock
        self._looked: dict[tuple[str, str], Looked] = {}
        # Each cluster's Topics as parsed in its last pass, by resourceVersion: a calm pass parses none again
        self._parsed: dict[tuple[str, str], dict[tuple[str, str], tuple[str | None, topics.TopicResource | None]]] = {}
        # Each cluster's Topics whose last report wrote nothing, with what it was made of: the same again writes
        # nothing, so a calm pass does not make it again
        self._quiet: dict[tuple[str, str], dict[tuple[str, str], Quiet]] = {}

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
            self._parsed.pop((namespace, cluster), None)
            self._looked.pop((namespace, cluster), None)
            self._quiet.pop((namespace, cluster), None)
            return None
        live = [b for b in bodies if not deleting(b)]
        writer.for_each([b for b in live if naming.TOPIC_FINALIZER not in (b["metadata"].get("finalizers") or [])],
                        lambda body: self.kube.add_finalizer(naming.TOPIC_KIND, body, naming.TOPIC_FINALIZER))
        cluster_body = self.cluster_body(namespace, cluster)
        waiting = self._let_go([b for b in bodies if deleting(b)], namespace, cluster, cluster_body)
        retry = DELETION_RETRY if waiting else None
        if not live:
            return retry
        spec = None if deleting(cluster_body) else spec_of(KafkaClusterSpec, cluster_body)
        parsed = self._parse(namespace, cluster, live)
        resources = [r for _, r in parsed if r is not None]
        if spec is None:  # gone or going (its Topics are looked at again when it comes back), or not parseable
            self._report((namespace, cluster), parsed, topics.plan(resources, {}, None, []), {})
            return retry if cluster_body is None or deleting(cluster_body) else CHECK_INTERVAL
        key, began, state = (namespace, cluster), self._clock(), (spec, naming.paused(cluster_body))
        focus = self._focus(self._looked.get(key), state, parsed, began)
        if focus is not None and not focus:  # nothing changed since the last pass
            return self._next(key, began, retry or CHECK_INTERVAL)
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
            self._unreachable(live, str(error))
            return BUSY_INTERVAL
        plan = topics.plan(looking, actual, spec, sorted(brokers), moving=len(ongoing))
        if state[1]:
            plan = topics.held(plan, f"KafkaCluster {cluster} is paused")
        try:
            self._execute(admin, plan, looking, spec.leader_balance.replication_throttle_bytes_per_second)
        except KafkaUnavailable as error:  # a request Kafka never answered: as when it cannot be read
            self._unreachable(live, str(error))
            return BUSY_INTERVAL
        touched = plan.touched()
        after = {**actual, **self._described(admin, touched, plan, looking)} if touched else actual
        plan = topics.settle(plan, looking, after, spec, sorted(brokers))
        if plan.reassignments:
            ongoing = kraft.list_reassignments(admin.connection)
        keys = {r.key for r in looking}
        self._report(key, [(b, r) for b, r in parsed if r is None or r.key in keys], plan, after, ongoing)
        looked = self._remember(key, focus is None, began, state, parsed, plan, after)
        metrics.COLLECTOR.set_topics(namespace, cluster, looked.counts)
        busy = any(v.progressing for v in plan.verdicts.values())
        return BUSY_INTERVAL if busy else self._next(key, began, retry or CHECK_INTERVAL)

    def _focus(self, looked: Looked | None, state: tuple[KafkaClusterSpec, bool],
               parsed: list[tuple[dict[str, Any], topics.TopicResource | None]], now: float
               ) -> list[topics.TopicResource] | None:
        """The Topics this pass looks at, or None for all of them (see the module's docstring)."""
        if looked is None or now - looked.at >= self._look_at_all_every or looked.cluster != state:
            return None
        claims = Counter(r.kafka_name for _, r in parsed if r is not None)
        changed = [r for body, r in parsed if r is not None and looked.ready.get(r.key) != _marker(body)]
        if any(r.kafka_name in looked.existing or claims[r.kafka_name] > 1 for r in changed):
            return None
        return changed

    def _remember(self, key: tuple[str, str], whole: bool, began: float, state: tuple[KafkaClusterSpec, bool],
                  parsed: list[tuple[dict[str, Any], topics.TopicResource | None]], plan: topics.TopicPlan,
                  after: dict[str, topics.KafkaTopic]) -> Looked:
        counts = {name: (len(t.partitions), summarize(t.partitions).under_replicated) for name, t in after.items()}
        looked = self._looked.get(key)
        if whole or looked is None:
            looked = self._looked[key] = Looked(began, state, {}, set(), {})
        looked.existing.update(after)
        looked.existing.update(t.name for t in plan.creates)  # (one the brokers do not describe yet too)
        looked.counts.update(counts)
        for body, resource in parsed:
            topic = (body["metadata"]["namespace"], body["metadata"]["name"])
            verdict = plan.verdicts.get(topic) if resource is not None else None
            if verdict is not None and verdict.ready:
                looked.ready[topic] = _marker(body)
            elif verdict is not None or whole:
                looked.ready.pop(topic, None)
        return looked

    def _next(self, key: tuple[str, str], began: float, delay: float) -> float:
        """`delay`, or less when a pass that looks at every Topic is due before."""
        looked = self._looked.get(key)
        if looked is None or self._look_at_all_every <= 0:
            return delay
        return max(min(delay, looked.at + self._look_at_all_every - began), 0.5)

    def _parse(self, namespace: str, cluster: str, bodies: list[dict[str, Any]]
               ) -> list[tuple[dict[str, Any], topics.TopicResource | None]]:
        """Each body with its resource (None: a spec that cannot be parsed), parsed again only once changed."""
        before = self._parsed.get((namespace, cluster), {})
        now = {}
        out = []
        for body in bodies:
            meta = body["metadata"]
            key, version = (meta["namespace"], meta["name"]), meta.get("resourceVersion")
            known = before.get(key)
            if known is None or version is None or known[0] != version:
                known = (version, _resource(body))
            now[key] = known
            out.append((body, known[1]))
        self._parsed[(namespace, cluster)] = now
        quiet = self._quiet.get((namespace, cluster), {})
        self._quiet[(namespace, cluster)] = {topic: made_of for topic, made_of in quiet.items() if topic in now}
        return out

    def _described(self, admin: KafkaAdmin, touched: set[str], plan: topics.TopicPlan,
                   resources: list[topics.TopicResource]) -> dict[str, topics.KafkaTopic]:
        """The topics the pass changed, read again; one it created that the brokers do not describe yet is asked
        again a moment later (a few times), so that its first status is whole and not written twice."""
        found = self._actual(admin, touched)
        created = {r.kafka_name for r in resources
                   if r.key in plan.verdicts and plan.verdicts[r.key].reason == "Creating"}
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

    def _report(self, cluster_key: tuple[str, str], parsed: list[tuple[dict[str, Any], topics.TopicResource | None]],
                plan: topics.TopicPlan, actual: dict[str, topics.KafkaTopic],
                ongoing: dict[tuple[str, int], Any] | None = None) -> None:
        """Each resource's Events and status, decided in line; only those with something to write are written
        (at once: krafty.reconcile.status.for_each)."""
        moment, quiet = writer.now(), self._quiet.setdefault(cluster_key, {})
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
