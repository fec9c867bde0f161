"""The operator's log: plain lines for a terminal, or one JSON object per line for a log pipeline.

In JSON every field a line was logged with is its own key: a decision (krafty.events) carries namespace,
kind, object, cluster, node and reason, so a pipeline can select "every restart of cluster X" without
parsing prose.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_SKIPPED = frozenset({"settings", "k8s_skip"})  # kopf's: its whole settings object, and a flag of its own


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and key not in _SKIPPED and value is not None:
                entry[key] = _plain(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _plain(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


# Lines every liveness probe would add (each replica is probed every 10-20 s): kept for --verbose
_PROBE_LOGGERS = ("aiohttp.access", "kopf.activities.probe")


def configure(json_lines: bool, verbose: bool) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler], force=True)
    for name in _PROBE_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)
