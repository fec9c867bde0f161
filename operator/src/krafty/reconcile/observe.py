"""Observing a cluster, once per pass: StatefulSets, pods, preflight pods, data claims and their StorageClasses
from Kubernetes; registered brokers,
metadata.version, partition moves, partitions, topic throttles, the dynamic cluster config and the quorum from
Kafka.

Each Kubernetes object and each Kafka fact is read once. Kafka sources fail on
their own and say so, so one unreachable part never hides what the others show.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from krafty import naming
from krafty.clients import kraft, kraft_transport
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kafka_admin import KafkaAdmin
from krafty.clients.kraft_transport import Target
from krafty.clients.kube import Kube
from krafty.facts import pods, service_state, volume_claims
from krafty.facts.observed import (
    BrokerRegistration,
    ClusterObservation,
    ExternalServiceState,
    FeatureLevel,
    PartitionState,
    PodPhase,
    QuorumState,
    StorageClassState,
    VolumeState,
    VoterState,
)
from krafty.model import versions
from krafty.model.context import ClusterContext, Sizes
from krafty.naming import Pool
from krafty.wire import METADATA_VERSION, KafkaProtocolError

log = logging.getLogger(__name__)


def quorum_state(servers: Target) -> QuorumState:
    quorum = kraft.describe_quorum(servers)

    def voter(replica: Any) -> VoterState:
        return VoterState(replica.node_id, replica.directory_id, quorum.lag(replica))

    return QuorumState(quorum.leader_id, quorum.leader_epoch, tuple(voter(v) for v in quorum.voters),
                       tuple(voter(o) for o in quorum.observers))


class _KafkaFacts:
    """What Kafka says this pass; the first read that fails ends the reading (Kafka is down or
    restarting: every further read would only wait out its timeout)."""

    def __init__(self) -> None:
        self.registrations: tuple[BrokerRegistration, ...] = ()
        self.reassignments: dict[tuple[str, int], object] | None = None
        self.partitions: tuple[PartitionState, ...] | None = None
        self.throttled: frozenset[str] | None = None
        self.defaults: dict[str, str] | None = None
        self.metadata_level: int | None = None
        self.features: tuple[FeatureLevel, ...] = ()
        self.groups: dict[str, tuple[str, ...]] = {}
        self.error: str | None = None

    def read(self, admin: KafkaAdmin, wanted: Mapping[str, int]) -> None:
        brokers = kraft.describe_brokers(admin.connection)
        finalized, supported = kraft.features(admin.connection)
        self.metadata_level = finalized.get(METADATA_VERSION)
        self.features = tuple(FeatureLevel(name, finalized.get(name, 0), supported.get(name))
                              for name in sorted(finalized.keys() | supported.keys()))
        # The groups a feature the spec turns off is used by (read only then: krafty.decide.features)
        needed = {known.used_by for name, level in wanted.items() if level < finalized.get(name, 0)
                  and (known := versions.feature(name)) is not None and known.used_by}
        if needed:
            listed = kraft.group_ids(admin.connection)
            self.groups = {kind: tuple(sorted(g for g, t in listed.items() if t == kind)) for kind in needed}
        self.registrations = tuple(BrokerRegistration(b.node_id, b.fenced, b.rack) for b in brokers)
        # Moves first, then the replica lists: with no move in flight, the lists read after it cannot
        # show a move that has just finished (target and old replicas together).
        self.reassignments = dict(kraft.list_reassignments(admin.connection))
        self.partitions, self.throttled = admin.topic_state(
            eligible=finalized.get(versions.ELIGIBLE_LEADERS, 0) >= 1)
        if any(not r.fenced for r in self.registrations):
            try:
                self.defaults = admin.dynamic_cluster_defaults()
            except KafkaUnavailable as error:
                log.info("dynamic cluster config unreadable: %s", error)


def _kafka(admin: KafkaAdmin, any_broker_ready: bool, wanted: Mapping[str, int]) -> _KafkaFacts:
    facts = _KafkaFacts()
    if not any_broker_ready:
        # The bootstrap Service has no endpoint to answer: asking would only wait out the client's
        # timeout, and a new cluster's first passes would create nothing meanwhile.
        facts.error = "no broker pod is ready"
        return facts
    try:
        facts.read(admin, wanted)
    except (KafkaUnavailable, KafkaProtocolError) as error:
        facts.error = str(error)
        facts.partitions = None
    return facts


def volumes(kube: Kube, cluster: str, namespace: str) -> tuple[VolumeState, ...]:
    """The cluster's PersistentVolumeClaims (identity and volume decisions both need them)."""
    return tuple(volume_claims.volume_state(c) for c in kube.list("PersistentVolumeClaim", namespace,
                                                                  naming.selector_labels(cluster)))


def storage_classes(kube: Kube, found: tuple[VolumeState, ...]) -> dict[str, StorageClassState | None]:
    """The StorageClasses the claims name, read once per pass."""
    names = sorted({v.storage_class for v in found if v.storage_class})
    return {name: volume_claims.storage_class_state(name, kube.get("StorageClass", name, None)) for name in names}


def hosts_down(kube: Kube, found: list[dict[str, Any]], now: datetime.datetime,
               start_timeout_seconds: int) -> dict[str, str]:
    """The Kubernetes nodes under the cluster's pods that are not ready, when those nodes cannot run pods (a
    stopped or cut-off machine), and why: each read once, and only for pods that are not ready."""
    names = sorted({name for p in found if pods.phase(p, now, start_timeout_seconds) is not PodPhase.READY
                    and (name := pods.host(p))})
    return {name: why for name in names if (why := pods.host_down(kube.get("Node", name, None), name))}


def external_services(kube: Kube, ctx: ClusterContext) -> dict[str, ExternalServiceState]:
    """The cluster's nodeport and loadbalancer Services (of its listeners' brokers and bootstraps), by name."""
    return {state.name: state for found in kube.list("Service", ctx.namespace, naming.selector_labels(ctx.name))
            if (state := service_state.external_service(found)) is not None}


def node_addresses(kube: Kube) -> tuple[str, ...]:
    """Every Kubernetes node's internal and external addresses: a broker's nodeport listener advertises its
    node's (the pod's hostIP, one of these), and its certificate names them all."""
    return tuple(sorted({address["address"] for node in kube.list("Node", None)
                         for address in (node.get("status") or {}).get("addresses") or []
                         if address.get("type") in ("InternalIP", "ExternalIP") and address.get("address")}))


def _claim_template_size(statefulset: dict[str, Any]) -> str | None:
    for template in statefulset["spec"].get("volumeClaimTemplates") or []:
        if template["metadata"]["name"] == naming.DATA_VOLUME:
            return str(template["spec"]["resources"]["requests"]["storage"])
    return None


def cluster_pods(kube: Kube, ctx: ClusterContext) -> list[dict[str, Any]]:
    """The cluster's Kafka and preflight pods (read once per pass: the PKI step and `observe` share them)."""
    return kube.list("Pod", ctx.namespace, {naming.CLUSTER_LABEL: ctx.name})


def _combined_controllers(admin: KafkaAdmin, servers: str, ctx: ClusterContext, quorum: QuorumState,
                          found: list[dict[str, Any]], now: datetime.datetime) -> dict[int, bool]:
    """Combined mode: for each ready broker whose roles may be in flux (one that is to vote and does not yet, one
    that votes or ever ran as a controller and is not to), whether it runs as a controller now: its controller
    listener takes connections. The others run the roles their configuration gives."""
    try:
        ever = kraft.controller_nodes(admin.connection.to(servers))
    except (KafkaUnavailable, KafkaProtocolError) as error:
        log.info("the controllers' registrations are unreadable: %s", error)
        return {}
    voting, wanted = quorum.voter_ids(), set(ctx.voter_ids())
    asked = (wanted - voting) | ((voting | ever) - wanted)
    ready = {pods.ordinal(p) for p in found if pods.phase(p, now, ctx.spec.restarts.node_ready_timeout_seconds)
             is PodPhase.READY and (p["metadata"].get("labels") or {}).get(naming.ROLE_LABEL) == Pool.BROKER.value}
    out = {}
    for node in sorted(asked):
        pool, ordinal = naming.pool_and_ordinal(node)
        if pool is Pool.BROKER and ordinal in ready:
            answer = kraft_transport.listening(f"{ctx.host(pool, ordinal)}:{naming.CONTROLLER_PORT}")
            if answer is not None:
                out[node] = answer
    return out


def observe(kube: Kube, admin: KafkaAdmin, controllers: Callable[[int], str], ctx: ClusterContext,
            claims: tuple[VolumeState, ...], listed: list[dict[str, Any]],
            services: Mapping[str, ExternalServiceState], now: datetime.datetime) -> ClusterObservation:
    """`controllers`: the controller addresses for a number of controllers (during a scale-down the quorum's
    leader can be one the spec no longer asks for: every controller that runs is asked); `listed`: the
    cluster's pods (`cluster_pods`); `services`: its nodeport and loadbalancer Services (`external_services`)."""
    statefulsets = {pool: kube.get("StatefulSet", naming.statefulset(ctx.name, pool), ctx.namespace)
                    for pool in ctx.pools()}
    replicas = {pool: int(sts["spec"]["replicas"]) for pool, sts in statefulsets.items() if sts}
    found = [p for p in listed if (p["metadata"].get("labels") or {}).get(naming.ROLE_LABEL)]
    preflights = tuple(found_preflight for p in listed if (found_preflight := pods.preflight(p)) is not None)
    ready = any(pods.phase(p, now, ctx.spec.restarts.node_ready_timeout_seconds) is PodPhase.READY for p in found
                if (p["metadata"].get("labels") or {}).get(naming.ROLE_LABEL) == Pool.BROKER.value)
    kafka = _kafka(admin, ready, ctx.spec.features)
    servers = controllers(max(ctx.spec.controllers.replicas, replicas.get(Pool.CONTROLLER, 0)))
    quorum, quorum_error = None, None
    try:
        quorum = quorum_state(admin.connection.to(servers))
    except (KafkaUnavailable, KafkaProtocolError) as error:
        quorum_error = str(error)
    registered = {r.node_id for r in kafka.registrations if not r.fenced}
    timeout = ctx.spec.restarts.node_ready_timeout_seconds
    sized = replace(ctx, sizes=Sizes.running(ctx.spec, replicas))
    controllers_running = (_combined_controllers(admin, servers, ctx, quorum, found, now)
                           if not ctx.dedicated and quorum is not None else None)
    nodes = pods.node_states(sized, statefulsets, found, registered, now, hosts_down(kube, found, now, timeout),
                             controllers_running)
    return ClusterObservation(nodes, kafka.partitions, quorum, kafka_error=kafka.error, quorum_error=quorum_error,
                              statefulset_replicas=replicas, reassignments=kafka.reassignments,
                              registrations=kafka.registrations, cluster_defaults=kafka.defaults,
                              throttled_topics=kafka.throttled, volumes=claims,
                              storage_classes=storage_classes(kube, claims), controller_servers=servers,
                              claim_templates={pool: size for pool, sts in statefulsets.items()
                                               if sts and (size := _claim_template_size(sts))},
                              revisions={pool: sts["status"]["updateRevision"] for pool, sts in statefulsets.items()
                                         if sts and (sts.get("status") or {}).get("updateRevision")},
                              templates={pool: sts["spec"]["template"] for pool, sts in statefulsets.items() if sts},
                              preflights=preflights, external_services=dict(services),
                              metadata_level=kafka.metadata_level, features=kafka.features,
                              groups=kafka.groups, observed_at=now)
