"""Benchmark: the in-place varint reader of krafty.wire.codec (bounded: a truncated answer or a varint that never
ends is refused) against the unbounded one it replaced, on the same bytes: 200,000 varints of the lengths and
counts a DescribeConfigs answer of 5,000 topics carries (mostly one byte). Both read the same values; each time is
the best of five runs of the whole buffer, in alternating order."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from krafty.wire.codec import varint_at
from krafty_testkit.bench_size import sized
from krafty_testkit.plugin import report_table

pytestmark = pytest.mark.bench


def unbounded(data: bytes, pos: int) -> tuple[int, int]:
    """The reader before the bound (a run of continuation bytes summed into an ever larger number)."""
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _encoded(values: list[int]) -> bytes:
    out = bytearray()
    for value in values:
        left = value
        while left >= 0x80:
            out.append(left & 0x7F | 0x80)
            left >>= 7
        out.append(left)
    return bytes(out)


def _read_all(read: Callable[[bytes, int], tuple[int, int]], data: bytes) -> list[int]:
    pos, values = 0, []
    while pos < len(data):
        value, pos = read(data, pos)
        values.append(value)
    return values


def test_bounded_varints_against_the_unbounded_reader():
    rng = random.Random(7)
    rows = []
    for what, sizes in (("mostly one byte (names, values, counts)", (1, 5, 20, 40, 90, 200)),
                        ("two to six bytes (offsets, sizes)", (300, 70_000, 2**30, 2**40))):
        values = [rng.choice(sizes) for _ in range(sized(200_000, 2_000))]
        data = _encoded(values)
        assert _read_all(varint_at, data) == _read_all(unbounded, data) == values
        took: dict[str, list[float]] = {"before": [], "after": []}
        for run in range(sized(10, 2)):
            side, read = (("before", unbounded), ("after", varint_at))[(run % 2) ^ (run // 2 % 2)]
            started = time.perf_counter()
            _read_all(read, data)
            took[side].append(time.perf_counter() - started)
        before, after = min(took["before"]), min(took["after"])
        rows.append([what, f"{before * 1000:,.1f}", f"{after * 1000:,.1f}", f"{after / before:.2f}"])
    report_table("Reading 200,000 varints in place (best of five runs each, ms)",
                 ["varints", "unbounded reader (baseline)", "bounded reader", "ratio"], rows)
