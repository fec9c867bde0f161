"""The plan pass: a KafkaClusterPlan's plan, made by the cluster pass's own steps over what runs (reading only, the
children applied as a dry run) and written into its status. The KafkaCluster is not changed.

A plan is made once for each generation of the KafkaClusterPlan. Who may create one is the API server's business:
Kubernetes' RBAC (the krafty kinds aggregated into a namespace's `edit`) and the chart's admission policy, which
takes a plan only from whoever may update the KafkaCluster it names, so that a plan tells its author nothing that
author could not find out by applying the spec.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from krafty import naming
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kube import API_ERRORS, Kube
from krafty.decide.status import READY, Condition
from krafty.model.common import spec_of
from krafty.model.plan import KafkaClusterPlanSpec
from krafty.planning.preview import Preview
from krafty.reconcile import writer
from krafty.reconcile.batched import settled
from krafty.wire import KafkaProtocolError

log = logging.getLogger(__name__)

RETRY = 15.0  # a plan that could not be made (Kafka or the API server did not answer) is tried again this soon

Previewer = Callable[[dict[str, Any], Mapping[str, Any]], Preview]


class PlanPass:
    def __init__(self, kube: Kube, previewer: Previewer,
                 clock: Callable[[], datetime.datetime] = writer.now) -> None:
        self.kube = kube
        self.previewer = previewer
        self.clock = clock

    def reconcile(self, namespace: str, name: str) -> float | None:
        """Plans the KafkaClusterPlan `name` if its spec has no plan yet; returns when to try again (None: done)."""
        body = self.kube.get(naming.PLAN_KIND, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp") or settled(body):  # (planned at this generation)
            return None
        spec = spec_of(KafkaClusterPlanSpec, body)
        if spec is None:  # (the CRD's schema lets no such plan in)
            return None
        cluster = spec.cluster_ref.name
        target = self.kube.get(naming.CLUSTER_KIND, cluster, namespace)
        if target is None:
            self._write(body, {}, Condition(READY, False, "ClusterNotFound",
                                            f"no {naming.CLUSTER_KIND} {cluster} in namespace {namespace}: create "
                                            "it, or name another in spec.clusterRef"))
            return None
        try:
            preview = self.previewer(target, spec.spec)
        except (*API_ERRORS, KafkaUnavailable, KafkaProtocolError) as error:
            log.warning("plan %s/%s of %s could not be made: %s", namespace, name, cluster, error)
            self._write(body, {}, Condition(READY, False, "PlanFailed",
                                            f"the plan could not be made: {error}; it is tried again in "
                                            f"{RETRY:.0f} s"))
            return RETRY
        moment = self.clock()
        message = f"{preview.verdict.value}: {preview.first_step or 'nothing to do'}"
        self._write(body, {"plannedAt": writer.timestamp(moment), "restarts": len(preview.restarts),
                           "plan": preview.as_json()}, Condition(READY, True, "Planned", message), moment)
        self.kube.event(body, naming.PLAN_KIND, "Planned", f"{naming.CLUSTER_KIND} {cluster}: {message}")
        return None

    def _write(self, body: dict[str, Any], fields: Mapping[str, Any], condition: Condition,
               moment: datetime.datetime | None = None) -> None:
        writer.write(self.kube, naming.PLAN_KIND, body, fields, [condition], moment or self.clock())
