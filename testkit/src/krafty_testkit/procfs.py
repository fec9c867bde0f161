"""A process's memory and CPU time, from the text of its /proc/<pid>/status and /proc/<pid>/stat."""

from __future__ import annotations

import os


def rss_mib(status: str) -> float:
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")) / 1024


def cpu_seconds(stat: str) -> float:
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14 and 15)
