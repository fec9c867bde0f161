"""The disk pass against real brokers: each broker's log directory, the size of the file system under it and the
bytes still free on it (DescribeLogDirs), equal to what the file system itself says; a broker that does not
answer has no series rather than a stale one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from krafty.clients.connection import Connection
from krafty.reconcile.disks import DISK_INTERVAL, DiskPass
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster

NS, CLUSTER = "disks", "local"
MIB = 2**20


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(3))


def series(name: str) -> dict[tuple[str, str], float]:
    """(broker, log dir) -> value of this test's cluster."""
    out = {}
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == name and (sample.labels["namespace"], sample.labels["cluster"]) == (NS, CLUSTER):
                out[(sample.labels["broker"], sample.labels["log_dir"])] = sample.value
    return out


def _pass(kafka: LocalKafkaCluster) -> DiskPass:
    def locate(namespace: str, cluster: str) -> Connection | None:
        return kafka.connection if (namespace, cluster) == (NS, CLUSTER) else None
    return DiskPass(locate)


def test_each_broker_reports_its_volume_as_the_file_system_does(kafka: LocalKafkaCluster):
    # When the disk pass runs
    assert _pass(kafka).reconcile(NS, CLUSTER) == DISK_INTERVAL
    # Then each broker's log directory has its file system's size and free bytes, and is online
    total, usable = series("krafty_broker_log_dir_total_bytes"), series("krafty_broker_log_dir_usable_bytes")
    online = series("krafty_broker_log_dir_online")
    expected = {(str(n.node_id), str(n.directory / "data")) for n in kafka.brokers}
    assert set(total) == set(usable) == set(online) == expected
    for (_, log_dir), size in total.items():
        fs = os.statvfs(Path(log_dir))
        assert size == fs.f_blocks * fs.f_frsize
        assert abs(usable[(_, log_dir)] - fs.f_bavail * fs.f_frsize) < 64 * MIB  # other tests write meanwhile
        assert online[(_, log_dir)] == 1


def test_a_broker_that_does_not_answer_has_no_series_and_the_others_keep_theirs(kafka: LocalKafkaCluster):
    stopped = kafka.brokers[1]
    kafka.stop_node(stopped.node_id)
    try:
        _pass(kafka).reconcile(NS, CLUSTER)
        brokers = {broker for broker, _ in series("krafty_broker_log_dir_total_bytes")}
        assert brokers == {str(n.node_id) for n in kafka.brokers} - {str(stopped.node_id)}
    finally:
        kafka.start_node(stopped.node_id)
        kafka.wait_ready()
    _pass(kafka).reconcile(NS, CLUSTER)
    assert len(series("krafty_broker_log_dir_total_bytes")) == len(kafka.brokers)


def test_a_cluster_that_is_gone_ends_the_pass():
    assert DiskPass(lambda _ns, _c: None).reconcile(NS, "gone") is None
