"""The process that makes the cluster's keys and certificates (`krafty.pki.signing`), so that the operator's own process
never loads a cryptography library: one JSON request per line on stdin, one answer per line on stdout, until
stdin closes. Started and stopped by `krafty.clients.pki_process`."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable
from typing import Any

from krafty.pki import signing
from krafty.pki.certs import KeyPair, PkiError


def _pair(value: list[str]) -> KeyPair:
    return KeyPair(*value)


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value)


def _span(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def _made(pair: KeyPair) -> dict[str, str]:
    return {"cert": pair.cert, "key": pair.key}


CALLS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {
    "new_ca": lambda r: _made(signing.new_ca(r["common_name"], _time(r["now"]), _span(r["validity"]))),
    "cross_sign": lambda r: {"cert": signing.cross_sign(_pair(r["ca"]), _pair(r["by"]))},
    "issue": lambda r: _made(signing.issue(_pair(r["ca"]), r["common_name"], r["alt_names"], _time(r["now"]),
                                       _span(r["validity"]), r["chain"])),
}


def answer(request: dict[str, Any]) -> dict[str, str]:
    try:
        return CALLS[request["call"]](request)
    except (PkiError, ValueError, TypeError) as error:  # material that cannot be used, said to the caller
        return {"error": str(error)}


def main() -> None:
    for line in sys.stdin:
        sys.stdout.write(json.dumps(answer(json.loads(line))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
