"""The scheduler's error reporting: Kafka not answering is one warning line, anything else a traceback."""

from __future__ import annotations

import logging
import threading

import pytest

from krafty.clients.errors import KafkaUnavailable
from krafty.scheduler import Scheduler


def _run_once(error: Exception, caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    done = threading.Event()

    def failing(_key: object) -> float | None:
        done.set()
        raise error

    scheduler = Scheduler(failing, workers=1, tick=0.05)
    with caplog.at_level(logging.WARNING, logger="krafty.scheduler"):
        scheduler.start()
        scheduler.poke(("lag", "ns", "c"))
        assert done.wait(5)
        scheduler.stop()
    [record] = [r for r in caplog.records if r.name == "krafty.scheduler"]
    return record


def test_kafka_not_answering_is_one_warning_line_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    record = _run_once(KafkaUnavailable("partitions: brokers down"), caplog)
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert "Kafka did not answer" in record.getMessage()
    assert "brokers down" in record.getMessage()


def test_any_other_failure_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    record = _run_once(ValueError("a bug"), caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is ValueError
