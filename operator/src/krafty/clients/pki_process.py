"""Keys and certificates made in a short-lived process of the operator's own (`krafty.pki.worker`): the operator's
process reads certificates (`krafty.pki.certs`) but never loads the cryptography library that makes them, which
would stay in its memory for as long as it runs. The process starts at a pass's first request and ends with
the pass; a pass with nothing to issue starts none."""

from __future__ import annotations

import datetime
import json
import select
import subprocess
import sys
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import IO, Any

from krafty.pki.certs import KeyPair, PkiError

ANSWER_SECONDS = 60.0  # a key and a certificate take milliseconds; a process that says nothing for this long is stuck


class PkiProcessFailed(RuntimeError):
    """The process that makes keys and certificates could not start, died or did not answer."""


class Issuer:
    """Makes CAs and certificates (see `krafty.pki.signing` for what each is); use as a context manager: the process
    it started ends on exit."""

    def __init__(self, answer_seconds: float = ANSWER_SECONDS) -> None:
        self.answer_seconds = answer_seconds
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self.started = 0  # processes started, for tests

    def __enter__(self) -> Issuer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                self._stop(self._process)
                self._process = None

    @staticmethod
    def _stop(process: subprocess.Popen[str]) -> None:
        assert process.stdin is not None
        process.stdin.close()  # it ends when its input does
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _started(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen([sys.executable, "-m", "krafty.pki.worker"], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, text=True)
            self.started += 1
        return self._process

    def _read(self, process: subprocess.Popen[str], out: IO[str]) -> str:
        ready, _, _ = select.select([out], [], [], self.answer_seconds)
        line = out.readline() if ready else ""
        if not line:
            process.kill()
            process.wait()
            raise PkiProcessFailed(f"the process making keys and certificates gave no answer (exit code "
                                   f"{process.returncode})")
        return line

    def _call(self, request: dict[str, Any]) -> dict[str, str]:
        with self._lock:
            process = self._started()
            assert process.stdin is not None
            assert process.stdout is not None
            try:
                process.stdin.write(json.dumps(request) + "\n")
                process.stdin.flush()
            except OSError as error:
                raise PkiProcessFailed(f"the process making keys and certificates is gone: {error}") from error
            answer: dict[str, str] = json.loads(self._read(process, process.stdout))
        if "error" in answer:
            raise PkiError(answer["error"])
        return answer

    def new_ca(self, common_name: str, now: datetime.datetime, validity: datetime.timedelta) -> KeyPair:
        made = self._call({"call": "new_ca", "common_name": common_name, "now": now.isoformat(),
                           "validity": validity.total_seconds()})
        return KeyPair(made["cert"], made["key"])

    def cross_sign(self, ca: KeyPair, by: KeyPair) -> str:
        return self._call({"call": "cross_sign", "ca": [ca.cert, ca.key], "by": [by.cert, by.key]})["cert"]

    def issue(self, ca: KeyPair, common_name: str, alt_names: Sequence[str], now: datetime.datetime,
              validity: datetime.timedelta, chain: Sequence[str] = ()) -> KeyPair:
        made = self._call({"call": "issue", "ca": [ca.cert, ca.key], "common_name": common_name,
                           "alt_names": list(alt_names), "now": now.isoformat(),
                           "validity": validity.total_seconds(), "chain": list(chain)})
        return KeyPair(made["cert"], made["key"])
