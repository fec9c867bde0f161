"""Observing a cluster: pods and StatefulSets from Kubernetes, brokers, partitions
and the quorum from Kafka. Each source fails on its own, so one unreachable
part never hides what the others show."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any

from krafty import naming
from krafty.clients import kraft
from krafty.clients.kafka_admin import KafkaAdmin, describe_error
from krafty.clients.kube import Kube
from krafty.naming import Pool
from krafty.observed import ClusterObservation, NodeState, QuorumState, VoterState
from krafty.render.context import ClusterContext

RESTART_ANNOTATION = f"{naming.GROUP}/restart"
REVISION_LABEL = "controller-revision-hash"
# Pod template fields a user changes through the spec, named in restart reasons when they differ.
POD_FIELDS = ("terminationGracePeriodSeconds", "affinity", "tolerations", "nodeSelector", "priorityClassName",
              "topologySpreadConstraints")

ADMISSION_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


@dataclass(frozen=True)
class PoolPods:
    statefulset: dict[str, Any] | None
    pods: dict[int, dict[str, Any]]  # by ordinal


def pool_pods(kube: Kube, ctx: ClusterContext, pool: Pool) -> PoolPods:
    sts = kube.get("StatefulSet", naming.statefulset(ctx.name, pool), ctx.namespace)
    pods = {}
    for pod in kube.list("Pod", ctx.namespace, naming.selector_labels(ctx.name, pool)):
        ordinal = pod["metadata"]["name"].rsplit("-", 1)[-1]
        if ordinal.isdigit():
            pods[int(ordinal)] = pod
    return PoolPods(sts, pods)


def _pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _pod_running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    states = [c.get("state") or {} for c in status.get("containerStatuses") or []]
    return bool(states) and all("running" in s for s in states)


def _static_config(annotations: dict[str, str]) -> dict[str, str]:
    raw = annotations.get(naming.STATIC_CONFIG_ANNOTATION)
    return dict(json.loads(raw)) if raw else {}


def pending_reasons(pod: dict[str, Any], template: dict[str, Any]) -> tuple[str, ...]:
    """What differs between a running pod and the template it should run (for restart messages)."""
    reasons = []
    pod_annotations = pod["metadata"].get("annotations") or {}
    template_annotations = template["metadata"].get("annotations") or {}
    old, new = _static_config(pod_annotations), _static_config(template_annotations)
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if changed:
        shown = ", ".join(f"{k}={new.get(k, '(default)')}" for k in changed[:5])
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        reasons.append(f"config: {shown}{more} need a restart")
    pod_container = (pod.get("spec") or {}).get("containers", [{}])[0]
    template_container = template["spec"]["containers"][0]
    if pod_container.get("image") != template_container.get("image"):
        reasons.append(f"image {pod_container.get('image')} -> {template_container.get('image')}")
    for field in ("resources", "env"):
        if (pod_container.get(field) or {}) != (template_container.get(field) or {}):
            reasons.append(f"container {field} changed")
    pod_spec, template_spec = pod.get("spec") or {}, template.get("spec") or {}
    for field in POD_FIELDS:
        running, wanted = pod_spec.get(field), template_spec.get(field)
        if field == "tolerations":
            running = _without_admission_defaults(running or [], wanted or []) or None
        if running != wanted:
            reasons.append(f"pod {field} {running} -> {wanted}")
    return tuple(reasons)


def _without_admission_defaults(running: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A pod's tolerations minus the ones the API server adds to every pod (DefaultTolerationSeconds)."""
    return [t for t in running if t in wanted or not (t.get("key") in ADMISSION_TOLERATION_KEYS
                                                       and t.get("effect") == "NoExecute")]


def _starting(pod: dict[str, Any], timeout_seconds: int) -> bool:
    """Created recently and not serving yet: a restart or first start still under way."""
    if pod["metadata"].get("deletionTimestamp") or (_pod_running(pod) and _pod_ready(pod)):
        return False
    created = datetime.datetime.fromisoformat(str(pod["metadata"]["creationTimestamp"]).replace("Z", "+00:00"))
    age = (datetime.datetime.now(datetime.UTC) - created).total_seconds()
    return age < timeout_seconds


def node_states(ctx: ClusterContext, pools: dict[Pool, PoolPods], registered: set[int]) -> tuple[NodeState, ...]:
    nodes = []
    for pool, observed in pools.items():
        sts = observed.statefulset or {}
        update_revision = (sts.get("status") or {}).get("updateRevision")
        template = (sts.get("spec") or {}).get("template")
        ordinals = set(range(ctx.replicas(pool))) | set(observed.pods)
        for ordinal in sorted(ordinals):
            pod = observed.pods.get(ordinal)
            node_id = naming.node_id(pool, ordinal)
            revision = pod["metadata"].get("labels", {}).get(REVISION_LABEL) if pod else None
            current = pod is None or update_revision is None or revision == update_revision
            nodes.append(NodeState(
                node_id=node_id, pool=pool, pod=naming.pod(ctx.name, pool, ordinal),
                roles=ctx.roles(pool, ordinal), pod_exists=pod is not None,
                pod_ready=pod is not None and _pod_ready(pod), pod_running=pod is not None and _pod_running(pod),
                revision_current=current,
                restart_requested=bool(pod and (pod["metadata"].get("annotations") or {}).get(RESTART_ANNOTATION)),
                terminating=bool(pod and pod["metadata"].get("deletionTimestamp")),
                starting=bool(pod and _starting(pod, ctx.spec.restarts.node_ready_timeout_seconds)),
                registered=node_id in registered,
                pending_reasons=pending_reasons(pod, template) if pod and template and not current else ()))
    return tuple(nodes)


def quorum_state(servers: str) -> QuorumState:
    quorum = kraft.describe_quorum(servers)

    def voter(replica: Any) -> VoterState:
        return VoterState(replica.node_id, replica.directory_id, quorum.lag(replica))

    return QuorumState(quorum.leader_id, quorum.leader_epoch, tuple(voter(v) for v in quorum.voters),
                       tuple(voter(o) for o in quorum.observers))


def observe(kube: Kube, admin: KafkaAdmin, ctx: ClusterContext) -> ClusterObservation:
    pools = {pool: pool_pods(kube, ctx, pool) for pool in ctx.pools()}
    registered: set[int] = set()
    partitions = None
    kafka_error = quorum_error = None
    if not any(_pod_ready(pod) for pod in pools[Pool.BROKER].pods.values()):
        # The bootstrap Service has no endpoint to answer: asking would only wait out the client's
        # timeout, and a new cluster's first passes would create nothing meanwhile.
        kafka_error = "no broker pod is ready"
    else:
        try:
            registered = admin.registered_brokers()
            partitions = admin.partitions()
        except Exception as error:  # noqa: BLE001 - reported in status; the rest of the observation stands
            kafka_error = describe_error(error)
    quorum = None
    try:
        quorum = quorum_state(ctx.controller_bootstrap_servers())
    except Exception as error:  # noqa: BLE001
        quorum_error = describe_error(error)
    return ClusterObservation(node_states(ctx, pools, registered), partitions, quorum,
                              kafka_error=kafka_error, quorum_error=quorum_error)
