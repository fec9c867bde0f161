"""A node's restart, phase by phase: what status shows, how long each phase took, and a recovering broker waited
for however long it takes."""

from __future__ import annotations

import datetime
from dataclasses import replace

import pytest

from krafty.decide.restart_phases import RestartPhase, phase_of, recovering, track
from krafty.decide.roll import Blocked, Wait, next_step
from krafty.facts.observed import BrokerRegistration, PodPhase

from .test_roll import node, observe, part

T0 = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.UTC)
IN_SYNC = (part(0, (0, 1, 2)),)
WITHOUT_1 = (part(0, (0, 1, 2), isr=(0, 2)),)


@pytest.mark.parametrize(("phase", "registered", "partitions", "expected"), [
    (PodPhase.TERMINATING, True, IN_SYNC, RestartPhase.STOPPING),
    (PodPhase.MISSING, False, IN_SYNC, RestartPhase.STARTING),
    (PodPhase.STARTING, False, IN_SYNC, RestartPhase.STARTING),
    (PodPhase.WARMING_UP, False, IN_SYNC, RestartPhase.RECOVERING),
    (PodPhase.NOT_READY, False, IN_SYNC, RestartPhase.RECOVERING),
    (PodPhase.READY, False, IN_SYNC, RestartPhase.RECOVERING),
    (PodPhase.READY, True, WITHOUT_1, RestartPhase.CATCHING_UP),
    (PodPhase.READY, True, IN_SYNC, None),
], ids=["stopping", "no pod", "pod starting", "warming up", "not ready", "unregistered", "behind", "back"])
def test_the_phase_of_a_broker_coming_back(phase, registered, partitions, expected):
    broker = replace(node(1, outdated=False, registered=registered), phase=phase)
    assert phase_of(broker, observe([node(0, outdated=False), broker], partitions)) is expected


def test_each_phase_is_timed_from_when_it_began_to_when_the_next_took_over():
    # Given broker 1 seen stopping at T0, then starting 10 s later, then back 70 s after that
    stopping = observe([node(0), replace(node(1), phase=PodPhase.TERMINATING)])
    first = track({}, stopping, T0)
    assert first.now["c-broker-1"] == (RestartPhase.STOPPING, T0)
    before = {pod: (phase.value, since.isoformat()) for pod, (phase, since) in first.now.items()}
    starting = observe([node(0), replace(node(1), phase=PodPhase.STARTING)])
    second = track(before, starting, T0 + datetime.timedelta(seconds=10))
    assert second.ended == ((RestartPhase.STOPPING, 10.0),)
    before = {pod: (phase.value, since.isoformat()) for pod, (phase, since) in second.now.items()}
    back = track(before, observe([node(0), node(1, outdated=False)]), T0 + datetime.timedelta(seconds=80))
    # Then each ended phase has its length, and a node that is back has none
    assert back.ended == ((RestartPhase.STARTING, 70.0),)
    assert "c-broker-1" not in back.now
    # And a phase that goes on keeps its start
    again = track(before, starting, T0 + datetime.timedelta(seconds=40))
    assert (again.now["c-broker-1"], again.ended) == ((RestartPhase.STARTING, T0 + datetime.timedelta(seconds=10)),
                                                      ())


def test_a_broker_recovering_its_logs_past_the_start_timeout_is_waited_for_not_called_stuck():
    # Given broker 1 on the new configuration, its pod running but not ready past the timeout
    late = replace(node(1, outdated=False, registered=False), phase=PodPhase.NOT_READY)
    nodes = [node(0), late, node(2)]
    stuck = next_step(observe(nodes, WITHOUT_1), restore_leaders=False)
    # When Kafka holds it registered and fenced (recovering its logs), Then the roll waits for it
    fenced = replace(observe(nodes, WITHOUT_1), registrations=(BrokerRegistration(0, False),
                                                               BrokerRegistration(1, True)))
    assert recovering(late, fenced)
    waiting = next_step(fenced, restore_leaders=False)
    assert isinstance(waiting, Wait), waiting
    # And without that registration it is a broken node: the roll stops there
    assert isinstance(stuck, Blocked), stuck
