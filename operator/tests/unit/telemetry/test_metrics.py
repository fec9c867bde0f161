"""Lag arithmetic and the metrics snapshot rendered at scrape time."""

from __future__ import annotations

import threading
import time

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.registry import CollectorRegistry

from krafty.decide.lag import LagRead, LogRange, Retention, SelectedGroups, partition_lag
from krafty.facts.observed import ClusterObservation, NodeState, PartitionState, PodPhase, QuorumState, VoterState
from krafty.naming import Pool
from krafty.telemetry.metrics import ClusterFacts, KafkaCollector, timed_pass


def _collector() -> tuple[KafkaCollector, CollectorRegistry]:
    collector = KafkaCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    return collector, registry


def test_snapshot_series_follow_the_cluster_and_disappear_with_it():
    collector, registry = _collector()
    node = NodeState(0, Pool.BROKER, "c-broker-0", ("broker",), PodPhase.READY, True, registered=True)
    parts = (PartitionState("t", 0, 0, (0, 1), (0,), 2), PartitionState("t", 1, -1, (1, 0), (), 2))
    obs = ClusterObservation((node,), parts, QuorumState(1000, 2, (VoterState(1000, "d", 0), VoterState(1001, "e", 7))))
    collector.set_cluster("ns", "c", ClusterFacts(3, 1, False, True, True, 0, obs))
    text = generate_latest(registry).decode()
    assert 'krafty_cluster_under_replicated_partitions{cluster="c",namespace="ns"} 2.0' in text
    assert 'krafty_cluster_offline_partitions{cluster="c",namespace="ns"} 1.0' in text
    assert 'krafty_cluster_under_min_isr_partitions{cluster="c",namespace="ns"} 1.0' in text
    assert 'krafty_cluster_quorum_voter_lag{cluster="c",namespace="ns",voter="1001"} 7.0' in text
    assert 'krafty_cluster_roll_in_progress{cluster="c",namespace="ns"} 1.0' in text
    assert 'krafty_cluster_kafka_reachable{cluster="c",namespace="ns"} 1.0' in text
    assert 'krafty_cluster_available{cluster="c",namespace="ns"} 1.0' in text
    collector.set_cluster("ns", "c", ClusterFacts(3, 1, False, None, False, 0, ClusterObservation((node,), None, None)))
    unreachable = generate_latest(registry).decode()
    assert 'krafty_cluster_kafka_reachable{cluster="c",namespace="ns"} 0.0' in unreachable
    assert "krafty_cluster_under_replicated_partitions{" not in unreachable
    assert "krafty_cluster_available{" not in unreachable
    collector.set_cluster("ns", "c", None)
    assert 'cluster="c"' not in generate_latest(registry).decode()


def test_lag_series_are_complete_or_absent_and_the_unknown_gauge_says_which():
    # Given one group read completely and one partition of another topic whose log end could not be read
    collector, registry = _collector()
    read = LagRead({"g": {("a", 0): 5, ("b", 0): 1, ("b", 1): 2}}, frozenset(),
                   {("a", 0): LogRange(0, 10), ("b", 0): LogRange(0, 4), ("b", 1): None})
    collector.set_lag("ns", "c", partition_lag(read))
    text = generate_latest(registry).decode()
    # Then topic a has its sum, topic b has none (never a smaller one) and says one partition is unknown
    assert 'krafty_consumergroup_lag_sum{cluster="c",group="g",namespace="ns",topic="a"} 5.0' in text
    assert 'krafty_consumergroup_lag_sum{cluster="c",group="g",namespace="ns",topic="b"}' not in text
    assert 'krafty_consumergroup_retention_headroom_ratio{cluster="c",group="g",namespace="ns",topic="b"}' not in text
    assert 'krafty_consumergroup_lag_unknown_partitions{cluster="c",group="g",namespace="ns",topic="b"} 1.0' in text
    assert 'krafty_consumergroup_lag_unknown_partitions{cluster="c",group="g",namespace="ns",topic="a"} 0.0' in text
    assert 'krafty_consumergroup_lag{cluster="c",group="g",namespace="ns",partition="0",topic="b"} 3.0' in text


def test_lag_in_seconds_and_the_retention_forecast_are_per_partition_and_absent_where_unknown():
    collector, registry = _collector()
    read = LagRead({"g": {("a", 0): 5, ("a", 1): 9, ("b", 0): 1}}, frozenset(),
                   {("a", 0): LogRange(0, 10), ("a", 1): LogRange(0, 9), ("b", 0): LogRange(0, 4)}, at=100.0,
                   timestamps={("a", 0, 5): 40_000, ("b", 0, 1): None}, retention={"a": Retention(600.0)})
    collector.set_lag("ns", "c", partition_lag(read))
    text = generate_latest(registry).decode()
    labels = 'cluster="c",group="g",namespace="ns"'
    assert f'krafty_consumergroup_lag_seconds{{{labels},partition="0",topic="a"}} 60.0' in text
    assert f'krafty_consumergroup_retention_seconds_left{{{labels},partition="0",topic="a"}} 540.0' in text
    # a group that read everything is 0 s behind and not heading for any loss
    assert f'krafty_consumergroup_lag_seconds{{{labels},partition="1",topic="a"}} 0.0' in text
    assert f'krafty_consumergroup_retention_seconds_left{{{labels},partition="1",topic="a"}} +Inf' in text
    # an unreadable timestamp has no series, never a 0
    assert 'krafty_consumergroup_lag_seconds{' + labels + ',partition="0",topic="b"}' not in text
    assert 'topic="b"' in text  # (its lag in records is there)
    # the risk is told for topics read whole (a: 540 s left of 600, more than half), not for b
    assert f'krafty_consumergroup_retention_risk{{{labels},risk="Safe",topic="a"}} 1.0' in text
    assert 'krafty_consumergroup_retention_risk{' + labels + ',risk="Safe",topic="b"}' not in text


def test_every_pass_outcome_is_shown_and_replaces_the_one_before():
    # Given a cluster whose pass reconciled, then found the spec invalid
    collector, registry = _collector()
    collector.set_pass("ns", "c", "reconciled", 1000.0)
    collector.set_pass("ns", "c", "invalid", 1030.0)
    text = generate_latest(registry).decode()
    # Then only the last outcome is 1, with when it ended
    assert 'krafty_cluster_last_pass_result{cluster="c",namespace="ns",result="invalid"} 1.0' in text
    assert 'result="reconciled"' not in text
    assert 'krafty_cluster_last_pass_timestamp_seconds{cluster="c",namespace="ns"} 1030.0' in text
    # And a deleted cluster takes its series along
    collector.set_cluster("ns", "c", None)
    assert 'cluster="c"' not in generate_latest(registry).decode()


def test_the_groups_left_out_of_lag_collection_are_counted():
    collector, registry = _collector()
    collector.set_lag_groups("ns", "c", SelectedGroups(("a", "b"), excluded=3, over_limit=995,
                                                       types={"a": "classic", "b": "share"}))
    text = generate_latest(registry).decode()
    assert 'krafty_consumergroup_info{cluster="c",group="b",namespace="ns",type="share"} 1.0' in text
    assert 'krafty_consumergroup_lag_groups{cluster="c",namespace="ns",state="read"} 2.0' in text
    assert 'krafty_consumergroup_lag_groups{cluster="c",namespace="ns",state="excluded"} 3.0' in text
    assert 'krafty_consumergroup_lag_groups{cluster="c",namespace="ns",state="over_limit"} 995.0' in text


def _spin(seconds: float) -> None:
    """Uses this much CPU on the calling thread."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def _pass_sums(kind: str) -> tuple[float, float]:
    """(CPU seconds, seconds) of this kind's passes so far."""
    return (REGISTRY.get_sample_value("krafty_reconcile_cpu_seconds_total", {"kind": kind}) or 0.0,
            REGISTRY.get_sample_value("krafty_reconcile_duration_seconds_sum", {"kind": kind}) or 0.0)


def test_a_pass_counts_the_cpu_of_its_own_thread_beside_its_duration():
    cpu, wall = _pass_sums("probe")
    # Given a pass that computes for 0.1 s of CPU, waits 0.3 s, and meanwhile another thread computes 0.2 s
    other = threading.Thread(target=_spin, args=(0.2,))
    with timed_pass("probe"):
        other.start()
        _spin(0.1)
        time.sleep(0.3)
        other.join()
    cpu_after, wall_after = _pass_sums("probe")
    # Then its CPU counts the pass's own computing only, its duration the whole of it
    assert 0.1 <= cpu_after - cpu < 0.25  # (the other thread's 0.2 s would make it 0.3)
    assert wall_after - wall >= 0.4
