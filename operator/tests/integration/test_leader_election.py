"""Leader election among operator replicas (krafty.runtime.leadership) against a real API server: one leads, a standby
takes over when the leader dies or lets go, and a leader whose Lease was taken stops acting; of two installs
watching one namespace, one acts there."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import kubernetes
import pytest

from krafty.clients.kube import Kube
from krafty.decide.leadership import Role
from krafty.runtime.leadership import Elector, LeaseSettings, NamespaceClaims
from krafty.telemetry import metrics
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.waiting import wait_for

NS = "election"


@pytest.fixture(scope="module")
def kube(apiserver: LocalApiServer) -> Kube:
    apiserver.kubectl("create", "namespace", NS, check=False)
    return Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))


class Replica:
    """One operator replica's elector, with what its callbacks saw."""

    def __init__(self, kube: Kube, lease: str, identity: str, duration: int) -> None:
        self.elected = threading.Event()
        self.lost = threading.Event()
        self.elector = Elector(kube, LeaseSettings(NS, lease, identity, duration_seconds=duration,
                                                   renew_deadline=duration * 2 / 3, retry_period=0.5),
                               self.elected.set, self.lost.set)

    def die(self) -> None:
        """The pod is killed: renewals stop, nothing is let go."""
        self.elector._stop.set()  # a killed process runs no cleanup: renewals end, the Lease stays
        self.elector._thread.join(5)


@pytest.fixture
def replicas(kube: Kube) -> Iterator[list[Replica]]:
    made: list[Replica] = []
    yield made
    for replica in made:
        replica.die()


def _holder(kube: Kube, lease: str) -> str | None:
    body = kube.get("Lease", lease, NS)
    return None if body is None else body["spec"].get("holderIdentity")


def test_one_leads_and_a_standby_takes_over_when_the_leader_dies(kube: Kube, replicas: list[Replica],
                                                                  caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="krafty.events")
    # Given two replicas, the first started first
    first, second = Replica(kube, "dies", "pod-a", 3), Replica(kube, "dies", "pod-b", 3)
    replicas += [first, second]
    first.elector.start()
    assert first.elected.wait(10)
    second.elector.start()
    # Then exactly one leads, and the Lease and an Event say so
    time.sleep(2)
    assert (first.elector.role, second.elector.role) == (Role.LEADER, Role.STANDBY)
    assert not second.elected.is_set()
    assert _holder(kube, "dies") == "pod-a"
    # When the leader dies without letting go
    killed = time.monotonic()
    first.die()
    # Then the standby leads once the Lease has gone unrenewed for its duration, and not before
    assert second.elected.wait(15)
    took = time.monotonic() - killed
    # (not before the Lease's 3 s, less the renew period of 1 s the last renewal may have come before the kill; the
    # upper bound only says it did not wait for some other, longer time)
    assert 3 - 1 <= took < 3 * 3, took
    assert _holder(kube, "dies") == "pod-b"
    assert kube.get("Lease", "dies", NS)["spec"]["leaseTransitions"] == 1
    said = "pod-b leads the operator now: pod-a has not renewed"
    wait_for(lambda: kube.list("Event", NS), lambda events: any(
        e["reason"] == "LeaderElected" and e["message"].startswith(said) for e in events), 10, "the Event")
    # And the same decision is in the log, its fields apart (as JSON logs show them)
    [logged] = [r for r in caplog.records if r.name == "krafty.events" and r.getMessage().find(said) > 0]
    assert (logged.namespace, logged.kind, logged.object, logged.reason) == (NS, "Lease", "dies", "LeaderElected")


def test_a_leader_that_stops_cleanly_hands_over_at_once(kube: Kube, replicas: list[Replica]):
    # Given a leader and a standby, with a Lease that would take 30 s to expire
    first, second = Replica(kube, "hands-over", "pod-a", 30), Replica(kube, "hands-over", "pod-b", 30)
    replicas += [first, second]
    first.elector.start()
    assert first.elected.wait(10)
    second.elector.start()
    # When the leader stops cleanly (SIGTERM: kopf's cleanup)
    stopped = time.monotonic()
    first.elector.stop()
    # Then the standby leads at its next retry (a second), not once the Lease's 30 s have run out: the bound is
    # half of those, far above a retry however slow the machine
    assert second.elected.wait(15)
    assert time.monotonic() - stopped < 30 / 2
    assert first.elector.role is Role.STANDBY
    assert not first.lost.is_set()


def test_a_leader_whose_lease_was_taken_stops_acting(kube: Kube, replicas: list[Replica]):
    # Given a leader
    leader = Replica(kube, "taken", "pod-a", 3)
    replicas.append(leader)
    leader.elector.start()
    assert leader.elected.wait(10)
    # When another holder writes itself into the Lease (as after a long pause of this one)
    body = kube.get("Lease", "taken", NS)
    body["spec"]["holderIdentity"] = "pod-z"
    kube.replace(body)
    # Then the leader gives up at its next look
    wait_for(leader.lost.is_set, bool, 10, "the leader told it lost the Lease")
    assert leader.elector.role is Role.STANDBY


def test_a_second_install_watching_the_same_namespace_stays_out_until_the_first_is_gone(kube: Kube):
    # Given two installs of the operator watching one namespace, the first acting there
    first = NamespaceClaims(kube, "krafty-system/krafty", duration_seconds=3)
    second = NamespaceClaims(kube, "team-b/krafty", duration_seconds=3)
    assert first.check(NS).ours
    # Then the second leaves it alone, naming the install that operates it
    refused = second.check(NS)
    assert (refused.ours, refused.holder) == (False, "krafty-system/krafty")
    assert refused.reason == (f"namespace {NS} is operated by install krafty-system/krafty (its claim, Lease "
                              f"krafty-operator-claim, is renewed); this install (team-b/krafty) leaves it alone")
    # And while the first keeps checking (its passes), the second stays out
    for _ in range(5):
        time.sleep(1.1)
        assert first.check(NS).ours
        assert not second.check(NS).ours
    # When the first install stops renewing (uninstalled), the second takes the namespace after the duration
    stopped = time.monotonic()
    taken = wait_for(lambda: second.check(NS), lambda claim: claim.ours, 15, "the second install claiming it")
    assert time.monotonic() - stopped >= 2
    assert taken.holder == "team-b/krafty"
    assert not first.check(NS).ours
    # And one that stops cleanly lets go at once
    second.release()
    assert wait_for(lambda: first.check(NS), lambda claim: claim.ours, 3, "the first install back").ours


def test_a_leader_renews_every_third_of_the_duration_and_a_standby_looks_every_retry_period(kube: Kube,
                                                                                            replicas: list[Replica]):
    # Given a leader and a standby of a 3 s Lease (retry period 0.5 s: a renewal every 1 s)
    leader, standby = Replica(kube, "calm", "pod-a", 3), Replica(kube, "calm", "pod-b", 3)
    replicas += [leader, standby]
    leader.elector.start()
    assert leader.elected.wait(10)
    standby.elector.start()
    # When 6 s pass
    before = _lease_requests()
    time.sleep(6)
    requests = {key: n - before.get(key, 0) for key, n in _lease_requests().items()}
    # Then the leader wrote about six renewals (not twelve) without reading the Lease first (it renews what it wrote),
    # the standby read about twelve times, and nobody else led
    assert 4 <= requests.get("replace", 0) <= 8, requests
    assert 8 <= requests.get("get", 0) <= 14, requests  # (the standby's reads alone: the leader's made it 16 or more)
    assert (leader.elector.role, standby.elector.role) == (Role.LEADER, Role.STANDBY)
    assert not standby.elected.is_set()


def _lease_requests() -> dict[str, float]:
    return {s.labels["verb"]: s.value for metric in metrics.KUBE_REQUESTS.collect() for s in metric.samples
            if s.name.endswith("_total") and s.labels["kind"] == "Lease"}
