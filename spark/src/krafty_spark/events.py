"""The job's input format: one page view per Kafka record, as JSON.

    {"event_id": "e42", "user": "u7", "page": "/cart", "ts": "2026-01-01T00:01:05.250Z"}

`ts` is the event time (ISO-8601, UTC); the record's key is not used.
Producers and tests encode events with `PageView.to_json()`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime


def iso_millis(ts: datetime) -> str:
    """2026-01-01T00:01:05.250Z: the timestamp format of the job's input and output."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class PageView:
    event_id: str
    user: str
    page: str
    ts: datetime

    def to_json(self) -> bytes:
        return json.dumps({"event_id": self.event_id, "user": self.user, "page": self.page,
                           "ts": iso_millis(self.ts)}, separators=(",", ":")).encode()
