"""When a Kafka client handle that keeps failing is replaced: after a bounded time, never per call."""

from __future__ import annotations

from krafty.clients.kafka_admin import Recycler


def test_a_handle_is_replaced_only_after_failing_for_the_whole_window():
    now = [0.0]
    recycler = Recycler(after=60, clock=lambda: now[0])
    # Given failures for less than the window, the handle stays
    assert not recycler.failed()
    now[0] = 59
    assert not recycler.failed()
    # When it keeps failing past the window, it is replaced, once
    now[0] = 60
    assert recycler.failed()
    now[0] = 61
    assert not recycler.failed()


def test_a_success_starts_the_window_again():
    now = [0.0]
    recycler = Recycler(after=60, clock=lambda: now[0])
    recycler.failed()
    now[0] = 50
    recycler.succeeded()
    now[0] = 100
    assert not recycler.failed()  # failing since 100, not since 0
