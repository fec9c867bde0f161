"""Topics: from the Topic resources of one cluster and what Kafka holds, the
changes to make (batched per kind of change) and what to report per resource.

Nothing here loses data: partitions only grow, a topic that already exists
with different settings is adopted only when it matches (or when the user
says so), two resources claiming one Kafka topic leave it to the older one,
and an invalid spec changes nothing. A Topic that leaves partitions or
replicas to the cluster's topicDefaults keeps what it was created or adopted
with (status.createdWith): changing the defaults changes new topics only.
Replication-factor changes move replicas in batches, one batch at a time,
throttled like scaling moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from krafty.decide.configs import diff
from krafty.decide.health import summarize, unhealthy
from krafty.decide.verdicts import Refusal, withheld
from krafty.decide.verdicts import Verdict as ResourceVerdict
from krafty.facts.observed import PartitionState
from krafty.model import KafkaClusterSpec, TopicSpec
from krafty.model.validation import validate_topic
from krafty.naming import THROTTLED_REPLICAS_KEYS, kafka_topic_name

MAX_PROBLEM_PARTITIONS = 50
MOVE_BATCH = 100  # partitions whose replicas one pass may start moving


@dataclass(frozen=True)
class TopicResource:
    """A Topic resource as the planner needs it."""

    namespace: str
    name: str
    created: str  # creationTimestamp: the older of two claims wins
    spec: TopicSpec
    managed: bool  # the operator created or adopted the topic (status.topicName is set)
    force_adopt: bool = False  # annotation: adopt an existing topic and make it match the spec
    created_with: tuple[int, int] | None = None  # (partitions, replicas) it was created or adopted with
    settled: bool = False  # Ready at the current generation: a difference now was made behind its back

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def kafka_name(self) -> str:
        return kafka_topic_name(self.name, self.spec.topic_name)


@dataclass(frozen=True)
class KafkaTopic:
    name: str
    topic_id: str
    partitions: tuple[PartitionState, ...]
    overrides: Mapping[str, str]  # topic-level config set on this topic

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True)
class NewTopic:
    name: str
    partitions: int
    replicas: int
    config: Mapping[str, str]


@dataclass(frozen=True)
class Verdict(ResourceVerdict):
    """What to report on one Topic resource."""

    target_replicas: int | None = None  # a replication-factor change under way: its target


@dataclass(frozen=True)
class TopicPlan:
    """Every change of one pass, and a verdict per Topic resource; carried out as it is (what Kafka refuses comes
    back as Refusals, and settle() makes the verdicts of them)."""

    creates: tuple[NewTopic, ...] = ()
    partition_counts: Mapping[str, int] = field(default_factory=dict)
    config_changes: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)  # None: back to default
    reassignments: Mapping[tuple[str, int], list[int]] = field(default_factory=dict)
    verdicts: Mapping[tuple[str, str], Verdict] = field(default_factory=dict)
    created_with: Mapping[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # per resource key

    def touched(self) -> set[str]:
        """The Kafka topics this plan changes (the only ones to read again after it)."""
        return ({t.name for t in self.creates} | set(self.partition_counts) | set(self.config_changes)
                | {topic for topic, _ in self.reassignments})


class Refused(Enum):
    """Why Kafka did not take a change of one topic."""

    INVALID = "InvalidConfig"  # refused when validated: nothing was changed
    APPLY = "ApplyFailed"  # validated, then refused when applied
    REASSIGNMENT = "ReassignmentFailed"  # a partition's replica move refused


@dataclass
class _Draft:
    """A plan while plan() makes it."""

    creates: list[NewTopic] = field(default_factory=list)
    partition_counts: dict[str, int] = field(default_factory=dict)
    config_changes: dict[str, dict[str, str | None]] = field(default_factory=dict)
    reassignments: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    verdicts: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    created_with: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def frozen(self) -> TopicPlan:
        return TopicPlan(tuple(self.creates), self.partition_counts, self.config_changes, self.reassignments,
                         self.verdicts, self.created_with)


# Kafka's controller refuses a whole CreateTopics or CreatePartitions request, its valid topics with the rest, when
# the change takes more metadata records than this ("Unable to perform excessively large batch operation": one
# record per topic, per partition and per config entry) or holds more partitions ("Excessively large number of
# partitions per request")
MAX_RECORDS_PER_REQUEST = 10_000


def records_to_create(topic: NewTopic) -> int:
    return 1 + topic.partitions + len(topic.config)


def by_request(records: Mapping[str, int], limit: int = MAX_RECORDS_PER_REQUEST) -> list[list[str]]:
    """The topics in order, in as few requests as take at most `limit` records each (a topic above it alone:
    Kafka's own refusal names it, and it holds no other topic back)."""
    requests: list[list[str]] = []
    held = 0
    for topic, count in records.items():
        if not requests or held + count > limit:
            requests.append([])
            held = 0
        requests[-1].append(topic)
        held += count
    return requests


def owners(resources: Iterable[TopicResource]) -> tuple[dict[str, TopicResource], list[tuple[TopicResource, str]]]:
    """Who manages each Kafka topic, and which resources lose a claim (with the winner's name)."""
    by_topic: dict[str, list[TopicResource]] = {}
    for resource in resources:
        by_topic.setdefault(resource.kafka_name, []).append(resource)
    winners, losers = {}, []
    for topic, claims in by_topic.items():
        ordered = sorted(claims, key=lambda r: (not r.managed, r.created, r.name))
        winners[topic] = ordered[0]
        losers += [(r, ordered[0].name) for r in ordered[1:]]
    return winners, losers


def config_diff(desired: Mapping[str, str], actual: Mapping[str, str]) -> dict[str, str | None]:
    """Keys to set (value) or to return to the broker default (None). Replication throttles
    belong to the operator's replica moves and are left alone."""
    return diff(desired, actual, keep=THROTTLED_REPLICAS_KEYS).as_changes()


def replica_counts(topics: Iterable[KafkaTopic], brokers: Iterable[int]) -> Counter[int]:
    counts: Counter[int] = Counter({b: 0 for b in brokers})
    for topic in topics:
        for p in topic.partitions:
            counts.update(p.replicas)
    return counts


def change_replication(topic: KafkaTopic, target: int, load: Counter[int]) -> dict[tuple[str, int], list[int]]:
    """New replica lists for a replication factor change: grow onto the least loaded
    brokers, shrink by dropping the last replicas (the preferred leader stays first)."""
    plan = {}
    for p in topic.partitions:
        replicas = list(p.replicas)
        if len(replicas) > target:
            replicas = replicas[:target]
        while len(replicas) < target:
            candidate = min((b for b in load if b not in replicas), key=lambda b: (load[b], b))
            replicas.append(candidate)
            load[candidate] += 1
        if replicas != list(p.replicas):
            plan[(topic.name, p.partition)] = replicas
    return plan


def wanted(resource: TopicResource, cluster: KafkaClusterSpec, actual: KafkaTopic | None) -> tuple[int, int]:
    """(partitions, replicas) the topic should have: the spec's; for what it leaves out, what the topic was
    created or adopted with; the cluster's topicDefaults only for a topic not made yet."""
    spec, defaults = resource.spec, cluster.topic_defaults
    if resource.created_with is not None:
        kept = resource.created_with
    elif actual is not None:  # adopting, or managed before createdWith was recorded: what it has
        kept = (len(actual.partitions), actual.replication_factor)
    else:
        kept = (defaults.partitions, defaults.replication_factor)
    return spec.partitions or kept[0], spec.replicas or kept[1]


def _mismatches(resource: TopicResource, actual: KafkaTopic, cluster: KafkaClusterSpec) -> list[str]:
    spec = resource.spec
    out = []
    partitions, replicas = wanted(resource, cluster, actual)
    if partitions != len(actual.partitions):
        out.append(f"partitions {len(actual.partitions)} in Kafka, {partitions} in the spec")
    if replicas != actual.replication_factor:
        out.append(f"replication factor {actual.replication_factor} in Kafka, {replicas} in the spec")
    for key, value in sorted(config_diff(spec.config, actual.overrides).items()):
        out.append(f"config {key}={actual.overrides.get(key, '(default)')} in Kafka, "
                   f"{value if value is not None else '(default)'} in the spec")
    return out


def _why_moves_wait(in_flight: int, started: int, wanted: int) -> str | None:
    """Replica moves go in batches: none while Kafka still moves others, at most MOVE_BATCH partitions a pass."""
    if in_flight:
        return f"waiting for {in_flight} partition moves in flight to finish before moving more replicas"
    if started and started + wanted > MOVE_BATCH:
        return "waiting for the replica moves of other topics to finish first"
    return None


def _plan_existing(plan: _Draft, resource: TopicResource, actual: KafkaTopic, cluster: KafkaClusterSpec,
                   load: Counter[int], in_flight: int) -> Verdict:
    spec = resource.spec
    adopting = not resource.managed
    differences = _mismatches(resource, actual, cluster)
    if adopting and differences and not resource.force_adopt:
        return Verdict(False, "AdoptionPending",
                       f"topic {actual.name} already exists in Kafka and differs: {'; '.join(differences)}. Nothing "
                       "was changed: edit the spec to match, or annotate kafka.krafty.io/adopt=force to apply it",
                       manage=False)
    events: list[tuple[str, str, bool]] = []
    if adopting:
        events.append(("TopicAdopted", f"took over existing topic {actual.name}", False))
    elif differences and resource.settled:  # (not settled: the spec changed, and the verdict says it is applied)
        events.append(("DriftReverted", f"{actual.name} was changed outside the operator: {'; '.join(differences)}; "
                                        "making it match the spec", True))
    partitions, replicas = wanted(resource, cluster, actual)
    plan.created_with[resource.key] = resource.created_with or (len(actual.partitions), actual.replication_factor)
    if partitions > len(actual.partitions):
        plan.partition_counts[actual.name] = partitions
    elif partitions < len(actual.partitions):
        return Verdict(False, "PartitionsAboveSpec",
                       f"{actual.name} has {len(actual.partitions)} partitions, the spec {partitions}: Kafka cannot "
                       f"remove partitions; set spec.partitions to {len(actual.partitions)}", events=tuple(events))
    changes = config_diff(spec.config, actual.overrides)
    if changes:
        plan.config_changes[actual.name] = changes
    moves = change_replication(actual, replicas, load)
    waiting = _why_moves_wait(in_flight, len(plan.reassignments), len(moves)) if moves else None
    if not waiting:
        plan.reassignments.update(moves)
    busy = bool(moves or changes or actual.name in plan.partition_counts)
    message = waiting or ("applying the spec to Kafka" if busy else f"{actual.name} matches the spec")
    moving = bool(moves) or any(len(p.replicas) != replicas for p in actual.partitions)
    return Verdict(not busy, "Updating" if busy else "TopicReady", message, progressing=busy, events=tuple(events),
                   target_replicas=replicas if moving else None)


def plan(resources: Iterable[TopicResource], actual: Mapping[str, KafkaTopic], cluster: KafkaClusterSpec | None,
         brokers: Iterable[int], moving: int = 0) -> TopicPlan:
    """Every change for one cluster's topics, and a verdict per Topic resource. `moving`: partitions whose
    replicas Kafka is moving now (no new batch starts before they are done)."""
    result = _Draft()
    winners, losers = owners(resources)
    for loser, winner in losers:
        result.verdicts[loser.key] = Verdict(
            False, "Conflict", f"Kafka topic {loser.kafka_name} is already managed by Topic {winner}; this resource "
                               "changes nothing (delete it, or give it another topicName)", manage=False)
    registered = len(set(brokers))
    load = replica_counts(actual.values(), brokers)
    for topic, resource in sorted(winners.items()):
        problems = validate_topic(resource.name, resource.spec, cluster)
        if problems or cluster is None:
            reason = "ClusterNotFound" if cluster is None else "InvalidSpec"
            result.verdicts[resource.key] = Verdict(False, reason, "; ".join(str(p) for p in problems), manage=False)
        elif topic in actual:
            result.verdicts[resource.key] = _plan_existing(result, resource, actual[topic], cluster, load, moving)
        else:
            spec = resource.spec
            partitions, replicas = wanted(resource, cluster, None)
            if replicas > registered:  # (validation keeps it within spec.brokers: the others are still starting)
                result.verdicts[resource.key] = Verdict(
                    False, "WaitingForBrokers", f"waiting for {replicas} brokers to place {replicas} replicas of "
                    f"{topic} on: {registered} registered with the controllers so far", progressing=True)
                continue
            result.created_with[resource.key] = (partitions, replicas)
            result.creates.append(NewTopic(topic, partitions, replicas,
                                           dict(spec.config)))
            result.verdicts[resource.key] = Verdict(False, "Creating", f"creating {topic}", progressing=True)
    return result.frozen()


def created(done: TopicPlan, refused: Mapping[str, Refusal[Refused]]) -> set[str]:
    """The Kafka topics the plan created (Kafka took their creation)."""
    return {t.name for t in done.creates} - refused.keys()


def settle(done: TopicPlan, refused: Mapping[str, Refusal[Refused]], resources: Iterable[TopicResource],
           actual: Mapping[str, KafkaTopic], cluster: KafkaClusterSpec, brokers: Iterable[int]) -> TopicPlan:
    """The verdicts once the plan was carried out: a topic whose change Kafka refused (`refused`, by Kafka topic)
    says so on the resource that manages it, with a warning Event; each topic it created says it was (an Event),
    and one that Kafka already describes as the spec wants has the verdict the next pass would give it (so that
    its status is written once, not twice)."""
    verdicts = dict(done.verdicts)
    resources = list(resources)
    for resource in resources:
        refusal = refused.get(resource.kafka_name)
        if refusal is not None and resource.key in verdicts and verdicts[resource.key].manage:
            verdicts[resource.key] = Verdict(False, refusal.reason.value, refusal.message, events=refusal.events)
    made = created(done, refused)
    fresh = [r for r in resources
             if r.kafka_name in made and r.key in verdicts and verdicts[r.key].reason == "Creating"]
    again = plan([r for r in fresh if r.kafka_name in actual], actual, cluster, brokers).verdicts
    for resource in fresh:
        event = ("TopicCreated", f"created {resource.kafka_name}", False)
        now = again.get(resource.key)
        verdicts[resource.key] = replace(now if now is not None and now.ready else verdicts[resource.key],
                                         events=(event,))
    return replace(done, verdicts=verdicts)


def withhold(plan: TopicPlan, why: str) -> TopicPlan:
    """The same verdicts with every change withheld (a paused cluster changes nothing)."""
    return TopicPlan(verdicts=withheld(plan.verdicts, "Paused", why))


def partition_report(topic: KafkaTopic) -> dict[str, object]:
    """The status fields that describe a topic's partitions."""
    leaders = Counter(str(p.leader) for p in topic.partitions if p.leader >= 0)
    problems = unhealthy(topic.partitions)
    health = summarize(topic.partitions)
    return {
        "topicName": topic.name, "topicId": topic.topic_id, "partitions": health.total,
        "replicationFactor": topic.replication_factor,
        "underReplicatedPartitions": health.under_replicated,
        "underMinIsrPartitions": health.under_min_isr,
        "offlinePartitions": health.offline,
        "leaders": dict(sorted(leaders.items())),
        "problemPartitions": [{"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas),
                               "isr": list(p.isr)} for p in problems[:MAX_PROBLEM_PARTITIONS]],
    }
