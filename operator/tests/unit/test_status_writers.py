"""Status and Event writes for many resources run WRITERS at a time, and a failure is not lost."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from krafty.reconcile import status


def test_writes_for_many_resources_run_side_by_side():
    together = threading.Barrier(status.WRITERS, timeout=5)  # broken (and raising) unless WRITERS run at once
    done: list[str] = []

    def report(body: dict[str, Any]) -> None:
        together.wait()
        done.append(body["name"])

    status.for_each([{"name": f"t{i}"} for i in range(3 * status.WRITERS)], report)
    assert sorted(done) == sorted(f"t{i}" for i in range(3 * status.WRITERS))


def test_a_failed_write_is_raised_once_every_other_resource_was_written():
    done: list[str] = []

    def report(body: dict[str, Any]) -> None:
        if body["name"] in ("t3", "t7"):
            raise RuntimeError(f"refused {body['name']}")
        done.append(body["name"])

    with pytest.raises(RuntimeError, match="refused t3"):
        status.for_each([{"name": f"t{i}"} for i in range(20)], report)
    assert len(done) == 18
