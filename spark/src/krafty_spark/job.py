"""Entry point: parse options, start the query, make its lag visible, wait.

Delivery guarantee (see krafty_spark.pageviews): with --output-path every
window is written exactly once; with --output-topic records are written at
least once, a retried batch writes byte-identical records, and the last
record per key holds the right count. Both rest on the checkpoint: keep
--checkpoint on durable storage and never share it between jobs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from krafty_spark.config import ConfigError, JobOptions, parse_args

log = logging.getLogger("krafty_spark")


@dataclass
class RunningJob:
    """A started query and the listener that commits its progress to the lag group."""

    spark: Any
    query: Any
    committer: Any

    def wait(self) -> None:
        """Blocks until the query ends (an availableNow run) or fails (raises)."""
        self.query.awaitTermination()

    def stop(self) -> None:
        self.query.stop()

    def close(self) -> None:
        """Commits the last finished batch and detaches the listener.

        Progress events are delivered asynchronously; committing the last one
        here leaves the group's lag exact when a run ends.
        """
        try:
            self.committer.commit_progress(self.query.lastProgress)
            self.committer.flush()
        finally:
            self.spark.streams.removeListener(self.committer)
            self.committer.close()


def start(spark: Any, options: JobOptions) -> RunningJob:
    from krafty_spark.lag import LagCommitter
    from krafty_spark.pageviews import start_query

    committer = LagCommitter(options.job_name, options.lag_group, options.kafka.client_config())
    spark.streams.addListener(committer)
    try:
        query = start_query(spark, options)
    except Exception:
        spark.streams.removeListener(committer)
        raise
    log.info("query %s started (id %s): %s → %s sink; lag group %s", options.job_name, query.id,
             ",".join(options.input_topics), options.sink, options.lag_group)
    return RunningJob(spark, query, committer)


def run(options: JobOptions) -> int:
    """Runs the job until its query ends; returns the exit status."""
    from krafty_spark.session import build_session

    spark = build_session(options.job_name)
    try:
        job = start(spark, options)
        try:
            job.wait()
        finally:
            job.close()
    finally:
        # Drains the listener bus while this process can still answer its callbacks.
        spark.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        options = parse_args(sys.argv[1:] if argv is None else argv)
    except ConfigError as error:
        print(f"krafty_spark: error: {error}", file=sys.stderr)
        return 2
    return run(options)
