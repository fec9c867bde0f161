"""Reading Kafka pods: each node's phase and how its pod differs from the template it should run.

Pure functions over the pod and StatefulSet documents the API server returned,
with the clock passed in, so every case is a table test.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

from krafty import naming
from krafty.decide.configs import diff
from krafty.facts.observed import (
    ChangeKind,
    NodeState,
    PendingChange,
    PodPhase,
    Preflight,
    PreflightOutcome,
    RestartRequest,
    ServedListener,
)
from krafty.model.cluster import ClientAuthentication, SecurityProtocol
from krafty.model.context import ClusterContext
from krafty.naming import Pool

RESTART_ANNOTATION = f"{naming.GROUP}/restart"
FORCED_RESTART = "force"  # the annotation's value that asks for a restart without Kafka's checks
REVISION_LABEL = "controller-revision-hash"
# Pod template fields a user changes through the spec, named in restart reasons when they differ.
POD_FIELDS = ("terminationGracePeriodSeconds", "affinity", "tolerations", "nodeSelector", "priorityClassName",
              "topologySpreadConstraints")
CONTAINER_FIELDS = ("resources", "env")
ADMISSION_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
# Container waiting reasons that do not pass by themselves: the pod will not start as it is.
FAILING = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError",
           "CreateContainerError", "RunContainerError")

Pod = Mapping[str, Any]



def restart_request(annotation: str | None) -> RestartRequest:
    """What the manual-restart annotation asks: any value a restart when the roll allows it (kubectl krafty writes
    the time), "force" one without Kafka's checks."""
    if not annotation:
        return RestartRequest.NONE
    return RestartRequest.FORCED if annotation == FORCED_RESTART else RestartRequest.SAFE

def ordinal(pod: Pod) -> int | None:
    suffix = str(pod["metadata"]["name"]).rsplit("-", 1)[-1]
    return int(suffix) if suffix.isdigit() else None


def _ready(pod: Pod) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _running(pod: Pod) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    states = [c.get("state") or {} for c in status.get("containerStatuses") or []]
    return bool(states) and all("running" in s for s in states)


def trouble(pod: Pod | None) -> str | None:
    """Why the pod does not start, when it will not by itself: unschedulable, a crash loop, an image that cannot
    be pulled, ... (with the last exit code and reason of a crashed container)."""
    status = (pod or {}).get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"{condition.get('reason') or 'Unschedulable'}: {condition.get('message') or 'no node fits it'}"
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING:
            last = (container.get("lastState") or {}).get("terminated") or {}
            exited = f" (last exit code {last.get('exitCode')}, {last.get('reason')})" if last else ""
            message = f": {waiting['message']}" if waiting.get("message") and not last else ""
            return f"{waiting['reason']}{exited}{message}"
    return None


def phase(pod: Pod | None, now: datetime.datetime, start_timeout_seconds: int) -> PodPhase:
    if pod is None:
        return PodPhase.MISSING
    if pod["metadata"].get("deletionTimestamp"):
        return PodPhase.TERMINATING
    running = _running(pod)
    if running and _ready(pod):
        return PodPhase.READY
    if not running and trouble(pod) is not None:
        return PodPhase.DOWN  # it will not start by itself: no need to wait for the timeout
    created = datetime.datetime.fromisoformat(str(pod["metadata"]["creationTimestamp"]).replace("Z", "+00:00"))
    young = (now - created).total_seconds() < start_timeout_seconds
    if running:
        return PodPhase.WARMING_UP if young else PodPhase.NOT_READY
    return PodPhase.STARTING if young else PodPhase.DOWN


def _static_config(metadata: Mapping[str, Any]) -> dict[str, str]:
    raw = (metadata.get("annotations") or {}).get(naming.STATIC_CONFIG_ANNOTATION)
    return dict(json.loads(raw)) if raw else {}


def _authentication(config: Mapping[str, str], name: str, protocol: SecurityProtocol) -> ClientAuthentication:
    if protocol in (SecurityProtocol.SASL_SSL, SecurityProtocol.SASL_PLAINTEXT):
        return ClientAuthentication.SCRAM_SHA_512
    if config.get(f"listener.name.{name.lower()}.ssl.client.auth") == "required":
        return ClientAuthentication.TLS
    return ClientAuthentication.NONE


def node_pods(pods: Sequence[Pod]) -> list[Pod]:
    """The nodes' pods among a cluster's pods (preflight pods aside)."""
    return [p for p in pods if naming.ROLE_LABEL in (labels := p["metadata"].get("labels") or {})
            and naming.PREFLIGHT_LABEL not in labels]


def authorizes(pod: Pod) -> bool:
    """Whether the node was started with Kafka's StandardAuthorizer (its static config)."""
    return _static_config(pod["metadata"]).get("authorizer.class.name") == naming.STANDARD_AUTHORIZER


def served_listeners(pod: Pod) -> frozenset[ServedListener]:
    """The client listeners a pod was started with (its static config: listeners, their protocols and
    authentication)."""
    config = _static_config(pod["metadata"])
    protocols = dict(part.split(":", 1) for part in config.get("listener.security.protocol.map", "").split(",")
                     if ":" in part)
    served = set()
    for bound in filter(None, config.get("listeners", "").split(",")):
        name, _, address = bound.partition("://")
        if name in (naming.REPLICATION_LISTENER, naming.CONTROLLER_LISTENER) or name not in protocols:
            continue
        protocol = SecurityProtocol(protocols[name])
        served.add(ServedListener(name, int(address.rsplit(":", 1)[1]), protocol,
                                  _authentication(config, name, protocol)))
    return frozenset(served)


def _without_admission_defaults(running: Sequence[Any], wanted: Sequence[Any]) -> list[Any]:
    """A pod's tolerations minus the ones the API server adds to every pod (DefaultTolerationSeconds)."""
    return [t for t in running if t in wanted or not (t.get("key") in ADMISSION_TOLERATION_KEYS
                                                       and t.get("effect") == "NoExecute")]


def pending_changes(pod: Pod, template: Mapping[str, Any]) -> tuple[PendingChange, ...]:
    """What differs between a running pod and the template it should run."""
    old, new = _static_config(pod["metadata"]), _static_config(template["metadata"])
    config = diff(new, old)
    changes = [PendingChange(ChangeKind.CONFIG, key, old.get(key), value)
               for key, value in sorted({**config.set, **dict.fromkeys(config.unset)}.items())]
    for kind, key in ((ChangeKind.CERTIFICATES, naming.CERTIFICATES_ANNOTATION),
                      (ChangeKind.CLIENTS_CA, naming.CLIENTS_CA_ANNOTATION),
                      (ChangeKind.SECRETS, naming.CONFIG_SECRETS_ANNOTATION)):
        running, wanted = ((pod["metadata"].get("annotations") or {}).get(key),
                           (template["metadata"].get("annotations") or {}).get(key))
        if running != wanted:
            changes.append(PendingChange(kind, key, running, wanted))
    pod_container = ((pod.get("spec") or {}).get("containers") or [{}])[0]
    template_container = template["spec"]["containers"][0]
    if pod_container.get("image") != template_container.get("image"):
        changes.append(PendingChange(ChangeKind.IMAGE, "image", pod_container.get("image"),
                                     template_container.get("image")))
    for name in CONTAINER_FIELDS:
        if (pod_container.get(name) or {}) != (template_container.get(name) or {}):
            changes.append(PendingChange(ChangeKind.CONTAINER, name, None, None))
    pod_spec, template_spec = pod.get("spec") or {}, template.get("spec") or {}
    for name in POD_FIELDS:
        running, wanted = pod_spec.get(name), template_spec.get(name)
        if name == "tolerations":
            running = _without_admission_defaults(running or [], wanted or []) or None
        if running != wanted:
            changes.append(PendingChange(ChangeKind.POD, name, str(running), str(wanted)))
    return tuple(changes)


def host(pod: Pod) -> str | None:
    """The Kubernetes node a pod was scheduled on (None before it is scheduled)."""
    name = (pod.get("spec") or {}).get("nodeName")
    return str(name) if name else None


def host_down(node: Mapping[str, Any] | None, name: str) -> str | None:
    """Why a Kubernetes node cannot run pods (missing, or its Ready condition not True), else None."""
    if node is None:
        return f"Kubernetes node {name} is gone"
    conditions = (node.get("status") or {}).get("conditions") or []
    ready: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    if ready.get("status") == "True":
        return None
    why = ready.get("message") or ready.get("reason") or "no status posted"
    return f"Kubernetes node {name} is not Ready ({why})"


def node_states(ctx: ClusterContext, statefulsets: Mapping[Pool, Mapping[str, Any] | None],
                pods: Sequence[Pod], registered: set[int], now: datetime.datetime,
                hosts_down: Mapping[str, str] | None = None,
                controller_running: Mapping[int, bool] | None = None) -> tuple[NodeState, ...]:
    """Every node of the pools ctx runs, plus any pod left beyond them (being removed). hosts_down: the
    Kubernetes nodes that cannot run pods, and why; controller_running: for the nodes asked, whether they run as
    controllers now (combined mode)."""
    timeout = ctx.spec.restarts.node_ready_timeout_seconds
    nodes = []
    for pool in ctx.pools():
        sts = statefulsets.get(pool) or {}
        update_revision = (sts.get("status") or {}).get("updateRevision")
        template = (sts.get("spec") or {}).get("template")
        by_ordinal = {ordinal(p): p for p in pods if (p["metadata"].get("labels") or {}).get(naming.ROLE_LABEL)
                      == pool.value and ordinal(p) is not None}
        for index in sorted(set(range(ctx.replicas(pool))) | {o for o in by_ordinal if o is not None}):
            pod = by_ordinal.get(index)
            node_id = naming.node_id(pool, index)
            revision = (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) if pod else None
            current = pod is None or update_revision is None or revision == update_revision
            annotations = (pod["metadata"].get("annotations") or {}) if pod else {}
            nodes.append(NodeState(
                node_id=node_id, pool=pool, pod=naming.pod(ctx.name, pool, index), roles=ctx.roles(pool, index),
                phase=phase(pod, now, timeout), revision_current=current, registered=node_id in registered,
                restart_requested=restart_request(annotations.get(RESTART_ANNOTATION)),
                trouble=trouble(pod), requests=_requests(pod), listeners=served_listeners(pod) if pod else frozenset(),
                version=ctx.version_of(_image(pod)) if pod else None,
                host=host(pod) if pod else None, host_down=(hosts_down or {}).get(host(pod) or "") if pod else None,
                host_address=((pod.get("status") or {}).get("hostIP") or None) if pod else None,
                pending=pending_changes(pod, template) if pod and template and not current else (),
                controller_running=(controller_running or {}).get(node_id)))
    return tuple(nodes)


def _image(pod: Pod) -> str | None:
    image = (((pod.get("spec") or {}).get("containers") or [{}])[0]).get("image")
    return str(image) if image else None


def _requests(pod: Pod | None) -> dict[str, str]:
    container = (((pod or {}).get("spec") or {}).get("containers") or [{}])[0]
    return {k: str(v) for k, v in ((container.get("resources") or {}).get("requests") or {}).items()}


def preflight(pod: Pod) -> Preflight | None:
    """What a preflight pod showed: passed (the JVM printed Kafka's version), failed (and why, quoting
    Kubernetes or the JVM), or still running. None for a pod that is not a preflight pod."""
    labels = pod["metadata"].get("labels") or {}
    pool, revision = labels.get(naming.PREFLIGHT_LABEL), labels.get(naming.PREFLIGHT_REVISION_LABEL)
    if pool not in set(Pool) or not revision:
        return None
    status = pod.get("status") or {}
    terminated = next(((c.get("state") or {}).get("terminated") for c in status.get("containerStatuses") or []
                       if (c.get("state") or {}).get("terminated")), None) or {}
    said = " ".join(str(terminated.get("message") or "").split())[-600:]
    outcome, message = PreflightOutcome.RUNNING, trouble(pod)
    if status.get("phase") == "Succeeded":
        outcome, message = PreflightOutcome.PASSED, said or "started"
    elif status.get("phase") == "Failed":
        exit_code = f"exit code {terminated['exitCode']}: " if "exitCode" in terminated else ""
        outcome = PreflightOutcome.FAILED
        message = f"{exit_code}{said or status.get('message') or terminated.get('reason') or status.get('reason')}"
    elif message is not None:  # it will not start by itself: unschedulable, image not pulled
        outcome = PreflightOutcome.FAILED
    return Preflight(pod["metadata"]["name"], Pool(pool), revision, outcome, message or "starting")
