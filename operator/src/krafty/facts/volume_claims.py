"""Reading data PersistentVolumeClaims and StorageClasses: how big each volume is and how its growth stands.

Pure functions over the documents the API server returned, so every state a
claim passes through on its way to a new size is a table test. Kubernetes
tells the steps apart in two places, read both: status.allocatedResourceStatuses
(newer) and the Resizing / FileSystemResizePending / ...ResizeError conditions.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from krafty.facts.observed import StorageClassState, VolumeResize, VolumeState
from krafty.model.common import parse_quantity, parse_time

_INFEASIBLE = ("ControllerResizeInfeasible", "NodeResizeInfeasible")
_NODE_PENDING = ("NodeResizePending", "NodeResizeInProgress")
_ERRORS = ("ControllerResizeError", "NodeResizeError")


def _bytes(value: str | None) -> int | None:
    return None if value is None else int(parse_quantity(value))


def _time(condition: Mapping[str, Any] | None) -> datetime.datetime | None:
    return parse_time((condition or {}).get("lastTransitionTime"))


def _resize(allocated: str, conditions: Mapping[str, Mapping[str, Any]], requested: int,
            capacity: int | None) -> tuple[VolumeResize, Mapping[str, Any] | None]:
    """The resize state and the condition that tells it (for its time and message)."""
    error = next((conditions[c] for c in _ERRORS if c in conditions), None)
    if allocated in _INFEASIBLE:
        return VolumeResize.INFEASIBLE, error
    if error is not None:
        return VolumeResize.FAILING, error
    if "FileSystemResizePending" in conditions or allocated in _NODE_PENDING:
        return VolumeResize.FILE_SYSTEM_PENDING, conditions.get("FileSystemResizePending")
    if "Resizing" in conditions or allocated == "ControllerResizeInProgress":
        return VolumeResize.EXPANDING, conditions.get("Resizing")
    if capacity is not None and capacity < requested:
        return VolumeResize.EXPANDING, None  # asked for, not picked up by the driver yet
    return VolumeResize.AT_SIZE, None


def volume_state(claim: Mapping[str, Any]) -> VolumeState:
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    requested = _bytes(((spec.get("resources") or {}).get("requests") or {}).get("storage")) or 0
    capacity = _bytes((status.get("capacity") or {}).get("storage"))
    allocated = str((status.get("allocatedResourceStatuses") or {}).get("storage") or "")
    conditions = {str(c.get("type")): c for c in status.get("conditions") or []}
    resize, told_by = _resize(allocated, conditions, requested, capacity)
    return VolumeState(claim["metadata"]["name"], requested, capacity, spec.get("storageClassName"), resize,
                       _time(told_by), str((told_by or {}).get("message") or ""))


def storage_class_state(name: str, found: Mapping[str, Any] | None) -> StorageClassState | None:
    return None if found is None else StorageClassState(name, bool(found.get("allowVolumeExpansion")))
