"""The canary (spec.canary): its topic, with one partition led by each broker, and the roll's gate on what it
measured (spec.restarts.canaryGate).

The topic is made once every broker the spec asks for is registered (so that its replication factor is the
cluster's, up to 3), gains a partition for each broker that leads none (a scale-up), and is deleted when the
canary is turned off. Its min.insync.replicas leaves room for one replica to restart, so it never blocks a roll.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from krafty.facts.observed import CanaryReading, PartitionState
from krafty.model.cluster import CanaryGate
from krafty.naming import CANARY_TOPIC

MAX_REPLICAS = 3


class TopicChange(StrEnum):
    CREATE = "create"
    ADD_PARTITIONS = "add-partitions"
    DELETE = "delete"


@dataclass(frozen=True)
class CanaryTopic:
    change: TopicChange
    replicas: tuple[tuple[int, ...], ...]  # the replica list of each partition to make, its leader first
    total: int  # partitions after the change
    min_isr: int
    message: str


class GatePosition(StrEnum):
    OPEN = "Open"  # a restart may go ahead
    HOLDING = "Holding"  # the roll waits
    OFF = "Off"  # no spec.restarts.canaryGate


@dataclass(frozen=True)
class Gate:
    position: GatePosition
    message: str  # with the figures (status)
    calm_since: datetime.datetime | None = None  # to remember: the canary's p99s within the gate since


def min_isr(replication_factor: int) -> int:
    return max(1, min(2, replication_factor - 1))


def _led_by(leader: int, brokers: list[int], replication_factor: int) -> tuple[int, ...]:
    """A partition led by `leader`, its followers the brokers after it in id order."""
    start = brokers.index(leader)
    return tuple((brokers[start:] + brokers[:start])[:replication_factor])


def topic_change(enabled: bool, desired_brokers: Iterable[int], registered: Iterable[int],
                 partitions: tuple[PartitionState, ...] | None) -> CanaryTopic | None:
    """What the canary's topic needs this pass, or None (also when Kafka cannot be asked)."""
    if partitions is None:
        return None
    mine = sorted((p for p in partitions if p.topic == CANARY_TOPIC), key=lambda p: p.partition)
    if not enabled:
        return CanaryTopic(TopicChange.DELETE, (), 0, 0, "the canary is off: its topic is deleted") if mine else None
    brokers = sorted(desired_brokers)
    if not brokers or not set(brokers) <= set(registered):
        return None  # made once every broker can hold its replicas
    if not mine:
        factor = min(MAX_REPLICAS, len(brokers))
        replicas = tuple(_led_by(b, brokers, factor) for b in brokers)
        return CanaryTopic(TopicChange.CREATE, replicas, len(replicas), min_isr(factor),
                           f"canary topic {CANARY_TOPIC}: {len(replicas)} partitions, one led by each broker, "
                           f"replication factor {factor}")
    factor = len(mine[0].replicas)
    leaderless = [b for b in brokers if b not in {p.preferred_leader for p in mine}]
    if not leaderless:
        return None
    replicas = tuple(_led_by(b, brokers, factor) for b in leaderless)
    return CanaryTopic(TopicChange.ADD_PARTITIONS, replicas, len(mine) + len(replicas), min_isr(factor),
                       f"canary topic {CANARY_TOPIC}: a partition for broker{'s' if len(leaderless) > 1 else ''} "
                       f"{', '.join(map(str, leaderless))}, which lead{'' if len(leaderless) > 1 else 's'} none")


def gate(spec: CanaryGate | None, reading: CanaryReading | None, calm_since: datetime.datetime | None,
         now: datetime.datetime | None) -> Gate:
    """Whether a running node may restart now, by what clients feel: once the canary's p99s have been within the
    gate for a whole window (one calm reading among bad ones is not enough: a restart itself, or a slow broker,
    makes the figures swing)."""
    if spec is None:
        return Gate(GatePosition.OFF, "")
    if reading is None or reading.written + reading.failed == 0:
        return Gate(GatePosition.HOLDING, "the canary has no figures yet (its topic is being made, or it has just "
                                          "started)")
    window = f"over the last {reading.window_seconds} s"
    if reading.failed:
        return Gate(GatePosition.HOLDING, f"{reading.failed} canary writes failed {window} ({reading.last_error})")
    over = [f"{what} p99 {_ms(seen)} is above {_ms(limit)}"
            for what, seen, limit in (("acks=all write", reading.produce_p99_ms, spec.produce_p99_milliseconds),
                                      ("end-to-end", reading.end_to_end_p99_ms, spec.end_to_end_p99_milliseconds))
            if limit is not None and (seen is None or seen > limit)]
    if over:
        return Gate(GatePosition.HOLDING, f"the canary's {' and '.join(over)} {window}")
    since = calm_since or now
    calm = (now - since).total_seconds() if now is not None and since is not None else 0.0
    if calm >= reading.window_seconds:
        return Gate(GatePosition.OPEN, f"the canary's p99s have been within spec.restarts.canaryGate for "
                                       f"{calm:.0f} s", since)
    return Gate(GatePosition.HOLDING, f"the canary's p99s are within spec.restarts.canaryGate since {calm:.0f} s; "
                                      f"a restart waits until they have been for a whole window "
                                      f"({reading.window_seconds} s)", since)


def _ms(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,} ms"


def status(reading: CanaryReading | None, decided: Gate) -> dict[str, object] | None:
    """status.canary: the figures and the gate's position."""
    if reading is None:
        return None
    return {"windowSeconds": reading.window_seconds, "written": reading.written, "failed": reading.failed,
            "produceP99Milliseconds": reading.produce_p99_ms, "endToEndP99Milliseconds": reading.end_to_end_p99_ms,
            "gate": decided.position.value, "message": decided.message or None,  # (None: removed from status)
            "calmSince": decided.calm_since.isoformat() if decided.calm_since else None}
