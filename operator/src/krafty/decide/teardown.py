"""Deleting a KafkaCluster in order: brokers first, through controlled shutdown while the controllers
still run, then the controllers.

Kubernetes' garbage collector would stop every pod at once: with no controller
left to approve it, each broker's controlled shutdown waits out its whole grace
period. The operator holds the KafkaCluster's finalizer until its brokers are
gone, then lets the collector take the rest. Bounded: brokers still there after
their grace period and a margin (a lost node, a stuck kubelet) no longer hold
the controllers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MARGIN_SECONDS = 60  # beyond the brokers' grace period, before the controllers stop anyway


class TeardownStep(StrEnum):
    STOP_BROKERS = "StopBrokers"  # delete the broker StatefulSet: its pods shut down, the controllers run on
    WAIT_BROKERS = "WaitBrokers"  # broker pods are still shutting down
    RELEASE = "Release"  # remove the finalizer: the garbage collector stops the controllers and the rest


@dataclass(frozen=True)
class Teardown:
    step: TeardownStep
    reason: str
    message: str
    warning: bool = False


def decide(dedicated: bool, broker_set_present: bool, brokers_left: tuple[str, ...], waited_seconds: float,
           grace_period_seconds: int) -> Teardown:
    """The next step of a KafkaCluster's deletion, from what is left of its brokers."""
    if not dedicated:
        return Teardown(TeardownStep.RELEASE, "NodesStopping",
                        "combined nodes stop together: each stops its broker before its controller")
    if broker_set_present:
        return Teardown(TeardownStep.STOP_BROKERS, "BrokersStopping",
                        "stopping the brokers through controlled shutdown while the controllers run")
    if not brokers_left:
        return Teardown(TeardownStep.RELEASE, "ControllersStopping",
                        "the brokers have stopped: stopping the controllers")
    if waited_seconds > grace_period_seconds + MARGIN_SECONDS:
        return Teardown(TeardownStep.RELEASE, "TeardownUnordered",
                        f"{', '.join(brokers_left)} still there {waited_seconds:.0f} s after the deletion "
                        f"(grace period {grace_period_seconds} s): stopping the controllers anyway", warning=True)
    return Teardown(TeardownStep.WAIT_BROKERS, "BrokersStopping",
                    f"waiting for {len(brokers_left)} broker(s) to stop: {', '.join(brokers_left)}")
