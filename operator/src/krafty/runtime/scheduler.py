"""Runs each object's reconcile pass on its own timer, never two at once for one object.

kopf's timers and daemons put a finalizer on every object, which would make a
KafkaCluster undeletable once the operator is gone. This scheduler needs none:
kopf's event handlers (every change of a KafkaCluster, Topic, KafkaUser or Kafka
pod, and the first listing at start; krafty.runtime.handlers) poke it, and each
pass says when the next one is due (soon while a roll is under way, seldom when
all is calm).
A standby replica's scheduler queues passes and runs none until its replica
leads (krafty.runtime.leadership); it then runs every queued one at once.
"""

from __future__ import annotations

import datetime
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

from krafty.clients.errors import KafkaUnavailable
from krafty.decide.cluster_status import PassFailure

log = logging.getLogger(__name__)

ERROR_DELAY = 15.0  # after Kafka did not answer (it is starting or restarting), and after a first failure
MAX_ERROR_DELAY = 300.0  # a pass that keeps failing otherwise waits twice as long each time, up to this


def retry_delay(failures: int, first: float = ERROR_DELAY, most: float = MAX_ERROR_DELAY) -> float:
    """Seconds before the next pass of an object whose passes failed `failures` times in a row (not counting
    Kafka not answering): a bug or a refusal that every pass meets is not retried every 15 s for ever."""
    return min(first * float(2 ** max(failures - 1, 0)), most)
Key = Hashable
Pass = Callable[[Key], float | None]  # returns seconds until the next pass, or None to forget the key
Group = Callable[[Key], Hashable]  # which keys share a limit (the passes of one Kafka cluster)
Told = Callable[[Key, PassFailure | None], None]  # a key's pass failed (how), or succeeded after failing (None)


class Scheduler:
    def __init__(self, run: Pass, workers: int = 4, leading: bool = True,
                 group: Group | None = None, per_group: int | None = None,
                 error_delays: tuple[float, float] = (ERROR_DELAY, MAX_ERROR_DELAY), told: Told | None = None) -> None:
        """`per_group`: at most this many passes of one group at once, so that a cluster whose calls hang (each
        bounded by its timeout) holds that many workers, never all of them: other clusters' passes go on.
        `error_delays`: the first and the longest wait after a failed pass (retry_delay). `told`: called after each
        failed pass, and after the first that succeeds again."""
        self._run = run
        self._told = told
        self._error_delays = error_delays
        self._failures: Counter[Key] = Counter()  # failed passes in a row, per key
        self._group = group or (lambda key: key)
        self._per_group = per_group or workers
        self._leading = threading.Event()
        if leading:
            self._leading.set()
        self._due: dict[Key, float] = {}
        self._running: set[Key] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reconcile")
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(10)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def lead(self) -> None:
        """This replica leads now: run the queued passes."""
        self._leading.set()
        self._wake.set()

    def poke(self, key: Key) -> None:
        """Run a pass for this key as soon as it is not running."""
        with self._lock:
            self._due[key] = 0.0
        self._wake.set()

    def forget(self, key: Key) -> None:
        with self._lock:
            self._due.pop(key, None)
            self._failures.pop(key, None)

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._due)

    def _loop(self) -> None:
        """Sleeps until the next pass falls due or something wakes it (a poke, a pass ending, leading, stopping):
        an idle operator's scheduler wakes once for each pass, not twice a second."""
        while not self._stop.is_set():
            timeout = None
            if self._leading.is_set():
                now = time.monotonic()
                with self._lock:
                    ready = self._ready(now)
                    self._running.update(ready)
                    for key in ready:
                        self._due[key] = float("inf")  # a poke while it runs resets this to 0
                    timeout = self._until_due(now)
                for key in ready:
                    self._pool.submit(self._one, key)
            self._wake.wait(timeout)
            self._wake.clear()

    def _tell(self, key: Key, failure: PassFailure | None) -> None:
        if self._told is None:
            return
        try:
            self._told(key, failure)
        except Exception:  # (telling is a record: the passes go on without it)
            log.exception("telling how the pass of %s went failed", key)

    def _until_due(self, now: float) -> float | None:
        """Seconds until the next key falls due, or None. (A key due already but held by its group's limit waits
        for one of that group's passes to end, which wakes the loop.)"""
        soonest = min((at for at in self._due.values() if at > now), default=math.inf)
        return None if soonest == math.inf else soonest - now

    def _ready(self, now: float) -> list[Key]:
        """Due keys, longest due first, within each group's limit."""
        busy = Counter(self._group(k) for k in self._running)
        ready = []
        for key, at in sorted(self._due.items(), key=lambda item: item[1]):
            group = self._group(key)
            if at <= now and key not in self._running and busy[group] < self._per_group:
                busy[group] += 1
                ready.append(key)
        return ready

    def _one(self, key: Key) -> None:
        delay: float | None = self._error_delays[0]
        try:
            delay = self._run(key)
            if self._failures.pop(key, None):
                self._tell(key, None)
        except KafkaUnavailable as error:  # Kafka starting, restarting or unreachable: one line, no traceback
            log.warning("reconcile of %s: Kafka did not answer (%s); retrying in %ss", key, error, delay)
        except Exception as error:
            self._failures[key] += 1
            delay = retry_delay(self._failures[key], *self._error_delays)
            log.exception("reconcile of %s failed (%d in a row); retrying in %ss", key, self._failures[key], delay)
            self._tell(key, PassFailure(self._failures[key], f"{type(error).__name__}: {error}",
                                        datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=delay)))
        finally:
            with self._lock:
                self._running.discard(key)
                # A poke while it ran (due reset to 0) is a change the pass may not have seen: run again soon,
                # even after a pass that was its last (a Topic deleted while its gone cluster's pass listed them)
                poked = self._due.get(key) == 0.0
                if poked:
                    self._due[key] = time.monotonic() + min(1.0 if delay is None else delay, 1.0)
                elif delay is None:
                    self._due.pop(key, None)
                elif key in self._due:
                    self._due[key] = time.monotonic() + delay
            self._wake.set()
