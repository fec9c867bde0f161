"""What the scripts that write a generated page share: rewrite it, or with --check fail when it is out of date."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(out: Path, text: str, argv: list[str], script: str) -> int:
    if "--check" in argv:
        if out.read_text() != text:
            print(f"{out} is out of date: run python scripts/{script}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    return 0
