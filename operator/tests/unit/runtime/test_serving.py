"""The operator's HTTP endpoints (krafty.runtime.serving): served, idle while nobody asks, stopped at once."""

from __future__ import annotations

import socket
import time
import urllib.request

from krafty.runtime import serving
from krafty.telemetry import metrics


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_metrics_endpoint_serves_sleeps_between_scrapes_and_stops_at_once():
    # Given the metrics endpoint, its serving loop counted (socketserver runs service_actions each time it wakes)
    port = free_port()
    server = serving.metrics(port)
    wakes = []
    server.service_actions = lambda: wakes.append(time.monotonic())  # type: ignore[method-assign]
    # When Prometheus scrapes it
    metrics.RECONCILES.labels("topics", "ok").inc()
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'krafty_reconcile_total{kind="topics",result="ok"}' in text
    # Then, while nobody asks, it does not wake (it woke twice a second to look for a shutdown)
    time.sleep(0.5)  # (the loop may look once more after handing the scrape to its thread)
    woken = len(wakes)
    time.sleep(2.0)
    assert len(wakes) == woken
    # And it stops without waiting out its minute, its port closed
    began = time.monotonic()
    serving.stop(server)
    assert time.monotonic() - began < 10  # (not its poll interval, a minute)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def _silent_clients(port: int, count: int) -> list[socket.socket]:
    """Connections that send nothing, each told to give up after a minute."""
    return [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(count)]


def test_a_client_that_sends_nothing_is_hung_up_on_and_cannot_hold_the_endpoint(monkeypatch):
    # Given the metrics endpoint, a client allowed 3 s of silence and two connections at once from one address
    monkeypatch.setattr(serving, "MAX_CONNECTIONS", 2)
    monkeypatch.setattr(serving._QuietHandler, "timeout", 3.0)
    port = free_port()
    server = serving.metrics(port)
    try:
        # When two clients connect and send nothing, Then a third's scrape from their address is closed unanswered
        # while they hold it, and one from another address is answered
        held = _silent_clients(port, 2)
        deadline = time.monotonic() + 30  # (until the server has taken both: it counts them as it accepts)
        while dict(server.held) != {"127.0.0.1": 2}:
            assert time.monotonic() < deadline, dict(server.held)
            time.sleep(0.02)
        with socket.create_connection(("127.0.0.1", port), timeout=60) as third:
            third.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert third.recv(1) == b""
        with socket.create_connection(("127.0.0.1", port), timeout=60, source_address=("127.0.0.2", 0)) as other:
            other.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert other.recv(12) == b"HTTP/1.0 200"
        # And the silent ones are hung up on (without a timeout they waited out the client's minute)
        for client in held:
            assert client.recv(1) == b""
            client.close()
        # And the endpoint serves the next scrape
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert "krafty_reconcile_total" in text
    finally:
        serving.stop(server)
