"""Generated page views and the results the job must produce, computed in plain Python.

Events come in phases. The tests produce a phase only after the query has
reported the watermark the previous phases imply, so each event's fate does
not depend on how Spark cuts micro-batches:
- an event is accepted when its window ends after `max event time so far
  (including its own phase) - lateness`: no batch can have a watermark that
  high before it is read;
- an event is dropped when its window ends at or before `max event time of
  the earlier phases - lateness`: the watermark every later batch uses.
Anything in between could go either way; `expected_results` refuses such
data rather than guess.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from krafty_spark.events import PageView, iso_millis

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PAGES = ("/home", "/search", "/cart", "/checkout")
WINDOW = timedelta(minutes=1)
LATENESS = timedelta(minutes=2)

WindowKey = tuple[str, datetime]  # (page, window start)


class AmbiguousTestData(ValueError):
    """An event whose fate would depend on micro-batch boundaries."""


def window_start(ts: datetime, width: timedelta = WINDOW) -> datetime:
    offset = (ts - EPOCH) // width
    return EPOCH + offset * width


@dataclass(frozen=True)
class Expected:
    files: dict[WindowKey, int]  # append mode: final windows only
    kafka: dict[WindowKey, int]  # update mode: last value of every window that got an event
    dropped: int
    watermarks: list[datetime]  # the watermark after each phase

    def watermark_text(self, phase: int) -> str:
        return iso_millis(self.watermarks[phase])


def expected_results(phases: Sequence[Sequence[PageView]], width: timedelta = WINDOW,
                     lateness: timedelta = LATENESS) -> Expected:
    counts: Counter[WindowKey] = Counter()
    watermark = EPOCH
    watermarks, dropped = [], 0
    max_seen = EPOCH
    for phase in phases:
        max_seen = max([max_seen, *(e.ts for e in phase)])
        for event in phase:
            start = window_start(event.ts, width)
            end = start + width
            if end <= watermark:
                dropped += 1
            elif end > max_seen - lateness:
                counts[(event.page, start)] += 1
            else:
                raise AmbiguousTestData(f"{event}: window ends {end}, between watermark {watermark} and "
                                        f"{max_seen - lateness}")
        watermark = max(watermark, max_seen - lateness)
        watermarks.append(watermark)
    final = {key: n for key, n in counts.items() if key[1] + width <= watermark}
    return Expected(files=final, kafka=dict(counts), dropped=dropped, watermarks=watermarks)


class EventFactory:
    """Deterministic events (seeded), with unique ids across phases."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_id = 0

    def between(self, count: int, first: timedelta, last: timedelta) -> list[PageView]:
        """`count` events with event times in [T0+first, T0+last], both bounds included."""
        span_ms = int((last - first).total_seconds() * 1000)
        offsets = [0, span_ms] + [self.rng.randint(0, span_ms) for _ in range(count - 2)]
        events = []
        for ms in offsets[:count]:
            self.next_id += 1
            events.append(PageView(f"e{self.next_id}", f"u{self.rng.randrange(20)}", self.rng.choice(PAGES),
                                   T0 + first + timedelta(milliseconds=ms)))
        self.rng.shuffle(events)
        return events


def minutes(m: float) -> timedelta:
    return timedelta(minutes=m)


def four_phases(seed: int, per_phase: int = 120) -> list[list[PageView]]:
    """With a 1-minute window and 2 minutes lateness (minute offsets from T0):

    1. on time in [0, 1:59]                     windows 0 and 1
    2. on time in [2, 3:59]; watermark after: 1:59
    3. late in window 0 (ends 1:00 <= 1:59: dropped); in window 1 (ends 2:00 > 1:59:
       counted, although each is older than the watermark); on time in [2, 3:59]
    4. on time in [6, 6:59], late in window 0 (dropped); watermark after: 4:59,
       so windows 0-3 are final and window 6 is not
    """
    make = EventFactory(seed)
    quarter = per_phase // 4
    return [
        make.between(per_phase, minutes(0), minutes(1) + timedelta(seconds=59)),
        make.between(per_phase, minutes(2), minutes(3) + timedelta(seconds=59)),
        (make.between(quarter, minutes(0), minutes(0) + timedelta(seconds=59))
         + make.between(quarter, minutes(1), minutes(1) + timedelta(seconds=59))
         + make.between(per_phase - 2 * quarter, minutes(2), minutes(3) + timedelta(seconds=59))),
        (make.between(per_phase - quarter, minutes(6), minutes(6) + timedelta(seconds=59))
         + make.between(quarter, minutes(0), minutes(0) + timedelta(seconds=30))),
    ]
