"""Certificates and keys of a cluster's PKI, made with the `cryptography` package (never by shelling out).

Keys are ECDSA P-256: quick to make, and read by Kafka's PEM stores, librdkafka and Python's ssl alike.
Everything is PEM text; private keys are unencrypted PKCS#8 and live only in Secrets.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Issued a little in the past, so that a node whose clock is behind the operator's accepts it at once.
_BACKDATE = datetime.timedelta(minutes=5)
_PEM_END = "-----END CERTIFICATE-----"


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


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _load_cert(pem: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem.encode())
    except ValueError as error:
        raise PkiError(f"not a PEM certificate: {error}") from error


_CA_USAGE = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                          decipher_only=False)


def new_ca(common_name: str, now: datetime.datetime, validity: datetime.timedelta) -> KeyPair:
    """A self-signed CA. Path length 1: it may vouch for one CA below it, its successor cross-signed
    during a renewal (see `cross_sign`), and that one for end-entity certificates only."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key()
    cert = (x509.CertificateBuilder()
            .subject_name(_name(common_name)).issuer_name(_name(common_name))
            .public_key(public).serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(key, hashes.SHA256()))
    return KeyPair(_cert_pem(cert), _key_pem(key))


def cross_sign(ca: KeyPair, by: KeyPair) -> str:
    """The CA `ca` vouched for by the CA `by` (same subject and key as `ca`, issued by `by`): sent after a
    certificate signed by `ca`, it lets a client that trusts only `by` still verify that certificate."""
    cert, issuer = _load_cert(ca.cert), _load_cert(by.cert)
    issuer_key = serialization.load_pem_private_key(by.key.encode(), password=None)
    if not isinstance(issuer_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise PkiError("the CA key is neither an EC nor an RSA key")
    cross = (x509.CertificateBuilder()
             .subject_name(cert.subject).issuer_name(issuer.subject)
             .public_key(cert.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(cert.not_valid_before_utc)
             .not_valid_after(min(cert.not_valid_after_utc, issuer.not_valid_after_utc))
             .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
             .add_extension(_CA_USAGE, critical=True)
             .add_extension(x509.SubjectKeyIdentifier.from_public_key(cert.public_key()), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
             .sign(issuer_key, hashes.SHA256()))
    return _cert_pem(cross)


def issued_at(pem: str) -> datetime.datetime:
    """When a certificate made by `issue` was issued (its start of validity is set a little before)."""
    return _load_cert(pem).not_valid_before_utc + _BACKDATE


def _alt_name(name: str) -> x509.GeneralName:
    """An IP address names the certificate as one (clients check an address they connect to against the
    certificate's IP addresses, never its DNS names); anything else is a DNS name."""
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def issue(ca: KeyPair, common_name: str, alt_names: Sequence[str], now: datetime.datetime,
          validity: datetime.timedelta, chain: Sequence[str] = ()) -> KeyPair:
    """An end-entity certificate for TLS servers and clients alike (nodes are both to each other),
    never valid past its CA; `alt_names`: DNS names and IP addresses; `chain`: certificates to send after it
    (a cross-signed CA)."""
    ca_cert = _load_cert(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):  # what cert-manager issues
        raise PkiError("the CA key is neither an EC nor an RSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (x509.CertificateBuilder()
               .subject_name(_name(common_name)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - _BACKDATE)
               .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                              critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName([_alt_name(n) for n in alt_names]),
                                        critical=False)
    return KeyPair(_cert_pem(builder.sign(ca_key, hashes.SHA256())) + "".join(chain), _key_pem(key))


def facts(pem: str) -> CertFacts:
    """What the operator decides on: names, validity, fingerprint (of the first certificate in `pem`)."""
    cert = _load_cert(pem)
    try:
        found = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        sans = (*found.get_values_for_type(x509.DNSName), *map(str, found.get_values_for_type(x509.IPAddress)))
    except x509.ExtensionNotFound:
        sans = ()
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return CertFacts(common_name=str(names[0].value) if names else "", not_before=cert.not_valid_before_utc,
                     not_after=cert.not_valid_after_utc, alt_names=sans,
                     fingerprint=cert.fingerprint(hashes.SHA256()).hex(), is_ca=is_ca,
                     self_signed=cert.issuer == cert.subject and signed_by(pem, pem))


def signed_by(pem: str, ca_pem: str) -> bool:
    """Whether the certificate's signature verifies with the CA certificate's key."""
    cert, ca_cert = _load_cert(pem), _load_cert(ca_pem)
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def matches(pair: KeyPair) -> bool:
    """Whether the key is the private half of the certificate's public key."""
    key = serialization.load_pem_private_key(pair.key.encode(), password=None)
    public = _load_cert(pair.cert).public_key()
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return key.public_key().public_bytes(*fmt) == public.public_bytes(*fmt)


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
