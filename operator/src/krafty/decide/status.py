"""Status conditions: built from what was observed and decided, merged so that
lastTransitionTime only moves when a condition's status does."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

READY = "Ready"
AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool | None  # None: Unknown (what it is about cannot be seen now)
    reason: str
    message: str

    def as_dict(self, now: str, generation: int) -> dict[str, Any]:
        status = "Unknown" if self.status is None else "True" if self.status else "False"
        return {"type": self.type, "status": status, "reason": self.reason,
                "message": self.message, "lastTransitionTime": now, "observedGeneration": generation}


def merge_conditions(old: Sequence[dict[str, Any]], new: Iterable[Condition], now: str,
                     generation: int) -> list[dict[str, Any]]:
    """New conditions, keeping the old lastTransitionTime where the status did not change."""
    previous = {c.get("type"): c for c in old}
    merged = []
    for condition in new:
        entry = condition.as_dict(now, generation)
        before = previous.get(condition.type)
        if before is not None and before.get("status") == entry["status"] and before.get("lastTransitionTime"):
            entry["lastTransitionTime"] = before["lastTransitionTime"]
        merged.append(entry)
    return merged
