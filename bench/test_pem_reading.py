"""Benchmark: PEM text read by the one-pass reader of krafty.pki.certs against the pattern it replaced, on the
same text: an operator's own CA certificate, and what a tenant can write into a Secret the operator reads (a BEGIN
line and spaces, no END line). Both sides find the same blocks; each time is the best of a few runs of one read.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable

import pytest

from krafty.pki import certs, signing
from krafty_testkit.bench_size import sized
from krafty_testkit.plugin import report_table

pytestmark = pytest.mark.bench

# The pattern krafty.pki.certs read PEM text with until the one-pass reader (its three whitespace quantifiers
# overlap: a BEGIN line and spaces with no END line backtrack cubically)
BACKTRACKING = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\s*([A-Za-z0-9+/=\s]+?)\s*-----END \1-----")


def _best(read: Callable[[], object], runs: int) -> float:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        read()
        took.append(time.perf_counter() - started)
    return min(took)


def test_pem_reading_one_pass_against_the_backtracking_pattern():
    ca = signing.new_ca("bench CA", datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1)).cert
    cases = [("the operator's CA certificate", ca, 20)]
    cases += [(f"BEGIN line and {n:,} spaces", "-----BEGIN CERTIFICATE-----" + " " * n, 2)
              for n in sized((250, 500, 1000), (250,))]
    rows = []
    for what, text, runs in cases:
        # the same blocks found both ways
        assert [label for label, _ in certs._pem_text(text)] == [label for label, _ in BACKTRACKING.findall(text)]
        before = _best(lambda text=text: BACKTRACKING.findall(text), runs)
        after = _best(lambda text=text: list(certs._pem_text(text)), runs)
        rows.append([what, f"{before * 1000:,.3f}", f"{after * 1000:,.3f}", f"{before / after:,.0f}x"])
    report_table("Reading PEM text (best of the runs, ms)",
                 ["text", "backtracking pattern (baseline)", "one-pass reader", "ratio"], rows)
