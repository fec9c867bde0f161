"""Certificates and keys read from their PEM text: what the operator decides on (names, validity, fingerprint,
which CA key signed a certificate, whether a key belongs to a certificate), by a small DER reader.

Reading needs no cryptography library: the operator's process never loads one (making keys and certificates
happens in a short-lived process of its own, `krafty.clients.pki_process`). A certificate counts as signed by
a CA when it names that CA as its issuer and the key that signed it (its authority key identifier, when it has
one) is the CA's: the operator compares the signer's identity and leaves checking signatures to the TLS
clients and servers that use the certificates.
"""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import ipaddress
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

# Issued a little in the past, so that a node whose clock is behind the operator's accepts it at once.
BACKDATE = datetime.timedelta(minutes=5)
_PEM_END = "-----END CERTIFICATE-----"
_DASHES, _BEGIN, _END = "-----", "-----BEGIN ", "-----END "
_LABEL, _BASE64 = re.compile(r"[A-Z0-9 ]{1,64}"), re.compile(r"[A-Za-z0-9+/=\s]*")
# Past the largest Secret the API server stores (1 MiB): no key or certificate of ours comes near it
MAX_PEM_CHARACTERS = 1 << 20

# DER tags and the object identifiers read
_BOOLEAN, _INTEGER, _BIT_STRING, _OCTET_STRING, _OID, _SEQUENCE = 0x01, 0x02, 0x03, 0x04, 0x06, 0x30
_UTC_TIME, _GENERALIZED_TIME, _BMP_STRING = 0x17, 0x18, 0x1E
_VERSION, _EXTENSIONS, _EC_PUBLIC_KEY = 0xA0, 0xA3, 0xA1
_DNS_NAME, _IP_ADDRESS, _KEY_IDENTIFIER = 0x82, 0x87, 0x80
_COMMON_NAME = bytes.fromhex("550403")
_SUBJECT_ALT_NAME, _BASIC_CONSTRAINTS, _AUTHORITY_KEY_ID = (bytes.fromhex(h) for h in ("551d11", "551d13", "551d23"))
_RSA, _EC = bytes.fromhex("2a864886f70d010101"), bytes.fromhex("2a8648ce3d0201")


class PkiError(ValueError):
    """Certificate or key material that cannot be used (unreadable, or not a CA)."""


@dataclass(frozen=True)
class KeyPair:
    cert: str  # PEM
    key: str = field(repr=False)  # PEM, PKCS#8, unencrypted: never printed


@dataclass(frozen=True)
class CertFacts:
    common_name: str
    not_before: datetime.datetime
    not_after: datetime.datetime
    alt_names: tuple[str, ...]  # its subject alternative names: DNS names and IP addresses, as text
    fingerprint: str  # SHA-256 of the DER encoding, hex
    is_ca: bool
    self_signed: bool


@dataclass(frozen=True)
class _Der:
    tag: int
    body: bytes


def _items(data: bytes) -> Iterator[_Der]:
    """The DER elements one after another in `data` (definite lengths, as DER has)."""
    at = 0
    while at < len(data):
        if at + 2 > len(data):
            raise PkiError("truncated DER")
        tag, size = data[at], data[at + 1]
        at += 2
        if size & 0x80:
            count = size & 0x7F
            if count == 0 or count > 4 or at + count > len(data):
                raise PkiError("a DER length that cannot be read")
            size = int.from_bytes(data[at:at + count], "big")
            at += count
        if at + size > len(data):
            raise PkiError("truncated DER")
        yield _Der(tag, data[at:at + size])
        at += size


def _children(element: _Der, tag: int = _SEQUENCE) -> list[_Der]:
    if element.tag != tag:
        raise PkiError(f"DER tag {element.tag:#x} where {tag:#x} belongs")
    return list(_items(element.body))


def _one(data: bytes) -> _Der:
    found = list(_items(data))
    if len(found) != 1:
        raise PkiError("not one DER element")
    return found[0]


def _bits(element: _Der) -> bytes:
    if element.tag != _BIT_STRING or not element.body or element.body[0] != 0:
        raise PkiError("not a whole-byte DER bit string")
    return element.body[1:]


def _time(element: _Der) -> datetime.datetime:
    text = element.body.decode("ascii")
    if element.tag == _UTC_TIME:  # two digits of year: 1950 to 2049 (RFC 5280)
        text = ("19" if int(text[:2]) >= 50 else "20") + text
    elif element.tag != _GENERALIZED_TIME:
        raise PkiError("a validity time that is neither UTCTime nor GeneralizedTime")
    return datetime.datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=datetime.UTC)


def _common_name(name: bytes) -> str:
    for relative in _items(name):
        for attribute in _children(relative, 0x31):
            oid, value = _children(attribute)
            if oid.tag == _OID and oid.body == _COMMON_NAME:
                return value.body.decode("utf-16-be" if value.tag == _BMP_STRING else "utf-8")
    return ""


def _alt_names(value: bytes) -> tuple[str, ...]:
    names = _children(_one(value))
    dns = [n.body.decode("ascii") for n in names if n.tag == _DNS_NAME]
    return (*dns, *(str(ipaddress.ip_address(n.body)) for n in names if n.tag == _IP_ADDRESS))


@dataclass(frozen=True)
class _Certificate:
    """The parts of an X.509 certificate (RFC 5280) the operator reads."""

    der: bytes
    issuer: bytes  # the DER of the names, compared as they are
    subject: bytes
    not_before: datetime.datetime
    not_after: datetime.datetime
    public_key: tuple[bytes, bytes]  # (algorithm, subjectPublicKey)
    extensions: dict[bytes, bytes]  # extension OID -> its value's DER

    @property
    def key_id(self) -> bytes:
        """The identifier of its public key as a certificate it signs names it (RFC 5280 4.2.1.2, method 1)."""
        return hashlib.sha1(self.public_key[1], usedforsecurity=False).digest()

    @property
    def signed_with(self) -> bytes | None:
        """The identifier of the key that signed it (its authority key identifier), when it says."""
        if _AUTHORITY_KEY_ID not in self.extensions:
            return None
        found = [part.body for part in _children(_one(self.extensions[_AUTHORITY_KEY_ID]))
                 if part.tag == _KEY_IDENTIFIER]
        return found[0] if found else None


def _pem_text(pem: str) -> Iterator[tuple[str, str]]:
    """(label, body) of each PEM block, read in one pass over the text (a tenant writes it: no pattern that
    could backtrack, no search that starts again from a block's beginning). A block runs to the next END line:
    one whose END names another label, or whose body has headers (an encrypted key's), is passed over."""
    if len(pem) > MAX_PEM_CHARACTERS:
        raise PkiError(f"PEM text of {len(pem):,} characters, more than the {MAX_PEM_CHARACTERS:,} read")
    at = pem.find(_BEGIN)
    while at >= 0:
        label_at = at + len(_BEGIN)
        label_end = pem.find(_DASHES, label_at, label_at + 70)
        label = pem[label_at:label_end] if label_end >= 0 else ""
        if not _LABEL.fullmatch(label):
            at = pem.find(_BEGIN, label_at)
            continue
        body_at = label_end + len(_DASHES)
        end = pem.find(_END, body_at)
        if end < 0:
            return
        end_line = f"{_END}{label}{_DASHES}"
        if pem.startswith(end_line, end) and _BASE64.fullmatch(pem, body_at, end):
            yield label, pem[body_at:end]
        at = pem.find(_BEGIN, end + len(_END))


def _pem_blocks(pem: str, *labels: str) -> list[tuple[str, bytes]]:
    try:
        return [(label, base64.b64decode("".join(body.split()), validate=True))
                for label, body in _pem_text(pem) if label in labels]
    except ValueError as error:
        raise PkiError(f"PEM that is not base64: {error}") from error


@functools.lru_cache(maxsize=256)
def _certificate(pem: str) -> _Certificate:
    """The first certificate in `pem` (each pass reads the same ones again: parsed once)."""
    blocks = _pem_blocks(pem, "CERTIFICATE")
    if not blocks:
        raise PkiError("not a PEM certificate")
    der = blocks[0][1]
    try:
        tbs = _children(_children(_one(der))[0])
        if tbs[0].tag == _VERSION:
            tbs = tbs[1:]
        _serial, _signature, issuer, validity, subject, spki, *rest = tbs
        not_before, not_after = (_time(t) for t in _children(validity))
        algorithm, key = _children(spki)
        extensions: dict[bytes, bytes] = {}
        for part in rest:
            if part.tag == _EXTENSIONS:
                for extension in _children(_one(part.body)):
                    oid, *_critical, value = _children(extension)
                    extensions[oid.body] = value.body
        return _Certificate(der, issuer.body, subject.body, not_before, not_after,
                            (_children(algorithm)[0].body, _bits(key)), extensions)
    except (ValueError, IndexError, UnicodeDecodeError) as error:
        raise PkiError(f"not an X.509 certificate: {error}") from error


def _is_ca(cert: _Certificate) -> bool:
    if _BASIC_CONSTRAINTS not in cert.extensions:
        return False
    parts = _children(_one(cert.extensions[_BASIC_CONSTRAINTS]))
    return bool(parts) and parts[0].tag == _BOOLEAN and parts[0].body != b"\x00"


def _signed(cert: _Certificate, ca: _Certificate) -> bool:
    return cert.issuer == ca.subject and cert.signed_with in (None, ca.key_id)


def facts(pem: str) -> CertFacts:
    """What the operator decides on: names, validity, fingerprint (of the first certificate in `pem`)."""
    cert = _certificate(pem)
    try:
        return CertFacts(common_name=_common_name(cert.subject), not_before=cert.not_before,
                         not_after=cert.not_after,
                         alt_names=_alt_names(cert.extensions[_SUBJECT_ALT_NAME])
                         if _SUBJECT_ALT_NAME in cert.extensions else (),
                         fingerprint=hashlib.sha256(cert.der).hexdigest(), is_ca=_is_ca(cert),
                         self_signed=_signed(cert, cert))
    except (ValueError, UnicodeDecodeError) as error:
        raise PkiError(f"a certificate whose extensions cannot be read: {error}") from error


def same_key(first: str, second: str) -> bool:
    """Whether two certificates hold the same public key (one CA, however often its certificate was made)."""
    return _certificate(first).public_key == _certificate(second).public_key


def issued_at(pem: str) -> datetime.datetime:
    """When a certificate made by `krafty.pki.signing.issue` was issued (its start of validity is set a little
    before)."""
    return _certificate(pem).not_before + BACKDATE


def signed_by(pem: str, ca_pem: str) -> bool:
    """Whether the certificate names the CA as its issuer and was signed with the CA's key (by its authority
    key identifier: every certificate the operator issues has one)."""
    return _signed(_certificate(pem), _certificate(ca_pem))


def _public_half(key_pem: str) -> tuple[bytes, bytes]:
    """(algorithm, public key bits as a certificate carries them) of a PEM private key: PKCS#8, or the
    PKCS#1 RSA and SEC 1 EC forms cert-manager writes."""
    blocks = _pem_blocks(key_pem, "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY")
    if not blocks:
        raise PkiError("not a PEM private key (encrypted keys are not read)")
    label, der = blocks[0]
    try:
        if label == "PRIVATE KEY":
            _version, algorithm, inner, *_ = _children(_one(der))
            kind = _children(algorithm)[0].body
            label, der = {_RSA: "RSA PRIVATE KEY", _EC: "EC PRIVATE KEY"}.get(kind, ""), inner.body
        fields = _children(_one(der))
        if label == "RSA PRIVATE KEY":  # version, n, e, ...: the public key is the sequence (n, e)
            return _RSA, _encoded(_Der(_SEQUENCE, _encoded(fields[1]) + _encoded(fields[2])))
        if label == "EC PRIVATE KEY":
            public = [f for f in fields if f.tag == _EC_PUBLIC_KEY]
            if not public:
                raise PkiError("an EC key that does not carry its public key")
            return _EC, _bits(_one(public[0].body))
    except (ValueError, IndexError) as error:
        raise PkiError(f"not a private key: {error}") from error
    raise PkiError("a private key that is neither RSA nor EC")


def _encoded(element: _Der) -> bytes:
    return bytes([element.tag]) + _size(len(element.body)) + element.body


def _size(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def matches(pair: KeyPair) -> bool:
    """Whether the key is the private half of the certificate's public key."""
    return _public_half(pair.key) == _certificate(pair.cert).public_key


def bundle(certs: Iterable[str]) -> str:
    """Several PEM certificates as one trust bundle, each once, in order."""
    out: list[str] = []
    for pem in certs:
        for part in split_bundle(pem):
            if part not in out:
                out.append(part)
    return "".join(out)


def split_bundle(pem: str) -> tuple[str, ...]:
    parts = [part.strip() for part in pem.split(_PEM_END) if part.strip()]
    return tuple(f"{part}\n{_PEM_END}\n" for part in parts)
