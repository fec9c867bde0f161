"""The scheduler: Kafka not answering is one warning line, anything else a traceback and told (with its failures in
a row and the next attempt) until a pass succeeds again; a cluster that hangs holds two workers only; a poke while
a pass runs is never lost."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from krafty.clients.errors import KafkaUnavailable
from krafty.decide.cluster_status import PassFailure, failing_passes
from krafty.runtime.scheduler import Scheduler, retry_delay


def _run_once(error: Exception, caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    done = threading.Event()

    def failing(_key: object) -> float | None:
        done.set()
        raise error

    scheduler = Scheduler(failing, workers=1)
    with caplog.at_level(logging.WARNING, logger="krafty.runtime.scheduler"):
        scheduler.start()
        scheduler.poke(("lag", "ns", "c"))
        assert done.wait(5)
        scheduler.stop()
    [record] = [r for r in caplog.records if r.name == "krafty.runtime.scheduler"]
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


def test_failed_passes_are_told_with_their_count_until_one_succeeds_and_kafka_not_answering_is_not() -> None:
    # Given a pass that Kafka does not answer once, then raises twice, then succeeds
    outcomes: list[Exception | None] = [KafkaUnavailable("down"), ValueError("a bug"), ValueError("a bug"), None]
    told: list[tuple[object, PassFailure | None]] = []
    done = threading.Event()

    def run(_key: object) -> float | None:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        done.set()
        return None

    scheduler = Scheduler(run, workers=1, error_delays=(0.05, 0.1), told=lambda key, how: told.append((key, how)))
    scheduler.start()
    try:
        scheduler.poke(("topics", "ns", "c"))
        assert done.wait(10)
        time.sleep(0.1)  # (told after the pass returned)
    finally:
        scheduler.stop()
    # Then each failure is told with its count and error, and the success after them once; Kafka not answering is
    # no failure (each pass reports it itself)
    assert [(key, how and (how.failures, how.error)) for key, how in told] == [
        (("topics", "ns", "c"), (1, "ValueError: a bug")), (("topics", "ns", "c"), (2, "ValueError: a bug")),
        (("topics", "ns", "c"), None)]
    # And the status lists the failing passes by kind, removed once none is left
    failure = told[1][1]
    assert failure is not None
    assert failing_passes({"topics": failure, "cluster": failure}) == [
        {"pass": kind, "failures": 2, "error": "ValueError: a bug",
         "nextAttemptAt": failure.next_at.strftime("%Y-%m-%dT%H:%M:%SZ")} for kind in ("cluster", "topics")]
    assert failing_passes({}) is None
    assert failure.message("topics").startswith("the topics pass failed 2 times in a row (ValueError: a bug); ")


def test_a_cluster_whose_passes_hang_holds_two_workers_and_other_clusters_go_on() -> None:
    # Given a scheduler of 3 workers, at most 2 passes per cluster, and cluster "stuck" whose passes hang
    release = threading.Event()
    started: list[tuple[str, str, str]] = []
    other_ran = threading.Event()

    def run(key: tuple[str, str, str]) -> float | None:
        started.append(key)
        if key[2] == "stuck":
            release.wait(10)
        else:
            other_ran.set()
        return None

    scheduler = Scheduler(run, workers=3, group=lambda key: key[1:], per_group=2)
    scheduler.start()
    try:
        for job in ("cluster", "topics", "users", "lag"):
            scheduler.poke((job, "ns", "stuck"))
        scheduler.poke(("cluster", "ns", "healthy"))
        # Then the healthy cluster's pass runs while two of the stuck one's hang, and no third of them starts
        assert other_ran.wait(5)
        assert len([k for k in started if k[2] == "stuck"]) == 2
    finally:
        release.set()
        scheduler.stop()


def test_a_poke_while_a_pass_runs_runs_it_again_even_when_the_pass_was_its_last() -> None:
    # Given a pass that says it is done (None: nothing left to look at) but was poked while it ran
    # (a Topic deleted while the pass of its gone cluster was reading the Topics)
    first_running, poked, runs = threading.Event(), threading.Event(), []
    again = threading.Event()

    def run(key: tuple[str, str, str]) -> float | None:
        runs.append(key)
        if len(runs) == 1:
            first_running.set()
            assert poked.wait(5)
        else:
            again.set()
        return None

    scheduler = Scheduler(run, workers=1)
    scheduler.start()
    try:
        scheduler.poke(("topics", "ns", "gone"))
        assert first_running.wait(5)
        # When the poke comes during that pass
        scheduler.poke(("topics", "ns", "gone"))
        poked.set()
        # Then the pass runs once more
        assert again.wait(5), runs
    finally:
        scheduler.stop()


def test_an_idle_scheduler_wakes_only_when_a_pass_falls_due() -> None:
    # Given a pass that wants its next one in 30 s
    looks, ran = [], threading.Event()

    class Counting(Scheduler):
        def _ready(self, now: float) -> list[object]:
            looks.append(now)
            return super()._ready(now)

    def run(_key: object) -> float | None:
        ran.set()
        return 30.0

    scheduler = Counting(run, workers=1)
    scheduler.start()
    try:
        scheduler.poke(("cluster", "ns", "c"))
        assert ran.wait(5)
        time.sleep(1.5)
        # Then the loop looked when poked and when the pass ended, and slept since (it used to look twice a second)
        assert len(looks) <= 3, looks
    finally:
        scheduler.stop()


@pytest.mark.parametrize(("failures", "delay"), [(1, 15.0), (2, 30.0), (3, 60.0), (5, 240.0), (6, 300.0),
                                                 (60, 300.0)])
def test_a_pass_that_keeps_failing_waits_twice_as_long_each_time_up_to_five_minutes(failures: int, delay: float):
    assert retry_delay(failures) == delay


def test_the_scheduler_backs_off_a_failing_pass_and_starts_again_after_one_that_works(
        caplog: pytest.LogCaptureFixture) -> None:
    # Given a pass that fails four times, then works, then fails again
    outcomes = iter([ValueError("a bug")] * 4 + [None, ValueError("again")])
    finished = threading.Event()

    def run(_key: object) -> float | None:
        outcome = next(outcomes, StopIteration)
        if outcome is StopIteration:
            finished.set()
            return None
        if isinstance(outcome, Exception):
            raise outcome
        return 0.01

    scheduler = Scheduler(run, workers=1, error_delays=(0.01, 0.04))
    with caplog.at_level(logging.ERROR, logger="krafty.runtime.scheduler"):
        scheduler.start()
        scheduler.poke("cluster")
        assert finished.wait(30)
        scheduler.stop()
    # Then each failure in a row doubled the wait, up to the longest, and the one after a pass that worked is the
    # first again
    said = [r.getMessage().split("failed ")[1] for r in caplog.records if r.name == "krafty.runtime.scheduler"]
    assert said == ["(1 in a row); retrying in 0.01s", "(2 in a row); retrying in 0.02s",
                    "(3 in a row); retrying in 0.04s", "(4 in a row); retrying in 0.04s",
                    "(1 in a row); retrying in 0.01s"]
