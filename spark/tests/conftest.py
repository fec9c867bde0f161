"""Fixtures for the Spark job's tests: one local Spark (local[2]) for the whole run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from krafty_spark.session import build_session

# Small and quick for 2 cores: two shuffle partitions, no UI, no progress bars.
TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.minBatchesToRetain": "20",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = build_session("krafty-spark-tests", master="local[2]", conf=TEST_CONF)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
