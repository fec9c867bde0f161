"""Topic decisions: what leaves values to the cluster's defaults keeps what it was made with; replica
moves go in batches."""

from __future__ import annotations

from dataclasses import replace

from krafty.decide.topics import (
    MAX_RECORDS_PER_REQUEST,
    MOVE_BATCH,
    KafkaTopic,
    NewTopic,
    TopicResource,
    by_request,
    plan,
    records_to_create,
    settle,
)
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
    done.verdicts[("ns", "refused")] = replace(done.verdicts[("ns", "refused")], reason="InvalidConfig",
                                                progressing=False)
    made = replace(kafka_topic("made"), overrides={"retention.ms": "1000"})
    settled = settle(done, wanted, {"made": made}, cluster(), range(5)).verdicts
    # Then the described one has the verdict the next pass would give it (its status written once), each created
    # one says so in an Event, and the others keep theirs
    assert settled[("ns", "made")] == replace(plan([wanted[0]], {"made": made}, cluster(), range(5)).verdicts[
        ("ns", "made")], events=(("TopicCreated", "created made", False),))
    assert (settled[("ns", "made")].ready, settled[("ns", "made")].progressing) == (True, False)
    assert (settled[("ns", "slow")].reason, settled[("ns", "slow")].events) == \
        ("Creating", (("TopicCreated", "created slow", False),))
    assert (settled[("ns", "refused")].reason, settled[("ns", "refused")].events) == ("InvalidConfig", ())


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
