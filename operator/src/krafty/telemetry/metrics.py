"""The operator's Prometheus metrics.

Counters and the reconcile histogram are plain prometheus-client metrics.
Everything per cluster, topic and consumer group is a snapshot replaced by
each pass and rendered at scrape time, so a deleted cluster, topic or group
disappears from /metrics instead of leaving stale series.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import REGISTRY, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from krafty.decide.health import summarize
from krafty.decide.lag import PartitionLag, SelectedGroups, by_topic
from krafty.facts.observed import ClusterObservation
from krafty.wire import LogDir

RECONCILES = Counter("krafty_reconcile_total", "Reconcile passes by resource kind and result", ["kind", "result"])
RECONCILE_ERRORS = Counter("krafty_reconcile_errors_total", "Reconcile passes that failed with an error", ["kind"])
RECONCILE_SECONDS = Histogram("krafty_reconcile_duration_seconds", "Duration of reconcile passes", ["kind"],
                              buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
RECONCILE_CPU = Counter("krafty_reconcile_cpu_seconds", "CPU time of reconcile passes (the pass's own thread), by kind",
                        ["kind"])
RESTARTS = Counter("krafty_restarts_total", "Kafka node restarts by the operator, by reason",
                   ["namespace", "cluster", "reason"])
RESTART_PHASE_SECONDS = Histogram(
    "krafty_node_restart_phase_seconds", "How long a node's restart spent in each phase: Stopping (controlled "
    "shutdown), Starting (its new pod not running yet), Recovering (running, not back: its logs recovered), "
    "CatchingUp (serving, rejoining its ISRs)", ["namespace", "cluster", "phase"],
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600))
KAFKA_REQUESTS = Counter("krafty_kafka_requests_total", "Calls the operator made to Kafka, by call", ["call"])
LEADER = Gauge("krafty_operator_leader", "1 on the operator replica that leads (runs the passes), 0 on a standby")
KUBE_REQUESTS = Counter("krafty_kube_requests_total", "Kubernetes API requests the operator made, by verb and kind",
                        ["verb", "kind"])


@contextlib.contextmanager
def timed_pass(kind: str) -> Iterator[None]:
    """A pass's duration and the CPU its thread used while it ran (what an idle operator spends, by kind)."""
    wall, cpu = time.monotonic(), time.thread_time()
    try:
        yield
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.monotonic() - wall)
        RECONCILE_CPU.labels(kind).inc(time.thread_time() - cpu)


# The canary (spec.canary): removed with it
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
CANARY_WRITE_SECONDS = Histogram("krafty_canary_produce_latency_seconds",
                                 "acks=all write latency of the operator's canary records", ["namespace", "cluster"],
                                 buckets=_LATENCY_BUCKETS)
CANARY_END_TO_END_SECONDS = Histogram("krafty_canary_end_to_end_latency_seconds",
                                      "Delay from a canary record's send to its read by the operator's canary",
                                      ["namespace", "cluster"], buckets=_LATENCY_BUCKETS)
CANARY_FAILED = Counter("krafty_canary_failed_writes_total", "Canary records whose write failed",
                        ["namespace", "cluster"])


@dataclass(frozen=True)
class ClusterFacts:
    brokers_desired: int
    brokers_ready: int
    ready: bool
    available: bool | None  # None: cannot be seen now (the gauge is absent)
    roll_in_progress: bool
    partitions_to_move: int
    observation: ClusterObservation


@dataclass(frozen=True)
class LastPass:
    result: str  # a PassResult value: paused, invalid, error, reconciled, ...
    finished: float  # epoch seconds


@dataclass
class Snapshot:
    clusters: dict[tuple[str, str], ClusterFacts] = field(default_factory=dict)
    passes: dict[tuple[str, str], LastPass] = field(default_factory=dict)
    topics: dict[tuple[str, str], dict[str, tuple[int, int]]] = field(default_factory=dict)  # partitions, URP
    lag: dict[tuple[str, str], list[PartitionLag]] = field(default_factory=dict)
    lag_groups: dict[tuple[str, str], SelectedGroups] = field(default_factory=dict)
    log_dirs: dict[tuple[str, str], dict[int, tuple[LogDir, ...]]] = field(default_factory=dict)  # by broker


class KafkaCollector(Collector):
    def __init__(self) -> None:
        self.snapshot = Snapshot()
        self.lock = threading.Lock()

    def set_cluster(self, namespace: str, name: str, facts: ClusterFacts | None) -> None:
        with self.lock:
            if facts is None:
                self.snapshot.clusters.pop((namespace, name), None)
                self.snapshot.passes.pop((namespace, name), None)
                self.snapshot.topics.pop((namespace, name), None)
                self.snapshot.lag.pop((namespace, name), None)
                self.snapshot.lag_groups.pop((namespace, name), None)
                self.snapshot.log_dirs.pop((namespace, name), None)
            else:
                self.snapshot.clusters[(namespace, name)] = facts

    def set_pass(self, namespace: str, name: str, result: str, finished: float) -> None:
        """Every cluster pass, whatever its outcome: a paused, invalid or failing cluster shows as such."""
        with self.lock:
            self.snapshot.passes[(namespace, name)] = LastPass(result, finished)

    def set_topics(self, namespace: str, cluster: str, topics: dict[str, tuple[int, int]]) -> None:
        with self.lock:
            self.snapshot.topics[(namespace, cluster)] = topics

    def set_lag(self, namespace: str, cluster: str, lag: list[PartitionLag]) -> None:
        with self.lock:
            self.snapshot.lag[(namespace, cluster)] = lag

    def set_lag_groups(self, namespace: str, cluster: str, selected: SelectedGroups) -> None:
        with self.lock:
            self.snapshot.lag_groups[(namespace, cluster)] = selected

    def set_log_dirs(self, namespace: str, cluster: str, dirs: dict[int, tuple[LogDir, ...]]) -> None:
        """The log directories each broker that answered described (a broker that did not has no series)."""
        with self.lock:
            self.snapshot.log_dirs[(namespace, cluster)] = dirs

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            snap = Snapshot(dict(self.snapshot.clusters), dict(self.snapshot.passes), dict(self.snapshot.topics),
                            dict(self.snapshot.lag), dict(self.snapshot.lag_groups), dict(self.snapshot.log_dirs))
        yield from _cluster_metrics(snap)
        yield from _pass_metrics(snap)
        yield from _topic_metrics(snap)
        yield from _lag_metrics(snap)
        yield from _log_dir_metrics(snap)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _cluster_metrics(snap: Snapshot) -> Iterator[Metric]:
    labels = ["namespace", "cluster"]
    g = {
        "desired": _gauge("krafty_cluster_brokers_desired", "Brokers the spec asks for", labels),
        "ready": _gauge("krafty_cluster_brokers_ready", "Brokers running, registered and ready", labels),
        "cluster_ready": _gauge("krafty_cluster_ready", "1 when the cluster's Ready condition is True", labels),
        "available": _gauge("krafty_cluster_available", "1 when every partition has a leader with min.insync.replicas "
                            "in sync (the Available condition); absent while Kafka cannot be asked", labels),
        "roll": _gauge("krafty_cluster_roll_in_progress", "1 while a rolling restart is under way", labels),
        "reachable": _gauge("krafty_cluster_kafka_reachable",
                            "1 when the last pass could read the partitions (else the partition gauges are absent)",
                            labels),
        "urp": _gauge("krafty_cluster_under_replicated_partitions", "Partitions with fewer in-sync replicas than "
                                                                    "replicas", labels),
        "min_isr": _gauge("krafty_cluster_under_min_isr_partitions", "Partitions below min.insync.replicas", labels),
        "offline": _gauge("krafty_cluster_offline_partitions", "Partitions without a leader", labels),
        "eligible": _gauge("krafty_cluster_eligible_leaders_only_partitions", "Partitions without an in-sync "
                           "replica whose eligible leader replicas (ELR) wait to lead", labels),
        "imbalance": _gauge("krafty_cluster_leader_imbalance_ratio", "Share of partitions not led by their "
                                                                     "preferred replica", labels),
        "move": _gauge("krafty_cluster_partitions_to_move", "Partitions whose replicas still move (scaling)", labels),
        "leader": _gauge("krafty_cluster_quorum_leader", "Node id of the active controller (-1: none)", labels),
        "voter_lag": _gauge("krafty_cluster_quorum_voter_lag", "Offsets a voter is behind the quorum leader",
                            [*labels, "voter"]),
    }
    for (namespace, name), facts in sorted(snap.clusters.items()):
        key = [namespace, name]
        obs = facts.observation
        g["desired"].add_metric(key, facts.brokers_desired)
        g["ready"].add_metric(key, facts.brokers_ready)
        g["cluster_ready"].add_metric(key, 1 if facts.ready else 0)
        if facts.available is not None:
            g["available"].add_metric(key, 1 if facts.available else 0)
        g["roll"].add_metric(key, 1 if facts.roll_in_progress else 0)
        g["move"].add_metric(key, facts.partitions_to_move)
        g["reachable"].add_metric(key, 0 if obs.partitions is None else 1)
        if obs.partitions is not None:
            health = summarize(obs.partitions)
            g["urp"].add_metric(key, health.under_replicated)
            g["min_isr"].add_metric(key, health.under_min_isr)
            g["offline"].add_metric(key, health.offline)
            g["eligible"].add_metric(key, health.eligible_leaders_only)
            g["imbalance"].add_metric(key, health.imbalance)
        if obs.quorum is not None:
            g["leader"].add_metric(key, obs.quorum.leader_id)
            for voter in obs.quorum.voters:
                g["voter_lag"].add_metric([*key, str(voter.node_id)], max(voter.lag, 0))
    yield from g.values()


def _pass_metrics(snap: Snapshot) -> Iterator[Metric]:
    labels = ["namespace", "cluster"]
    finished = _gauge("krafty_cluster_last_pass_timestamp_seconds", "When the last cluster pass ended, whatever its "
                      "outcome (a stale value: the operator stopped reconciling this cluster)", labels)
    result = _gauge("krafty_cluster_last_pass_result", "1 for the outcome of the last cluster pass (paused, invalid, "
                    "conflict, error, blocked, waiting, restarted, elected, reconciled)", [*labels, "result"])
    for (namespace, name), last in sorted(snap.passes.items()):
        finished.add_metric([namespace, name], last.finished)
        result.add_metric([namespace, name, last.result], 1)
    yield finished
    yield result


def _topic_metrics(snap: Snapshot) -> Iterator[Metric]:
    labels = ["namespace", "cluster", "topic"]
    partitions = _gauge("krafty_topic_partitions", "Partitions of a topic", labels)
    urp = _gauge("krafty_topic_under_replicated_partitions", "Under-replicated partitions of a topic", labels)
    for (namespace, cluster), topics in sorted(snap.topics.items()):
        for topic, (count, under) in sorted(topics.items()):
            partitions.add_metric([namespace, cluster, topic], count)
            urp.add_metric([namespace, cluster, topic], under)
    yield partitions
    yield urp


GROUP_TOPIC = ["namespace", "cluster", "group", "topic"]


def _lag_metrics(snap: Snapshot) -> Iterator[Metric]:
    """Each group's lag on each partition, in records and in seconds, and the retention forecast."""
    lag = _gauge("krafty_consumergroup_lag", "Records a consumer group is behind the end of a partition (absent "
                 "while it cannot be read)", [*GROUP_TOPIC, "partition"])
    seconds = _gauge("krafty_consumergroup_lag_seconds", "Age of the oldest record of a partition a consumer group "
                     "has not processed, from its timestamp (0: it has read everything; absent while unreadable)",
                     [*GROUP_TOPIC, "partition"])
    left = _gauge("krafty_consumergroup_retention_seconds_left",
                  "Seconds until retention may delete the oldest record of a partition a consumer group has not "
                  "read, at the rate its lag in seconds grew over the last minute (+Inf: not growing; absent: "
                  "the topic deletes nothing for its age, or unreadable)", [*GROUP_TOPIC, "partition"])
    for (namespace, cluster), entries in sorted(snap.lag.items()):
        for e in entries:
            key = [namespace, cluster, e.group, e.topic, str(e.partition)]
            if e.lag is not None:
                lag.add_metric(key, e.lag)
            if e.seconds is not None:
                seconds.add_metric(key, e.seconds)
            if e.retention_left is not None:
                left.add_metric(key, e.retention_left)
    yield lag
    yield seconds
    yield left
    yield from _topic_lag_metrics(snap)
    groups = _gauge("krafty_consumergroup_lag_groups", "Consumer groups whose lag is read (state read), left out by "
                    "the include/exclude patterns (excluded) or by the maximum (over_limit)",
                    ["namespace", "cluster", "state"])
    info = _gauge("krafty_consumergroup_info", "1 for each group whose lag is read, with its type: classic, "
                  "consumer (KIP-848), share (KIP-932) or streams (KIP-1071); join on group for the lag of a type",
                  ["namespace", "cluster", "group", "type"])
    for (namespace, cluster), selected in sorted(snap.lag_groups.items()):
        for state, count in (("read", len(selected.groups)), ("excluded", selected.excluded),
                             ("over_limit", selected.over_limit)):
            groups.add_metric([namespace, cluster, state], count)
        for group, kind in sorted(selected.types.items()):
            info.add_metric([namespace, cluster, group, kind or "unknown"], 1)
    yield groups
    yield info


def _topic_lag_metrics(snap: Snapshot) -> Iterator[Metric]:
    """Each group's lag over each topic: its sum, headroom and risk, where every partition was read."""
    total = _gauge("krafty_consumergroup_lag_sum", "Records a consumer group is behind, summed over a topic (only "
                   "when every partition of it was read)", GROUP_TOPIC)
    headroom = _gauge("krafty_consumergroup_retention_headroom_ratio",
                      "Smallest share of a topic's retained records a group has not yet read past the oldest one: "
                      "near 0, retention deletes records before the group reads them (only when every partition "
                      "was read)", GROUP_TOPIC)
    unknown = _gauge("krafty_consumergroup_lag_unknown_partitions",
                     "Partitions of a topic whose lag for the group cannot be read now (0: the lag shown is complete)",
                     GROUP_TOPIC)
    risk = _gauge("krafty_consumergroup_retention_risk", "1 for a group's risk of losing a topic's records to "
                  "retention (risk: Safe; AtRisk: they may be deleted unread within the hour, or half the "
                  "retention; Lost: some were), as the KafkaCluster's Events tell it (absent while unreadable)",
                  [*GROUP_TOPIC, "risk"])
    for (namespace, cluster), entries in sorted(snap.lag.items()):
        for topic in by_topic(entries):
            key = [namespace, cluster, topic.group, topic.topic]
            unknown.add_metric(key, topic.unknown)
            if topic.judged:
                risk.add_metric([*key, topic.risk.value], 1)
            if topic.total is not None and topic.headroom is not None:
                total.add_metric(key, topic.total)
                headroom.add_metric(key, topic.headroom)
    yield total
    yield headroom
    yield unknown
    yield risk


def _log_dir_metrics(snap: Snapshot) -> Iterator[Metric]:
    labels = ["namespace", "cluster", "broker", "log_dir"]
    total = _gauge("krafty_broker_log_dir_total_bytes", "Size of the volume holding a broker's log directory, as "
                   "the broker sees it (DescribeLogDirs)", labels)
    usable = _gauge("krafty_broker_log_dir_usable_bytes", "Bytes still free on the volume holding a broker's log "
                    "directory; the disk-filling alert compares it with the total", labels)
    online = _gauge("krafty_broker_log_dir_online", "1 while the log directory serves its replicas, 0 once the "
                    "broker took it offline (an I/O error, a full or lost volume)", labels)
    for (namespace, cluster), brokers in sorted(snap.log_dirs.items()):
        for broker, dirs in sorted(brokers.items()):
            for d in dirs:
                key = [namespace, cluster, str(broker), d.path]
                online.add_metric(key, 1 if d.online else 0)
                if d.total_bytes >= 0 and d.usable_bytes >= 0:
                    total.add_metric(key, d.total_bytes)
                    usable.add_metric(key, d.usable_bytes)
    yield total
    yield usable
    yield online


COLLECTOR = KafkaCollector()
REGISTRY.register(COLLECTOR)
