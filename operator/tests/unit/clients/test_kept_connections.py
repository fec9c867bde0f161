"""The wire client's kept connections: given back to the next call to the same server within their time, closed
after it, at most PER_SERVER of them per server, and one the server closed meanwhile never handed out."""

from __future__ import annotations

import socket

from krafty.clients.kraft_transport import _Kept

KEY = ("broker-0.brokers", 9092, None)


def test_a_connection_is_handed_to_the_next_call_within_its_time_and_closed_after_it():
    now = [0.0]
    kept = _Kept(keep_seconds=60, clock=lambda: now[0])
    ours, theirs = socket.socketpair()
    # Given a connection given back after a call
    kept.give(KEY, ours)
    # When the next call to the same server comes 59 s later, Then it gets that connection
    now[0] = 59
    assert kept.take(KEY) is ours
    assert kept.take(KEY) is None  # (one call at a time on it)
    # And given back again, When 60 s pass with no call, Then it is closed, not handed out
    kept.give(KEY, ours)
    now[0] = 119
    assert kept.take(("another", 9092, None)) is None  # (any call closes the expired ones)
    assert ours.fileno() == -1
    assert kept.take(KEY) is None
    theirs.close()


def test_at_most_per_server_connections_are_kept_and_the_others_closed():
    kept = _Kept(clock=lambda: 0.0)
    pairs = [socket.socketpair() for _ in range(_Kept.PER_SERVER + 1)]
    for ours, _ in pairs:
        kept.give(KEY, ours)
    assert pairs[-1][0].fileno() == -1
    taken = {kept.take(KEY) for _ in range(_Kept.PER_SERVER)}
    assert taken == {ours for ours, _ in pairs[:-1]}
    assert kept.take(KEY) is None
    for ours, theirs in pairs:
        ours.close()
        theirs.close()


def test_a_connection_the_server_closed_meanwhile_is_not_handed_out():
    kept = _Kept(clock=lambda: 0.0)
    ours, theirs = socket.socketpair()
    kept.give(KEY, ours)
    theirs.close()  # (readable while idle: the server's end of file)
    assert kept.take(KEY) is None
    assert ours.fileno() == -1
