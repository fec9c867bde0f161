"""The unit tier's report: the slowest input of each fuzzed reader (test_fuzz.py), printed after the run."""

from __future__ import annotations

import pytest

SLOWEST = pytest.StashKey[dict[str, float]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SLOWEST] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    slowest = config.stash[SLOWEST]
    if slowest:
        terminalreporter.write_sep("-", "slowest input of each fuzzed reader (ms)")
        for reader, seconds in sorted(slowest.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{reader:<40} {seconds * 1000:8.3f}")
