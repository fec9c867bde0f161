"""One reconcile pass of a KafkaCluster: a flat, ordered list of named steps.

validate -> identity -> apply children -> observe -> quorum formation ->
dynamic config -> roll or leader balance -> status. Everything is read from
the cluster each pass, so a new operator process continues where the last
one stopped.
"""

from __future__ import annotations

import datetime
import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from krafty import metrics, naming
from krafty.clients.kafka_admin import KafkaAdmin, describe_error
from krafty.clients.kube import Kube
from krafty.decide import cluster_status, identity, roll, scaling
from krafty.decide.status import DEGRADED, PROGRESSING, READY, Condition, merge_conditions
from krafty.kraft_wire import random_kafka_uuid
from krafty.model import KafkaClusterSpec, LeaderBalanceMode
from krafty.naming import Pool
from krafty.observed import ClusterObservation, PartitionState
from krafty.reconcile import observe as observing
from krafty.reconcile import scaling as scaling_exec
from krafty.render.cluster import children
from krafty.render.context import ClusterContext
from krafty.render.kafka_config import dynamic_broker_config
from krafty.validation import validate_cluster

log = logging.getLogger(__name__)
CLUSTER_SCOPED = {"ClusterRoleBinding"}


@dataclass(frozen=True)
class Settings:
    broker_image: str
    cluster_domain: str = "cluster.local"
    rack_cluster_role: str = naming.RACK_CLUSTER_ROLE


@dataclass
class Outcome:
    """What a pass did, for metrics and the daemon's next wake-up."""

    result: str
    busy: bool = False  # a roll, formation or election is under way: check again soon
    restarts: list[str] = field(default_factory=list)
    observation: ClusterObservation | None = None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ClusterReconciler:
    def __init__(self, kube: Kube, settings: Settings) -> None:
        self.kube = kube
        self.settings = settings
        self.scaling = scaling_exec.ScalingExecutor(kube)
        self._admins: dict[str, KafkaAdmin] = {}
        self._lock = threading.Lock()

    def admin(self, bootstrap: str) -> KafkaAdmin:
        with self._lock:
            if bootstrap not in self._admins:
                self._admins[bootstrap] = KafkaAdmin(bootstrap)
            return self._admins[bootstrap]

    # -- the pass --------------------------------------------------------------
    def reconcile(self, body: dict[str, Any]) -> Outcome:
        meta = body["metadata"]
        if (meta.get("annotations") or {}).get(naming.PAUSED_ANNOTATION) == "true":
            self._status(body, {}, [Condition(PROGRESSING, False, "Paused",
                                              f"changes are paused by the annotation {naming.PAUSED_ANNOTATION}")])
            return Outcome("paused")
        spec = self._valid_spec(body)
        if spec is None:
            return Outcome("invalid")
        ctx = self._context(body, spec)
        if ctx is None:
            return Outcome("conflict")
        admin = self.admin(ctx.bootstrap_servers())
        obs = observing.observe(self.kube, admin, self._sized(ctx, *self._running(ctx)))
        memory = scaling_exec.Memory.from_status(body.get("status"))
        scale = self._plan_scaling(ctx, obs, memory, admin)
        ctx = self._sized(ctx, scale.brokers, scale.controllers)
        for child in children(ctx):
            self._apply(ctx, child.kind, child.name, child.desired)
        forming = self._advance_quorum_formation(body, ctx, obs)
        self._apply_dynamic_config(body, ctx, obs)
        balance = spec.leader_balance
        memory = self.scaling.execute(body, admin, ctx.controller_bootstrap_servers(), scale, memory,
                                      balance.replication_throttle_bytes_per_second, obs, ctx.cluster_id)
        restore_leaders = balance.mode is LeaderBalanceMode.OPERATOR
        if scale.busy:
            step: roll.Step = roll.Wait(f"scaling first: {scale.message}")
        else:
            # After replicas moved, every partition goes back to its preferred leader, not only those of
            # brokers above the threshold: scaling promises new brokers their full share of leaders.
            threshold = 0 if memory.leaders_pending else balance.imbalance_threshold_percent
            step = roll.next_step(obs, restore_leaders=restore_leaders, threshold_percent=threshold)
            memory.leaders_pending = (memory.leaders_pending and restore_leaders
                                      and not roll.leaders_settled(obs))
        outcome = self._act(body, ctx, obs, step)
        outcome.busy = outcome.busy or forming or scale.busy or not isinstance(step, roll.Done)
        self._report(body, ctx, obs, step, scale, memory)
        return outcome

    # -- sizes and scaling ----------------------------------------------------------
    def _running(self, ctx: ClusterContext) -> tuple[int, int]:
        """Replicas the StatefulSets run now (the spec's, for a pool not created yet)."""
        counts = []
        for pool in (Pool.BROKER, Pool.CONTROLLER):
            sts = self.kube.get("StatefulSet", naming.statefulset(ctx.name, pool), ctx.namespace)
            counts.append(int(sts["spec"]["replicas"]) if sts else ctx.replicas(pool) if pool in ctx.pools() else 0)
        return counts[0], counts[1]

    @staticmethod
    def _sized(ctx: ClusterContext, brokers: int, controllers: int) -> ClusterContext:
        spec = ctx.spec
        update: dict[str, Any] = {"brokers": spec.brokers.model_copy(update={"replicas": brokers})}
        if ctx.dedicated:
            update["controllers"] = spec.controllers.model_copy(update={"replicas": controllers})
        return replace(ctx, spec=spec.model_copy(update=update))

    def _plan_scaling(self, ctx: ClusterContext, obs: ClusterObservation, memory: scaling_exec.Memory,
                      admin: KafkaAdmin) -> scaling.ScalePlan:
        running_brokers, running_controllers = self._running(ctx)
        ongoing: dict[tuple[str, int], Any] | None = {}
        if obs.partitions is not None:  # Kafka answered this pass: ask it about moves too
            ongoing = self.scaling.ongoing(admin)
            if ongoing is None:
                obs = replace(obs, partitions=None, kafka_error="partition reassignments cannot be listed")
            elif not ongoing:
                # Replica lists read before this answer may still show a move that has just finished
                # (target and old replicas together): plan from lists read after it instead.
                obs = replace(obs, partitions=self._partitions_now(admin))
        return scaling.plan(scaling.ScaleInput(
            desired_brokers=ctx.spec.brokers.replicas, running_brokers=running_brokers,
            desired_controllers=ctx.spec.controllers.replicas if ctx.dedicated else 0,
            running_controllers=running_controllers, dedicated=ctx.dedicated, ongoing=ongoing or {},
            balanced_for=memory.balanced_for, roll_pending=any(n.needs_restart for n in obs.nodes)), obs)

    @staticmethod
    def _partitions_now(admin: KafkaAdmin) -> tuple[PartitionState, ...] | None:
        try:
            return admin.partitions()
        except Exception:  # noqa: BLE001 - None: the planner waits
            return None

    def _valid_spec(self, body: dict[str, Any]) -> KafkaClusterSpec | None:
        try:
            spec = KafkaClusterSpec.model_validate(body.get("spec") or {})
        except ValidationError as error:
            problems = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in error.errors()]
            self._invalid(body, problems)
            return None
        problems = [str(p) for p in validate_cluster(spec)]
        if problems:
            self._invalid(body, problems)
            return None
        return spec

    def _invalid(self, body: dict[str, Any], problems: list[str]) -> None:
        message = "the spec cannot work and nothing was changed: " + "; ".join(problems)
        self.kube.event(body, naming.CLUSTER_KIND, "InvalidSpec", message, warning=True)
        self._status(body, {}, [Condition(READY, False, "InvalidSpec", message),
                                Condition(DEGRADED, True, "InvalidSpec", message)])

    def _context(self, body: dict[str, Any], spec: KafkaClusterSpec) -> ClusterContext | None:
        meta = body["metadata"]
        config = self.kube.get("ConfigMap", naming.config_map(meta["name"]), meta["namespace"])
        draft = ClusterContext(meta["name"], meta["namespace"], meta["uid"], spec, "", (),
                               spec.image or self.settings.broker_image, self.settings.cluster_domain,
                               self.settings.rack_cluster_role)
        try:
            found = identity.resolve((body.get("status") or {}).get("clusterId"),
                                     (config or {}).get("data") if config else None,
                                     draft.voter_ids(), random_kafka_uuid)
        except identity.IdentityConflict as error:
            self.kube.event(body, naming.CLUSTER_KIND, "ClusterIdConflict", str(error), warning=True)
            self._status(body, {}, [Condition(DEGRADED, True, "ClusterIdConflict", str(error))])
            return None
        return replace(draft, cluster_id=found.cluster_id, initial_voters=found.initial_voters)

    def release(self, namespace: str, name: str) -> None:
        """Cleans up after a deleted cluster: what no owner reference can (its cluster-scoped rack
        binding) and the operator's Kafka clients for it."""
        self.kube.delete("ClusterRoleBinding", naming.rack_binding(name, namespace), None)
        prefix = f"{naming.bootstrap_service(name)}.{namespace}.svc."
        with self._lock:
            for bootstrap in [b for b in self._admins if b.startswith(prefix)]:
                self._admins.pop(bootstrap).close()

    def _apply(self, ctx: ClusterContext, kind: str, name: str, desired: dict[str, Any] | None) -> None:
        if desired is None:
            self.kube.delete(kind, name, None if kind in CLUSTER_SCOPED else ctx.namespace)
        else:
            self.kube.apply(desired)

    # -- quorum formation and dynamic configuration ------------------------------
    def _advance_quorum_formation(self, body: dict[str, Any], ctx: ClusterContext, obs: ClusterObservation) -> bool:
        """Once every first voter has joined and caught up, the first-quorum list is retired:
        from then on a node formatting an empty disk joins the existing quorum instead.
        Returns whether formation is still under way (or just finished)."""
        if not ctx.initial_voters or obs.quorum is None or obs.quorum.leader_id < 0:
            return bool(ctx.initial_voters)
        wanted = {v.node_id for v in ctx.initial_voters}
        if not wanted <= obs.quorum.caught_up(roll.MAX_VOTER_LAG):
            return True
        formed = replace(ctx, initial_voters=())
        self._apply(formed, "ConfigMap", naming.config_map(ctx.name),
                    next(c.desired for c in children(formed) if c.name == naming.config_map(ctx.name)))
        self.kube.event(body, naming.CLUSTER_KIND, "QuorumFormed",
                        f"controller quorum formed with voters {sorted(wanted)}, leader {obs.quorum.leader_id}")
        return True

    def _apply_dynamic_config(self, body: dict[str, Any], ctx: ClusterContext, obs: ClusterObservation) -> None:
        if obs.partitions is None:
            return
        admin = self.admin(ctx.bootstrap_servers())
        try:
            current = admin.dynamic_cluster_defaults()
            desired = dynamic_broker_config(ctx)
            to_set = {k: v for k, v in desired.items() if current.get(k) != v}
            to_delete = sorted(set(current) - set(desired) - set(naming.THROTTLE_RATE_KEYS))
            if to_set or to_delete:
                admin.alter_dynamic_cluster_defaults(to_set, to_delete)
                changes = [f"{k}={v}" for k, v in to_set.items()] + [f"{k} (back to default)" for k in to_delete]
                self.kube.event(body, naming.CLUSTER_KIND, "DynamicConfigApplied",
                                "applied without a restart: " + ", ".join(changes))
        except Exception as error:  # noqa: BLE001 - retried next pass, reported as an Event
            self.kube.event(body, naming.CLUSTER_KIND, "DynamicConfigFailed", describe_error(error), warning=True)

    # -- acting ----------------------------------------------------------------
    def _act(self, body: dict[str, Any], ctx: ClusterContext, obs: ClusterObservation, step: roll.Step) -> Outcome:
        admin = self.admin(ctx.bootstrap_servers())
        if isinstance(step, roll.Restart):
            self.kube.event(body, naming.CLUSTER_KIND, f"Restart{step.reason.value}",
                            f"restarting {step.node.pod}: {step.message}")
            self.kube.delete("Pod", step.node.pod, ctx.namespace)
            metrics.RESTARTS.labels(ctx.namespace, ctx.name, step.reason.value).inc()
            return Outcome("restarted", busy=True, restarts=[step.reason.value], observation=obs)
        if isinstance(step, roll.ElectLeaders):
            return self._elect(body, admin, list(step.partitions), step.message, obs)
        if isinstance(step, roll.Blocked):
            self.kube.event(body, naming.CLUSTER_KIND, "RollBlocked", step.message, warning=True)
            return Outcome("blocked", busy=True, observation=obs)
        if isinstance(step, roll.Done):
            return Outcome("reconciled", observation=obs)
        return Outcome("waiting", busy=True, observation=obs)

    def _elect(self, body: dict[str, Any], admin: KafkaAdmin, partitions: list[tuple[str, int]], why: str,
               obs: ClusterObservation) -> Outcome:
        try:
            failed = admin.elect_preferred(partitions)
        except Exception as error:  # noqa: BLE001
            self.kube.event(body, naming.CLUSTER_KIND, "LeaderElectionFailed", describe_error(error), warning=True)
            return Outcome("error", busy=True, observation=obs)
        moved = len(partitions) - len(failed)
        message = f"preferred leader elected for {moved} partitions ({why})"
        if failed:
            message += f"; not possible yet for {len(failed)}: {'; '.join(list(failed.values())[:3])}"
        self.kube.event(body, naming.CLUSTER_KIND, "LeadersRebalanced", message)
        return Outcome("elected", busy=True, observation=obs)

    # -- status ----------------------------------------------------------------
    def _report(self, body: dict[str, Any], ctx: ClusterContext, obs: ClusterObservation, step: roll.Step,
                scale: scaling.ScalePlan, memory: scaling_exec.Memory) -> None:
        desired_brokers = {naming.node_id(Pool.BROKER, i) for i in range(ctx.spec.brokers.replicas)}
        status: dict[str, Any] = {
            "clusterId": ctx.cluster_id,
            "bootstrapServers": ctx.bootstrap_servers(),
            "readyBrokers": sum(1 for n in obs.nodes if n.is_broker and n.pod_ready and n.registered),
            "nodes": cluster_status.node_entries(obs),
            "roll": cluster_status.roll_summary(obs, step),
            "plannedActions": cluster_status.planned_actions(obs) + ([scale.message] if scale.busy else []),
            "scaling": scaling_exec.status(scale, memory),
        }
        if all(n.pod_exists and n.revision_current for n in obs.nodes):
            status["kafkaVersion"] = ctx.spec.version
        for key, value in (("partitions", cluster_status.partition_summary(obs)),
                           ("quorum", cluster_status.quorum_summary(obs))):
            if value is not None:
                status[key] = value
        conditions = cluster_status.conditions(obs, step, desired_brokers, scale)
        self._status(body, status, conditions)
        metrics.COLLECTOR.set_cluster(ctx.namespace, ctx.name, metrics.ClusterFacts(
            brokers_desired=ctx.spec.brokers.replicas, brokers_ready=status["readyBrokers"],
            ready=conditions[0].status, roll_in_progress=status["roll"] is not None,
            partitions_to_move=scale.partitions_to_move, observation=obs))

    def _status(self, body: dict[str, Any], status: dict[str, Any], conditions: list[Condition]) -> None:
        meta = body["metadata"]
        old = (body.get("status") or {}).get("conditions") or []
        kept = [c for c in old if c.get("type") not in {x.type for x in conditions}]
        status = {**status, "observedGeneration": meta.get("generation"),
                  "conditions": kept + merge_conditions(old, conditions, _now(), meta.get("generation") or 0)}
        self.kube.patch_status(naming.CLUSTER_KIND, meta["name"], meta["namespace"], status)
