"""A combined quorum's voters changed on real pods, 3 -> 5 -> 3, under acks=all load: brokers 3 and 4 restart
with the controller role and become voters, then leave the voters and restart as brokers only; the quorum keeps a
leader and its metadata throughout (kafka-metadata-quorum.sh after each step)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import pytest

from krafty_testkit.k8s_kafka import (
    ClientPod,
    KafkaClusterHandle,
    assert_written,
    cluster_spec,
    delete_topics,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

# about 5 min: two rolls of five brokers; CI changes a dedicated quorum's voters
pytestmark = [pytest.mark.full, pytest.mark.timeout(1800)]
TOPIC = "voting-load"


@pytest.fixture(scope="module")
def voting(operator: KubeCluster) -> Iterator[KafkaClusterHandle]:
    handle = KafkaClusterHandle(operator, "voting")
    handle.apply(cluster_spec("combined", brokers=5, controllers=3))
    handle.wait_ready(900)
    yield handle
    delete_topics(operator, TOPIC)
    handle.delete(600)


def quorum_described(handle: KafkaClusterHandle) -> tuple[int, list[int], list[int]]:
    """(leader, voters, observers) as kafka-metadata-quorum.sh describes them."""
    out = handle.kafka_tool("kafka-metadata-quorum.sh", "describe", "--status", timeout=60)
    leader = re.search(r"LeaderId:\s+(-?\d+)", out)
    ids = {name: sorted(int(n) for line in out.splitlines() if line.startswith(f"{name}:")
                        for n in re.findall(r'"id":\s*(\d+)', line)) for name in ("CurrentVoters", "CurrentObservers")}
    return int(leader.group(1)) if leader else -1, ids["CurrentVoters"], ids["CurrentObservers"]


def test_combined_voters_3_to_5_to_3_under_load_keep_a_leader_and_the_metadata(
        voting: KafkaClusterHandle, client: ClientPod, operator: KubeCluster):
    seen: list[tuple[float, int]] = []
    stop = threading.Event()

    def watch_leader() -> None:
        while not stop.is_set():
            try:
                seen.append((time.monotonic(), quorum_described(voting)[0]))
            except Exception:  # a broker exec'd into restarting: the next look counts  # noqa: BLE001
                time.sleep(1)

    operator.apply([topic_resource(TOPIC, "voting", partitions=6, replicas=3, config={"min.insync.replicas": 2})])
    wait_topic_ready(operator, TOPIC)
    watcher = threading.Thread(target=watch_leader, daemon=True)
    rows, created = [], []
    try:
        with client.steady_producer(voting.bootstrap, TOPIC, rate=50) as report:
            watcher.start()
            for size in (5, 3):
                step = time.monotonic()
                voting.patch_spec({"controllers": {"replicas": size}})
                wait_for(lambda: voting.status().get("quorum", {}).get("voters"),
                         lambda voters, n=size: voters == list(range(n)), 1800, f"{size} voters")
                voting.wait_ready(1800)
                # Then Kafka's own tool shows the voters asked for, the others observers only
                leader, voters, observers = wait_for(lambda: quorum_described(voting),
                                                     lambda q, n=size: q[1] == list(range(n)), 120,
                                                     "the voters as kafka-metadata-quorum.sh describes them")
                assert leader in voters
                assert set(observers) >= set(range(size, 5)), observers
                # And metadata changes keep working
                name = f"voting-step-{size}"
                # (RF 3: with min.insync.replicas 2, a partition of two replicas holds every later restart)
                operator.apply([topic_resource(name, "voting", partitions=1, replicas=3)])
                wait_topic_ready(operator, name)
                created.append(name)
                rows.append([f"3 -> {size}" if size == 5 else "5 -> 3", f"{time.monotonic() - step:.0f}",
                             str(voters), str(observers), str(leader)])
    finally:
        stop.set()
        watcher.join(90)
    verified = client.verify(voting.bootstrap, TOPIC)
    report_table("A combined quorum's voters changed under 50 records/s (acks=all)",
                 ["step", "took (s)", "voters", "observers", "leader"], rows)
    assert_written(report)
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    assert seen, "the quorum was never described"
    assert all(leader >= 0 for _, leader in seen), f"moments without a leader: {seen}"
    # Each new voter restarted into the controller role before it voted, each leaving one after it stopped voting
    assert {f"controller {node} added to the KRaft voters" for node in (3, 4)} <= {
        e["message"] for e in voting.events("VoterAdded")}, voting.events("VoterAdded")
    removed = {e["message"] for e in voting.events("VoterRemoved")}
    assert {f"controller {node} removed from the KRaft voters" for node in (3, 4)} <= removed, removed
    topics = set(voting.kafka_tool("kafka-topics.sh", "--list").split())
    assert {TOPIC, *created} <= topics
    delete_topics(operator, *created)
