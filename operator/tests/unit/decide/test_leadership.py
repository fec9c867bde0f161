"""Which operator replica leads: the Lease decision, table-tested, and a standby's scheduler running nothing."""

from __future__ import annotations

import threading

import pytest

from krafty.decide.leadership import LeaseAct, LeaseRecord, Role, decide, lost
from krafty.runtime.scheduler import Scheduler

ME = "krafty-operator-abc"
OTHER = "krafty-operator-xyz"


@pytest.mark.parametrize(("record", "unchanged_for", "act"), [
    (None, 0, LeaseAct.CREATE),
    (LeaseRecord(ME, 15, 3), 0, LeaseAct.RENEW),
    (LeaseRecord(ME, 15, 3), 60, LeaseAct.RENEW),  # ours even if we were slow: renew, do not count a transition
    (LeaseRecord(None, 1, 3), 0, LeaseAct.TAKE),  # released by a leader that stopped cleanly: at once
    (LeaseRecord(OTHER, 15, 3), 14.9, LeaseAct.WAIT),
    (LeaseRecord(OTHER, 15, 3), 15, LeaseAct.TAKE),
    (LeaseRecord(OTHER, 30, 3), 20, LeaseAct.WAIT),  # the holder's duration counts, not ours
], ids=["none", "ours", "ours-late", "released", "held", "expired", "held-longer"])
def test_the_lease_decision(record: LeaseRecord | None, unchanged_for: float, act: LeaseAct) -> None:
    assert decide(record, ME, unchanged_for).act is act


def test_a_takeover_says_whose_lease_expired_and_after_how_long() -> None:
    decision = decide(LeaseRecord(OTHER, 15, 0), ME, 17.2)
    assert decision.reason == f"{OTHER} has not renewed the lease for 17s (its duration is 15s)"


@pytest.mark.parametrize(("role", "since", "gone"), [
    (Role.LEADER, 9.9, False), (Role.LEADER, 10.1, True), (Role.STANDBY, 100, False)])
def test_a_leader_that_cannot_renew_within_the_deadline_stops(role: Role, since: float, gone: bool) -> None:
    assert lost(role, since, renew_deadline=10) is gone


def test_a_standby_scheduler_queues_passes_and_runs_them_once_it_leads() -> None:
    ran = threading.Event()
    scheduler = Scheduler(lambda _key: ran.set() or None, workers=1, leading=False)
    scheduler.start()
    try:
        scheduler.poke(("cluster", "ns", "c"))
        assert not ran.wait(0.5)  # standing by: nothing runs
        assert scheduler.keys() == [("cluster", "ns", "c")]
        scheduler.lead()
        assert ran.wait(5)
    finally:
        scheduler.stop()
