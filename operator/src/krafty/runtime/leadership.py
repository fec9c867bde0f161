"""Leader election among the operator's replicas: a Kubernetes Lease renewed by the one that acts.

Every replica watches and queues passes; only the leader's scheduler runs them.
A standby takes the Lease once it has not changed for its whole duration (the
leader died) or as soon as the leader lets go of it (it stopped cleanly). A
leader that cannot renew within the deadline stops the process at once rather
than act beside a successor: a pass half done is safe to redo (each one reads
the whole state again), two writers are not.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from krafty import naming
from krafty.clients.kube import API_ERRORS, Kube
from krafty.decide.leadership import LeaseAct, LeaseRecord, Role, decide, lost
from krafty.telemetry import metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str
    identity: str  # this replica: its pod's name
    duration_seconds: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0  # how often a standby looks, and a leader whose renewal failed tries again

    @property
    def renew_period(self) -> float:
        """How often a leader whose last renewal went through renews: a third of the Lease's duration (a standby
        sees it change well within the duration; renewing every retry_period cost a read and a write every 2 s)."""
        return max(self.retry_period, self.duration_seconds / 3)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(body: dict[str, Any] | None) -> LeaseRecord | None:
    if body is None:
        return None
    spec = body.get("spec") or {}
    return LeaseRecord(holder=spec.get("holderIdentity") or None,
                       duration_seconds=int(spec.get("leaseDurationSeconds") or 15),
                       transitions=int(spec.get("leaseTransitions") or 0))


class _Observed:
    """When this process last saw a Lease change: expiry is judged by its own clock, not the holder's."""

    def __init__(self) -> None:
        self._seen: str | None = None
        self._at = time.monotonic()

    def unchanged_for(self, body: dict[str, Any] | None) -> float:
        seen = None if body is None else str(body["metadata"].get("resourceVersion"))
        if seen != self._seen:
            self._seen, self._at = seen, time.monotonic()
        return time.monotonic() - self._at


def _write_lease(kube: Kube, namespace: str, name: str, holder: str, duration: int, body: dict[str, Any] | None,
                 act: LeaseAct) -> dict[str, Any] | None:
    """Creates, takes or renews the Lease for `holder`; None when another writer came first (409). The write is
    conditional on the version read, so of two candidates exactly one wins."""
    record = _record(body)
    now = _now()
    spec: dict[str, Any] = {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": now}
    if act is LeaseAct.RENEW and body is not None and record is not None:
        spec["acquireTime"] = (body.get("spec") or {}).get("acquireTime") or now
        spec["leaseTransitions"] = record.transitions
    else:
        spec["acquireTime"] = now
        spec["leaseTransitions"] = record.transitions + 1 if record else 0
    lease: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                             "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    try:
        if body is None:
            return kube.create(lease)
        lease["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"]
        return kube.replace(lease)
    except ApiException as error:
        if error.status != 409:
            raise
    return None


class Elector:
    def __init__(self, kube: Kube, settings: LeaseSettings, on_elected: Callable[[], None],
                 on_lost: Callable[[], None]) -> None:
        self._kube = kube
        self._settings = settings
        self._on_elected = on_elected
        self._on_lost = on_lost
        self.role = Role.STANDBY
        self._observed = _Observed()
        self._renewed_at = 0.0
        self._written: dict[str, Any] | None = None  # the Lease as this replica last wrote it, while it leads
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="leader-election", daemon=True)
        metrics.LEADER.set(0)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stops electing; a leader lets go of the Lease so a standby takes over without waiting it out."""
        self._stop.set()
        self._thread.join(self._settings.retry_period + 35)
        if self.role is Role.LEADER:
            self._release()

    def _loop(self) -> None:
        while not self._stop.is_set():
            renewed = self.step()
            self._stop.wait(self._settings.renew_period if renewed else self._settings.retry_period)

    def step(self) -> bool:
        """One look at the Lease: renew it, take it, or stand by; returns whether this replica holds it now."""
        s = self._settings
        # A leader renews what it wrote last, unread: had another replica written since, the write's version test
        # refuses it (409) and the next look reads the Lease again
        body = self._written
        if body is None:
            try:
                body = self._kube.get("Lease", s.name, s.namespace)
            except API_ERRORS as error:  # the API server did not answer: a leader keeps acting until the deadline
                log.warning("leader election: cannot read Lease %s/%s (%s)", s.namespace, s.name, error)
                self._check_deadline()
                return False
        decision = decide(_record(body), s.identity, self._observed.unchanged_for(body))
        if decision.act is LeaseAct.WAIT:
            if self.role is Role.LEADER:
                self._lose(f"another replica holds the Lease: {decision.reason}")
            return False
        self._written = written = self._write(body, decision.act)
        if written is None:
            self._check_deadline()
            return False
        self._renewed_at = time.monotonic()
        if self.role is Role.STANDBY:
            self._become_leader(written, decision.reason)
        return True

    def _write(self, body: dict[str, Any] | None, act: LeaseAct) -> dict[str, Any] | None:
        s = self._settings
        try:
            return _write_lease(self._kube, s.namespace, s.name, s.identity, s.duration_seconds, body, act)
        except API_ERRORS as error:  # a leader keeps acting until the deadline
            log.warning("leader election: cannot write Lease %s/%s (%s)", s.namespace, s.name, error)
        return None

    def _become_leader(self, lease: dict[str, Any], reason: str) -> None:
        self.role = Role.LEADER
        metrics.LEADER.set(1)
        message = f"{self._settings.identity} leads the operator now: {reason}"
        log.info("leader election: %s", message)
        self._on_elected()
        try:
            self._kube.event(lease, "Lease", "LeaderElected", message)
        except API_ERRORS as error:  # the Event is a record; leading does not wait for it
            log.warning("leader election: no Event for the new leader (%s)", error)

    def _check_deadline(self) -> None:
        since = time.monotonic() - self._renewed_at
        if lost(self.role, since, self._settings.renew_deadline):
            self._lose(f"the Lease could not be renewed for {since:.0f}s")

    def _lose(self, why: str) -> None:
        self.role = Role.STANDBY
        metrics.LEADER.set(0)
        log.critical("leader election: %s no longer leads: %s", self._settings.identity, why)
        self._on_lost()

    def _release(self) -> None:
        s = self._settings
        try:
            body = self._kube.get("Lease", s.name, s.namespace)
            record = _record(body)
            if body is None or record is None or record.holder != s.identity:
                return
            spec = {"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _now(),
                    "leaseTransitions": record.transitions}
            self._kube.replace({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": s.name, "namespace": s.namespace,
                                             "resourceVersion": body["metadata"]["resourceVersion"]},
                                "spec": spec})
            self.role = Role.STANDBY
            metrics.LEADER.set(0)
            log.info("leader election: %s let go of the Lease", s.identity)
        except API_ERRORS as error:  # the standby takes over once the Lease expires instead
            log.warning("leader election: could not let go of Lease %s/%s (%s)", s.namespace, s.name, error)


@dataclass(frozen=True)
class Claim:
    ours: bool
    holder: str | None  # the install that holds the namespace (ours or another)
    reason: str


class NamespaceClaims:
    """Two installs of the operator that watch one namespace must not both act there. Each namespace holds a
    Lease (naming.NAMESPACE_CLAIM) naming the install, not the pod, whose leader acts there; the leader of
    another install finds it held and renewed, and leaves the namespace alone, saying why. A claim lapses
    `duration` seconds after its install stops renewing it (uninstalled, or all its replicas gone), and goes
    at once when its leader stops cleanly."""

    def __init__(self, kube: Kube, install: str, duration_seconds: int = 60) -> None:
        self._kube = kube
        self.install = install
        self._duration = duration_seconds
        self._known: dict[str, tuple[float, Claim]] = {}  # namespace -> (when checked, what was found)
        self._observed: dict[str, _Observed] = {}
        self._lock = threading.Lock()

    def check(self, namespace: str) -> Claim:
        """Whether this install acts in the namespace; claims or renews it when free or ours (at most every
        third of its duration: the answer is kept that long)."""
        with self._lock:
            known = self._known.get(namespace)
            if known is not None and time.monotonic() - known[0] < self._duration / 3:
                return known[1]
            claim = self._claim(namespace)
            self._known[namespace] = (time.monotonic(), claim)
            return claim

    def _claim(self, namespace: str) -> Claim:
        body = self._kube.get("Lease", naming.NAMESPACE_CLAIM, namespace)
        record = _record(body)
        decision = decide(record, self.install, self._observed.setdefault(namespace, _Observed()).unchanged_for(body))
        if decision.act is LeaseAct.WAIT:
            holder = record.holder if record else None
            return Claim(False, holder, f"namespace {namespace} is operated by install {holder} (its claim, "
                                        f"Lease {naming.NAMESPACE_CLAIM}, is renewed); this install "
                                        f"({self.install}) leaves it alone")
        if _write_lease(self._kube, namespace, naming.NAMESPACE_CLAIM, self.install, self._duration, body,
                        decision.act) is None:
            return Claim(False, None, f"another install claimed namespace {namespace} at the same moment")
        return Claim(True, self.install, decision.reason)

    def release(self) -> None:
        """Lets go of every namespace this install holds (its leader stops cleanly)."""
        with self._lock:
            held = [ns for ns, (_, claim) in self._known.items() if claim.ours]
            self._known.clear()
        for namespace in held:
            try:
                body = self._kube.get("Lease", naming.NAMESPACE_CLAIM, namespace)
                record = _record(body)
                if body is not None and record is not None and record.holder == self.install:
                    self._kube.replace({**body, "spec": {**body["spec"], "holderIdentity": None,
                                                         "leaseDurationSeconds": 1}})
            except API_ERRORS as error:  # it lapses after its duration instead
                log.warning("could not let go of the claim on namespace %s (%s)", namespace, error)
