"""The canary's topic and the roll's gate on what it measured, as tables (no Kafka, no threads)."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from krafty.clients.canary import MAX_SAMPLES, Canary, CanarySettings, p99
from krafty.clients.connection import Connection
from krafty.decide import canary
from krafty.decide.canary import GatePosition, TopicChange
from krafty.facts.observed import CanaryReading, PartitionState, PodPhase
from krafty.model import KafkaClusterSpec
from krafty.model.cluster import CanaryGate
from krafty.naming import CANARY_TOPIC
from krafty.planning.actions import Announce, ChangeCanaryTopic, RestartNode
from krafty.planning.cluster import Facts, Pace, PassResult, plan

from ..planning.test_plan import BROKERS, CONTROLLERS, ctx, node, observe, partitions

NOW = datetime.datetime(2026, 11, 27, 6, 0, tzinfo=datetime.UTC)
LONG_CALM = NOW - datetime.timedelta(seconds=31)  # a whole window (30 s) and more


def reading(write_p99: int | None = 40, end_to_end_p99: int | None = 60, written: int = 450, failed: int = 0,
            error: str | None = None) -> CanaryReading:
    return CanaryReading(30, written, failed, write_p99, end_to_end_p99, error)


def canary_partition(partition: int, replicas: tuple[int, ...]) -> PartitionState:
    return PartitionState(CANARY_TOPIC, partition, replicas[0], replicas, replicas, 2)


def test_the_topic_is_made_once_every_broker_is_registered_with_one_partition_led_by_each():
    assert canary.topic_change(True, range(3), {0, 1}, ()) is None
    made = canary.topic_change(True, range(3), {0, 1, 2}, partitions())
    assert made is not None
    assert (made.change, made.replicas, made.total, made.min_isr) == (
        TopicChange.CREATE, ((0, 1, 2), (1, 2, 0), (2, 0, 1)), 3, 2)


@pytest.mark.parametrize(("brokers", "replicas", "min_isr"), [
    (1, ((0,),), 1), (2, ((0, 1), (1, 0)), 1), (5, ((0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1)), 2)])
def test_its_replication_factor_is_the_clusters_up_to_three_and_min_isr_leaves_room_for_a_restart(
        brokers: int, replicas: tuple[tuple[int, ...], ...], min_isr: int):
    made = canary.topic_change(True, range(brokers), set(range(brokers)), ())
    assert made is not None
    assert (made.replicas, made.min_isr) == (replicas, min_isr)


def test_a_broker_added_gets_a_partition_it_leads_with_the_topics_replication_factor():
    existing = (canary_partition(0, (0, 1, 2)), canary_partition(1, (1, 2, 0)), canary_partition(2, (2, 0, 1)))
    grown = canary.topic_change(True, range(5), set(range(5)), existing)
    assert grown is not None
    assert (grown.change, grown.replicas, grown.total) == (TopicChange.ADD_PARTITIONS, ((3, 4, 0), (4, 0, 1)), 5)
    assert canary.topic_change(True, range(3), {0, 1, 2}, existing) is None  # as it should be
    assert canary.topic_change(True, range(5), {0, 1, 2, 3}, existing) is None  # broker 4 not registered yet


def test_turned_off_the_topic_is_deleted_and_nothing_is_decided_without_kafka():
    existing = (canary_partition(0, (0, 1, 2)),)
    deleted = canary.topic_change(False, range(3), {0, 1, 2}, existing)
    assert deleted is not None
    assert deleted.change is TopicChange.DELETE
    assert canary.topic_change(False, range(3), {0, 1, 2}, partitions()) is None
    assert canary.topic_change(True, range(3), {0, 1, 2}, None) is None


@pytest.mark.parametrize(("gate", "found", "position", "message"), [
    (None, reading(9_999), GatePosition.OFF, ""),
    (CanaryGate(produce_p99_milliseconds=500), None, GatePosition.HOLDING, "no figures yet"),
    (CanaryGate(produce_p99_milliseconds=500), reading(written=0), GatePosition.HOLDING, "no figures yet"),
    (CanaryGate(produce_p99_milliseconds=500), reading(501), GatePosition.HOLDING,
     "the canary's acks=all write p99 501 ms is above 500 ms over the last 30 s"),
    (CanaryGate(produce_p99_milliseconds=500), reading(500, 9_999), GatePosition.OPEN,
     "have been within spec.restarts.canaryGate for 31 s"),
    (CanaryGate(end_to_end_p99_milliseconds=1000), reading(40, 1_200), GatePosition.HOLDING,
     "end-to-end p99 1,200 ms is above 1,000 ms"),
    (CanaryGate(end_to_end_p99_milliseconds=1000), reading(40, None), GatePosition.HOLDING,
     "end-to-end p99 unknown is above 1,000 ms"),
    (CanaryGate(produce_p99_milliseconds=500, end_to_end_p99_milliseconds=1000), reading(600, 1_200),
     GatePosition.HOLDING, "write p99 600 ms is above 500 ms and end-to-end p99 1,200 ms is above 1,000 ms"),
    (CanaryGate(produce_p99_milliseconds=500), reading(40, failed=2, error="Local: Message timed out"),
     GatePosition.HOLDING, "2 canary writes failed over the last 30 s (Local: Message timed out)"),
])
def test_the_gate_holds_while_a_p99_is_above_its_threshold_or_unknown_or_writes_fail(
        gate: CanaryGate | None, found: CanaryReading | None, position: GatePosition, message: str):
    decided = canary.gate(gate, found, LONG_CALM, NOW)
    assert decided.position is position
    assert message in decided.message
    assert decided.calm_since == (LONG_CALM if position is GatePosition.OPEN else None)


def test_the_gate_opens_once_the_figures_have_been_within_it_for_a_whole_window():
    gate = CanaryGate(produce_p99_milliseconds=500)
    # the first calm reading after bad ones: calm since now, still held
    first = canary.gate(gate, reading(100), None, NOW)
    assert (first.position, first.calm_since) == (GatePosition.HOLDING, NOW)
    assert first.message == ("the canary's p99s are within spec.restarts.canaryGate since 0 s; a restart waits until "
                             "they have been for a whole window (30 s)")
    # 29 s later, still held; 30 s later, open
    assert canary.gate(gate, reading(100), NOW, NOW + datetime.timedelta(seconds=29)).position is GatePosition.HOLDING
    assert canary.gate(gate, reading(100), NOW, NOW + datetime.timedelta(seconds=30)).position is GatePosition.OPEN
    # one bad reading in between starts the count again
    assert canary.gate(gate, reading(501), NOW, NOW + datetime.timedelta(seconds=40)).calm_since is None


def test_a_gate_needs_a_threshold_and_a_running_canary():
    with pytest.raises(ValidationError, match="produceP99Milliseconds, endToEndP99Milliseconds or both"):
        CanaryGate()
    with pytest.raises(ValidationError, match=r"canaryGate needs canary\.enabled"):
        KafkaClusterSpec.model_validate({"brokers": {"replicas": 3},
                                         "restarts": {"canaryGate": {"produceP99Milliseconds": 500}}})
    with pytest.raises(ValidationError, match="greater than or equal to 20"):
        KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}, "canary": {"intervalMilliseconds": 0}})


def gated(limit: int = 500) -> Any:
    c = ctx()
    spec = c.spec.model_copy(update={
        "canary": c.spec.canary.model_copy(update={"enabled": True}),
        "restarts": c.spec.restarts.model_copy(update={"canary_gate": CanaryGate(produce_p99_milliseconds=limit)})})
    return replace(c, spec=spec)


def rolling(c: Any, found: CanaryReading | None, calm_since: datetime.datetime | None = LONG_CALM) -> Any:
    nodes = [node(i) for i in CONTROLLERS] + [node(i, outdated=True) for i in BROKERS]
    canary_topic = tuple(canary_partition(b, (b, *(x for x in BROKERS if x != b))) for b in BROKERS)
    return plan(c, observe(c, nodes, partitions=partitions() + canary_topic, canary=found, observed_at=NOW),
                Facts(BROKERS, calm_since=calm_since))


def test_a_held_roll_restarts_nothing_says_why_with_the_figures_and_tells_it_once_per_node():
    result = rolling(gated(), reading(1_234))
    assert not [a for a in result.actions if isinstance(a, RestartNode)]
    [told] = [a for a in result.actions if isinstance(a, Announce) and a.reason == "RollHeldByCanary"]
    assert told.message == "prod-broker-0 waits until the canary's p99 is within spec.restarts.canaryGate"
    assert result.status["roll"]["blockedBy"] == ("prod-broker-0 waits: the canary's acks=all write p99 1,234 ms is "
                                                  "above 500 ms over the last 30 s")
    progressing = next(x for x in result.conditions if x.type == "Progressing")
    assert (progressing.reason, progressing.message) == (
        "RollHeldByCanary", "3 of 6 nodes run the current configuration; " + result.status["roll"]["blockedBy"])
    assert result.status["canary"] == {"windowSeconds": 30, "written": 450, "failed": 0,
                                       "produceP99Milliseconds": 1234, "endToEndP99Milliseconds": 60,
                                       "gate": "Holding",
                                       "message": "the canary's acks=all write p99 1,234 ms is above 500 ms over the "
                                                  "last 30 s", "calmSince": None}
    assert result.facts.calm_since is None
    assert (result.result, result.pace) == (PassResult.WAITING, Pace.BUSY)


def test_an_open_gate_or_none_lets_the_roll_restart_the_next_node():
    for c, found in ((gated(), reading(499)), (ctx(), None)):
        result = rolling(c, found)
        [restart] = [a for a in result.actions if isinstance(a, RestartNode)]
        assert restart.node.node_id == 0


def test_calm_figures_are_remembered_in_status_until_they_have_lasted_a_window():
    # Given figures within the gate for the first time (calm since: none remembered)
    result = rolling(gated(), reading(100), calm_since=None)
    # Then nothing restarts yet, and the moment is remembered for the next pass, in status
    assert not [a for a in result.actions if isinstance(a, RestartNode)]
    assert result.facts.calm_since == NOW
    assert result.status["canary"]["calmSince"] == NOW.isoformat()
    assert Facts.from_status({"canary": result.status["canary"]}).calm_since == NOW


def test_a_gate_removed_clears_the_message_in_status():
    # status is merge-patched: a key left out would keep the last Holding message under gate Off
    assert canary.status(reading(), canary.gate(None, reading(), None, NOW)) == {
        "windowSeconds": 30, "written": 450, "failed": 0, "produceP99Milliseconds": 40, "endToEndP99Milliseconds": 60,
        "gate": "Off", "message": None, "calmSince": None}


def test_a_node_that_is_not_running_restarts_whatever_the_canary_says():
    c = gated()
    nodes = [node(i) for i in CONTROLLERS] + [node(0, phase=PodPhase.DOWN, outdated=True), node(1), node(2)]
    result = plan(c, observe(c, nodes, canary=reading(9_999)), Facts(BROKERS))
    [restart] = [a for a in result.actions if isinstance(a, RestartNode)]
    assert restart.node.node_id == 0


def test_the_pass_makes_the_canary_topic_when_the_canary_is_on():
    c = gated()
    [change] = [a for a in plan(c, observe(c), Facts(BROKERS)).actions if isinstance(a, ChangeCanaryTopic)]
    assert change.topic.change is TopicChange.CREATE


def test_p99_is_the_nearest_rank_in_milliseconds():
    assert p99([]) is None
    assert p99([0.010] * 99 + [2.0]) == 10
    assert p99([0.010] * 98 + [2.0, 3.0]) == 2000


class Delivered:
    """A delivery report's message, as librdkafka hands it to the callback."""

    def latency(self) -> float:
        return 0.02


class FullQueue:
    def produce(self, *_: object, **__: object) -> None:
        raise BufferError("Local: Queue full")


def test_the_canary_keeps_a_bounded_number_of_figures_and_counts_a_full_queue_as_failed_writes():
    now = [100.0]
    canary = Canary("ns", "c", CanarySettings(Connection("127.0.0.1:1"), 0.01, 3600), clock=lambda: now[0])
    for sequence in range(MAX_SAMPLES + 500):  # (not started: no thread, no Kafka)
        canary._delivered(sequence, None, Delivered())  # type: ignore[arg-type]
    assert canary.reading().written == MAX_SAMPLES
    canary._send(FullQueue(), 3)  # type: ignore[arg-type]
    found = canary.reading()
    assert (found.failed, found.last_error, found.produce_p99_ms) == (3, "the producer's queue is full", 20)
    now[0] += 3601  # and figures older than the window are let go
    assert (canary.reading().written, canary.reading().failed) == (0, 0)
