"""A real DNS server the test controls, and a Python process that resolves names through it alone.

In a cluster the operator reaches brokers by name: a pod's name, a headless Service's name that answers with
each pod's address. To test what the wire client does with names (one lookup per kept connection, an address
that failed tried last) the names are served by dnsmasq (Debian's, installed by scripts/setup-system.sh) from a
hosts file the test writes, every query logged; the client runs in a child Python process of its own mount
namespace, whose /etc/resolv.conf names that server (glibc's resolver has no other way to be pointed at one),
and evaluates the expressions the test sends it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from krafty_testkit.waiting import wait_for

# The child's loop: each line in is a Python expression (with the wire client imported as `kraft`); each line out
# is its value as JSON, or the exception it raised.
_CHILD = """
import json, sys
from krafty.clients import kraft
for line in sys.stdin:
    try:
        print(json.dumps({"value": eval(line, {"kraft": kraft})}), flush=True)
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
"""
ADDRESS = "127.0.53.1"  # where the server listens (port 53: resolv.conf names no port); only the child asks it


class Resolver:
    """dnsmasq answering the names of `names` (name -> its addresses) and nothing else, no answer cached."""

    def __init__(self, workdir: Path, names: Mapping[str, Sequence[str]]) -> None:
        binary = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
        self.hosts, self.log = workdir / "dns-hosts", workdir / "dns-queries.log"
        self.resolv_conf = workdir / "resolv.conf"
        self.resolv_conf.write_text(f"nameserver {ADDRESS}\noptions attempts:1 timeout:2\n")
        self.hosts.write_text("".join(f"{address} {name}\n" for name, addresses in names.items()
                                      for address in addresses))
        self.log.write_text("")
        errors = workdir / "dnsmasq.err"
        with errors.open("w") as err:
            self.process = subprocess.Popen(
                [binary, "--keep-in-foreground", "--no-resolv", "--no-hosts", f"--addn-hosts={self.hosts}",
                 "--cache-size=0", "--log-queries", f"--log-facility={self.log}", f"--listen-address={ADDRESS}",
                 "--bind-interfaces", "--port=53", "--user=root", "--pid-file="],
                stdout=subprocess.DEVNULL, stderr=err)
        wait_for(lambda: self.process.poll() is not None or "started, version" in self.log.read_text(), bool, 10,
                 "dnsmasq started")
        if self.process.poll() is not None:
            raise RuntimeError(f"dnsmasq exited {self.process.returncode}: {errors.read_text()}")

    def lookups(self, name: str) -> int:
        """How many times the name was asked for its IPv4 addresses."""
        return len(re.findall(rf"query\[A\] {re.escape(name)} from ", self.log.read_text()))

    def python(self) -> Child:
        """A Python process resolving through this server alone (a context manager: it ends on leaving)."""
        return Child(self.resolv_conf)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def __enter__(self) -> Resolver:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Child:
    """A Python process in a mount namespace of its own, /etc/resolv.conf bound to the resolver's file."""

    def __init__(self, resolv_conf: Path) -> None:
        self.process = subprocess.Popen(
            ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$1" -c "$2"',
             str(resolv_conf), sys.executable, _CHILD],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def eval(self, expression: str) -> Any:
        """The expression's value in the child; its exception raised here as ChildError."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(expression.replace("\n", " ") + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the resolving child exited {self.process.wait(10)} on: {expression}")
        answer = json.loads(line)
        if "error" in answer:
            raise ChildError(answer["error"])
        return answer["value"]

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(30)


class ChildError(Exception):
    """An exception the child's expression raised (its type and message)."""
