"""Topic decisions: what leaves values to the cluster's defaults keeps what it was made with; replica
moves go in batches."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from krafty.decide.topics import (
    MAX_RECORDS_PER_REQUEST,
    MOVE_BATCH,
    KafkaTopic,
    NewTopic,
    Refused,
    TopicPlan,
    TopicResource,
    by_request,
    plan,
    records_to_create,
    settle,
)
from krafty.decide.verdicts import Refusal
from krafty.facts.observed import PartitionState
from krafty.model import KafkaClusterSpec, TopicSpec


def cluster(partitions: int = 3, replication: int = 3) -> KafkaClusterSpec:
    return KafkaClusterSpec.model_validate({"brokers": {"replicas": 5}, "topicDefaults": {
        "partitions": partitions, "replicationFactor": replication, "minInsyncReplicas": 1}})


def resource(name: str, created_with: tuple[int, int] | None = (3, 3), **spec: object) -> TopicResource:
    return TopicResource("ns", name, "2026-01-01T00:00:00Z",
                         TopicSpec.model_validate({"clusterRef": {"name": "c"}, **spec}), managed=True,
                         created_with=created_with)


def kafka_topic(name: str, partitions: int = 3, replication: int = 3) -> KafkaTopic:
    parts = tuple(PartitionState(name, p, p % 5, tuple((p + i) % 5 for i in range(replication)),
                                 tuple((p + i) % 5 for i in range(replication)), 1) for p in range(partitions))
    return KafkaTopic(name, "id", parts, {})


def test_changing_topic_defaults_changes_no_existing_topic():
    # Given a topic made with the defaults of the time (3 partitions, RF 3)
    topics = [resource("events")]
    actual = {"events": kafka_topic("events")}
    # When the cluster's defaults go to 12 partitions and RF 2
    result = plan(topics, actual, cluster(partitions=12, replication=2), range(5))
    # Then the topic neither grows nor moves, and a new topic gets the new defaults
    assert (result.partition_counts, result.reassignments) == ({}, {})
    assert result.verdicts[("ns", "events")].ready
    fresh = plan([resource("new", created_with=None)], {}, cluster(partitions=12, replication=2), range(5))
    assert [(t.partitions, t.replicas) for t in fresh.creates] == [(12, 2)]
    assert fresh.created_with[("ns", "new")] == (12, 2)


def test_values_the_spec_sets_still_win():
    result = plan([resource("events", partitions=6, replicas=2)], {"events": kafka_topic("events")}, cluster(),
                  range(5))
    assert result.partition_counts == {"events": 6}
    assert all(len(r) == 2 for r in result.reassignments.values())


def test_a_topic_managed_before_created_with_was_recorded_keeps_what_it_has():
    result = plan([resource("old", created_with=None)], {"old": kafka_topic("old", 4, 2)}, cluster(), range(5))
    assert (result.partition_counts, result.reassignments) == ({}, {})
    assert result.created_with[("ns", "old")] == (4, 2)


def test_replica_moves_wait_while_others_are_in_flight_and_go_in_batches():
    # Given two topics whose replication factor goes from 1 to 3
    big = kafka_topic("big", partitions=MOVE_BATCH - 10, replication=1)
    small = kafka_topic("small", partitions=20, replication=1)
    wanted = [resource("big", created_with=None, replicas=3), resource("small", created_with=None, replicas=3)]
    # While Kafka still moves replicas, none starts
    waiting = plan(wanted, {"big": big, "small": small}, cluster(), range(5), moving=4)
    assert waiting.reassignments == {}
    assert "4 partition moves in flight" in waiting.verdicts[("ns", "big")].message
    # Then one batch at a time: the second topic would take it over the batch size, so it waits its turn
    first = plan(wanted, {"big": big, "small": small}, cluster(), range(5))
    assert {topic for topic, _ in first.reassignments} == {"big"}
    assert "other topics" in first.verdicts[("ns", "small")].message
    assert first.verdicts[("ns", "small")].target_replicas == 3


def test_only_the_topics_a_plan_changes_are_read_again():
    actual = {name: kafka_topic(name) for name in ("calm", "grows", "reconfigured", "moved")}
    wanted = [resource("calm"), resource("grows", partitions=6), resource("reconfigured", config={"retention.ms": 1}),
              resource("moved", replicas=2), resource("new", created_with=None)]
    result = plan(wanted, actual, cluster(), range(5))
    assert result.touched() == {"grows", "reconfigured", "moved", "new"}
    assert plan([resource("calm")], actual, cluster(), range(5)).touched() == set()


def test_creates_go_in_requests_kafka_accepts():
    # a record per topic, per partition and per config entry
    assert records_to_create(NewTopic("t", 4, 3, {"retention.ms": "1"})) == 6
    assert by_request({"a": 4000, "b": 4000, "c": 4000, "d": 1}) == [["a", "b"], ["c", "d"]]
    assert by_request({"a": MAX_RECORDS_PER_REQUEST, "b": 1}) == [["a"], ["b"]]
    # one topic above the limit goes alone (Kafka's refusal names it) and holds no other back
    assert by_request({"a": 1, "huge": MAX_RECORDS_PER_REQUEST + 1, "b": 1}) == [["a"], ["huge"], ["b"]]
    assert by_request({}) == []


def test_a_topic_created_and_described_as_wanted_is_reported_ready_at_once():
    # Given three new Topics: one Kafka describes after creating it, one not yet, one Kafka refused
    wanted = [resource(name, created_with=None, config={"retention.ms": 1000}) for name in ("made", "slow", "refused")]
    done = plan(wanted, {}, cluster(), range(5))
    refusal = Refusal(Refused.INVALID, "Kafka refused it: INVALID_CONFIG")
    made = replace(kafka_topic("made"), overrides={"retention.ms": "1000"})
    settled = settle(done, {"refused": refusal}, wanted, {"made": made}, cluster(), range(5)).verdicts
    # Then the described one has the verdict the next pass would give it (its status written once), each created
    # one says so in an Event, and the refused one says what Kafka answered, in a warning
    assert settled[("ns", "made")] == replace(plan([wanted[0]], {"made": made}, cluster(), range(5)).verdicts[
        ("ns", "made")], events=(("TopicCreated", "created made", False),))
    assert (settled[("ns", "made")].ready, settled[("ns", "made")].progressing) == (True, False)
    assert (settled[("ns", "slow")].reason, settled[("ns", "slow")].events) == \
        ("Creating", (("TopicCreated", "created slow", False),))
    assert settled[("ns", "refused")] == replace(
        settled[("ns", "refused")], ready=False, progressing=False, reason="InvalidConfig",
        message=refusal.message, events=(("InvalidConfig", refusal.message, True),))
    # And the plan it settled is as it was: nothing changed it
    assert done == plan(wanted, {}, cluster(), range(5))


def test_what_kafka_refused_marks_only_the_resource_that_manages_the_topic():
    # Given a managed Topic, a second one claiming its Kafka topic, and one whose spec is invalid
    older = resource("older", partitions=6)
    younger = replace(resource("younger", partitions=6), created="2026-02-01T00:00:00Z", managed=False,
                      spec=TopicSpec.model_validate({"clusterRef": {"name": "c"}, "topicName": "older",
                                                     "partitions": 6}))
    broken = resource("broken", replicas=9)  # (more than the cluster's brokers)
    resources = [older, younger, broken]
    actual = {"older": kafka_topic("older"), "broken": kafka_topic("broken")}
    done = plan(resources, actual, cluster(), range(5))
    assert (done.verdicts[younger.key].reason, done.verdicts[broken.key].reason) == ("Conflict", "InvalidSpec")
    for reason in Refused:
        # When Kafka refuses a change to each Kafka topic
        refused = {"older": Refusal(reason, "no"), "broken": Refusal(reason, "no")}
        settled = settle(done, refused, resources, actual, cluster(), range(5)).verdicts
        # Then the managing resource says so with Kafka's answer; the loser and the invalid one keep theirs
        assert (settled[older.key].reason, settled[older.key].ready, settled[older.key].events) == \
            (reason.value, False, ((reason.value, "no", True),))
        assert settled[younger.key] == done.verdicts[younger.key]
        assert settled[broken.key] == done.verdicts[broken.key]
    # And with nothing refused and nothing created, settling changes no verdict
    assert settle(done, {}, resources, actual, cluster(), range(5)) == done


def test_a_new_topic_waits_for_as_many_registered_brokers_as_replicas():
    # Given a new cluster whose third broker has not registered yet (Kafka would refuse RF 3: "only 2 brokers")
    # (brokers 2, 3 and 4 still hold replicas of a topic: they count only once registered)
    wanted = [resource("three", created_with=None), resource("two", created_with=None, replicas=2)]
    early = plan(wanted, {"old": kafka_topic("old", partitions=5, replication=1)}, cluster(), [0, 1])
    # Then the RF 3 topic waits, saying why, and is looked at again soon; the RF 2 topic is created now
    waiting = early.verdicts[("ns", "three")]
    assert (waiting.ready, waiting.reason, waiting.progressing) == (False, "WaitingForBrokers", True)
    assert waiting.message == "waiting for 3 brokers to place 3 replicas of three on: 2 registered with the " \
                              "controllers so far"
    assert [t.name for t in early.creates] == ["two"]
    assert ("ns", "three") not in early.created_with
    # And once the third registers, it is created
    assert [t.name for t in plan(wanted, {}, cluster(), [1, 0, 2]).creates] == ["three", "two"]


def _unmanaged(name: str, **spec: object) -> TopicResource:
    return replace(resource(name, created_with=None, **spec), managed=False)


# One pass over one Topic, whole: (the resource, what Kafka holds, what Kafka refuses) -> (what the pass asks Kafka
# for, and the verdict its status is written from)
PASSES = {
    "new, created": (resource("t", created_with=None), None, None,
                     ("create t 3x3", "TopicCreated"), ("Creating", False)),
    "new, refused": (resource("t", created_with=None, config={"retention.ms": 1000}), None, Refused.INVALID,
                     ("create t 3x3",), ("InvalidConfig", False)),
    "calm": (resource("t"), kafka_topic("t"), None, (), ("TopicReady", True)),
    "spec changed: applied, no drift said": (resource("t", config={"retention.ms": 60000}), kafka_topic("t"), None,
                                             ("config t retention.ms=60000",), ("Updating", False)),
    "grown": (resource("t", partitions=6), kafka_topic("t"), None, ("partitions t 6",), ("Updating", False)),
    "grown, refused when applied": (resource("t", partitions=6), kafka_topic("t"), Refused.APPLY,
                                    ("partitions t 6",), ("ApplyFailed", False)),
    "config drift put back": (replace(resource("t", config={"retention.ms": 60000}), settled=True),
                              replace(kafka_topic("t"), overrides={"retention.ms": "1"}), None,
                              ("config t retention.ms=60000", "DriftReverted"), ("Updating", False)),
    "RF raised, moved": (resource("t", replicas=4), kafka_topic("t"), None, ("move t 3",), ("Updating", False)),
    "RF move refused": (resource("t", replicas=4), kafka_topic("t"), Refused.REASSIGNMENT, ("move t 3",),
                        ("ReassignmentFailed", False)),
    "shrink asked": (resource("t", partitions=2), kafka_topic("t"), None, (), ("PartitionsAboveSpec", False)),
    "adopted as it is": (_unmanaged("t"), kafka_topic("t"), None, ("TopicAdopted",), ("TopicReady", True)),
    "adoption held": (_unmanaged("t", partitions=6), kafka_topic("t"), None, (), ("AdoptionPending", False)),
    "invalid spec": (resource("t", replicas=9), kafka_topic("t"), None, (), ("InvalidSpec", False)),
}


def _asked(done: TopicPlan) -> tuple[str, ...]:
    return (*(f"create {t.name} {t.partitions}x{t.replicas}" for t in done.creates),
            *(f"partitions {name} {count}" for name, count in done.partition_counts.items()),
            *(f"config {name} " + ",".join(f"{k}={v}" for k, v in change.items())
              for name, change in done.config_changes.items()),
            *(f"move {topic} {count}" for topic, count in Counter(t for t, _ in done.reassignments).items()))


@pytest.mark.parametrize(("topic", "before", "refusal", "asked", "verdict"), PASSES.values(), ids=PASSES.keys())
def test_one_pass_over_a_topic(topic: TopicResource, before: KafkaTopic | None, refusal: Refused | None,
                               asked: tuple[str, ...], verdict: tuple[str, bool]):
    # Given a Topic and what Kafka holds, When a pass plans, Kafka answers (or refuses), and the pass settles
    actual = {before.name: before} if before else {}
    done = plan([topic], actual, cluster(), range(5))
    refused = {topic.kafka_name: Refusal(refusal, "Kafka said no")} if refusal else {}
    settled = settle(done, refused, [topic], actual, cluster(), range(5)).verdicts[topic.key]
    # Then the pass asked Kafka for exactly these changes, said these Events, and reports this verdict
    events = tuple(reason for reason, _, _ in settled.events if reason != (refusal.value if refusal else None))
    assert (*_asked(done), *events) == asked
    assert (settled.reason, settled.ready) == verdict
