"""A process's memory and CPU time, from the text of its /proc/<pid>/status and /proc/<pid>/stat; this process's
threads of librdkafka."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def rss_mib(status: str) -> float:
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")) / 1024


def cpu_seconds(stat: str) -> float:
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14 and 15)


def librdkafka_threads() -> int:
    """This process's threads librdkafka started (named rdk:*): a handle keeps one per broker, and a few more."""
    names = []
    for task in Path("/proc/self/task").iterdir():
        # A thread that ended meanwhile: gone from /proc (FileNotFoundError), or its entry not yet (ESRCH on read)
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            names.append((task / "comm").read_text())
    return sum(name.startswith("rdk:") for name in names)
