"""Carrying out a scaling plan: throttled replica moves, voter removal, unregistering.

What is in flight is always read back from Kafka (ongoing reassignments, the
voter set); what the operator must remember between passes (brokers balanced
for, throttled topics, brokers to unregister) lives in status.scaling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from krafty import naming
from krafty.clients import kraft
from krafty.clients.kafka_admin import KafkaAdmin, describe_error
from krafty.clients.kube import Kube
from krafty.decide import scaling
from krafty.kraft_wire import KafkaProtocolError
from krafty.observed import ClusterObservation


@dataclass
class Memory:
    """status.scaling fields the next pass needs."""

    balanced_for: tuple[int, ...] | None
    throttled_topics: list[str]
    pending_unregister: list[int]
    leaders_pending: bool = False  # replicas moved: every preferred leader goes back, whatever the threshold

    @classmethod
    def from_status(cls, status: dict[str, Any] | None) -> Memory:
        scaling_status = (status or {}).get("scaling") or {}
        balanced = scaling_status.get("balancedBrokers")
        return cls(tuple(balanced) if balanced is not None else None,
                   list(scaling_status.get("throttledTopics") or []),
                   list(scaling_status.get("pendingUnregister") or []),
                   bool(scaling_status.get("leadersPending")))


class ScalingExecutor:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def ongoing(self, admin: KafkaAdmin) -> dict[tuple[str, int], Any] | None:
        """The partition moves in flight; None when Kafka cannot say (then nothing may be planned)."""
        try:
            return dict(kraft.list_reassignments(admin.bootstrap_servers))
        except Exception:  # noqa: BLE001 - the planner waits for an answer
            return None

    def execute(self, body: dict[str, Any], admin: KafkaAdmin, controller_servers: str, plan: scaling.ScalePlan,
                memory: Memory, throttle_rate: int, obs: ClusterObservation,
                cluster_id: str) -> Memory:
        if plan.reassign:
            self._move(body, admin, plan, memory, throttle_rate)
            memory.leaders_pending = True
        elif not plan.busy and memory.throttled_topics and self.ongoing(admin) == {}:
            self._unthrottle(body, admin, memory)
        if plan.remove_voter is not None:
            self._remove_voter(body, controller_servers, plan, cluster_id)
        memory.pending_unregister = sorted(set(memory.pending_unregister) | set(plan.unregister))
        self._unregister(body, controller_servers, memory, obs)
        if plan.balanced_for is not None:
            memory.balanced_for = plan.balanced_for
        return memory

    def _move(self, body: dict[str, Any], admin: KafkaAdmin, plan: scaling.ScalePlan, memory: Memory,
              throttle_rate: int) -> None:
        topics = sorted({topic for topic, _ in plan.reassign})
        rate = str(throttle_rate)
        admin.alter_dynamic_cluster_defaults(dict.fromkeys(naming.THROTTLE_RATE_KEYS, rate), [])
        admin.alter_topic_configs({t: dict.fromkeys(naming.THROTTLED_REPLICAS_KEYS, "*") for t in topics})
        memory.throttled_topics = sorted(set(memory.throttled_topics) | set(topics))
        errors = kraft.alter_reassignments(admin.bootstrap_servers, plan.reassign)
        message = (f"{plan.message}; replication throttled to {throttle_rate // 2**20} MiB/s per broker"
                   + (f"; refused for {len(errors)}: {'; '.join(list(errors.values())[:3])}" if errors else ""))
        self.kube.event(body, naming.CLUSTER_KIND, "ReplicasMoving", message, warning=bool(errors))

    def _unthrottle(self, body: dict[str, Any], admin: KafkaAdmin, memory: Memory) -> None:
        existing = set(admin.describe_topics(memory.throttled_topics))
        admin.alter_topic_configs({t: dict.fromkeys(naming.THROTTLED_REPLICAS_KEYS) for t in existing})
        admin.alter_dynamic_cluster_defaults({}, naming.THROTTLE_RATE_KEYS)
        self.kube.event(body, naming.CLUSTER_KIND, "ReplicasMoved",
                        f"replica moves finished; throttles removed from {len(memory.throttled_topics)} topics")
        memory.throttled_topics = []

    def _remove_voter(self, body: dict[str, Any], servers: str, plan: scaling.ScalePlan, cluster_id: str) -> None:
        voter = plan.remove_voter
        assert voter is not None
        try:
            kraft.remove_voter(servers, cluster_id, voter.node_id, voter.directory_id)
        except Exception as error:  # noqa: BLE001 - retried next pass
            self.kube.event(body, naming.CLUSTER_KIND, "VoterRemovalFailed", describe_error(error), warning=True)
            return
        self.kube.event(body, naming.CLUSTER_KIND, "VoterRemoved",
                        f"controller {voter.node_id} removed from the KRaft voters")

    def _unregister(self, body: dict[str, Any], servers: str, memory: Memory, obs: ClusterObservation) -> None:
        running = {n.node_id for n in obs.nodes if n.pod_exists}
        for broker in [b for b in memory.pending_unregister if b not in running]:
            try:
                kraft.unregister_broker(servers, broker)
            except KafkaProtocolError as error:
                if error.error_name != "BROKER_ID_NOT_REGISTERED":
                    self.kube.event(body, naming.CLUSTER_KIND, "UnregisterFailed", str(error), warning=True)
                    continue
            memory.pending_unregister.remove(broker)
            self.kube.event(body, naming.CLUSTER_KIND, "BrokerUnregistered",
                            f"broker {broker} removed from the cluster metadata")


def status(plan: scaling.ScalePlan, memory: Memory) -> dict[str, Any]:
    return {
        "phase": plan.phase, "message": plan.message, "partitionsToMove": plan.partitions_to_move,
        "balancedBrokers": list(memory.balanced_for) if memory.balanced_for is not None else None,
        "throttledTopics": memory.throttled_topics or None, "pendingUnregister": memory.pending_unregister or None,
        "leadersPending": memory.leaders_pending or None,
    }
