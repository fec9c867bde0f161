"""Which of each cluster's passes keep failing, told where a user looks: status.failingPasses on the KafkaCluster
(each pass's failures in a row, its error and when it runs next) and a warning Event for each failure; both go
once the pass succeeds again. Kafka not answering is not a failure here: each pass reports that itself."""

from __future__ import annotations

import logging
import threading
from typing import Any

from krafty import naming
from krafty.clients.kube import API_ERRORS, Kube
from krafty.decide.cluster_status import PassFailure, failing_passes

log = logging.getLogger(__name__)

CLUSTER_PASSES = ("cluster", "topics", "users", "lag", "disks")  # a cluster's passes: status.failingPasses[].pass


class FailingPasses:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._lock = threading.Lock()
        self._failing: dict[tuple[str, str], dict[str, PassFailure]] = {}  # (namespace, cluster) -> kind -> how

    def told(self, key: Any, failure: PassFailure | None) -> None:
        """A pass (key: job, namespace, cluster) failed, or succeeded after failing (None)."""
        kind, namespace, cluster = key
        if kind not in CLUSTER_PASSES:  # (a KafkaClusterPlan's pass says its own failures in its status)
            return
        with self._lock:
            failing = self._failing.setdefault((namespace, cluster), {})
            if failure is None:
                failing.pop(kind, None)
            else:
                failing[kind] = failure
            rows = failing_passes(failing)
            if not failing:
                self._failing.pop((namespace, cluster), None)
        try:
            body = self.kube.get(naming.CLUSTER_KIND, cluster, namespace)
            if body is None:
                return
            if failure is not None:
                self.kube.event(body, naming.CLUSTER_KIND, "PassFailed", failure.message(kind), warning=True)
            else:
                self.kube.event(body, naming.CLUSTER_KIND, "PassRecovered", f"the {kind} pass succeeded again")
            self.kube.patch_status(naming.CLUSTER_KIND, cluster, namespace, {"failingPasses": rows})
        except API_ERRORS as error:  # (the next failure, or success, tells it again)
            log.warning("could not tell %s/%s's failing passes: %s", namespace, cluster, error)
