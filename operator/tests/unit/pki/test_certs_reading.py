"""Certificates and keys read without a cryptography library (`krafty.pki.certs`), against what `cryptography` reads
of the same material; and the process that makes them (`krafty.clients.pki_process`)."""

from __future__ import annotations

import base64
import datetime
import subprocess
import sys
from dataclasses import astuple

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from krafty.clients.pki_process import Issuer
from krafty.pki import certs, signing

NOW = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
PEM, NONE = serialization.Encoding.PEM, serialization.NoEncryption()


def _cryptography_facts(pem: str) -> tuple[object, ...]:
    """What `cryptography` reads of a certificate, in the order of `certs.CertFacts`."""
    cert = x509.load_pem_x509_certificate(pem.encode())
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
    self_signed = cert.issuer == cert.subject
    try:
        cert.verify_directly_issued_by(cert)
    except (InvalidSignature, ValueError):  # (a node's; a CA cross-signed by its predecessor of the same name)
        self_signed = False
    return (str(names[0].value) if names else "", cert.not_valid_before_utc, cert.not_valid_after_utc, sans,
            cert.fingerprint(hashes.SHA256()).hex(), is_ca, self_signed)


def _foreign_ca(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, name: str = "my company CA") -> str:
    """A self-signed CA as another tool makes it: no key identifiers, a UTF-8 name, years past 2049."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(7).not_valid_before(NOW).not_valid_after(datetime.datetime(2060, 1, 1, tzinfo=datetime.UTC))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(PEM).decode()


def test_what_is_read_of_the_operators_certificates_is_what_cryptography_reads():
    ca = signing.new_ca("prod cluster CA", NOW, 365 * DAY)
    node = signing.issue(ca, "prod-kafka", ["prod-broker-0.prod-brokers", "10.1.2.3", "fd00::3"], NOW, 30 * DAY)
    cross = signing.cross_sign(signing.new_ca("prod cluster CA", NOW, 365 * DAY), ca)
    for pem in (ca.cert, node.cert, cross):
        assert astuple(certs.facts(pem)) == _cryptography_facts(pem)
    assert certs.facts(node.cert).alt_names == ("prod-broker-0.prod-brokers", "10.1.2.3", "fd00::3")
    assert certs.issued_at(node.cert) == NOW


@pytest.mark.parametrize("key", [rsa.generate_private_key(65537, 2048), ec.generate_private_key(ec.SECP384R1())],
                         ids=["rsa", "ec-p384"])
@pytest.mark.parametrize("form", [serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL],
                         ids=["pkcs8", "pkcs1-or-sec1"])
def test_a_ca_another_tool_made_is_read_with_its_key_in_each_form_cert_manager_writes(key, form):
    cert = _foreign_ca(key)
    pair = certs.KeyPair(cert, key.private_bytes(PEM, form, NONE).decode())
    assert astuple(certs.facts(cert)) == _cryptography_facts(cert)
    assert certs.facts(cert).not_after.year == 2060  # a GeneralizedTime
    assert certs.matches(pair)
    assert not certs.matches(certs.KeyPair(cert, signing.new_ca("other", NOW, DAY).key))
    signer = certs.KeyPair(cert, key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, NONE).decode())
    issued = signing.issue(signer, "writer", (), NOW, DAY)
    assert certs.signed_by(issued.cert, cert)


def test_a_ca_renewed_under_the_same_name_signs_nothing_its_predecessor_signed():
    old, new = (signing.new_ca("prod cluster CA", NOW, 365 * DAY) for _ in range(2))
    node = signing.issue(old, "prod-kafka", ["prod-brokers"], NOW, 30 * DAY)
    assert certs.signed_by(node.cert, old.cert)
    assert not certs.signed_by(node.cert, new.cert)  # same issuer name, another key
    assert not certs.signed_by(node.cert, signing.new_ca("staging cluster CA", NOW, DAY).cert)
    assert certs.signed_by(signing.cross_sign(new, old), old.cert)


@pytest.mark.parametrize(("cert", "said"), [
    ("junk", "not a PEM certificate"),
    ("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "not an X.509 certificate"),
    ("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n", "not a PEM certificate"),
])
def test_an_unreadable_certificate_is_a_pki_error_that_says_what_it_is(cert, said):
    with pytest.raises(certs.PkiError, match=said):
        certs.facts(cert)


HOSTILE_PEM = [  # each held the operator's process (and the GIL) for minutes with a backtracking pattern
    "-----BEGIN CERTIFICATE-----" + " " * 500_000,
    "-----BEGIN CERTIFICATE-----\n" + "A \n" * 300_000 + "-----END CERTIFICATE-",
    "-----BEGIN CERTIFICATE-----\n" * 30_000,
    "-----BEGIN " + "A" * 500_000,
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pem", HOSTILE_PEM, ids=["spaces", "no end", "begins", "long label"])
def test_pem_text_a_tenant_wrote_to_hold_the_operator_is_read_in_one_pass_and_refused(pem):
    with pytest.raises(certs.PkiError, match="not a PEM certificate"):
        certs.facts(pem)


@pytest.mark.parametrize("before", ["text\n", "-----BEGIN lowercase-----\n", "-----BEGIN X-----\n-----END Y-----\n",
                                    "-----BEGIN CERTIFICATE-----\nnot: base64\n-----END CERTIFICATE-----\n"])
def test_a_certificate_after_text_or_blocks_that_cannot_be_read_is_read(before):
    ca = signing.new_ca("after junk", NOW, DAY)
    assert certs.facts(before + ca.cert).common_name == "after junk"


def test_pem_text_larger_than_any_secret_is_refused_naming_its_size():
    with pytest.raises(certs.PkiError, match="PEM text of 1,048,577 characters, more than the 1,048,576 read"):
        certs.facts(" " * (certs.MAX_PEM_CHARACTERS + 1))


def test_an_encrypted_key_with_headers_is_not_read():
    key = ("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nMIIB\n"
           "-----END RSA PRIVATE KEY-----\n")
    with pytest.raises(certs.PkiError, match="encrypted keys are not read"):
        certs.matches(certs.KeyPair(signing.new_ca("ca", NOW, DAY).cert, key))


def test_a_certificate_read_again_in_a_later_pass_is_not_parsed_again():
    # Given a certificate read once
    ca = signing.new_ca("read again", NOW, DAY)
    first = certs.facts(ca.cert)
    parsed = certs._certificate.cache_info().misses
    # When it is read again, Then the same is read without parsing it again
    assert certs.facts(ca.cert) == first
    assert certs.signed_by(ca.cert, ca.cert)
    assert certs._certificate.cache_info().misses == parsed


@pytest.mark.parametrize(("key", "said"), [
    ("junk", "not a PEM private key"),
    ("-----BEGIN EC PRIVATE KEY-----\nMAA=\n-----END EC PRIVATE KEY-----\n", "not a private key"),
])
def test_an_unreadable_key_is_a_pki_error_that_says_what_it_is(key, said):
    ca = signing.new_ca("ca", NOW, DAY)
    with pytest.raises(certs.PkiError, match=said):
        certs.matches(certs.KeyPair(ca.cert, key))


def test_an_ec_key_without_its_public_half_cannot_be_matched():
    key = ec.generate_private_key(ec.SECP256R1())
    # SEC 1 ECPrivateKey with only its version, private scalar and curve (the public key is optional there)
    scalar = key.private_numbers().private_value.to_bytes(32, "big")
    curve = bytes.fromhex("a00a06082a8648ce3d030107")
    body = bytes.fromhex("020101") + b"\x04\x20" + scalar + curve
    der = b"\x30" + bytes([len(body)]) + body
    serialization.load_der_private_key(der, None)  # a key cryptography reads
    pem = serialization.load_der_private_key(der, None).private_bytes(PEM, serialization.PrivateFormat.PKCS8, NONE)
    assert certs.matches(certs.KeyPair(_foreign_ca(key), pem.decode()))  # re-encoded by OpenSSL: it carries it
    bare = "-----BEGIN EC PRIVATE KEY-----\n" + base64.b64encode(der).decode() + "\n-----END EC PRIVATE KEY-----\n"
    with pytest.raises(certs.PkiError, match="does not carry its public key"):
        certs.matches(certs.KeyPair(_foreign_ca(key), bare))


def test_the_issuing_process_makes_what_krafty_pki_makes_and_ends_with_the_pass():
    with Issuer() as issuer:
        ca = issuer.new_ca("prod cluster CA", NOW, 365 * DAY)
        node = issuer.issue(ca, "prod-kafka", ["prod-brokers", "10.1.2.3"], NOW, 30 * DAY, ("CHAIN",))
        cross = issuer.cross_sign(issuer.new_ca("prod cluster CA", NOW, DAY), ca)
        process = issuer._process
        assert issuer.started == 1  # one process for the pass's requests
    assert process is not None
    assert process.poll() == 0  # it ended when its input did
    assert certs.facts(ca.cert).is_ca
    assert certs.matches(ca)
    assert certs.signed_by(node.cert, ca.cert)
    assert certs.matches(node)
    assert node.cert.endswith("CHAIN")
    assert certs.facts(node.cert).alt_names == ("prod-brokers", "10.1.2.3")
    assert certs.facts(node.cert).not_after == NOW + 30 * DAY
    assert certs.signed_by(cross, ca.cert)


def test_the_issuing_process_says_why_it_cannot_issue_and_goes_on():
    with Issuer() as issuer:
        ca = issuer.new_ca("ca", NOW, DAY)
        with pytest.raises(certs.PkiError):
            issuer.issue(certs.KeyPair(ca.cert, "junk"), "writer", (), NOW, DAY)
        assert certs.matches(issuer.issue(ca, "writer", (), NOW, DAY))
        assert issuer.started == 1


def test_a_pass_that_issues_nothing_starts_no_process():
    with Issuer() as issuer:
        pass
    assert issuer.started == 0


def test_the_operators_process_never_loads_a_cryptography_library():
    loaded = subprocess.run([sys.executable, "-c", "import sys, krafty.runtime.main; print(*sorted(sys.modules))"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert "krafty.reconcile.pki" in loaded
    assert [m for m in loaded if m.startswith("cryptography") or m in ("krafty.pki.signing", "krafty.pki.worker")] == []
