"""The operator's endpoint under abuse, beside its leader election against a real API server: clients that trickle
a request a byte a second from many addresses into /metrics, and 1 MiB bodies sent to it at once, over and over,
leave the Lease renewed on time, the leader leading, and Prometheus answered. The longest gap between renewals (as
the API server's watch of the Lease sees them) is printed beside that of an idle window of the same run."""

from __future__ import annotations

import contextlib
import itertools
import socket
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import kubernetes
import pytest

from krafty.clients.kube import Kube
from krafty.runtime import serving
from krafty.runtime.leadership import Elector, LeaseSettings
from krafty_testkit.apiserver import LocalApiServer, free_port
from krafty_testkit.kafka_dist import REPO_ROOT
from krafty_testkit.plugin import report_table

NS = "abuse"
LEASE = "abused"
WINDOW_SECONDS = 24.0
TRICKLERS = 20  # addresses (pods), each opening more connections than the endpoint lets one address hold
PER_TRICKLER = serving.MAX_CONNECTIONS + 2
SENDERS = 8  # requests at once, each with a 1 MiB body
BODY = b"a" * (1 << 20)
SETTINGS = LeaseSettings(NS, LEASE, "pod-a", duration_seconds=6, renew_deadline=4.0, retry_period=1.0)


@pytest.fixture(scope="module")
def kube(apiserver: LocalApiServer) -> Kube:
    apiserver.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds"))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", NS, check=False)
    return Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))


class Renewals:
    """When the API server's watch of the Lease saw each of its renewals (each a new resourceVersion: a watch
    started again lists the Lease as it is)."""

    def __init__(self, apiserver: LocalApiServer) -> None:
        self.seen: list[float] = []
        self._versions: set[str] = set()
        self._stop = threading.Event()
        api = kubernetes.client.CoordinationV1Api(kubernetes.config.new_client_from_config(
            config_file=str(apiserver.kubeconfig)))
        self._thread = threading.Thread(target=self._watch, args=(api,), daemon=True)
        self._thread.start()

    def _watch(self, api: kubernetes.client.CoordinationV1Api) -> None:
        while not self._stop.is_set():
            for event in kubernetes.watch.Watch().stream(api.list_namespaced_lease, NS, timeout_seconds=2,
                                                         field_selector=f"metadata.name={LEASE}"):
                version = event["object"].metadata.resource_version
                if event["type"] in ("ADDED", "MODIFIED") and version not in self._versions:
                    self._versions.add(version)
                    self.seen.append(time.monotonic())

    def longest_gap(self, began: float, ended: float) -> tuple[float, int]:
        """The longest time between renewals seen within [began, ended], and how many there were."""
        within = [t for t in self.seen if began <= t <= ended]
        assert len(within) >= WINDOW_SECONDS / SETTINGS.renew_period / 2, (within, self.seen)
        return max(b - a for a, b in itertools.pairwise(within)), len(within)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


def _trickle(port: int, address: str, stop: threading.Event, held: dict[str, int]) -> None:
    """PER_TRICKLER connections from `address`, each sent a GET a byte a second, never finished; `held` says
    how many of them the endpoint still holds open."""
    request = b"GET /metrics HTTP/1.1\r\nHost: operator\r\n" + b"X-Slow: " + b"a" * 200
    socks = []
    for _ in range(PER_TRICKLER):
        sock = socket.socket()
        sock.bind((address, 0))
        sock.connect(("127.0.0.1", port))
        socks.append(sock)
    sent = 0
    while not stop.wait(1.0):
        alive = 0
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.send(request[sent % len(request):][:1])
                alive += 1
        sent += 1
        held[address] = alive
    for sock in socks:
        sock.close()


def _send_large_bodies(port: int, stop: threading.Event, answers: list[int]) -> None:
    """POSTs of a 1 MiB body, over and over, from an address of its own (the tricklers hold theirs)."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30, source_address=("127.0.2.1", 0)) as sock:
                sock.sendall(b"POST /metrics HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
                answers.append(int(sock.recv(12)[9:12] or b"0"))
        except OSError:  # (past the address's share, or hung up on while sending: closed unanswered)
            answers.append(0)


@contextlib.contextmanager
def _running(threads: list[threading.Thread], stop: threading.Event) -> Iterator[None]:
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)


def _window(renewals: Renewals, scrape: Callable[[], float]) -> tuple[float, int, float]:
    """The longest renewal gap over a window, the renewals seen, and the median time of a scrape made meanwhile."""
    began = time.monotonic()
    scrapes = []
    while time.monotonic() - began < WINDOW_SECONDS:
        scrapes.append(scrape())
        time.sleep(1.0)
    gap, count = renewals.longest_gap(began, time.monotonic())
    return gap, count, statistics.median(scrapes)


def test_trickling_clients_and_large_bodies_leave_the_lease_renewed_and_prometheus_answered(
        apiserver: LocalApiServer, kube: Kube):
    # Given a leading replica, its metrics endpoint, and the API server's watch of its Lease
    elected, lost = threading.Event(), threading.Event()
    elector = Elector(kube, SETTINGS, elected.set, lost.set)
    metrics_port = free_port()
    metrics_server = serving.metrics(metrics_port)
    renewals = Renewals(apiserver)
    elector.start()

    def scrape() -> float:
        """A scrape by Prometheus (an address of its own), timed."""
        started = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
            assert answer.status == 200
            assert b"krafty_" in answer.read()
        return time.monotonic() - started

    try:
        assert elected.wait(10)
        # When nothing else happens (the baseline)
        idle = _window(renewals, scrape)
        # And when trickling clients from TRICKLERS addresses hold every thread they may, while SENDERS clients send
        # 1 MiB bodies at once, over and over
        stop, held, answers = threading.Event(), dict[str, int](), list[int]()
        attackers = [threading.Thread(target=_trickle, args=(metrics_port, f"127.0.1.{n}", stop, held), daemon=True)
                     for n in range(1, TRICKLERS + 1)]
        attackers += [threading.Thread(target=_send_large_bodies, args=(metrics_port, stop, answers), daemon=True)
                      for _ in range(SENDERS)]
        with _running(attackers, stop):
            attacked = _window(renewals, scrape)
            holding = sum(held.values())
        rows = [[what, f"{gap:.2f}", count, f"{median * 1000:.1f}"]
                for what, (gap, count, median) in (("idle (baseline)", idle), ("under abuse", attacked))]
        rows.append(["ratio", f"{attacked[0] / idle[0]:.2f}", "", f"{attacked[2] / idle[2]:.2f}"])
        report_table(f"Lease renewals (every {SETTINGS.renew_period:.0f} s, deadline {SETTINGS.renew_deadline:.0f} s) "
                     f"over {WINDOW_SECONDS:.0f} s: idle, and while {TRICKLERS} addresses trickle {PER_TRICKLER} "
                     f"requests each into /metrics a byte a second and {SENDERS} clients send it 1 MiB bodies at "
                     f"once ({len(answers)} sent: {answers.count(405)} refused with 405, the body not read; {holding} "
                     "connections held)",
                     ["window", "longest renewal gap (s)", "renewals", "scrape median (ms)"], rows)
        # Then the abuse was real: the tricklers held their share of connections (and no more), and the bodies
        # were sent and refused without being read (the endpoint takes no body)
        assert TRICKLERS * serving.MAX_CONNECTIONS // 2 <= holding <= TRICKLERS * serving.MAX_CONNECTIONS, held
        assert answers.count(405) >= SENDERS, answers[:20]
        # And the leader kept leading, its Lease renewed within the deadline throughout
        assert not lost.is_set()
        assert attacked[0] < SETTINGS.renew_deadline, attacked
    finally:
        elector.stop()
        renewals.close()
        serving.stop(metrics_server)
