"""How big a benchmark runs: its full size, or its smallest when KRAFTY_BENCH_SMOKE=1 (`make bench-smoke`, run by
CI), which shows only that it still runs and prints its table, not a figure worth keeping."""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

SMOKE_VARIABLE = "KRAFTY_BENCH_SMOKE"
SMOKE = os.environ.get(SMOKE_VARIABLE) == "1"


def sized(full: T, smoke: T) -> T:
    """`full` for a real run, `smoke` for the smoke run."""
    return smoke if SMOKE else full
