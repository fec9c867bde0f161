"""Lag arithmetic and the metrics snapshot rendered at scrape time."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from krafty.decide.lag import partition_lag
from krafty.metrics import ClusterFacts, KafkaCollector
from krafty.naming import Pool
from krafty.observed import ClusterObservation, NodeState, PartitionState, QuorumState, VoterState


def test_lag_and_retention_headroom():
    committed = {"spark-pageviews": {("views", 0): 900, ("views", 1): 100}, "gone": {("deleted", 0): 5}}
    logs = {("views", 0): (0, 1000), ("views", 1): (90, 1090)}
    lags = {(e.group, e.topic, e.partition): e for e in partition_lag(committed, logs)}
    assert lags[("spark-pageviews", "views", 0)].lag == 100
    assert lags[("spark-pageviews", "views", 1)].lag == 990
    assert lags[("spark-pageviews", "views", 1)].headroom == 0.01  # 10 of 1000 retained records left: danger
    assert ("gone", "deleted", 0) not in lags


def test_snapshot_series_follow_the_cluster_and_disappear_with_it():
    collector = KafkaCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    node = NodeState(0, Pool.BROKER, "c-broker-0", ("broker",), True, True, True, True, registered=True)
    parts = (PartitionState("t", 0, 0, (0, 1), (0,), 2), PartitionState("t", 1, -1, (1, 0), (), 2))
    obs = ClusterObservation((node,), parts, QuorumState(1000, 2, (VoterState(1000, "d", 0), VoterState(1001, "e", 7))))
    collector.set_cluster("ns", "c", ClusterFacts(3, 1, False, True, 0, obs))
    text = generate_latest(registry).decode()
    assert 'krafty_cluster_under_replicated_partitions{cluster="c",namespace="ns"} 2.0' in text
    assert 'krafty_cluster_offline_partitions{cluster="c",namespace="ns"} 1.0' in text
    assert 'krafty_cluster_under_min_isr_partitions{cluster="c",namespace="ns"} 1.0' in text
    assert 'krafty_cluster_quorum_voter_lag{cluster="c",namespace="ns",voter="1001"} 7.0' in text
    assert 'krafty_cluster_roll_in_progress{cluster="c",namespace="ns"} 1.0' in text
    assert 'krafty_cluster_kafka_reachable{cluster="c",namespace="ns"} 1.0' in text
    collector.set_cluster("ns", "c", ClusterFacts(3, 1, False, False, 0, ClusterObservation((node,), None, None)))
    unreachable = generate_latest(registry).decode()
    assert 'krafty_cluster_kafka_reachable{cluster="c",namespace="ns"} 0.0' in unreachable
    assert "krafty_cluster_under_replicated_partitions{" not in unreachable
    collector.set_cluster("ns", "c", None)
    assert 'cluster="c"' not in generate_latest(registry).decode()
