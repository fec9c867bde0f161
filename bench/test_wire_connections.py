"""Benchmark: the KRaft wire client's requests over mutual TLS (as the operator's passes send them to a krafty
cluster) on a kept connection, against a new connection for every request, as before (a pool keeping them 0 s: the name
looked up, a TCP connection and a TLS handshake each time).

3 combined nodes as local processes, every listener demanding a client certificate. ROUNDS rounds each way,
alternately, of CALLS DescribeCluster requests to the bootstrap address; per request: the client's CPU time (this
process), the brokers' (their processes, from /proc) and the wall time. Medians of the rounds.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from krafty.clients import kraft, kraft_transport
from krafty_testkit import procfs
from krafty_testkit.bench_size import sized
from krafty_testkit.local_kafka import Layout, running_cluster
from krafty_testkit.plugin import report_table

pytestmark = pytest.mark.bench
ROUNDS, CALLS = sized((5, 100), (1, 5))
WAYS = ("kept connection (now)", "a new connection each (before)")


def _cpu_seconds(pids: list[int]) -> float:
    return sum(procfs.cpu_seconds(Path(f"/proc/{pid}/stat").read_text()) for pid in pids)


def test_wire_requests_over_tls_on_a_kept_connection_against_a_new_one_each(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    keep = {WAYS[0]: kraft_transport.KEEP_SECONDS, WAYS[1]: 0.0}
    figures: dict[str, dict[str, list[float]]] = {way: {"client": [], "brokers": [], "wall": []} for way in WAYS}
    with running_cluster(Layout.combined(3), tmp_path, tls=True) as cluster:
        connection, pids = cluster.connection, cluster.pids()
        expected = {b.node_id for b in kraft.describe_brokers(connection)}
        for _ in range(ROUNDS):
            for way in WAYS:
                kraft_transport._kept.close_all()
                monkeypatch.setattr(kraft_transport, "_kept", kraft_transport._Kept(keep[way]))
                brokers, client, wall = _cpu_seconds(pids), time.process_time(), time.monotonic()
                for _ in range(CALLS):
                    assert {b.node_id for b in kraft.describe_brokers(connection)} == expected
                figures[way]["wall"].append((time.monotonic() - wall) / CALLS)
                figures[way]["client"].append((time.process_time() - client) / CALLS)
                figures[way]["brokers"].append((_cpu_seconds(pids) - brokers) / CALLS)
    now, before = ({key: statistics.median(values) * 1000 for key, values in figures[way].items()} for way in WAYS)
    rows = [[way, *(f"{figures_ms[key]:.2f}" for key in ("client", "brokers", "wall"))]
            for way, figures_ms in zip(WAYS, (now, before), strict=True)]
    rows.append(["ratio", *(f"{now[key] / before[key]:.2f}" for key in ("client", "brokers", "wall"))])
    report_table(f"A wire request over mutual TLS (DescribeCluster, 3 combined nodes; {ROUNDS} rounds of {CALLS} "
                 "each way, alternately; medians, ms per request)",
                 ["connection", "client CPU", "brokers' CPU", "wall"], rows)
