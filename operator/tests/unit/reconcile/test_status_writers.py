"""Status and Event writes for many resources run WRITERS at a time, and a failure is not lost."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from krafty.decide.status import Condition
from krafty.reconcile import writer


def test_writes_for_many_resources_run_side_by_side():
    together = threading.Barrier(writer.WRITERS, timeout=5)  # broken (and raising) unless WRITERS run at once
    done: list[str] = []

    def report(body: dict[str, Any]) -> None:
        together.wait()
        done.append(body["name"])

    writer.for_each([{"name": f"t{i}"} for i in range(3 * writer.WRITERS)], report)
    assert sorted(done) == sorted(f"t{i}" for i in range(3 * writer.WRITERS))


def test_a_failed_write_is_raised_once_every_other_resource_was_written():
    done: list[str] = []

    def report(body: dict[str, Any]) -> None:
        if body["name"] in ("t3", "t7"):
            raise RuntimeError(f"refused {body['name']}")
        done.append(body["name"])

    with pytest.raises(RuntimeError, match="refused t3"):
        writer.for_each([{"name": f"t{i}"} for i in range(20)], report)
    assert len(done) == 18


def _stored_body() -> dict[str, Any]:
    """A Topic as the API server keeps it after the pass's last write."""
    moment = writer.parse("2026-11-27T08:00:00Z")
    fields = {"partitions": 3, "leaders": {"1": 2, "2": 1}, "reassignment": None,
              "problemPartitions": [{"partition": 0, "isr": [1]}]}
    body: dict[str, Any] = {"metadata": {"generation": 4}}
    written = writer.pending(body, fields, [Condition("Ready", True, "Ready", "in sync")], moment)
    assert written is not None
    body["status"] = {key: value for key, value in written.items() if value is not None}
    return body


def test_nothing_is_pending_when_the_status_is_as_stored_keys_set_to_none_being_absent():
    body = _stored_body()
    later = writer.parse("2026-11-27T09:00:00Z")  # (a condition that did not change keeps its transition time)
    assert writer.pending(body, {"partitions": 3, "leaders": {"1": 2, "2": 1}, "reassignment": None,
                                 "problemPartitions": [{"partition": 0, "isr": [1]}]},
                          [Condition("Ready", True, "Ready", "in sync")], later) is None


@pytest.mark.parametrize("change", [
    {"leaders": {"1": 3}},  # a nested dict with fewer keys
    {"leaders": {"1": 2, "2": 2}},  # a nested value
    {"problemPartitions": [{"partition": 0, "isr": [1, 2]}]},  # inside a list
    {"problemPartitions": []},
    {"reassignment": {"targetReplicas": 3}},  # a key that was absent
    {"partitions": None},  # a key present, to be removed
])
def test_a_status_that_differs_anywhere_is_pending(change: dict[str, Any]):
    fields = {"partitions": 3, "leaders": {"1": 2, "2": 1}, "reassignment": None,
              "problemPartitions": [{"partition": 0, "isr": [1]}], **change}
    pending = writer.pending(_stored_body(), fields, [Condition("Ready", True, "Ready", "in sync")],
                             writer.parse("2026-11-27T09:00:00Z"))
    assert pending is not None
    assert {key: pending[key] for key in change} == change
