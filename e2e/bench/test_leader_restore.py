"""Benchmark: after a rolling restart, the time from the last broker Ready to every partition led by
its preferred replica, three ways on the same cluster:
  the operator (leaderBalance.mode Operator), kafka-leader-election --all-topic-partitions run
  from that moment until it succeeds (mode Disabled), and Kafka's own auto.leader.rebalance at its
  default 300 s interval (mode Kafka)."""

from __future__ import annotations

import calendar
import threading
import time
from typing import Any

import pytest

from krafty_testkit.k8s_kafka import (
    ClientPod,
    KafkaClusterHandle,
    cluster_spec,
    delete_topics,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

pytestmark = pytest.mark.bench
ROUNDS = 2  # the three ways in turn, then in the reverse order: none always follows the same one


def last_broker_ready(handle: KafkaClusterHandle, before: dict[str, str]) -> float:
    """Waits until every broker pod was replaced and is Ready; returns when the last became Ready (epoch)."""
    def ready_times(_: object) -> bool:
        pods = handle.pods("broker")
        return len(pods) == len(before) and all(
            p["metadata"]["uid"] != before[p["metadata"]["name"]] and any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
            for p in pods)

    wait_for(handle.summary, ready_times, 1200, "every broker restarted and Ready", interval=1)
    stamps = [next(c["lastTransitionTime"] for c in p["status"]["conditions"] if c["type"] == "Ready")
              for p in handle.pods("broker")]
    return max(calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ")) for s in stamps)


def roll(handle: KafkaClusterHandle, patch: dict[str, Any]) -> tuple[float, dict[str, str]]:
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in handle.pods("broker")}
    handle.patch_spec(patch)
    return last_broker_ready(handle, before), before


def first_all_preferred_after(samples: list[list[float]], since: float) -> float | None:
    """Seconds from `since` to the first sample at or after it with every partition preferred-led."""
    share_at_since = [s for t, s in samples if t <= since]
    if share_at_since and share_at_since[-1] == 1.0:
        return 0.0
    hit = next((t for t, s in samples if t >= since and s == 1.0), None)
    return None if hit is None else hit - since


def watched(client: ClientPod, bootstrap: str) -> tuple[threading.Thread, dict[str, Any]]:
    """The preferred-leader share, sampled in the client pod until it dropped and came back."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(client.cli("watch-preferred", bootstrap, "--seconds", "1200",
                                                                   timeout=1320)))
    thread.start()
    return thread, out


def elect_until_done(handle: KafkaClusterHandle) -> None:
    """kafka-leader-election as a script would run it: again each second while it fails, as it does for
    partitions whose preferred leader is not back in sync yet (PreferredLeaderNotAvailableException)."""
    wait_for(lambda: handle.kafka_tool("kafka-leader-election.sh", "--election-type", "PREFERRED",
                                       "--all-topic-partitions"),
             lambda _: True, 600, "kafka-leader-election to succeed for every partition", interval=1)


def measure(handle: KafkaClusterHandle, client: ClientPod, patch: dict[str, Any], cli: bool = False) -> float | None:
    """Rolls the brokers with `patch`; seconds from the last broker Ready to 100% preferred leaders."""
    thread, seen = watched(client, handle.bootstrap)
    time.sleep(2)
    ready, _ = roll(handle, patch)
    if cli:
        elect_until_done(handle)
    thread.join(1400)
    return first_all_preferred_after(seen["samples"], ready)


def test_preferred_leaders_after_a_roll(operator: KubeCluster, client: ClientPod):
    handle = KafkaClusterHandle(operator, "leaders")
    handle.apply(cluster_spec("combined"))
    handle.wait_ready(900)
    operator.apply([topic_resource(f"lead-{i}", "leaders", partitions=12, replicas=3) for i in range(3)])
    for i in range(3):
        wait_topic_ready(operator, f"lead-{i}")
    arms = [("krafty operator (leaderBalance.mode Operator)", {"mode": "Operator"}, False),
            ("kafka-leader-election --all-topic-partitions, rerun each second from then", {"mode": "Disabled"}, True),
            ("Kafka's auto.leader.rebalance (default 300 s check interval)",
             {"mode": "Kafka", "checkIntervalSeconds": 300}, False)]
    taken: dict[str, list[float | None]] = {name: [] for name, _, _ in arms}
    buffer = 200000
    for round_ in range(ROUNDS):
        for name, balance, cli in arms if round_ % 2 == 0 else arms[::-1]:
            buffer += 1  # (with the mode in the same patch: one roll each, whatever the mode was before)
            patch = {"leaderBalance": balance, "brokers": {"config": {"socket.send.buffer.bytes": buffer}}}
            taken[name].append(measure(handle, client, patch, cli=cli))
            handle.wait_ready(600)
    rows = [(name, t) for name, runs in taken.items() for t in runs]
    report_table("After a rolling restart: last broker Ready -> every partition on its preferred leader "
                 f"(36 partitions, RF 3; {ROUNDS} rounds, the order reversed in the second)",
                 ["who restores leadership", "seconds"],
                 [[name, "not reached" if t is None else f"{t:.1f}"] for name, t in rows])
    delete_topics(operator, *[f"lead-{i}" for i in range(3)])
    handle.delete()
    assert all(t is not None for _, t in rows), rows
