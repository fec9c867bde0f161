"""Every reader of input a tenant or a broker controls, fuzzed: any input is read, or refused with the reader's own
error, within a deadline per input (hypothesis'), never with another exception and never by running away (the
PEM pattern that backtracked held the operator's process for minutes). The slowest input of each reader is
printed at the end of the run."""

from __future__ import annotations

import base64
import contextlib
import inspect
import time
from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from krafty import wire
from krafty.model.common import MAX_QUANTITY, parse_quantity
from krafty.pki import certs
from krafty.render.kafka_config import render_properties

from ..conftest import SLOWEST

# A reader that runs in linear time takes micro- to milliseconds on these inputs; the deadline leaves room for a
# busy machine and none for a superlinear one.
FUZZ = settings(max_examples=150, deadline=500, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

DECODERS = sorted(((name, decode) for name, decode in inspect.getmembers(wire, inspect.isfunction)
                   if name.startswith("decode_") and name != "decode_simple"), key=lambda item: item[0])
DECODERS.append(("decode_simple", wire.decode_simple("UnregisterBroker")))


Timed = Callable[[str, Callable[[], object]], None]


@pytest.fixture
def timed(request: pytest.FixtureRequest) -> Timed:
    """Runs one read and keeps the longest time of each reader for the run's report (conftest.py)."""
    slowest = request.config.stash[SLOWEST]

    def run(reader: str, read: Callable[[], object]) -> None:
        started = time.perf_counter()
        try:
            read()
        finally:
            slowest[reader] = max(slowest.get(reader, 0.0), time.perf_counter() - started)

    return run


# Runs of continuation bytes (a varint that never ends), counts of 2^31, and text that is not UTF-8
HOSTILE_ANSWERS = (b"\xff" * 100_000, b"\x00" * 8 + b"\xff\xff\xff\x7f" + b"\x01" * 64, b"\x80" * 50_000,
                   b"\x00\x00\x00\x00\x00\x00\x02\x05\xff\xfe\xfd\xfc")


def test_every_decoder_is_fuzzed():
    assert len(DECODERS) >= 29


@pytest.mark.parametrize(("name", "decode"), DECODERS, ids=[name for name, _ in DECODERS])
def test_a_broker_answer_is_decoded_or_refused_as_malformed(name: str, decode: Callable[[wire.Reader], object],
                                                            timed: Timed):
    @FUZZ
    @given(st.binary(max_size=4096))
    @example(HOSTILE_ANSWERS[0])
    @example(HOSTILE_ANSWERS[1])
    @example(HOSTILE_ANSWERS[2])
    @example(HOSTILE_ANSWERS[3])
    def check(data: bytes) -> None:
        def read() -> None:
            # (the call turns these into KafkaUnavailable, or the error Kafka named)
            with contextlib.suppress(ValueError, wire.KafkaProtocolError):
                decode(wire.Reader(data))

        timed(name, read)

    check()


def test_a_varint_that_never_ends_is_refused_not_summed():
    with pytest.raises(ValueError, match="a varint longer than 10 bytes"):
        wire.Reader(b"\xff" * 1_000_000).uvarint()
    with pytest.raises(ValueError, match="truncated message"):
        wire.Reader(b"\xff").uvarint()
    assert wire.Reader(b"\xff" * 9 + b"\x01").uvarint() == 2**64 - 1


PEM_READERS: tuple[tuple[str, Callable[[str], object]], ...] = (
    ("certs.facts", certs.facts), ("certs.issued_at", certs.issued_at), ("certs.split_bundle", certs.split_bundle),
    ("certs.signed_by", lambda pem: certs.signed_by(pem, pem)),
    ("certs.matches", lambda pem: certs.matches(certs.KeyPair(pem, pem))))
_LABELS = st.sampled_from(("CERTIFICATE", "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"))


@st.composite
def pem_texts(draw: st.DrawFn) -> str:
    """PEM-shaped text: BEGIN and END lines around base64 of any bytes, or around any text, with junk between."""
    label = draw(_LABELS)
    body = draw(st.one_of(st.binary(max_size=2048).map(lambda raw: base64.encodebytes(raw).decode()),
                          st.text(alphabet=st.sampled_from("AB+/= \t\r\n-"), max_size=4096)))
    end = draw(st.sampled_from((f"-----END {label}-----", "", "-----END", f"-----END {label}")))
    junk = draw(st.text(max_size=64))
    return f"{junk}-----BEGIN {label}-----\n{body}\n{end}\n{junk}"


@pytest.mark.parametrize(("name", "read"), PEM_READERS, ids=[name for name, _ in PEM_READERS])
def test_pem_and_der_a_tenant_wrote_are_read_or_refused(name: str, read: Callable[[str], object], timed: Timed):
    @FUZZ
    @given(st.one_of(pem_texts(), st.text(max_size=4096)))
    @example("-----BEGIN CERTIFICATE-----" + " " * 100_000)
    @example("-----BEGIN CERTIFICATE-----\n" + "\t \n" * 30_000 + "-----END CERTIFICATE-----")
    @example("-----BEGIN CERTIFICATE-----\n" + base64.b64encode(b"\x30\x84\xff\xff\xff\xff").decode()
             + "\n-----END CERTIFICATE-----")
    def check(text: str) -> None:
        def attempt() -> None:
            with contextlib.suppress(certs.PkiError):  # (a condition and an Event on the resource that named it)
                read(text)

        timed(name, attempt)

    check()


_QUANTITY_SHAPED = st.from_regex(r"\A[+-]?\d{1,40}(\.\d{0,20})?([eE][+-]?\d{1,12}|[KMGTPE]i?|m|k)?\Z")


def test_a_quantity_is_read_within_what_kubernetes_holds_or_refused(timed: Timed):
    @FUZZ
    @given(st.one_of(st.text(max_size=200), _QUANTITY_SHAPED))
    @example("1e999999999")
    @example("9" * 100_000)
    @example("8Ei")
    def check(text: str) -> None:
        def read() -> None:
            try:
                quantity = parse_quantity(text)
            except ValueError:
                return  # InvalidSpec naming the field
            assert isinstance(quantity, Decimal)
            assert abs(quantity) <= MAX_QUANTITY

        timed("model.parse_quantity", read)

    check()


def test_java_properties_hold_one_line_per_setting(timed: Timed):
    @FUZZ
    @given(st.dictionaries(st.text(min_size=1, max_size=100), st.text(max_size=2000), max_size=20))
    @example({"log.cleaner.threads": "2\nnode.id=7\r\nbroker.rack=x"})
    @example({"k": "\\" * 100_000})
    def check(props: dict[str, str]) -> None:
        def render() -> None:
            rendered = render_properties(props)
            # no key or value starts a line of its own (Java ends a line at \n, \r and \f, and a final backslash
            # joins the next): the Java loader reads each back exactly (test_server_properties.py)
            assert rendered.count("\n") == len(props)
            assert not any(c in rendered for c in "\r\f")
            assert all(not (len(line) - len(line.rstrip("\\"))) % 2 for line in rendered.split("\n"))

        timed("render.render_properties", render)

    check()
