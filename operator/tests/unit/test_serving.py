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
