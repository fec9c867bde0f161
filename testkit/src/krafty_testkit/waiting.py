"""Waiting for a condition with a timeout, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    pass


def wait_for(observe: Callable[[], T], done: Callable[[T], bool], timeout: float, what: str,
             interval: float = 0.5) -> T:
    """Calls observe() until done(observation); on timeout fails showing the last observation.

    An exception from observe() counts as "not yet" and is shown if it was the last thing seen.
    """
    deadline = time.monotonic() + timeout
    last: object = "nothing observed"
    while True:
        try:
            value = observe()
            if done(value):
                return value
            last = value
        except Exception as error:  # noqa: BLE001 - any failure to observe means "not yet"
            last = f"{type(error).__name__}: {error}"
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout}s waiting for {what}; last seen: {last}")
        time.sleep(interval)
