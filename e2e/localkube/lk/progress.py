"""Saying what runs: a line for each step, and at least every PROGRESS_SECONDS while a long one lasts; and noting
how long each first build took, for the e2e tier's time budget."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

PROGRESS_SECONDS = 15
BUILDS_LEDGER = "KRAFTY_RUN_BUILDS"  # where a make run notes its first builds' seconds (krafty_testkit.budget reads it)


def say(message: str) -> None:
    print(f"localkube: {message}", flush=True)


@contextmanager
def ticking(what: str, every: float = PROGRESS_SECONDS) -> Iterator[Callable[[str], None]]:
    """Says what is still under way, and for how long, every `every` seconds while the block runs; the block is
    given a function that sets what it is at now (a build's step), said with each line."""
    began = time.monotonic()
    done = threading.Event()
    now = [""]

    def tick() -> None:
        while not done.wait(every):
            at = f", at {now[0]}" if now[0] else ""
            say(f"{what}: {time.monotonic() - began:.0f} s so far{at}")

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield lambda text: now.__setitem__(0, text)
    finally:
        done.set()
        thread.join()


@contextmanager
def first_build(what: str) -> Iterator[None]:
    """A build made only on a cache miss: its seconds are noted in the run's ledger (BUILDS_LEDGER), so that the
    e2e tier's time budget leaves them out."""
    began = time.monotonic()
    try:
        yield
    finally:
        ledger = os.environ.get(BUILDS_LEDGER)
        if ledger:
            with open(ledger, "a") as noted:
                noted.write(f"{time.monotonic() - began:.0f} {what}\n")


def wait(check: Callable[[], str], timeout: float, what: str) -> None:
    """Waits until check() says "ok", printing what it last said every PROGRESS_SECONDS."""
    began = last_said = time.monotonic()
    seen = ""
    while time.monotonic() - began < timeout:
        try:
            seen = check()
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            seen = str(error)
        if seen == "ok":
            return
        if time.monotonic() - last_said >= PROGRESS_SECONDS:
            say(f"waiting for {what} ({time.monotonic() - began:.0f} s): {seen}")
            last_said = time.monotonic()
        time.sleep(1)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {seen}")
