"""How kubectl krafty reaches an operator pod's ports: `kubectl port-forward` to the pod's loopback, and HTTP over it.

Port-forward goes through the API server (the caller's own credentials and their pods/portforward right in the
operator's namespace) to the pod's kubelet, which connects inside the pod: the plan endpoint listens on the
loopback only, so this is the one way to it, and the operator's NetworkPolicy does not apply to it.
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any, TextIO, cast

FORWARD_SECONDS = 30.0  # until kubectl says where it listens
FORWARDING = re.compile(r"^Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)$")


class ForwardError(RuntimeError):
    """The ports could not be forwarded: kubectl's own words (no right, no such pod, no kubectl)."""


def forwarding(line: str) -> tuple[int, int] | None:
    """The (pod port, local port) a line of `kubectl port-forward` announces, if it announces one."""
    found = FORWARDING.match(line.strip())
    return (int(found[2]), int(found[1])) if found else None


def _lines(stream: TextIO, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


@contextlib.contextmanager
def forwarded(namespace: str, pod: str, ports: Sequence[int]) -> Iterator[dict[int, int]]:
    """While the block runs, each of the pod's ports forwarded to a free local port: {pod port: local port}."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise ForwardError("kubectl is not on PATH (kubectl krafty forwards the operator's ports with it)")
    process = subprocess.Popen(
        [kubectl, "port-forward", "--namespace", namespace, f"pod/{pod}", "--address", "127.0.0.1",
         *(f":{port}" for port in ports)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = cast(TextIO, process.stdout), cast(TextIO, process.stderr)  # (both piped)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_lines, args=(stdout, lines), daemon=True).start()
        local: dict[int, int] = {}
        while len(local) < len(ports):
            try:
                line = lines.get(timeout=FORWARD_SECONDS)
            except queue.Empty:
                raise ForwardError(f"kubectl port-forward to {namespace}/{pod} said nothing for "
                                   f"{FORWARD_SECONDS:.0f} s") from None
            if line is None:
                process.wait(10)
                raise ForwardError(f"kubectl port-forward to {namespace}/{pod} failed: "
                                   f"{stderr.read().strip() or f'exit {process.returncode}'}")
            if (announced := forwarding(line)) is not None:
                local[announced[0]] = announced[1]
        yield local
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def request(port: int, path: str, method: str = "GET", body: Any = None,
            timeout: float = 30.0) -> tuple[int, str]:
    """An HTTP request to a forwarded local port: (status, body text)."""
    data = None if body is None else json.dumps(body).encode()
    asked = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                   headers={"Content-Type": "application/json",
                                            "Accept": "application/json, text/plain"})
    try:
        with urllib.request.urlopen(asked, timeout=timeout) as answer:
            return int(answer.status), bytes(answer.read()).decode()
    except urllib.error.HTTPError as error:
        return int(error.code), bytes(error.read() or b"").decode()
    except OSError as error:  # (refused or cut while forwarded)
        raise ForwardError(f"the forwarded port answered nothing: {error}") from error
