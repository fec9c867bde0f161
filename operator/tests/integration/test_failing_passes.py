"""A pass that keeps failing, told where a user looks: the scheduler's retries, status.failingPasses on the
KafkaCluster (as the CRD stores it) and its Events, with the rights the chart gives the operator."""

from __future__ import annotations

import json
import threading
from typing import Any

from krafty import naming
from krafty.clients.kube import Kube
from krafty.runtime.failing import FailingPasses
from krafty.runtime.scheduler import Scheduler
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.waiting import wait_for

from ..conftest import admin_kube, operator_kube

NS = "failing"


def failing_passes(kube: Kube, name: str) -> list[dict[str, Any]] | None:
    body = kube.get(naming.CLUSTER_KIND, name, NS) or {}
    return (body.get("status") or {}).get("failingPasses")


def reasons(apiserver: LocalApiServer, name: str) -> list[tuple[str, int]]:
    out = apiserver.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}",
                            "-o", "json").stdout
    return sorted((e["reason"], e["count"]) for e in json.loads(out)["items"])


def test_a_pass_that_keeps_failing_is_in_status_with_its_next_attempt_and_gone_once_it_succeeds(apiserver):
    # Given two clusters: prod's topic pass raises three times in a row, then succeeds; other's passes succeed
    kube = admin_kube(apiserver, NS)
    for name in ("prod", "other"):
        apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": naming.CLUSTER_KIND,
                         "metadata": {"name": name, "namespace": NS}, "spec": {"brokers": {"replicas": 3}}})
    raised = threading.Semaphore(3)
    seen: list[list[dict[str, Any]] | None] = []

    def run(key: tuple[str, str, str]) -> float | None:
        if key == ("topics", NS, "prod") and raised.acquire(blocking=False):
            seen.append(failing_passes(kube, "prod"))  # (what status said before this pass)
            raise ValueError("a bug the spec meets every time")
        return 30.0

    told = FailingPasses(operator_kube(apiserver, (NS,)))
    scheduler = Scheduler(run, workers=2, error_delays=(0.5, 1.0), told=told.told)
    scheduler.start()
    try:
        scheduler.poke(("topics", NS, "prod"))
        scheduler.poke(("cluster", NS, "other"))
        # When it has failed twice, Then the KafkaCluster's status names the pass, its failures in a row, the
        # error and when it runs next, as the CRD stores them
        wait_for(lambda: seen, lambda s: len(s) >= 3, 30, "three failed passes")
        assert seen[0] is None
        [second] = seen[2] or []
        assert (second["pass"], second["failures"], second["error"]) == (
            "topics", 2, "ValueError: a bug the spec meets every time")
        assert second["nextAttemptAt"].endswith("Z")
        # And once it succeeds, the entry is gone, and the Events said each failure and the recovery
        wait_for(lambda: failing_passes(kube, "prod"), lambda rows: rows is None, 30, "failingPasses gone")
        assert reasons(apiserver, "prod") == [("PassFailed", 1)] * 3 + [("PassRecovered", 1)]
        # And the other cluster, whose passes went on, has no such entry nor Event
        assert (failing_passes(kube, "other"), reasons(apiserver, "other")) == (None, [])
    finally:
        scheduler.stop()
