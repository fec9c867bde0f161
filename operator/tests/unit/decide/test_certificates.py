"""The cluster PKI: certificates made with `cryptography`, and the pure decisions of what to issue and when
(including the three steps of a CA renewal)."""

from __future__ import annotations

import datetime
import functools
import ipaddress
from dataclasses import replace

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from krafty.decide import certificates
from krafty.decide.certificates import CaHeld, IssueReason, Subject
from krafty.model.cluster import Validity
from krafty.pki import certs, signing

NOW = datetime.datetime(2026, 11, 24, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
VALIDITY = Validity(validity_days=365, renewal_days=30)
SUBJECT = Subject("broker-0", "prod-kafka", ("prod-broker-0.prod-brokers.kafka.svc.cluster.local", "prod-brokers"))


@functools.cache
def _ca(name: str, days: int) -> certs.KeyPair:
    return signing.new_ca(name, NOW, days * DAY)


def ca(name: str = "ca", days: int = 365) -> certs.KeyPair:
    return _ca(name, days)


def node(signer: certs.KeyPair, days: int = 365, names: tuple[str, ...] = SUBJECT.alt_names,
         common_name: str = SUBJECT.common_name) -> certs.KeyPair:
    return signing.issue(signer, common_name, names, NOW, days * DAY)


def test_a_node_certificate_is_signed_by_its_ca_and_carries_its_names():
    cert = node(ca())
    facts = certs.facts(cert.cert)
    assert certs.signed_by(cert.cert, ca().cert)
    assert not certs.signed_by(cert.cert, ca("other").cert)
    assert certs.matches(cert)
    assert not certs.matches(certs.KeyPair(cert.cert, ca().key))
    assert (facts.common_name, facts.alt_names, facts.is_ca) == ("prod-kafka", SUBJECT.alt_names, False)
    assert certs.facts(ca().cert).is_ca


def test_an_address_is_named_as_an_ip_address_which_a_client_checks_the_address_it_dialed_against():
    cert = node(ca(), names=("broker-0.example.com", "172.18.0.3", "fd00::3"))
    sans = x509.load_pem_x509_certificate(cert.cert.encode()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["broker-0.example.com"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["172.18.0.3", "fd00::3"]
    assert sorted(certs.facts(cert.cert).alt_names) == ["172.18.0.3", "broker-0.example.com", "fd00::3"]
    store = Store([x509.load_pem_x509_certificate(ca().cert.encode())])
    leaf = x509.load_pem_x509_certificate(cert.cert.encode())
    for dialed in ("172.18.0.3", "fd00::3"):  # what a client connecting to that address checks
        (PolicyBuilder().store(store).time(NOW + DAY)
         .build_server_verifier(x509.IPAddress(ipaddress.ip_address(dialed))).verify(leaf, []))
    with pytest.raises(VerificationError):
        (PolicyBuilder().store(store).time(NOW + DAY)
         .build_server_verifier(x509.IPAddress(ipaddress.ip_address("172.18.0.4"))).verify(leaf, []))


def test_a_certificate_is_issued_again_when_an_address_from_outside_comes_or_goes_or_a_dns_name_is_missing():
    signer = ca()
    held = node(signer, names=(*SUBJECT.alt_names, "172.18.0.3"))
    same = replace(SUBJECT, outside=("172.18.0.3",))
    joined = replace(SUBJECT, outside=("172.18.0.3", "172.18.0.4"))
    moved = replace(SUBJECT, alt_names=("prod-broker-0.prod-brokers.kafka.svc.example.org",), outside=("172.18.0.3",))
    assert certificates.certificate_reason(same, held, signer, NOW, VALIDITY) is None
    assert certificates.certificate_reason(joined, held, signer, NOW, VALIDITY) is IssueReason.ADDRESSES_CHANGED
    assert certificates.certificate_reason(SUBJECT, held, signer, NOW, VALIDITY) is IssueReason.ADDRESSES_CHANGED
    assert certificates.certificate_reason(moved, held, signer, NOW, VALIDITY) is IssueReason.NAMES_CHANGED
    assert sorted(certs.facts(node(signer, names=joined.names).cert).alt_names) == sorted(joined.names)


def test_a_certificate_never_outlives_its_ca():
    short = ca("short", days=10)
    assert certs.facts(node(short, days=365).cert).not_after == certs.facts(short.cert).not_after


def test_a_private_key_is_never_printed():
    cert = node(ca())
    assert cert.key not in repr(cert)
    assert "PRIVATE KEY" not in repr(cert)


def test_a_bundle_keeps_each_certificate_once_in_order():
    first, second = ca("a").cert, ca("b").cert
    assert certs.split_bundle(certs.bundle([first, second, first])) == (first, second)


@pytest.mark.parametrize(("held", "signer", "now", "expected"), [
    (None, "ca", NOW, IssueReason.NEW),
    ("good", "ca", NOW, None),
    ("good", "ca", NOW + 334 * DAY, None),  # 31 days left
    ("good", "ca", NOW + 336 * DAY, IssueReason.EXPIRING),  # 29 days left
    ("good", "other", NOW, IssueReason.NEW_CA),
    ("renamed", "ca", NOW, IssueReason.NAMES_CHANGED),
    ("wrong key", "ca", NOW, IssueReason.UNUSABLE),
    ("other subject", "ca", NOW, IssueReason.UNUSABLE),
    ("garbage", "ca", NOW, IssueReason.UNUSABLE),
])
def test_when_a_certificate_is_issued_again(held, signer, now, expected):
    # Given the certificate held, the CA that signs now and the time, Then the reason (or none) is:
    cert = node(ca())
    pairs = {None: None, "good": cert, "renamed": node(ca(), names=("elsewhere",)),
             "wrong key": certs.KeyPair(cert.cert, node(ca()).key),
             "other subject": node(ca(), common_name="someone-else"),
             "garbage": certs.KeyPair("not a certificate", cert.key)}
    assert certificates.certificate_reason(SUBJECT, pairs[held], ca(signer), now, VALIDITY) == expected


@pytest.mark.parametrize(("held", "now", "requested", "all_moved", "expected"), [
    (CaHeld(None), NOW, "", False, (IssueReason.NEW, False)),
    (CaHeld(ca()), NOW, "", False, (None, False)),
    (CaHeld(ca()), NOW + 336 * DAY, "", False, (IssueReason.EXPIRING, False)),
    (CaHeld(ca()), NOW, "1", False, (IssueReason.REQUESTED, False)),
    (CaHeld(ca(), renewed_for="1"), NOW, "1", False, (None, False)),  # that request was acted on
    (CaHeld(ca(), renewed_for="1"), NOW, "2", False, (IssueReason.REQUESTED, False)),
    (CaHeld(certs.KeyPair(node(ca()).cert, node(ca()).key)), NOW, "", False, (IssueReason.UNUSABLE, False)),
    # A renewal under way: nothing new starts, and the previous CA goes once every pod has moved
    (CaHeld(ca(), ca("old")), NOW, "2", False, (None, False)),
    (CaHeld(ca(), ca("old")), NOW, "", True, (None, True)),
])
def test_what_a_ca_needs(held, now, requested, all_moved, expected):
    step = certificates.ca_step(held, VALIDITY, now, requested, all_moved)
    assert (step.renew, step.release_previous) == expected


def test_a_renewal_signs_with_the_previous_ca_until_every_pod_trusts_the_new_one():
    held = CaHeld(ca("new"), ca("old"))
    before = [certificates.running_marker([ca("old").cert], 1)] * 2
    half = [certificates.running_marker([ca("new").cert, ca("old").cert], 1), before[0]]
    after = [half[0]] * 2
    assert [certificates.all_trust(markers, ca("new")) for markers in (before, half, after)] == [False, False, True]
    assert certificates.signer(held, all_trust_current=False) == ca("old")
    assert certificates.signer(held, all_trust_current=True) == ca("new")
    assert certificates.signer(CaHeld(ca("new")), all_trust_current=False) == ca("new")


def test_user_certificates_are_signed_by_the_new_clients_ca_only_once_every_broker_trusts_it():
    renewing = CaHeld(ca("new"), ca("old"))
    trusted = CaHeld(ca("new"), ca("old"), trusted_by_all=certificates.short_fingerprint(ca("new").cert))
    assert certificates.clients_signer(renewing) == ca("old")
    assert certificates.clients_signer(CaHeld(ca("new"), ca("old"), trusted_by_all="0123456789abcdef")) == ca("old")
    assert certificates.clients_signer(trusted) == ca("new")
    assert certificates.clients_signer(CaHeld(ca("new"))) == ca("new")


HANDOVER = datetime.timedelta(minutes=5)


@pytest.mark.parametrize(("trusted", "users", "now", "expected"), [
    (False, ("new",), NOW + DAY, False),  # some broker does not trust the new CA yet
    (True, ("new", "old"), NOW + DAY, False),  # a user certificate still signed by the previous CA
    (True, ("new",), NOW + HANDOVER - datetime.timedelta(seconds=1), False),  # handed over too recently
    (True, ("new",), NOW + HANDOVER, True),
    (True, (), NOW, True),  # no user certificate at all
])
def test_the_previous_clients_ca_goes_once_every_user_certificate_is_new_and_handed_over(trusted, users, now,
                                                                                        expected):
    held = CaHeld(ca("new"), ca("old"),
                  trusted_by_all=certificates.short_fingerprint(ca("new").cert) if trusted else "")
    certs = [signing.issue(ca(signer), "writer", (), NOW, DAY).cert for signer in users]
    assert certificates.clients_moved(held, certs, now, HANDOVER) is expected


def test_an_unreadable_user_certificate_holds_the_previous_clients_ca():
    held = CaHeld(ca("new"), ca("old"), trusted_by_all=certificates.short_fingerprint(ca("new").cert))
    assert not certificates.clients_moved(held, ["not a certificate"], NOW + DAY, HANDOVER)


def test_the_marker_says_which_generation_of_certificates_pods_run():
    markers = [certificates.running_marker([ca().cert], 2), certificates.running_marker([ca().cert], 3)]
    assert not certificates.all_run(markers, 3)
    assert certificates.all_run(markers[1:], 3)
    assert not certificates.all_run([""], 0)  # a pod from before the operator had TLS


def _verifies(trusted: certs.KeyPair, sent: str, name: str) -> bool:
    """Whether a TLS client trusting only `trusted` accepts a server that sends `sent` (leaf, then chain)."""
    leaf, *chain = [x509.load_pem_x509_certificate(p.encode()) for p in certs.split_bundle(sent)]
    verifier = (PolicyBuilder().store(Store([x509.load_pem_x509_certificate(trusted.cert.encode())]))
                .time(NOW + DAY).build_server_verifier(x509.DNSName(name)))
    try:
        verifier.verify(leaf, chain)
    except VerificationError:
        return False
    return True


def test_during_a_renewal_clients_of_either_ca_verify_the_nodes():
    # Given a CA renewed: the new one cross-signed by the one before, sent after each node certificate
    old, new = ca("old"), ca("new")
    held = CaHeld(new, old, cross=signing.cross_sign(new, old))
    served = signing.issue(new, "prod-kafka", ["prod-broker-0.prod-brokers"], NOW, 30 * DAY,
                       certificates.chain(held, new, NOW))
    # Then a client that trusts only the old CA, and one that trusts only the new one, both accept it
    assert _verifies(old, served.cert, "prod-broker-0.prod-brokers")
    assert _verifies(new, served.cert, "prod-broker-0.prod-brokers")
    # While without the cross-signed CA the old CA's client refuses it, and nobody accepts a wrong name
    alone = signing.issue(new, "prod-kafka", ["prod-broker-0.prod-brokers"], NOW, 30 * DAY)
    assert not _verifies(old, alone.cert, "prod-broker-0.prod-brokers")
    assert not _verifies(new, served.cert, "elsewhere")


def test_a_certificate_is_sent_with_the_cross_signed_ca_only_while_it_is_valid_and_signed_by_the_current():
    old, new = ca("old"), ca("new")
    held = CaHeld(new, old, cross=signing.cross_sign(new, old))
    assert certificates.chain(held, new, NOW) == (held.cross,)
    assert certificates.chain(held, old, NOW) == ()  # step 1: the CA before still signs, alone
    assert certificates.chain(held, new, NOW + 400 * DAY) == ()  # the CA before has expired
    # A certificate sent without the chain it should have is issued again
    bare = signing.issue(new, SUBJECT.common_name, SUBJECT.alt_names, NOW, 365 * DAY)
    assert certificates.certificate_reason(SUBJECT, bare, new, NOW, VALIDITY, (held.cross,)) is (
        IssueReason.CHAIN_CHANGED)


@pytest.mark.parametrize(("held", "provided", "all_moved", "expected"), [
    (CaHeld(None), "mine", False, (IssueReason.PROVIDED, False)),  # a new cluster takes the user's CA
    (CaHeld(ca("mine")), "mine", False, (None, False)),  # never renewed by the operator, expired or not ...
    (CaHeld(ca()), "mine", False, (IssueReason.PROVIDED, False)),  # ... and moved to when the Secret changes
    (CaHeld(ca("mine"), ca()), "mine", True, (None, True)),  # that move ends like a renewal
    (CaHeld(ca("mine"), ca()), "next", False, (None, False)),  # a second change waits for the first
])
def test_a_ca_the_user_brings(held, provided, all_moved, expected):
    step = certificates.ca_step(held, VALIDITY, NOW + 400 * DAY, "1", all_moved, ca(provided))
    assert (step.renew, step.release_previous) == expected


def test_a_ca_the_user_brings_must_be_a_self_signed_ca_with_its_key():
    leaf = node(ca())
    assert certificates.provided_problem(ca("mine"), "mine") is None
    assert "does not exist" in str(certificates.provided_problem(None, "mine"))
    assert "no self-signed CA" in str(certificates.provided_problem(leaf, "mine"))
    assert "does not belong" in str(certificates.provided_problem(certs.KeyPair(ca("mine").cert, ca().key), "mine"))
    assert "no readable" in str(certificates.provided_problem(certs.KeyPair("junk", ca().key), "mine"))


def test_a_clients_ca_with_the_cluster_cas_key_is_refused_however_its_certificate_was_made():
    cluster = ca("mine")
    # The same certificate, and another one of the same key (cross-signed: another issuer, another serial)
    again = certs.KeyPair(signing.cross_sign(cluster, ca("other")), cluster.key)
    assert again.cert != cluster.cert
    for clients in (cluster, again):
        assert "holds the cluster CA's key" in str(certificates.shared_key_problem(clients, cluster, "clients"))
    assert certificates.shared_key_problem(ca("clients"), cluster, "clients") is None
