"""A KafkaCluster's deletion, one pass at a time: observe what is left of its nodes, decide the next step
(krafty.decide.teardown), act, write status, and let go of the finalizer once the brokers are gone."""

from __future__ import annotations

import logging
from typing import Any

from krafty import naming
from krafty.clients.kube import Kube
from krafty.decide import teardown
from krafty.decide.status import PROGRESSING, READY, Condition
from krafty.decide.teardown import TeardownStep
from krafty.naming import Pool
from krafty.reconcile import writer

log = logging.getLogger(__name__)


def teardown_pass(kube: Kube, body: dict[str, Any]) -> bool:
    """One step of an ordered deletion; returns whether the cluster is still held (check again soon)."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    if naming.CLUSTER_FINALIZER not in (meta.get("finalizers") or []):
        return False
    moment = writer.now()
    brokers = kube.list("Pod", namespace, naming.selector_labels(name, Pool.BROKER))
    grace = max((int(p["spec"].get("terminationGracePeriodSeconds") or 30) for p in brokers), default=30)
    deleted_at = writer.parse(meta["deletionTimestamp"])
    step = teardown.decide(
        dedicated=kube.get("StatefulSet", naming.statefulset(name, Pool.CONTROLLER), namespace) is not None,
        broker_set_present=kube.get("StatefulSet", naming.statefulset(name, Pool.BROKER), namespace) is not None,
        brokers_left=tuple(sorted(p["metadata"]["name"] for p in brokers)),
        waited_seconds=(moment - deleted_at).total_seconds(), grace_period_seconds=grace)
    log.info("KafkaCluster %s/%s deletion: %s (%s)", namespace, name, step.step.value, step.message)
    kube.event(body, naming.CLUSTER_KIND, step.reason, step.message, warning=step.warning)
    writer.write(kube, naming.CLUSTER_KIND, body, {}, [
        Condition(READY, False, "Deleting", "the cluster is being deleted"),
        Condition(PROGRESSING, step.step is not TeardownStep.RELEASE, step.reason, step.message)], moment)
    if step.step is TeardownStep.STOP_BROKERS:
        kube.delete("StatefulSet", naming.statefulset(name, Pool.BROKER), namespace)
    if step.step is TeardownStep.RELEASE:
        kube.remove_finalizer(naming.CLUSTER_KIND, body, naming.CLUSTER_FINALIZER)
        return False
    return True
