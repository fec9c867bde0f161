"""Deleting a KafkaCluster: brokers stop while the controllers run, then the controllers; bounded."""

from __future__ import annotations

from krafty.decide.teardown import MARGIN_SECONDS, TeardownStep, decide

BROKERS = ("prod-broker-0", "prod-broker-1", "prod-broker-2")


def test_the_brokers_stop_first_while_the_controllers_run():
    step = decide(dedicated=True, broker_set_present=True, brokers_left=BROKERS, waited_seconds=0,
                  grace_period_seconds=300)
    assert step.step is TeardownStep.STOP_BROKERS


def test_the_controllers_wait_for_every_broker_pod_to_be_gone():
    step = decide(dedicated=True, broker_set_present=False, brokers_left=BROKERS[2:], waited_seconds=20,
                  grace_period_seconds=300)
    assert step.step is TeardownStep.WAIT_BROKERS
    assert "prod-broker-2" in step.message


def test_the_controllers_stop_once_the_brokers_are_gone():
    step = decide(dedicated=True, broker_set_present=False, brokers_left=(), waited_seconds=20,
                  grace_period_seconds=300)
    assert (step.step, step.warning) == (TeardownStep.RELEASE, False)


def test_brokers_stuck_past_their_grace_period_no_longer_hold_the_controllers():
    waited = 300 + MARGIN_SECONDS + 1
    step = decide(dedicated=True, broker_set_present=False, brokers_left=BROKERS[:1], waited_seconds=waited,
                  grace_period_seconds=300)
    assert (step.step, step.reason, step.warning) == (TeardownStep.RELEASE, "TeardownUnordered", True)
    assert "prod-broker-0" in step.message
    within = decide(dedicated=True, broker_set_present=False, brokers_left=BROKERS[:1], waited_seconds=waited - 2,
                    grace_period_seconds=300)
    assert within.step is TeardownStep.WAIT_BROKERS


def test_combined_nodes_are_let_go_at_once():
    step = decide(dedicated=False, broker_set_present=True, brokers_left=BROKERS, waited_seconds=0,
                  grace_period_seconds=300)
    assert step.step is TeardownStep.RELEASE
