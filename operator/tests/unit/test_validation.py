"""The semantic validator: what Kafka or another resource would refuse, found before anything changes."""

from __future__ import annotations

import pytest

from krafty.model import KafkaClusterSpec, TopicSpec
from krafty.validation import check_config, validate_cluster, validate_topic

CLUSTER = KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}})


def topic(**spec):
    return TopicSpec.model_validate({"clusterRef": {"name": "prod"}, **spec})


@pytest.mark.parametrize(("config", "expected"), [
    ({"retention.ms": "604800000", "cleanup.policy": "compact,delete", "compression.type": "ZSTD"}, []),
    ({"retention.ms": "-1", "min.insync.replicas": "2", "max.message.bytes": "1048588"}, []),
    ({"retention.msec": "1"}, ["spec.config.retention.msec: not a topic configuration of Kafka 4.3.1"]),
    ({"retention.ms": "seven days"}, ["spec.config.retention.ms: 'seven days' is not a number"]),
    ({"retention.ms": "-5"}, ["spec.config.retention.ms: -5 is outside the allowed range [-1,...]"]),
    ({"segment.bytes": "1.5"}, ["spec.config.segment.bytes: '1.5' is not a valid int"]),
    ({"segment.bytes": "99999999999"}, ["spec.config.segment.bytes: '99999999999' is not a valid int"]),
    ({"cleanup.policy": "compact,forever"}, ["spec.config.cleanup.policy: forever is not one of compact, delete"]),
    ({"compression.type": "brotli"},
     ["spec.config.compression.type: brotli is not one of uncompressed, zstd, lz4, snappy, gzip, producer"]),
    ({"unclean.leader.election.enable": "yes"},
     ["spec.config.unclean.leader.election.enable: 'yes' is not true or false"]),
    ({"min.cleanable.dirty.ratio": "1.5"},
     ["spec.config.min.cleanable.dirty.ratio: 1.5 is outside the allowed range [0,...,1]"]),
])
def test_topic_config_values(config, expected):
    assert [str(p) for p in check_config("topic", config, "spec.config")] == expected


@pytest.mark.parametrize(("spec", "expected"), [
    ({"partitions": 6, "replicas": 3, "config": {"min.insync.replicas": "2"}}, []),
    ({}, []),
    ({"replicas": 4}, ["spec.replicas: 4 replicas cannot be placed on 3 brokers"]),
    ({"replicas": 3, "config": {"min.insync.replicas": "3"}},
     ["spec.config.min.insync.replicas: min.insync.replicas (3) equals the replication factor (3): any broker restart "
      "would stop acks=all writes and block rolling restarts; use at most 2"]),
    ({"replicas": 2, "config": {"min.insync.replicas": "3"}},
     ["spec.config.min.insync.replicas: min.insync.replicas (3) exceeds the replication factor (2): no acks=all write "
      "could ever be acknowledged"]),
    ({"replicas": 1}, ["spec.replicas: 1 replicas is below the cluster's min.insync.replicas (2): set config "
                       "min.insync.replicas or raise replicas"]),
    ({"replicas": 1, "config": {"min.insync.replicas": "1"}}, []),
])
def test_topic_against_its_cluster(spec, expected):
    assert [str(p) for p in validate_topic("events", topic(**spec), CLUSTER)] == expected


def test_topic_of_a_missing_cluster():
    problems = validate_topic("events", topic(), None)
    assert [str(p) for p in problems] == ["spec.clusterRef.name: KafkaCluster 'prod' does not exist in this namespace"]


def test_long_resource_name_needs_a_topic_name():
    assert validate_topic("a" * 253, topic(), CLUSTER)[0].field == "spec.topicName"


@pytest.mark.parametrize(("spec", "expected"), [
    ({"brokers": {"replicas": 3, "config": {"num.io.threads": 16, "log.retention.ms": "86400000"}}}, []),
    ({"brokers": {"replicas": 3, "config": {"num.io.thread": 16}}},
     ["spec.brokers.config.num.io.thread: not a broker configuration of Kafka 4.3.1"]),
    ({"brokers": {"replicas": 3, "config": {"num.io.threads": 0}}},
     ["spec.brokers.config.num.io.threads: 0 is outside the allowed range [1,...]"]),
    ({"brokers": {"replicas": 3}, "topicDefaults": {"replicationFactor": 3, "minInsyncReplicas": 3}},
     ["spec.topicDefaults.minInsyncReplicas: min.insync.replicas (3) equals the replication factor (3): any broker "
      "restart would stop acks=all writes and block rolling restarts; use at most 2"]),
    ({"brokers": {"replicas": 3, "jvm": {"heap": "2Gi"}, "resources": {"limits": {"memory": "2Gi"}}}},
     ["spec.brokers.jvm.heap: heap 2Gi leaves no room under the memory limit 2Gi (page cache and off-heap memory "
      "need some): lower it"]),
])
def test_cluster_spec(spec, expected):
    assert [str(p) for p in validate_cluster(KafkaClusterSpec.model_validate(spec))] == expected


def test_replication_throttles_are_the_operators_own():
    # Given throttles set by hand, the operator would remove them after its next replica move: refused
    cluster = KafkaClusterSpec.model_validate(
        {"brokers": {"replicas": 3, "config": {"leader.replication.throttled.rate": "1048576"}}})
    assert [str(p) for p in validate_cluster(cluster)] == [
        "spec.brokers.config.leader.replication.throttled.rate: not a broker configuration of Kafka 4.3.1"]
    problems = validate_topic("t", topic(config={"follower.replication.throttled.replicas": "*"}), CLUSTER)
    assert [p.field for p in problems] == ["spec.config.follower.replication.throttled.replicas"]
    assert "set by the operator while replicas move" in problems[0].message
