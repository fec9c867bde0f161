"""A preflight pod: a StatefulSet's new pod template, tried before any node restarts into it.

Same image, JVM options (heap and KAFKA_OPTS), service account, node selector,
node affinity, tolerations and priority as a node would run, but it only starts
the JVM with the node's options to print Kafka's version, and exits. It leaves
out what concerns a node's place among its siblings (pod affinity and
anti-affinity, topology spread: the node it replaces frees its own place) and
asks only for the resources the new template asks beyond what the node it
replaces holds now, so a full cluster does not refuse a template that fits
where the old pod was.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from krafty import naming
from krafty.model.common import parse_quantity
from krafty.model.context import ClusterContext
from krafty.naming import Pool

# A preflight that has not finished by then has failed (an image that pulls forever, a JVM that hangs).
DEADLINE_SECONDS = 300
COMMAND = [f"{naming.KAFKA_HOME}/bin/kafka-run-class.sh", "kafka.Kafka", "--version"]
PLACEMENT_AMONG_SIBLINGS = ("podAffinity", "podAntiAffinity")


def _increase(limits: Mapping[str, Any], requests: Mapping[str, Any], old: Mapping[str, str]) -> dict[str, str]:
    """Per resource, what the new template asks beyond what the running pod holds (never negative); a
    resource with a limit and no request asks for its limit."""
    out = {}
    for name in sorted(set(limits) | set(requests)):
        wanted = parse_quantity(requests.get(name, limits.get(name, 0)))
        more = max(Decimal(0), wanted - parse_quantity(old.get(name, 0)))
        out[name] = f"{int(more * 1000)}m" if name == "cpu" else str(int(more))
    return out


def preflight_pod(ctx: ClusterContext, pool: Pool, revision: str, template: Mapping[str, Any],
                  replaced_requests: Mapping[str, str]) -> dict[str, Any]:
    spec = copy.deepcopy(dict(template["spec"]))
    container = spec["containers"][0]
    for key in ("readinessProbe", "livenessProbe", "startupProbe", "ports"):
        container.pop(key, None)
    container["command"] = COMMAND
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    # Every resource gets an explicit request: a limit alone would make Kubernetes request the whole limit.
    container["resources"] = {**({"limits": limits} if limits else {}),
                              "requests": _increase(limits, requests, replaced_requests)}
    spec["volumes"] = [v for v in spec.get("volumes") or [] if v.get("name") != naming.DATA_VOLUME] + [
        {"name": naming.DATA_VOLUME, "emptyDir": {}}]
    affinity = {k: v for k, v in (spec.get("affinity") or {}).items() if k not in PLACEMENT_AMONG_SIBLINGS}
    spec.pop("affinity", None)
    spec.pop("topologySpreadConstraints", None)
    spec.update({"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                 "activeDeadlineSeconds": DEADLINE_SECONDS, **({"affinity": affinity} if affinity else {})})
    metadata = ctx.metadata(naming.preflight_pod(revision))
    metadata["labels"] = {naming.MANAGED_BY_LABEL: naming.MANAGED_BY, "app.kubernetes.io/part-of": "krafty",
                          naming.CLUSTER_LABEL: ctx.name, naming.PREFLIGHT_LABEL: pool.value,
                          naming.PREFLIGHT_REVISION_LABEL: revision}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
