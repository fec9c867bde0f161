"""A Kafka version change as a table: what is refused, when metadata.version is raised, and the plan around it."""

from __future__ import annotations

import datetime
from dataclasses import replace

import pytest

from krafty.decide.upgrade import VersionFacts, VersionPhase, plan, refusal
from krafty.model import KafkaClusterSpec, versions
from krafty.model.validation import validate_cluster
from krafty.planning.actions import FinalizeMetadata
from krafty.planning.cluster import Pace, PassResult
from krafty.planning.cluster import plan as cluster_plan
from krafty.reconcile.cluster import Intervals, Outcome

from ..planning.test_plan import BROKERS, CONTROLLERS, Facts, ctx, kinds, node, observe

OLD, NEW = "4.2.2", "4.3.1"
OLD_LEVEL, NEW_LEVEL = 29, 30
T0 = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC)


def facts(target: str = NEW, nodes: tuple[str | None, ...] = (NEW, NEW, NEW), level: int | None = OLD_LEVEL,
          pinned: str | None = None, after: int = 600) -> VersionFacts:
    return VersionFacts(target, pinned, after, nodes, level)


def test_the_table_names_each_release_and_its_metadata_version():
    assert [(r.version, r.line, r.metadata_version) for r in versions.RELEASES] == [
        (OLD, "4.2", "4.2-IV1"), (NEW, "4.3", "4.3-IV0")]
    assert (versions.metadata_level("4.2"), versions.metadata_level("4.3-IV0"), versions.metadata_level("4.1")) == (
        OLD_LEVEL, NEW_LEVEL, None)
    assert versions.metadata_level("4.2-iv1") is None


@pytest.mark.parametrize(("case", "expected"), [
    (facts(target=NEW, nodes=(OLD, OLD, NEW)), None),  # an upgrade under way
    (facts(target=OLD, nodes=(OLD, NEW, NEW), level=OLD_LEVEL), None),  # a downgrade before finalization
    (facts(target=OLD, nodes=(NEW, NEW, NEW), level=NEW_LEVEL), "cannot run the cluster's metadata.version 4.3-IV0"),
    (facts(target=NEW, nodes=("4.1.1", NEW, NEW)), "nodes run Kafka 4.1.1, which this operator does not run"),
    (facts(target=NEW, level=NEW_LEVEL, pinned="4.2"), "is below the cluster's metadata.version 4.3-IV0"),
    (facts(target=OLD, nodes=(None, OLD), level=None), None),  # metadata.version unread: nothing to hold against
])
def test_what_is_refused(case: VersionFacts, expected: str | None):
    said = refusal(case)
    assert said is None if expected is None else expected in (said or "")


def test_metadata_version_waits_for_every_node_then_for_the_healthy_time():
    rolling = plan(facts(nodes=(OLD, NEW, NEW)), True, T0, None)
    assert (rolling.phase, rolling.finalize_to, rolling.message) == (VersionPhase.ROLLING, None,
                                                                     "2 of 3 nodes run Kafka 4.3.1")
    unhealthy = plan(facts(), False, T0, None)
    assert (unhealthy.phase, unhealthy.finalize_to, unhealthy.healthy_since) == (VersionPhase.FINALIZING, None, None)
    started = plan(facts(), True, T0, None)
    assert (started.finalize_to, started.healthy_since) == (None, T0)
    assert f"at {(T0 + datetime.timedelta(seconds=600)).isoformat(timespec='seconds')} " in started.message
    later = plan(facts(), True, T0 + datetime.timedelta(seconds=599), T0)
    assert later.finalize_to is None
    assert later.message == started.message  # the status is not rewritten by every pass of the wait
    assert started.due == later.due == T0 + datetime.timedelta(seconds=600)  # (a pass is due then)
    due = plan(facts(), True, T0 + datetime.timedelta(seconds=600), T0)
    assert due.finalize_to == NEW_LEVEL
    # A pass that saw the cluster unhealthy starts the wait again
    assert plan(facts(), False, T0 + datetime.timedelta(seconds=700), T0).healthy_since is None


def test_a_pinned_metadata_version_is_held_and_raised_when_the_user_raises_it():
    held = plan(facts(pinned="4.2"), True, T0, None)
    assert (held.phase, held.finalize_to) == (VersionPhase.HELD, None)
    assert plan(facts(pinned="4.3"), True, T0, None).finalize_to == NEW_LEVEL  # no waiting: the user chose it
    done = plan(facts(level=NEW_LEVEL), True, T0, None)
    assert (done.phase, done.finalize_to) == (VersionPhase.STEADY, None)


def _nodes(version: str) -> list:
    return [replace(node(i), version=version) for i in (*CONTROLLERS, *BROKERS)]


def test_the_pass_finalizes_once_the_roll_is_done_and_the_wait_is_over():
    c = ctx()
    c = replace(c, spec=c.spec.model_copy(update={"upgrade": c.spec.upgrade.model_copy(
        update={"finalize_after_seconds": 60})}))
    seen = observe(c, _nodes(c.spec.version), metadata_level=OLD_LEVEL, observed_at=T0 + datetime.timedelta(seconds=61))
    waited = cluster_plan(c, seen, Facts(BROKERS, healthy_since=T0))
    assert kinds(waited.actions) == ["ApplyChildren", "FinalizeMetadata"]
    finalize = waited.actions[-1]
    assert isinstance(finalize, FinalizeMetadata)
    assert finalize.level == NEW_LEVEL
    assert waited.status["versions"]["metadataVersion"] == "4.2-IV1"
    assert waited.pace is not Pace.CALM  # the next pass, soon, sees the raised metadata.version and says Ready
    early = cluster_plan(c, replace(seen, observed_at=T0 + datetime.timedelta(seconds=30)), Facts(BROKERS,
                                                                                                healthy_since=T0))
    assert kinds(early.actions) == ["ApplyChildren"]
    progressing = {x.type: (x.status, x.reason) for x in early.conditions}["Progressing"]
    assert progressing == (True, "FinalizingUpgrade")
    # Not busy while it waits, but due back when the raise is due (not at the idle interval after it)
    assert (early.pace, early.wake_at) == (Pace.CALM, T0 + datetime.timedelta(seconds=60))


def test_a_downgrade_after_finalization_changes_nothing_and_says_why():
    c = ctx()
    c = replace(c, spec=c.spec.model_copy(update={"version": OLD}))
    result = cluster_plan(c, observe(c, _nodes(NEW), metadata_level=NEW_LEVEL, observed_at=T0), Facts(BROKERS))
    assert kinds(result.actions) == ["Announce"]
    assert result.result is PassResult.INVALID
    ready = result.conditions[0]
    assert (ready.type, ready.status, ready.reason) == ("Ready", False, "VersionRefused")
    assert "a downgrade is only possible before that" in ready.message
    assert result.status["kafkaVersion"] == NEW


@pytest.mark.parametrize(("version", "pinned", "problem"), [
    (OLD, "4.2", None),
    (NEW, "4.2-IV1", None),
    (OLD, "4.3", "spec.upgrade.metadataVersion: 4.3 is newer than Kafka 4.2.2 can run (at most 4.2-IV1)"),
    (NEW, "4.1", "spec.upgrade.metadataVersion: '4.1' is not a metadata.version of a Kafka release this operator "
                 "runs: 4.2 (4.2-IV1), 4.3 (4.3-IV0)"),
])
def test_a_pinned_metadata_version_must_be_one_the_version_runs(version: str, pinned: str, problem: str | None):
    spec = KafkaClusterSpec.model_validate({"version": version, "brokers": {"replicas": 3},
                                            "upgrade": {"metadataVersion": pinned}})
    assert [str(p) for p in validate_cluster(spec)] == ([problem] if problem else [])


@pytest.mark.parametrize(("outcome", "after"), [
    (Outcome(PassResult.WAITING, Pace.BUSY, wake_in=20.0), 5.0),  # a roll under way: soon
    (Outcome(PassResult.ELECTED, Pace.FOLLOWING, wake_in=20.0), 1.5),  # the next restart waits on its leaders
    (Outcome(PassResult.RECONCILED), 30.0),  # calm: the idle interval
    (Outcome(PassResult.RECONCILED, wake_in=12.5), 12.5),  # metadata.version's raise due before that
    (Outcome(PassResult.RECONCILED, wake_in=-3.0), 1.0),  # overdue: at once, but not in a loop
    (Outcome(PassResult.RECONCILED, wake_in=600.0), 30.0),
])
def test_the_next_pass_comes_when_the_raise_is_due_if_that_is_before_the_idle_interval(outcome, after):
    assert outcome.next_pass(Intervals(1.5, 5.0, 30.0)) == after
