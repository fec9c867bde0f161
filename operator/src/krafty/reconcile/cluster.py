"""One reconcile pass of a KafkaCluster: observe once, plan purely, act, write status once.

    paused? invalid spec? identity? -> observe (Kubernetes, then Kafka) -> krafty.planning.cluster.plan
    -> krafty.reconcile.act (the plan's actions, in order) -> status and metrics

Everything is read from the cluster each pass (and the few facts to remember
from status), so a new operator process continues where the last one stopped.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from krafty import naming
from krafty.clients.canary import Canaries, CanarySettings
from krafty.clients.connection import Connection
from krafty.clients.kafka_admin import AdminPool, KafkaAdmin
from krafty.clients.kube import Kube, Refused, api_message
from krafty.clients.pki_process import Issuer
from krafty.decide import external, identity, listeners
from krafty.decide.status import DEGRADED, READY, Condition
from krafty.facts.observed import CanaryReading, ClusterObservation, ExternalServiceState, VolumeState
from krafty.facts.pods import node_pods
from krafty.model import KafkaClusterSpec
from krafty.model.context import ClusterContext, OperatorPeer
from krafty.model.network import NetworkPolicyPeer
from krafty.naming import Pool
from krafty.planning import preview as previewing
from krafty.planning.actions import Announce, ApplyChildren
from krafty.planning.cluster import ClusterPlan, Facts, NotAdmitted, Pace, PassResult, admit, plan, settle
from krafty.reconcile import observe as observing
from krafty.reconcile import rack, writer
from krafty.reconcile.act import Actor
from krafty.reconcile.applied import Applied
from krafty.reconcile.connection import Reached
from krafty.reconcile.pki import CaUnusable, ClusterPki, PkiPass, existing_pki
from krafty.reconcile.teardown import teardown_pass
from krafty.telemetry import metrics
from krafty.wire import random_kafka_uuid

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoints:
    """Where the operator's own clients reach a cluster: brokers (bootstrap) and controllers."""

    bootstrap: str
    controllers: str


@dataclass(frozen=True)
class Settings:
    broker_images: Mapping[str, str]  # by Kafka version
    cluster_domain: str = "cluster.local"
    rack_binding: str | None = None  # the chart's ClusterRoleBinding for rack awareness; None: not installed
    operator: OperatorPeer | None = None  # the operator's pods, let in to the internal ports
    monitoring_peers: tuple[NetworkPolicyPeer, ...] = ()  # the install's Prometheus, let in to the metrics port
    # Outside Kubernetes (development, tests) pod DNS names do not resolve: the operator's clients use these.
    endpoints: Endpoints | None = None


@dataclass(frozen=True)
class Intervals:
    """Seconds from one pass to the next at each pace."""

    following: float
    busy: float
    idle: float


@dataclass(frozen=True)
class Outcome:
    """What a pass did, for metrics and the scheduler's next wake-up."""

    result: PassResult
    pace: Pace = Pace.CALM
    wake_in: float | None = None  # seconds until something is due (metadata.version's raise): check again by then

    def next_pass(self, intervals: Intervals) -> float:
        """Seconds until the next pass: the pace's interval, or when calm the idle one or sooner when something is
        due by then."""
        match self.pace:
            case Pace.FOLLOWING:
                return intervals.following
            case Pace.BUSY:
                return intervals.busy
        return intervals.idle if self.wake_in is None else min(intervals.idle, max(self.wake_in, 1.0))


def _pace(planned: Pace, done: bool, actor: Actor) -> Pace:
    """A pass whose action failed tries again at the busy pace. A StatefulSet sent changed makes a new revision,
    which this pass's observation predates and no watch reports: look again at once for the roll it may start."""
    if not done:
        return Pace.BUSY
    return Pace.FOLLOWING if actor.workloads_changed else planned


def authorization_problem(ctx: ClusterContext) -> str | None:
    if ctx.spec.authorization.enabled and not ctx.internal_tls:
        return ("spec.authorization is enabled, but this cluster was created without TLS between its nodes: they "
                "would have no identity to be super users with. Nothing changes until authorization is off")
    return None


class ClusterReconciler:
    def __init__(self, kube: Kube, settings: Settings, reached: Reached | None = None) -> None:
        self.kube = kube
        self.settings = settings
        self.reached = reached  # told how each pass reached its cluster's brokers, for the other passes
        self.admins = AdminPool(KafkaAdmin)
        self.preview_admins = AdminPool(KafkaAdmin)  # a plan preview never waits on a pass's client, nor it on one
        self.canaries = Canaries()
        self.applied = Applied()  # what each cluster's passes last applied of its children

    def reconcile(self, body: dict[str, Any]) -> Outcome:
        moment = writer.now()
        if self.kube.add_finalizer(naming.CLUSTER_KIND, body, naming.CLUSTER_FINALIZER):
            log.info("KafkaCluster %s/%s: holding %s, so that a deletion stops the brokers before the controllers",
                     body["metadata"]["namespace"], body["metadata"]["name"], naming.CLUSTER_FINALIZER)
        spec = admit(body)
        if isinstance(spec, NotAdmitted):
            if spec.event is not None:
                self.kube.event(body, naming.CLUSTER_KIND, spec.event.reason, spec.event.message, warning=True)
            self._write(body, {}, spec.conditions, moment)
            return Outcome(spec.result)
        meta = body["metadata"]
        claims = observing.volumes(self.kube, meta["name"], meta["namespace"])
        ctx = self._context(body, spec, frozenset(v.claim for v in claims))
        if ctx is None:
            return Outcome(PassResult.CONFLICT)
        held = self._authorization(body, ctx, moment) or self._rack(body, ctx, moment)
        if held is not None:
            return held
        secrets_digest, missing = self._config_secrets(ctx)
        if missing:  # like an invalid spec: nothing changes until it is there
            return self._hold(body, "ConfigSecretMissing", missing, moment)
        listed = observing.cluster_pods(self.kube, ctx)
        services = observing.external_services(self.kube, ctx)
        try:
            with Issuer() as issuer:  # (a process of its own, started if something is issued)
                issued = PkiPass(self.kube, ctx, body, moment, self.applied, issuer).run(
                    listed, self._outside_names(ctx, services))
        except CaUnusable as unusable:
            return self._hold(body, "CaUnusable", str(unusable), moment)
        ctx = replace(ctx, certificates=issued.marker, config_secrets=secrets_digest, clients_ca=issued.clients_digest)
        admin, obs = self._observe(self.admins, ctx, issued, claims, listed, services, moment)
        if self.reached is not None:
            self.reached.reached(ctx.namespace, ctx.name, admin.connection)
        obs = replace(obs, canary=self._canary(ctx, admin.connection))
        decided = plan(ctx, obs, Facts.from_status(body.get("status")))
        actor = Actor(self.kube, admin, obs.controller_servers, replace(ctx, sizes=decided.sizes), body, self.applied)
        done = actor.run(decided.actions)
        conditions = settle(decided.conditions, actor.refused, actor.conflicts, actor.withheld)
        self._write(body, decided.status, conditions, moment)
        for phase, seconds in decided.phases_ended:
            metrics.RESTART_PHASE_SECONDS.labels(ctx.namespace, ctx.name, phase.value).observe(seconds)
        metrics.COLLECTOR.set_cluster(ctx.namespace, ctx.name, metrics.ClusterFacts(
            brokers_desired=spec.brokers.replicas, brokers_ready=decided.status["readyBrokers"],
            ready=conditions[0].status is True, available=conditions[1].status,
            roll_in_progress=decided.status["roll"] is not None,
            partitions_to_move=decided.scale.partitions_to_move, observation=obs))
        wake_in = None if decided.wake_at is None else (decided.wake_at - writer.now()).total_seconds()
        return Outcome(decided.result if done else PassResult.ERROR, _pace(decided.pace, done, actor), wake_in)

    def _observe(self, admins: AdminPool[KafkaAdmin], ctx: ClusterContext, issued: ClusterPki,
                 claims: tuple[VolumeState, ...], listed: list[dict[str, Any]],
                 services: Mapping[str, ExternalServiceState],
                 moment: datetime.datetime) -> tuple[KafkaAdmin, ClusterObservation]:
        """The one observation of a pass and of a plan preview (each with its own clients), read once: the
        cluster's Kafka client and what it and the API server say."""
        admin, controllers = self._kafka(admins, ctx, issued)
        return admin, observing.observe(self.kube, admin, controllers, ctx, claims, listed, services, moment)

    def _outside_names(self, ctx: ClusterContext, services: Mapping[str, ExternalServiceState]
                       ) -> Callable[[int], tuple[str, ...]]:
        """Per broker ordinal, what its certificate names for clients outside Kubernetes (the nodes' addresses
        are read only for a TLS nodeport listener)."""
        nodes = observing.node_addresses(self.kube) if external.needs_node_addresses(ctx.spec.listeners) else ()
        return lambda ordinal: external.certificate_names(ctx.name, ctx.spec.listeners, ordinal, services, nodes)

    def _kafka(self, admins: AdminPool[KafkaAdmin], ctx: ClusterContext, issued: ClusterPki
               ) -> tuple[KafkaAdmin, Callable[[int], str]]:
        """The operator's Kafka client for the cluster, and its controllers' addresses for a number of them."""
        override = self.settings.endpoints
        if override:
            return admins.get(Connection(override.bootstrap)), lambda _count: override.controllers
        bootstrap = naming.operator_bootstrap(ctx.name, ctx.namespace, ctx.cluster_domain)
        return (admins.get(Connection(bootstrap, issued.identity() if ctx.internal_tls else None)),
                ctx.controller_bootstrap_servers)

    def _canary(self, ctx: ClusterContext, connection: Connection) -> CanaryReading | None:
        """The cluster's canary run (or stopped) as spec.canary says, and what it measured."""
        canary = ctx.spec.canary
        self.canaries.want(ctx.namespace, ctx.name, CanarySettings(
            connection, canary.interval_milliseconds / 1000, canary.window_seconds) if canary.enabled else None)
        return self.canaries.reading(ctx.namespace, ctx.name)

    def preview(self, body: dict[str, Any], proposed_spec: Mapping[str, Any]) -> previewing.Preview:
        """What the passes would do if the cluster's spec were `proposed_spec` (`kubectl krafty plan`): the
        steps of a pass, reading only; the children are applied as a dry run (what the API server would store
        or refuse)."""
        proposed = {**body, "spec": dict(proposed_spec)}
        spec = admit(proposed)
        if isinstance(spec, NotAdmitted):
            return previewing.not_admitted(spec)
        meta = body["metadata"]
        claims = observing.volumes(self.kube, meta["name"], meta["namespace"])
        try:
            ctx, _ = self._resolve(proposed, spec, frozenset(v.claim for v in claims))
        except identity.IdentityConflict as error:
            return previewing.refused(str(error))
        secrets_digest, missing = self._config_secrets(ctx)
        refusals = [why for why in (authorization_problem(ctx), self._rack_problem(ctx), missing) if why]
        issued = existing_pki(self.kube, ctx)
        if issued is None:
            refusals.append("the cluster has no certificates yet: its first pass has not run")
        if refusals or issued is None:
            return previewing.refused(*refusals)
        ctx = replace(ctx, certificates=issued.marker, config_secrets=secrets_digest, clients_ca=issued.clients_digest)
        listed = observing.cluster_pods(self.kube, ctx)
        _, obs = self._observe(self.preview_admins, ctx, issued, claims, listed,
                               observing.external_services(self.kube, ctx), writer.now())
        obs = replace(obs, canary=self.canaries.reading(ctx.namespace, ctx.name))
        facts = Facts.from_status(body.get("status"))
        templates, rejected = self._dry_run(ctx, plan(ctx, obs, facts))
        if rejected:
            return previewing.refused(*rejected)
        running = {p["metadata"]["name"]: p for p in node_pods(listed)}
        return previewing.preview(ctx, previewing.proposed_nodes(obs, templates, running), facts)

    def _dry_run(self, ctx: ClusterContext, decided: ClusterPlan) -> tuple[dict[Pool, dict[str, Any]], list[str]]:
        """Each child the plan applies, applied as a dry run: the pod templates of the pools as the API server
        would store them, and what it would refuse."""
        by_name = {naming.statefulset(ctx.name, pool): pool for pool in ctx.pools()}
        templates, rejected = {}, []
        for action in decided.actions:
            for child in action.children if isinstance(action, ApplyChildren) else ():
                if child.desired is None:
                    continue
                try:
                    stored = self.kube.apply(dict(child.desired), dry_run=True)
                except Refused as error:
                    rejected.append(f"Kubernetes would refuse {child.kind} {child.name}: {api_message(error)}")
                    continue
                if child.kind == "StatefulSet" and child.name in by_name:
                    templates[by_name[child.name]] = stored["spec"]["template"]
        return templates, rejected

    # -- before observing ------------------------------------------------------------------
    def _context(self, body: dict[str, Any], spec: KafkaClusterSpec, claims: frozenset[str]) -> ClusterContext | None:
        try:
            ctx, notices = self._resolve(body, spec, claims)
        except identity.IdentityConflict as error:
            self.kube.event(body, naming.CLUSTER_KIND, "ClusterIdConflict", str(error), warning=True)
            self._write(body, {}, [Condition(DEGRADED, True, "ClusterIdConflict", str(error))])
            return None
        for notice in notices:
            self.kube.event(body, naming.CLUSTER_KIND, notice.reason, notice.message, warning=notice.warning)
        return ctx

    def _resolve(self, body: dict[str, Any], spec: KafkaClusterSpec, claims: frozenset[str]
                 ) -> tuple[ClusterContext, list[Announce]]:
        """The cluster's context (identity read from its ConfigMap and status), and what to tell about it;
        raises identity.IdentityConflict."""
        meta = body["metadata"]
        config = self.kube.get("ConfigMap", naming.config_map(meta["name"]), meta["namespace"])
        draft = ClusterContext(meta["name"], meta["namespace"], meta["uid"], spec, "", (),
                               spec.image or self.settings.broker_images[spec.version], self.settings.cluster_domain,
                               self.settings.operator, broker_images=self.settings.broker_images,
                               monitoring_peers=self.settings.monitoring_peers)
        found = identity.resolve((body.get("status") or {}).get("clusterId"),
                                 (config or {}).get("data") if config else None, draft.voter_ids(),
                                 random_kafka_uuid, naming.data_claims(meta["name"], claims),
                                 naming.config_map(meta["name"]))
        notices = []
        if found.renewed_from:
            notices.append(Announce("ClusterIdRenewed", f"no volume of the earlier cluster {found.renewed_from} is "
                                                        f"left: starting clean as {found.cluster_id}"))
        internal_tls = identity.internal_tls((config or {}).get("data") if config else None, spec.tls.internal)
        if spec.tls.internal is not None and spec.tls.internal != internal_tls:
            notices.append(Announce("InternalTlsFixed", f"spec.tls.internal is {str(spec.tls.internal).lower()}, but "
                                    f"this cluster was created with{'' if internal_tls else 'out'} TLS between its "
                                    "nodes, which cannot change while it runs: it keeps what it was created with",
                                    warning=True))
        return replace(draft, cluster_id=found.cluster_id, initial_voters=found.initial_voters,
                       internal_tls=internal_tls,
                       created_unnamed_peers=identity.unnamed_peers((config or {}).get("data") if config else None),
                       quorum=identity.stored_quorum((config or {}).get("data") if config else None),
                       announced_listeners=listeners.from_status((body.get("status") or {}).get("listeners") or ())
                       ), notices

    def _hold(self, body: dict[str, Any], reason: str, message: str, moment: datetime.datetime) -> Outcome:
        """A pass that changes nothing until what the spec names exists: said in conditions and an Event."""
        self.kube.event(body, naming.CLUSTER_KIND, reason, message, warning=True)
        self._write(body, {}, [Condition(READY, False, reason, message), Condition(DEGRADED, True, reason, message)],
                    moment)
        return Outcome(PassResult.INVALID)

    def _authorization(self, body: dict[str, Any], ctx: ClusterContext, moment: datetime.datetime
                       ) -> Outcome | None:
        problem = authorization_problem(ctx)
        return self._hold(body, "AuthorizationNeedsTls", problem, moment) if problem else None

    def _rack_problem(self, ctx: ClusterContext) -> str | None:
        if self.settings.rack_binding is None and ctx.spec.rack is not None:
            return ("spec.rack is set, but the operator was installed without rack awareness (chart value "
                    "rackAwareness.enabled): brokers could not read their node's labels. Nothing changes until it "
                    "is, or spec.rack is removed")
        return None

    def _rack(self, body: dict[str, Any], ctx: ClusterContext, moment: datetime.datetime) -> Outcome | None:
        """A rack-aware cluster's ServiceAccount in the chart's rack binding (and out of it when not); a hold
        when rack awareness was not installed."""
        binding = self.settings.rack_binding
        if binding is None:
            problem = self._rack_problem(ctx)
            return self._hold(body, "RackAwarenessNotInstalled", problem, moment) if problem else None
        try:
            if rack.admit(self.kube, binding, ctx.namespace, ctx.name, ctx.spec.rack is not None):
                self.kube.event(body, naming.CLUSTER_KIND, "RackBindingUpdated",
                                f"ServiceAccount {naming.service_account(ctx.name)} "
                                f"{'added to' if ctx.spec.rack else 'removed from'} ClusterRoleBinding {binding}")
        except rack.RackBindingMissing as missing:
            return self._hold(body, "RackBindingMissing", f"{missing}: upgrade the chart with "
                              "rackAwareness.enabled=true", moment)
        except rack.RackBindingRefused as refused:
            return self._hold(body, "RackBindingRefused", str(refused), moment)
        return None

    def _config_secrets(self, ctx: ClusterContext) -> tuple[str, str]:
        """A digest of the Secret keys spec.brokers.configFromSecrets names (the brokers roll when it changes),
        and what is missing of them ("" when nothing). Values are hashed, never kept or logged."""
        digest = hashlib.sha256()
        missing = []
        secrets: dict[str, dict[str, str]] = {}
        for key, ref in sorted(ctx.spec.brokers.config_from_secrets.items()):
            if ref.name not in secrets:
                secrets[ref.name] = dict((self.kube.get("Secret", ref.name, ctx.namespace) or {}).get("data") or {})
            value = secrets[ref.name].get(ref.key)
            if value is None:
                missing.append(f"{key}: key {ref.key} of Secret {ref.name}")
            digest.update(f"{key}={ref.name}/{ref.key}={value}\n".encode())
        if not missing:
            return digest.hexdigest()[:16], ""
        return digest.hexdigest()[:16], ("spec.brokers.configFromSecrets names what does not exist (" + "; ".join(
            missing) + "): a broker could not start without it; nothing changes until it is there")

    def _write(self, body: dict[str, Any], fields: Mapping[str, Any], conditions: Iterable[Condition],
               moment: datetime.datetime | None = None) -> None:
        writer.write(self.kube, naming.CLUSTER_KIND, body, fields, conditions, moment or writer.now())

    def teardown(self, body: dict[str, Any]) -> bool:
        """One step of the cluster's ordered deletion; returns whether it still holds the cluster."""
        return teardown_pass(self.kube, body)

    def release(self, namespace: str, name: str) -> None:
        """Cleans up after a deleted cluster: what no owner reference can (its ServiceAccount in the
        cluster-scoped rack binding), the operator's Kafka clients for it and its canary."""
        if self.settings.rack_binding is not None:
            rack.admit(self.kube, self.settings.rack_binding, namespace, name, wanted=False)
        self.admins.release(namespace, name)
        self.preview_admins.release(namespace, name)
        self.canaries.want(namespace, name, None)
        self.applied.forget(namespace, name)
        if self.reached is not None:
            self.reached.reached(namespace, name, None)
