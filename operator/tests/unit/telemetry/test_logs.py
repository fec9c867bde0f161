"""JSON log lines: one object per line, a decision's fields as keys, exceptions kept."""

from __future__ import annotations

import json
import logging
import sys

from krafty.telemetry.logs import JsonFormatter, configure


def _line(record: logging.LogRecord) -> dict[str, object]:
    text = JsonFormatter().format(record)
    assert "\n" not in text
    return dict(json.loads(text))


def test_a_decision_is_one_line_with_its_fields_as_keys() -> None:
    record = logging.makeLogRecord({
        "name": "krafty.events", "levelno": logging.INFO, "levelname": "INFO", "created": 0.0,
        "msg": "%s %s/%s: %s: %s", "args": ("KafkaCluster", "kafka", "prod", "RestartConfigChanged", "restarting"),
        "namespace": "kafka", "kind": "KafkaCluster", "object": "prod", "cluster": "prod", "node": "prod-broker-1",
        "reason": "RestartConfigChanged", "settings": object()})
    line = _line(record)
    assert line == {"time": "1970-01-01T00:00:00.000+00:00", "level": "INFO", "logger": "krafty.events",
                    "message": "KafkaCluster kafka/prod: RestartConfigChanged: restarting", "namespace": "kafka",
                    "kind": "KafkaCluster", "object": "prod", "cluster": "prod", "node": "prod-broker-1",
                    "reason": "RestartConfigChanged"}


def test_what_json_cannot_hold_is_written_as_text_and_a_traceback_is_kept() -> None:
    try:
        raise ValueError("a bug")
    except ValueError:
        record = logging.makeLogRecord({"msg": "failed", "k8s_ref": {"name": "prod"}, "peer": object(),
                                        "exc_info": sys.exc_info()})
    line = _line(record)
    assert line["k8s_ref"] == {"name": "prod"}
    assert str(line["peer"]).startswith("<object object at")
    assert "ValueError: a bug" in str(line["exception"])


def test_probe_chatter_is_left_out_unless_verbose() -> None:
    configure(json_lines=True, verbose=False)
    assert not logging.getLogger("aiohttp.access").isEnabledFor(logging.INFO)
    assert logging.getLogger("krafty.events").isEnabledFor(logging.INFO)
    configure(json_lines=False, verbose=True)
    assert logging.getLogger("kopf.activities.probe").isEnabledFor(logging.INFO)
