"""What the cluster's PKI needs now: a CA made or renewed, certificates issued, an old CA let go.

A CA is renewed without a moment in which nodes distrust each other, in three steps, each a roll:
    1. a new CA is made; every pod is given a trust bundle of the new and the previous CA, while the
       certificates stay signed by the previous one (which keeps signing new ones meanwhile);
    2. once every pod trusts the new CA, every certificate is issued again, signed by it;
    3. once every pod runs with those, the previous CA leaves the trust bundle.
From step 2 on, each certificate is sent with the new CA cross-signed by the previous one, so that clients
that still trust only the previous CA keep verifying the nodes while it is valid. A CA the user brings in a
Secret is moved to the same way when the Secret changes. Pods say what they run with in one annotation (see
`running_marker`), so each step is read, never remembered.

The clients CA (it signs the users' certificates, which brokers check) is renewed in the same three steps,
with users in the place of nodes: the brokers trust both CAs; once they all do, every user certificate is
issued again by the new one (`clients_signer`); and once those have been in the users' Secrets for the
handover time, the previous CA leaves the brokers' trust (`clients_moved`), and what it signed stops working.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from krafty.model.cluster import Validity
from krafty.pki import certs
from krafty.pki.certs import KeyPair


class IssueReason(StrEnum):
    NEW = "New"  # none yet
    EXPIRING = "Expiring"  # inside its renewal window
    REQUESTED = "Requested"  # a user asked for a new CA (annotation)
    UNUSABLE = "Unusable"  # unreadable, not a CA, or a key that does not belong to the certificate
    NAMES_CHANGED = "NamesChanged"  # it lacks a name its holder answers to inside Kubernetes
    ADDRESSES_CHANGED = "AddressesChanged"  # the addresses clients outside Kubernetes reach its holder by changed
    NEW_CA = "NewCa"  # signed by a CA that is no longer the one signing
    CHAIN_CHANGED = "ChainChanged"  # the CA certificates sent after it changed (a cross-signed CA came or went)
    PROVIDED = "Provided"  # the user's Secret holds a CA the cluster does not run with yet

    def message(self, what: str) -> str:
        return {
            IssueReason.NEW: f"{what}: issued",
            IssueReason.EXPIRING: f"{what}: renewed, it was about to expire",
            IssueReason.REQUESTED: f"{what}: renewed, as an annotation asked",
            IssueReason.UNUSABLE: f"{what}: issued again, the one kept could not be used",
            IssueReason.NAMES_CHANGED: f"{what}: issued again, its DNS names changed",
            IssueReason.ADDRESSES_CHANGED: f"{what}: issued again for the addresses clients outside Kubernetes reach "
                                           "them by (a node joined or left, a load balancer's address changed); no "
                                           "restart: each takes it when it next starts, on whichever node",
            IssueReason.NEW_CA: f"{what}: issued again by the new CA, which every node trusts now",
            IssueReason.CHAIN_CHANGED: f"{what}: issued again, the CA certificates sent with it changed",
            IssueReason.PROVIDED: f"{what}: taken from the Secret spec.tls names",
        }[self]


@dataclass(frozen=True)
class CaHeld:
    """A CA as its Secrets hold it."""

    current: KeyPair | None
    previous: KeyPair | None = None  # during a renewal: the CA before, which still signs until step 2
    renewed_for: str = ""  # the value of the renewal annotation already acted on
    cross: str | None = None  # the current CA cross-signed by the one before, while that one is valid
    trusted_by_all: str = ""  # clients CA: the short fingerprint of the CA every broker trusts, once they do


def chain(held: CaHeld, signer: KeyPair, now: datetime.datetime) -> tuple[str, ...]:
    """What a certificate signed by `signer` is sent with: the current CA cross-signed by the one before,
    while valid, so that clients that still trust only the CA before keep verifying the nodes."""
    if held.cross is None or signer != held.current or certs.facts(held.cross).not_after <= now:
        return ()
    return (held.cross,)


@dataclass(frozen=True)
class CaStep:
    renew: IssueReason | None  # make a new CA, for this reason
    release_previous: bool  # step 3: the previous CA leaves the trust bundle


def usable_ca(pair: KeyPair) -> bool:
    try:
        return certs.facts(pair.cert).is_ca and certs.matches(pair)
    except (certs.PkiError, ValueError, TypeError):
        return False


def _expiring(pair: KeyPair, now: datetime.datetime, validity: Validity) -> bool:
    return certs.facts(pair.cert).not_after - now <= datetime.timedelta(days=validity.renewal_days)


def provided_problem(pair: KeyPair | None, secret: str) -> str | None:
    """Why a CA from the user's Secret cannot be used, or None."""
    if pair is None:
        return f"Secret {secret} (type kubernetes.io/tls, with tls.crt and tls.key) does not exist or lacks a key"
    try:
        facts = certs.facts(pair.cert)
        matches = certs.matches(pair)
    except (certs.PkiError, ValueError, TypeError) as error:
        return f"Secret {secret} holds no readable certificate and key: {error}"
    if not (facts.is_ca and facts.self_signed):
        return f"Secret {secret} holds no self-signed CA certificate (basic constraints CA:true)"
    if not matches:
        return f"the key in Secret {secret} does not belong to its certificate"
    return None


def shared_key_problem(clients: KeyPair, cluster: KeyPair, secret: str) -> str | None:
    """Why the user's clients CA cannot be used beside the cluster CA: with the cluster CA's key, a user's
    certificate would be trusted on the nodes' own listeners, as a super user."""
    if certs.same_key(clients.cert, cluster.cert):
        return (f"Secret {secret} (tls.clientsCa) holds the cluster CA's key: a user's certificate would be a "
                "node's. Give the clients their own CA")
    return None


def ca_step(held: CaHeld, validity: Validity, now: datetime.datetime, requested: str,
            all_moved: bool, provided: KeyPair | None = None) -> CaStep:
    """`requested`: the cluster's renewal annotation ("" when none); `all_moved`: every pod runs with
    certificates signed by the current CA (step 2 done); `provided`: the user's own CA (checked with
    `provided_problem`), which replaces any renewal of the operator's."""
    if provided is not None:
        moving = held.current is not None and held.current.cert != provided.cert
        if moving and held.previous is not None:  # the Secret changed again mid-renewal: that one ends first
            return CaStep(None, False)
        if held.current is None or moving:
            return CaStep(IssueReason.PROVIDED, False)
        return CaStep(None, held.previous is not None and all_moved)
    if held.current is None:
        return CaStep(IssueReason.NEW, False)
    if not usable_ca(held.current):
        return CaStep(IssueReason.UNUSABLE, False)
    if held.previous is not None:  # a renewal under way: nothing new starts until it ends
        return CaStep(None, all_moved)
    if requested and requested != held.renewed_for:
        return CaStep(IssueReason.REQUESTED, False)
    if _expiring(held.current, now, validity):
        return CaStep(IssueReason.EXPIRING, False)
    return CaStep(None, False)


def signer(held: CaHeld, all_trust_current: bool) -> KeyPair:
    """The CA that signs certificates now: the previous one until every pod trusts the current one."""
    if held.previous is not None and not all_trust_current:
        return held.previous
    if held.current is None:
        raise ValueError("no CA to sign with")
    return held.current


@dataclass(frozen=True)
class Subject:
    """What one certificate must say."""

    key: str  # where it is kept
    common_name: str
    alt_names: tuple[str, ...]  # its names inside Kubernetes
    outside: tuple[str, ...] = ()  # the addresses and host names clients outside Kubernetes reach it by

    @property
    def names(self) -> tuple[str, ...]:
        """Every subject alternative name: DNS names and IP addresses."""
        return self.alt_names + tuple(n for n in self.outside if n not in self.alt_names)


def certificate_reason(subject: Subject, held: KeyPair | None, ca: KeyPair, now: datetime.datetime,
                       validity: Validity, sent_with: tuple[str, ...] = ()) -> IssueReason | None:
    """Why the certificate must be issued (again), or None when the one held is good. `sent_with`: the
    CA certificates it must be sent with (`chain`)."""
    if held is None:
        return IssueReason.NEW
    try:
        facts = certs.facts(held.cert)
        usable = certs.matches(held) and facts.common_name == subject.common_name
    except (certs.PkiError, ValueError, TypeError):
        return IssueReason.UNUSABLE
    if not usable:
        return IssueReason.UNUSABLE
    if not certs.signed_by(held.cert, ca.cert):
        return IssueReason.NEW_CA
    if not set(subject.alt_names) <= set(facts.alt_names):
        return IssueReason.NAMES_CHANGED
    if sorted(facts.alt_names) != sorted(subject.names):
        return IssueReason.ADDRESSES_CHANGED
    if certs.split_bundle(held.cert)[1:] != sent_with:
        return IssueReason.CHAIN_CHANGED
    if _expiring(held, now, validity):
        return IssueReason.EXPIRING
    return None


def short_fingerprint(pem: str) -> str:
    return certs.facts(pem).fingerprint[:16]


def clients_signer(held: CaHeld) -> KeyPair:
    """The clients CA that signs user certificates now: the previous one until every broker trusts the new."""
    return signer(held, held.current is not None and held.trusted_by_all == short_fingerprint(held.current.cert))


def clients_moved(held: CaHeld, users: Iterable[str], now: datetime.datetime, handover: datetime.timedelta) -> bool:
    """Whether step 3 of a clients CA renewal may come (the previous CA leaves the brokers' trust): every
    broker trusts the current CA, every user certificate (`users`, PEM) is signed by it, and the newest of
    them has been in its Secret for `handover`, for clients to read it."""
    if held.current is None or held.trusted_by_all != short_fingerprint(held.current.cert):
        return False
    try:
        return all(certs.signed_by(cert, held.current.cert) and now - certs.issued_at(cert) >= handover
                   for cert in users)
    except certs.PkiError:  # an unreadable one: the user pass issues it again first
        return False


def running_marker(trusted: Iterable[str], generation: int) -> str:
    """The pod template annotation that says what a pod runs with: the CAs it trusts (short fingerprints)
    and the generation of the node certificates. A change of either rolls the pods."""
    return ",".join(short_fingerprint(pem) for pem in trusted) + f"/{generation}"


def _parse(marker: str) -> tuple[frozenset[str], int | None]:
    trust, _, generation = marker.rpartition("/")
    return frozenset(filter(None, trust.split(","))), int(generation) if generation.isdigit() else None


def all_trust(markers: Iterable[str], ca: KeyPair) -> bool:
    """Whether every pod (by its marker) trusts the CA."""
    fingerprint = short_fingerprint(ca.cert)
    return all(fingerprint in _parse(marker)[0] for marker in markers)


def all_run(markers: Iterable[str], generation: int) -> bool:
    """Whether every pod runs with node certificates of this generation."""
    return all(_parse(marker)[1] == generation for marker in markers)
