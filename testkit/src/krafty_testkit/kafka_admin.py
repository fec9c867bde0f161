"""Small Admin API helpers for tests (confluent-kafka)."""

from __future__ import annotations

from typing import Any

from krafty_testkit.waiting import wait_for


def create_topic(admin: Any, name: str, partitions: int, replicas: int, **config: str) -> None:
    from confluent_kafka.admin import NewTopic

    futures = admin.create_topics([NewTopic(name, partitions, replicas, config=config)], operation_timeout=30)
    futures[name].result(timeout=60)


def partition_states(admin: Any, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """partition -> (leader, replicas, isr), from the cluster's metadata."""
    metadata = admin.list_topics(topic, timeout=10)
    info = metadata.topics[topic]
    if info.error is not None:
        raise RuntimeError(f"topic {topic}: {info.error}")
    return {p.id: (p.leader, tuple(p.replicas), tuple(p.isrs)) for p in info.partitions.values()}


def wait_fully_in_sync(admin: Any, topic: str, timeout: float = 60) -> None:
    wait_for(lambda: partition_states(admin, topic),
             lambda states: bool(states) and all(set(isr) == set(replicas) and leader >= 0
                                                 for leader, replicas, isr in states.values()),
             timeout, f"every partition of {topic} fully in sync")


def leaders(admin: Any, topic: str) -> dict[int, int]:
    return {p: state[0] for p, state in partition_states(admin, topic).items()}


def preferred_leader_ratio(admin: Any, topic: str) -> float:
    states = partition_states(admin, topic)
    preferred = sum(1 for leader, replicas, _ in states.values() if replicas and leader == replicas[0])
    return preferred / len(states)
