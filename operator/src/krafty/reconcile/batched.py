"""What the batched resource passes (Topics, KafkaUsers) share: how soon a pass comes again, each live
resource's finalizer, and what every resource says when Kafka cannot be asked."""

from __future__ import annotations

import datetime
from typing import Any

from krafty.clients.kube import Kube
from krafty.decide.status import READY, Condition
from krafty.reconcile import writer

BUSY_INTERVAL = 5.0  # something is changing, or Kafka could not be asked: the pass comes again this soon
CHECK_INTERVAL = 30.0  # nothing to change: the pass comes again this soon (drift, a topic deleted behind our back)


def add_finalizers(kube: Kube, kind: str, finalizer: str, live: list[dict[str, Any]]) -> None:
    """Each live resource holds the pass's finalizer (added at once, to those without it), so that its deletion
    waits for the pass to undo what it made."""
    writer.for_each([body for body in live if finalizer not in (body["metadata"].get("finalizers") or [])],
                    lambda body: kube.add_finalizer(kind, body, finalizer))


def unreachable(kube: Kube, kind: str, live: list[dict[str, Any]], error: Exception,
                moment: datetime.datetime) -> float:
    """Every live resource says Kafka cannot be asked (and why); returns when the pass comes again."""
    condition = Condition(READY, False, "KafkaUnreachable", f"Kafka cannot be asked: {error}")
    writer.for_each(live, lambda body: writer.write(kube, kind, body, {}, [condition], moment))
    return BUSY_INTERVAL


def settled(body: dict[str, Any]) -> bool:
    """Ready at the current generation: a difference found now was made behind the operator's back (else it is a
    spec change being applied)."""
    status = body.get("status") or {}
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == READY), {})
    return ready.get("status") == "True" and status.get("observedGeneration") == body["metadata"].get("generation")
