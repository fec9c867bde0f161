"""Restart reasons: what differs between a running pod and its template, and nothing else."""

from __future__ import annotations

from typing import Any

from krafty.reconcile.observe import pending_reasons

ADMITTED = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}]


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {}, "spec": {"containers": [{"image": "krafty/kafka:1"}], **spec}}


def test_tolerations_the_api_server_adds_are_not_a_difference():
    template = pod(terminationGracePeriodSeconds=150)
    assert pending_reasons(pod(terminationGracePeriodSeconds=120, tolerations=ADMITTED), template) == (
        "pod terminationGracePeriodSeconds 120 -> 150",)
    assert pending_reasons(pod(tolerations=ADMITTED), pod()) == ()


def test_a_toleration_the_user_adds_is_named():
    dedicated = {"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}
    reasons = pending_reasons(pod(tolerations=ADMITTED), pod(tolerations=[dedicated]))
    assert reasons == (f"pod tolerations None -> {[dedicated]}",)
