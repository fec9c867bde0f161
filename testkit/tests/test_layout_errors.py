"""Impossible layouts fail at once, before any process starts, saying why."""

import socket
import time
from pathlib import Path

import pytest

from krafty_testkit.local_kafka import Layout, LayoutError, LocalKafkaCluster


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Layout.combined(0), "needs at least 1 broker, got 0"),
    (lambda: Layout.dedicated(3, 0), "needs at least 1 broker, got 0"),
    (lambda: Layout.dedicated(2, 3), "odd number of controllers"),
    (lambda: Layout.dedicated(4, 3), "got 4"),
    (lambda: Layout.dedicated(0, 3), "odd number of controllers"),
    (lambda: Layout("mixed", 3), "mode must be 'combined' or 'dedicated'"),
])
def test_impossible_layout_is_refused(make, message):
    # Given an impossible layout, When it is built, Then it fails with a reason.
    with pytest.raises(LayoutError, match=message):
        make()


def test_taken_port_is_refused_before_anything_starts(tmp_path: Path):
    # Given a port already in use
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        # When a cluster is asked to use it, Then it fails at once naming the port and its use.
        with pytest.raises(LayoutError, match=rf"port {port} \(node 0 broker listener\) is already in use"):
            LocalKafkaCluster(Layout.combined(1), tmp_path, base_port=port)
        assert time.monotonic() - started < 1
    assert not list(tmp_path.iterdir()), "nothing may be written for a refused layout"


def test_layouts_name_nodes_like_the_operator():
    assert [n for n, _ in Layout.combined(3).node_roles()] == [0, 1, 2]
    assert [n for n, _ in Layout.dedicated(3, 2).node_roles()] == [1000, 1001, 1002, 0, 1]
