"""Page-view events the Spark tests produce, and the views per page per 1-minute window they make."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta

PAGES = ["/", "/cart", "/checkout", "/search"]


def events() -> tuple[list[str], Counter[tuple[str, str]]]:
    """Page views over five minutes, and the views per page per 1-minute window they make."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    lines, expected = [], Counter[tuple[str, str]]()
    for i in range(600):
        ts = start + timedelta(seconds=i // 2)
        page = PAGES[(i * 7) % len(PAGES)]
        lines.append(json.dumps({"event_id": f"e{i}", "user": f"u{i % 13}", "page": page,
                                 "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.000Z")}))
        window = ts.replace(second=0).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        expected[(page, window)] += 1
    return lines, expected


def numbered(first: int, count: int, start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
             spacing: timedelta = timedelta(milliseconds=500)) -> tuple[list[str], Counter[tuple[str, str]]]:
    """Views `first` to `first + count - 1` of an endless stream (view i at start + i × spacing), and the views
    per page per 1-minute window they make: a producer that sends them in order, in chunks, knows the reference
    of what it had acknowledged."""
    lines, expected = [], Counter[tuple[str, str]]()
    for i in range(first, first + count):
        ts = start + i * spacing
        page = PAGES[(i * 7) % len(PAGES)]
        lines.append(json.dumps({"event_id": f"n{i}", "user": f"u{i % 13}", "page": page,
                                 "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"}))
        expected[(page, ts.replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%S.000Z"))] += 1
    return lines, expected


def closing(after: datetime) -> str:
    """One view stamped `after`: it moves the watermark (its time minus the job's 2 minutes) past the end of every
    window that ended at least 2 minutes before, so the file output holds them all (its own window stays open)."""
    return json.dumps({"event_id": "closing", "user": "u0", "page": "/closing",
                       "ts": after.strftime("%Y-%m-%dT%H:%M:%S.000Z")})
