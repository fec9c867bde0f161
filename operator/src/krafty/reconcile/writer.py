"""The one status writer for KafkaClusters, Topics and KafkaUsers, and the one clock their conditions use."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from krafty.clients.kube import Kube
from krafty.decide.status import Condition, merge_conditions

# Resources whose Events and status are written at once: a pass over thousands of resources waits for the API
# server's work, not for the sum of its round trips. (On the two-core test machine the API server's CPU is the limit
# either way: 500 new Topics took as long as one by one, see the README's "Measured here".)
WRITERS = 8
_WRITERS = ThreadPoolExecutor(WRITERS, thread_name_prefix="status-writer")


T = TypeVar("T")


def for_each(items: Iterable[T], act: Callable[[T], object]) -> None:
    """Runs `act` (one resource's Events, then its status) for every item, WRITERS at a time; once all ran,
    raises the first failure. Only for what writes: a thread per item costs more than deciding in line."""
    futures = [_WRITERS.submit(act, item) for item in items]
    failures = [error for error in (future.exception() for future in futures) if error is not None]
    if failures:
        raise failures[0]


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def timestamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(stamp: str) -> datetime.datetime:
    """A timestamp as the API server writes it (metadata.deletionTimestamp, lastTransitionTime)."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)


def write(kube: Kube, kind: str, body: Mapping[str, Any], fields: Mapping[str, Any],
          conditions: Iterable[Condition], moment: datetime.datetime) -> bool:
    """Writes status: the given fields, observedGeneration, and the conditions merged with the old ones
    (conditions of other types are kept). Nothing is written when nothing changed; returns whether it was."""
    status = pending(body, fields, conditions, moment)
    if status is None:
        return False
    meta = body["metadata"]
    kube.patch_status(kind, meta["name"], meta["namespace"], status)
    return True


def pending(body: Mapping[str, Any], fields: Mapping[str, Any], conditions: Iterable[Condition],
            moment: datetime.datetime) -> dict[str, Any] | None:
    """The status `write` would write, or None when the object has it already."""
    before = body.get("status") or {}
    old = before.get("conditions") or []
    generation = body["metadata"].get("generation") or 0
    new = list(conditions)
    kept = [c for c in old if c.get("type") not in {x.type for x in new}]
    status = {**fields, "observedGeneration": generation,
              "conditions": kept + merge_conditions(old, new, timestamp(moment), generation)}
    if all(_stored_as(before.get(key), value) for key, value in status.items()):
        return None
    return status


def _stored_as(stored: Any, value: Any) -> bool:
    """Whether `stored` is `value` as the API server keeps it after a merge patch (keys set to None are gone);
    compared in place, since a calm pass asks it of every field of thousands of resources."""
    if isinstance(value, Mapping):
        if not isinstance(stored, Mapping):
            return False
        kept = [key for key, item in value.items() if item is not None]
        return len(kept) == len(stored) and all(key in stored and _stored_as(stored[key], value[key]) for key in kept)
    if isinstance(value, list):
        return isinstance(stored, list) and len(stored) == len(value) and all(map(_stored_as, stored, value))
    return bool(stored == value)
