"""Growing data volumes: reading a claim's resize state, and what the pass does with a larger storage.size."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

from krafty import naming
from krafty.decide.roll import RestartReason
from krafty.facts.observed import StorageClassState, VolumeResize, VolumeState
from krafty.facts.volume_claims import storage_class_state, volume_state
from krafty.model.context import ClusterContext
from krafty.naming import Pool
from krafty.planning.actions import Announce, ApplyChildren, ExpandVolumes, RestartNode
from krafty.planning.cluster import Facts, Pace, plan

from ..planning.test_plan import BROKERS, CONTROLLERS, ctx, observe, partitions

GI = 2**30
NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC)


def pvc(requested: str = "2Gi", capacity: str | None = "2Gi", allocated: str | None = None,
        conditions: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Bound"} if capacity else {"phase": "Pending"}
    if capacity:
        status["capacity"] = {"storage": capacity}
    if allocated:
        status["allocatedResourceStatuses"] = {"storage": allocated}
    if conditions:
        status["conditions"] = list(conditions)
    return {"metadata": {"name": "data-prod-broker-0"}, "status": status,
            "spec": {"storageClassName": "expandable", "resources": {"requests": {"storage": requested}}}}


def condition(kind: str, message: str = "", at: str = "2026-11-25T11:58:00Z") -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastTransitionTime": at, "message": message}


@pytest.mark.parametrize(("doc", "state", "message"), [
    (pvc(), VolumeResize.AT_SIZE, ""),
    (pvc(capacity=None), VolumeResize.AT_SIZE, ""),
    (pvc("3Gi"), VolumeResize.EXPANDING, ""),
    (pvc("3Gi", conditions=(condition("Resizing"),)), VolumeResize.EXPANDING, ""),
    (pvc("3Gi", allocated="ControllerResizeInProgress"), VolumeResize.EXPANDING, ""),
    (pvc("3Gi", allocated="NodeResizePending", conditions=(condition("FileSystemResizePending", "waiting"),)),
     VolumeResize.FILE_SYSTEM_PENDING, "waiting"),
    (pvc("3Gi", allocated="NodeResizeInProgress"), VolumeResize.FILE_SYSTEM_PENDING, ""),
    (pvc("3Gi", allocated="ControllerResizeInProgress", conditions=(condition("ControllerResizeError", "busy"),)),
     VolumeResize.FAILING, "busy"),
    (pvc("9Ti", allocated="ControllerResizeInfeasible", conditions=(condition("ControllerResizeError", "no room"),)),
     VolumeResize.INFEASIBLE, "no room"),
])
def test_a_claims_resize_state_is_read_from_its_status(doc: dict[str, Any], state: VolumeResize, message: str):
    read = volume_state(doc)
    assert (read.resize, read.message) == (state, message)
    assert read.storage_class == "expandable"
    assert read.capacity == (2 * GI if doc["status"].get("capacity") else None)


def test_the_time_a_file_system_started_waiting_is_kept():
    read = volume_state(pvc("3Gi", conditions=(condition("FileSystemResizePending"),)))
    assert read.since == datetime.datetime(2026, 11, 25, 11, 58, tzinfo=datetime.UTC)


def test_a_storage_class_says_whether_it_can_grow():
    assert storage_class_state("a", {"allowVolumeExpansion": True}) == StorageClassState("a", True)
    assert storage_class_state("b", {"provisioner": "x"}) == StorageClassState("b", False)
    assert storage_class_state("c", None) is None


# -- the pass ---------------------------------------------------------------------------------
def grown(size: str = "3Gi") -> ClusterContext:
    c = ctx()
    storage = c.spec.brokers.storage
    assert storage is not None
    brokers = c.spec.brokers.model_copy(update={"storage": storage.model_copy(update={"size": size})})
    return replace(c, spec=c.spec.model_copy(update={"brokers": brokers}))


def broker_volumes(requested: int = 2 * GI, capacity: int | None = 2 * GI, klass: str = "expandable",
                   **changes: Any) -> tuple[VolumeState, ...]:
    return tuple(replace(VolumeState(naming.claim("prod", Pool.BROKER, b), requested, capacity, klass), **changes)
                 for b in BROKERS)


CLASSES = {"expandable": StorageClassState("expandable", True), "fixed": StorageClassState("fixed", False)}


def observed(c: ClusterContext, volumes: tuple[VolumeState, ...], **overrides: Any) -> Any:
    return observe(c, volumes=volumes, storage_classes=CLASSES, observed_at=NOW,
                   claim_templates={Pool.BROKER: "2Gi", Pool.CONTROLLER: "1Gi"}, **overrides)


def test_a_larger_size_asks_each_claim_for_it_and_restarts_nothing():
    c = grown()
    result = plan(c, observed(c, broker_volumes()), Facts(BROKERS))
    [expand] = [a for a in result.actions if isinstance(a, ExpandVolumes)]
    assert expand.claims == tuple((naming.claim("prod", Pool.BROKER, b), "3Gi") for b in BROKERS)
    assert not [a for a in result.actions if isinstance(a, RestartNode)]
    ready, _, progressing, _ = result.conditions
    assert (progressing.status, progressing.reason) == (True, "ExpandingVolumes")
    assert "0 of 3 volumes at their size" in progressing.message
    assert (ready.status, ready.reason) == (False, "ExpandingVolumes")
    assert result.pace is not Pace.CALM


def test_the_statefulsets_claim_template_keeps_the_size_it_was_created_with():
    # Kubernetes refuses any change of a StatefulSet's claim templates: the claims grow, the template stays
    c = grown()
    result = plan(c, observed(c, broker_volumes()), Facts(BROKERS))
    [apply] = [a for a in result.actions if isinstance(a, ApplyChildren)]
    [sts] = [ch.desired for ch in apply.children if ch.kind == "StatefulSet" and ch.name == "prod-broker"]
    assert sts is not None
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "2Gi"


def test_a_new_pool_is_created_with_the_specs_size():
    c = grown()
    result = plan(c, observe(c, volumes=(), statefulset_replicas={}), Facts(BROKERS))
    [apply] = [a for a in result.actions if isinstance(a, ApplyChildren)]
    [sts] = [ch.desired for ch in apply.children if ch.kind == "StatefulSet" and ch.name == "prod-broker"]
    assert sts is not None
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "3Gi"


@pytest.mark.parametrize(("klass", "why"), [
    ("fixed", "StorageClass fixed of data-prod-broker-0 does not allow volume expansion"),
    ("gone", "StorageClass gone of data-prod-broker-0 does not exist"),
    ("", "data-prod-broker-0 has no StorageClass"),
])
def test_growing_on_a_class_that_cannot_is_refused_naming_the_field(klass: str, why: str):
    c = grown()
    result = plan(c, observed(c, broker_volumes(klass=klass)), Facts(BROKERS))
    assert not [a for a in result.actions if isinstance(a, ExpandVolumes)]
    [refused] = [a for a in result.actions if isinstance(a, Announce) and a.reason == "VolumeResizeRefused"]
    assert refused.warning
    assert refused.message.startswith("spec.brokers.storage.size asks for 3Gi, but ")
    assert why in refused.message
    ready = result.conditions[0]
    assert (ready.status, ready.reason, ready.message) == (False, "VolumeResizeRefused", refused.message)


def test_a_size_below_what_the_volumes_have_is_refused_and_nothing_shrinks():
    c = grown("2Gi")
    result = plan(c, observed(c, broker_volumes(4 * GI, 4 * GI)), Facts(BROKERS))
    assert not [a for a in result.actions if isinstance(a, ExpandVolumes)]
    ready = result.conditions[0]
    assert ready.reason == "VolumeResizeRefused"
    assert "spec.brokers.storage.size is 2Gi, but 3 volumes already have more" in ready.message
    assert "set at least 4Gi" in ready.message


def test_the_drivers_refusal_is_reported_and_not_retried():
    c = grown()
    volumes = broker_volumes(3 * GI, 2 * GI, resize=VolumeResize.INFEASIBLE, message="out of space")
    result = plan(c, observed(c, volumes), Facts(BROKERS))
    assert not [a for a in result.actions if isinstance(a, ExpandVolumes)]
    ready = result.conditions[0]
    assert (ready.status, ready.reason) == (False, "VolumeResizeFailed")
    assert "cannot grow data-prod-broker-0 to 3Gi: out of space" in ready.message


def test_growth_in_progress_is_reported_until_every_file_system_has_grown():
    c = grown()
    volumes = (*broker_volumes(3 * GI, 3 * GI)[:2],
               VolumeState("data-prod-broker-2", 3 * GI, 2 * GI, "expandable", VolumeResize.FILE_SYSTEM_PENDING,
                           NOW - datetime.timedelta(seconds=20)))
    result = plan(c, observed(c, volumes), Facts(BROKERS))
    progressing = result.conditions[2]
    assert progressing.reason == "ExpandingVolumes"
    assert progressing.message == ("2 of 3 volumes at their size; data-prod-broker-2 has 2Gi of 3Gi, "
                                   "FileSystemResizePending")
    assert not [a for a in result.actions if isinstance(a, ExpandVolumes | RestartNode)]
    entries = {e["claim"]: e for e in result.status["volumes"]}
    assert entries["data-prod-broker-2"] == {"claim": "data-prod-broker-2", "requested": "3Gi", "capacity": "2Gi",
                                             "state": "FileSystemResizePending"}
    # Once all are grown, the cluster is ready again
    done = plan(c, observed(c, broker_volumes(3 * GI, 3 * GI)), Facts(BROKERS))
    assert [cond.reason for cond in done.conditions[::2]] == ["ClusterReady", "Reconciled"]
    assert done.pace is Pace.CALM


def test_a_file_system_that_waits_for_its_pod_restarts_the_node_through_the_roll():
    c = grown()
    waiting = NOW - datetime.timedelta(minutes=5)
    volumes = (*broker_volumes(3 * GI, 3 * GI)[:2],
               VolumeState("data-prod-broker-2", 3 * GI, 2 * GI, "expandable", VolumeResize.FILE_SYSTEM_PENDING,
                           waiting))
    result = plan(c, observed(c, volumes), Facts(BROKERS))
    [restart] = [a for a in result.actions if isinstance(a, RestartNode)]
    assert (restart.node.node_id, restart.reason) == (2, RestartReason.FILE_SYSTEM_RESIZE)
    assert "data-prod-broker-2 has waited 300 s to grow to 3Gi" in restart.message
    # Not while the restart would take a partition below min.insync.replicas
    blocked = plan(c, observed(c, volumes, partitions=partitions(isr_without=0)), Facts(BROKERS))
    assert not [a for a in blocked.actions if isinstance(a, RestartNode)]


def test_a_claim_not_bound_yet_is_not_growing():
    # A new broker's claim waits for its pod to be scheduled (WaitForFirstConsumer): nothing to grow or report
    c = grown()
    volumes = (*broker_volumes(3 * GI, 3 * GI)[:2], VolumeState("data-prod-broker-2", 3 * GI, None, "expandable"))
    result = plan(c, observed(c, volumes), Facts(BROKERS))
    assert result.conditions[2].reason != "ExpandingVolumes"
    assert not [a for a in result.actions if isinstance(a, ExpandVolumes)]


def test_claims_of_removed_nodes_are_left_as_they_are():
    c = grown()
    kept = VolumeState(naming.claim("prod", Pool.BROKER, 5), 2 * GI, 2 * GI, "fixed")
    result = plan(c, observed(c, (*broker_volumes(3 * GI, 3 * GI), kept)), Facts(BROKERS))
    assert not [a for a in result.actions if isinstance(a, ExpandVolumes)]
    assert result.conditions[0].reason == "ClusterReady"


def test_controller_volumes_follow_their_own_pool():
    c = ctx()
    storage = c.spec.controllers.storage
    assert storage is not None
    controllers = c.spec.controllers.model_copy(update={"storage": storage.model_copy(update={"size": "2Gi"})})
    c = replace(c, spec=c.spec.model_copy(update={"controllers": controllers}))
    volumes = (*broker_volumes(), *(VolumeState(naming.claim("prod", Pool.CONTROLLER, i - 1000), GI, GI, "fixed")
                                    for i in CONTROLLERS))
    result = plan(c, observed(c, volumes), Facts(BROKERS))
    assert "spec.controllers.storage.size asks for 2Gi" in result.conditions[0].message
