"""Where each node is in its restart: stopping, starting, recovering its logs, catching up; and how long each phase
took, for status.nodes[].restartPhase and the krafty_node_restart_phase_seconds histogram.

A broker that takes long to come back is not a broken one: Kafka registers it with the controller, fenced, while
it recovers its logs (a broker with thousands of partitions, or stopped uncleanly, takes minutes), then unfences
it and it rejoins each ISR. The roll waits for it as long as it is in one of these phases (krafty.decide.roll).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from krafty.facts.observed import ClusterObservation, NodeState, PodPhase


class RestartPhase(StrEnum):
    STOPPING = "Stopping"  # told to stop: controlled shutdown moves its leadership away
    STARTING = "Starting"  # its new pod is not running yet (scheduled, pulled, started)
    RECOVERING = "Recovering"  # running, not back yet: Kafka recovers its logs (a broker registered, fenced)
    CATCHING_UP = "CatchingUp"  # serving again, not yet back in every ISR it belongs to


def phase_of(node: NodeState, obs: ClusterObservation) -> RestartPhase | None:
    """The restart phase a node is in, or None when it is not coming back from one (or never left)."""
    match node.phase:
        case PodPhase.TERMINATING:
            return RestartPhase.STOPPING
        case PodPhase.MISSING | PodPhase.STARTING:
            return RestartPhase.STARTING
        case PodPhase.WARMING_UP | PodPhase.NOT_READY:
            return RestartPhase.RECOVERING
        case PodPhase.READY if node.is_broker and not node.registered:
            return RestartPhase.RECOVERING
        case PodPhase.READY if node.is_broker and any(node.node_id in p.replicas and node.node_id not in p.isr
                                                      for p in obs.partitions or ()):
            return RestartPhase.CATCHING_UP
    return None


def recovering(node: NodeState, obs: ClusterObservation) -> bool:
    """A broker whose pod runs, not ready, and that Kafka holds registered and fenced: it is recovering its logs
    (however long that takes, the roll waits for it rather than calling it stuck)."""
    fenced = {r.node_id for r in obs.registrations if r.fenced}
    return node.is_broker and node.phase is PodPhase.NOT_READY and node.node_id in fenced


@dataclass(frozen=True)
class Phases:
    now: Mapping[str, tuple[RestartPhase, datetime.datetime]]  # by pod: its phase and since when
    ended: tuple[tuple[RestartPhase, float], ...]  # phases that ended this pass, and how many seconds they took


def track(before: Mapping[str, tuple[str, str]], obs: ClusterObservation, moment: datetime.datetime) -> Phases:
    """Each node's phase now, kept since it began (`before`: status.nodes[].restartPhase and restartPhaseSince
    by pod), and the phases that ended since the last pass."""
    now: dict[str, tuple[RestartPhase, datetime.datetime]] = {}
    ended = []
    for node in obs.nodes:
        phase = phase_of(node, obs)
        old = before.get(node.pod)
        old_phase = RestartPhase(old[0]) if old and old[0] in RestartPhase.__members__.values() else None
        since = datetime.datetime.fromisoformat(old[1]) if old and old_phase else moment
        if old_phase is not None and old_phase is not phase:
            ended.append((old_phase, max(0.0, (moment - since).total_seconds())))
        if phase is not None:
            now[node.pod] = (phase, since if phase is old_phase else moment)
    return Phases(now, tuple(ended))
