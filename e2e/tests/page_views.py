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
