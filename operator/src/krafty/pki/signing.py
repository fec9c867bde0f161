"""Certificates and keys of a cluster's PKI, made with the `cryptography` package (never by shelling out), in
the operator's process for making them (`krafty.pki.worker`); the operator reads them with `krafty.pki.certs`.

Keys are ECDSA P-256: quick to make, and read by Kafka's PEM stores, librdkafka and Python's ssl alike.
Everything is PEM text; private keys are unencrypted PKCS#8 and live only in Secrets.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from krafty.pki.certs import BACKDATE, KeyPair, PkiError


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
            .not_valid_before(now - BACKDATE).not_valid_after(now + validity)
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
               .not_valid_before(now - BACKDATE)
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









