"""Detached processes with PID files: started in their own session, logging to files, stopped by PID.

A PID file holds the PID and the process start time (/proc/PID/stat field 22), so a recycled PID is
never mistaken for ours and never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else fields[19]  # state, then field 22 is index 19 after ")"


def pid_of(pids_dir: Path, name: str) -> int | None:
    """The PID of the named process if it is still the one we started, else None."""
    try:
        pid_text, started = (pids_dir / f"{name}.pid").read_text().split()
    except (OSError, ValueError):
        return None
    pid = int(pid_text)
    return pid if _start_time(pid) == started else None


def start(pids_dir: Path, logs_dir: Path, name: str, argv: Sequence[str],
          env: Mapping[str, str] | None = None) -> int:
    pids_dir.mkdir(parents=True, exist_ok=True)
    logs_dir.mkdir(parents=True, exist_ok=True)
    with open(logs_dir / f"{name}.log", "ab") as log:
        process = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, **(env or {})}, close_fds=True)
    (pids_dir / f"{name}.pid").write_text(f"{process.pid} {_start_time(process.pid)}\n")
    return process.pid


def _alive(pid: int, started: str | None) -> bool:
    return started is not None and _start_time(pid) == started


def stop_pid(pid: int, timeout: float) -> None:
    """SIGTERM, then SIGKILL if still there after timeout seconds."""
    started = _start_time(pid)
    if started is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid, started) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid, started):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while _alive(pid, started):
            time.sleep(0.05)


def stop(pids_dir: Path, name: str, timeout: float = 10) -> None:
    pid = pid_of(pids_dir, name)
    if pid is not None:
        stop_pid(pid, timeout)
    (pids_dir / f"{name}.pid").unlink(missing_ok=True)


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def wait_gone(pids: set[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{pid}").exists() and _start_time(pid) for pid in pids):
        if time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def signal_term(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
