"""The cluster's PKI, each pass: read its Secrets and what the pods run with, decide
(krafty.decide.certificates), issue what is missing or due, and write the Secrets before anything uses them.

Every certificate issued is logged and emitted as an Event with its reason; no key is ever logged.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from krafty import naming
from krafty.clients.connection import TlsIdentity
from krafty.clients.kube import Kube
from krafty.clients.pki_process import Issuer
from krafty.decide import certificates
from krafty.decide.certificates import CaHeld, IssueReason, Subject
from krafty.facts import pods as pods_of
from krafty.model.cluster import CertificateAuthority
from krafty.model.context import ClusterContext
from krafty.naming import Pool
from krafty.pki import certs
from krafty.pki.certs import KeyPair
from krafty.reconcile.applied import Applied, cluster_key
from krafty.render.cluster import Child
from krafty.render.secrets import annotations_of, decoded, owned_by, secret, tls_secret


class CaUnusable(RuntimeError):
    """The CA the spec names cannot be used (its Secret is missing or holds no usable CA)."""


@dataclass(frozen=True)
class ClusterPki:
    trusted: tuple[str, ...]  # the CA certificates the nodes and clients trust, newest first
    marker: str  # what the pods are to run with (krafty.decide.certificates.running_marker)
    operator: KeyPair  # the operator's client certificate
    clients_trusted: tuple[str, ...]  # the clients CA certificates, newest first

    @property
    def clients_digest(self) -> str:
        return clients_digest(self.clients_trusted)

    def identity(self) -> TlsIdentity:
        return TlsIdentity(certs.bundle(self.trusted), self.operator.cert, self.operator.key)


def clients_digest(trusted: tuple[str, ...]) -> str:
    """Changes when the clients CA bundle does (brokers trusting it restart to read it)."""
    return hashlib.sha256(certs.bundle(trusted).encode()).hexdigest()[:16]


def _days(days: int) -> datetime.timedelta:
    return datetime.timedelta(days=days)


def _pair(data: Mapping[str, str], cert_key: str, key_key: str) -> KeyPair | None:
    if cert_key in data and key_key in data:
        return KeyPair(data[cert_key], data[key_key])
    return None


def ca_held(body: Mapping[str, Any] | None) -> CaHeld:
    data = decoded(body)
    return CaHeld(_pair(data, naming.CA_CERT_KEY, naming.CA_KEY_KEY),
                  _pair(data, naming.PREVIOUS_CA_CERT_KEY, naming.PREVIOUS_CA_KEY_KEY),
                  annotations_of(body).get(naming.RENEWED_FOR_ANNOTATION, ""), data.get(naming.CROSS_CA_CERT_KEY),
                  annotations_of(body).get(naming.TRUSTED_BY_BROKERS_ANNOTATION, ""))


def _trusted(held: CaHeld) -> tuple[str, ...]:
    """The certificates a CA's holders trust: the CA, and during a renewal the one before it."""
    return tuple(pair.cert for pair in (held.current, held.previous) if pair is not None)


def _node_subjects(ctx: ClusterContext, held: Mapping[str, str]) -> list[tuple[Pool, int]]:
    """Every node of the spec's pools, and any further one whose certificate is held (a node being
    removed keeps its certificate until it is gone; one added again finds it)."""
    out = []
    for pool in ctx.pools():
        count = ctx.replicas(pool)
        while naming.node_certificate_keys(pool, count)[0] in held:
            count += 1
        out += [(pool, ordinal) for ordinal in range(count)]
    return out


@dataclass(frozen=True)
class _CaRole:
    """One of a cluster's two CAs, for the pass's Events."""

    secret: str
    title: str
    both: str  # said when a renewal starts
    released: str  # said when its previous CA is let go


def _cluster_ca_role(cluster: str) -> _CaRole:
    return _CaRole(naming.cluster_ca(cluster), "cluster CA",
                   "; nodes trust both CAs until every certificate is signed by the new one",
                   "every node runs with certificates of the new CA; the nodes no longer trust the previous CA "
                   "(clients that still do keep working while it is valid: the nodes send the new CA cross-signed "
                   "by it)")


def _clients_ca_role(cluster: str) -> _CaRole:
    return _CaRole(naming.clients_ca(cluster), "clients CA",
                   "; brokers trust both CAs until every user certificate is signed by the new one",
                   "every user certificate is signed by the new CA and was handed over; the brokers no longer trust "
                   "the previous CA (certificates it signed stop working)")


class PkiPass:
    def __init__(self, kube: Kube, ctx: ClusterContext, body: dict[str, Any], now: datetime.datetime,
                 applied: Applied, issuer: Issuer) -> None:
        self.kube, self.ctx, self.body, self.now, self.applied = kube, ctx, body, now, applied
        self.issuer = issuer

    def _tell(self, reason: str, message: str) -> None:
        self.kube.event(self.body, naming.CLUSTER_KIND, reason, message)

    @staticmethod
    def _markers(pods: list[dict[str, Any]]) -> list[str]:
        """What each Kafka pod runs with (preflight pods aside)."""
        return [((p["metadata"].get("annotations") or {}).get(naming.CERTIFICATES_ANNOTATION, ""))
                for p in pods_of.node_pods(pods)]

    def _provided(self, spec: CertificateAuthority) -> KeyPair | None:
        """The user's own CA from the Secret spec.tls names (None when the operator runs its own)."""
        if spec.secret_name is None:
            return None
        pair = _pair(decoded(self.kube.get("Secret", spec.secret_name, self.ctx.namespace)), naming.TLS_CERT_KEY,
                     naming.TLS_KEY_KEY)
        problem = certificates.provided_problem(pair, spec.secret_name)
        if problem is not None or pair is None:
            raise CaUnusable(f"spec.tls names a CA that cannot be used: {problem}; nothing changes until it can")
        return pair

    def _ca(self, role: _CaRole, before: CaHeld, spec: CertificateAuthority, provided: KeyPair | None,
            requested: str, all_moved: bool, trusted_now: bool = False) -> CaHeld:
        """The CA after this pass's step (made, renewed, taken from the user's Secret `provided` or its previous
        one let go), written when changed. `trusted_now`: every holder runs with the trust bundle `before` makes
        (the clients CA's brokers; recorded for the user pass)."""
        step = certificates.ca_step(before, spec, self.now, requested, all_moved, provided)
        held = before
        if step.renew is not None:
            made = provided or self.issuer.new_ca(f"{self.ctx.name} {role.title}", self.now, _days(spec.validity_days))
            # Renewed (not made anew): the CA before stays trusted, and vouches for the new one, for a while
            renewal = step.renew in (IssueReason.EXPIRING, IssueReason.REQUESTED, IssueReason.PROVIDED)
            previous = before.current if renewal and before.current is not None and certificates.usable_ca(
                before.current) else None
            renewed_for = requested if step.renew in (IssueReason.REQUESTED, IssueReason.NEW) else before.renewed_for
            held = CaHeld(made, previous, renewed_for, self.issuer.cross_sign(made, previous) if previous else None)
            self._tell(f"Ca{step.renew.value}", step.renew.message(role.title) + (role.both if previous else ""))
        elif step.release_previous:
            held = replace(before, previous=None)
            self._tell("CaRenewed", f"{role.title}: {role.released}")
        if held.cross is not None and certs.facts(held.cross).not_after <= self.now:
            held = replace(held, cross=None)
        trusted = trusted_now and held.current is not None and held.current == before.current
        held = replace(held, trusted_by_all=certificates.short_fingerprint(held.current.cert) if trusted
                       and held.current is not None else "")
        if held != before:
            self._write_ca(role.secret, held)
        return held

    def _write_ca(self, name: str, held: CaHeld) -> None:
        if held.current is None:
            return
        data = {naming.CA_CERT_KEY: held.current.cert, naming.CA_KEY_KEY: held.current.key}
        if held.previous is not None:
            data |= {naming.PREVIOUS_CA_CERT_KEY: held.previous.cert, naming.PREVIOUS_CA_KEY_KEY: held.previous.key}
        if held.cross is not None:
            data[naming.CROSS_CA_CERT_KEY] = held.cross
        annotations = {naming.RENEWED_FOR_ANNOTATION: held.renewed_for}
        if held.trusted_by_all:
            annotations[naming.TRUSTED_BY_BROKERS_ANNOTATION] = held.trusted_by_all
        self.kube.apply(secret(self.ctx, name, data, annotations))

    def _issue(self, subjects: Mapping[str, Subject], held: Mapping[str, KeyPair | None], signer: KeyPair,
               sent_with: tuple[str, ...], what: str) -> tuple[dict[str, KeyPair], bool]:
        """The certificates after issuing what is due; and whether one a holder already ran with was replaced."""
        out: dict[str, KeyPair] = {}
        reasons: dict[IssueReason, list[str]] = {}
        for key, subject in subjects.items():
            pair = held.get(key)
            reason = certificates.certificate_reason(subject, pair, signer, self.now, self.ctx.spec.tls.certificates,
                                                     sent_with)
            if reason is not None:
                pair = self.issuer.issue(signer, subject.common_name, subject.names, self.now,
                                 _days(self.ctx.spec.tls.certificates.validity_days), sent_with)
                reasons.setdefault(reason, []).append(key)
            assert pair is not None
            out[key] = pair
        for reason, keys in reasons.items():
            self._tell(f"Certificate{reason.value}", reason.message(f"{what} {', '.join(keys)}"))
        return out, any(reason not in (IssueReason.NEW, IssueReason.ADDRESSES_CHANGED) for reason in reasons)

    def _clients_ca(self, pods: list[dict[str, Any]], cluster_ca: KeyPair) -> CaHeld:
        """The clients CA after this pass's step. Its renewal: the brokers trust both CAs (a roll); once they
        do, the user pass issues every user certificate again with the new one; `handoverSeconds` after the
        last of those, the previous CA leaves the brokers' trust (a roll), and what it signed stops working."""
        ctx, spec = self.ctx, self.ctx.spec.tls.clients_ca
        provided = self._provided(spec)
        shared = None if provided is None else certificates.shared_key_problem(provided, cluster_ca,
                                                                                  str(spec.secret_name))
        if shared is not None:
            raise CaUnusable(f"spec.tls names a CA that cannot be used: {shared}; nothing changes until it can")
        before = ca_held(self.kube.get("Secret", naming.clients_ca(ctx.name), ctx.namespace))
        digest = clients_digest(_trusted(before))
        trusted_now = all((p["metadata"].get("annotations") or {}).get(naming.CLIENTS_CA_ANNOTATION, digest) == digest
                          for p in pods_of.node_pods(pods))  # (brokers without a tls listener do not trust it)
        moved = before.previous is not None and certificates.clients_moved(
            before, self._user_certificates(), self.now, datetime.timedelta(seconds=spec.handover_seconds))
        requested = annotations_of(self.body).get(naming.RENEW_CLIENTS_CA_ANNOTATION, "")
        return self._ca(_clients_ca_role(ctx.name), before, spec, provided, requested, moved, trusted_now)

    def _user_certificates(self) -> list[str]:
        """The certificates in the Secrets of the cluster's KafkaUsers (each read by name: the operator may not
        list Secrets)."""
        out = []
        for user in self.kube.list(naming.USER_KIND, self.ctx.namespace):
            if ((user.get("spec") or {}).get("clusterRef") or {}).get("name") != self.ctx.name:
                continue
            held = self.kube.get("Secret", naming.user_secret(user["metadata"]["name"]), self.ctx.namespace)
            data = decoded(held)
            if owned_by(held, user) and naming.TLS_CERT_KEY in data:
                out.append(data[naming.TLS_CERT_KEY])
        return out

    def run(self, pods: list[dict[str, Any]], outside: Callable[[int], tuple[str, ...]]) -> ClusterPki:
        """`pods`: the cluster's pods, as listed this pass; `outside`: per broker, the addresses its certificate
        names for clients outside Kubernetes (`external.certificate_names`)."""
        ctx, ns = self.ctx, self.ctx.namespace
        markers = self._markers(pods)
        nodes_body = self.kube.get("Secret", naming.node_certificates(ctx.name), ns)
        nodes_data = decoded(nodes_body)
        generation = int(annotations_of(nodes_body).get(naming.CERTIFICATE_GENERATION_ANNOTATION, "0") or 0)
        operator_data = decoded(self.kube.get("Secret", naming.operator_certificate(ctx.name), ns))
        held_operator = _pair(operator_data, naming.TLS_CERT_KEY, naming.TLS_KEY_KEY)
        node_keys = {f"{pool.value}-{ordinal}": (pool, ordinal) for pool, ordinal in _node_subjects(ctx, nodes_data)}
        held_nodes = {key: _pair(nodes_data, *naming.node_certificate_keys(*node)) for key, node in node_keys.items()}

        before = ca_held(self.kube.get("Secret", naming.cluster_ca(ctx.name), ns))
        moved = before.current is not None and certificates.all_run(markers, generation) and all(
            pair is not None and certs.signed_by(pair.cert, before.current.cert)
            for pair in [*held_nodes.values(), held_operator])
        requested = annotations_of(self.body).get(naming.RENEW_CA_ANNOTATION, "")
        spec = ctx.spec.tls.cluster_ca
        ca = self._ca(_cluster_ca_role(ctx.name), before, spec, self._provided(spec), requested, moved)
        assert ca.current is not None
        clients = self._clients_ca(pods, ca.current)
        signer = certificates.signer(ca, certificates.all_trust(markers, ca.current))
        sent_with = certificates.chain(ca, signer, self.now)
        trusted, clients_trusted = _trusted(ca), _trusted(clients)
        cluster = cluster_key(self.body)
        for name, pems in ((naming.cluster_ca_cert(ctx.name), trusted),
                            (naming.clients_ca_cert(ctx.name), clients_trusted)):
            body = secret(ctx, name, {naming.CA_CERT_KEY: certs.bundle(pems)})
            published = Child("Secret", name, body)
            if self.applied.due(*cluster, published):  # (sent when it changes, and at each resync)
                self.kube.apply(body)
                self.applied.done(*cluster, published)

        subjects = {key: Subject(key, naming.node_common_name(ctx.name),
                                 naming.node_dns_names(ctx.name, ns, *node, ctx.cluster_domain),
                                 outside(node[1]) if node[0] is Pool.BROKER else ())
                    for key, node in node_keys.items()}
        nodes, replaced = self._issue(subjects, held_nodes, signer, sent_with, "node certificates of")
        if replaced:  # what the nodes run with changes: the next generation, which rolls them
            generation += 1
        data: dict[str, str] = {}
        for key, pair in nodes.items():
            cert_key, key_key = naming.node_certificate_keys(*node_keys[key])
            data |= {cert_key: pair.cert, key_key: pair.key}
            if subjects[key].outside:
                names = certs.facts(pair.cert).alt_names
                data[naming.node_names_key(*node_keys[key])] = "".join(f"{n}\n" for n in names)
        if data != nodes_data or replaced:
            self.kube.apply(secret(ctx, naming.node_certificates(ctx.name), data,
                                   {naming.CERTIFICATE_GENERATION_ANNOTATION: str(generation)}))
        operator, _ = self._issue({"operator": Subject("operator", naming.OPERATOR_COMMON_NAME, ())},
                                  {"operator": held_operator}, signer, sent_with, "the certificate of the")
        bundle = certs.bundle(trusted)
        if (held_operator, operator_data.get(naming.CA_CERT_KEY)) != (operator["operator"], bundle):
            self.kube.apply(tls_secret(ctx, naming.operator_certificate(ctx.name), operator["operator"].cert,
                                       operator["operator"].key, bundle))
        return ClusterPki(trusted, certificates.running_marker(trusted, generation), operator["operator"],
                          clients_trusted)


def existing_pki(kube: Kube, ctx: ClusterContext) -> ClusterPki | None:
    """What the last pass issued, read and changed in nothing (a plan preview); None before the first pass
    issued anything."""
    ns = ctx.namespace
    trust = decoded(kube.get("Secret", naming.cluster_ca_cert(ctx.name), ns)).get(naming.CA_CERT_KEY)
    operator = _pair(decoded(kube.get("Secret", naming.operator_certificate(ctx.name), ns)), naming.TLS_CERT_KEY,
                     naming.TLS_KEY_KEY)
    if trust is None or operator is None:
        return None
    generation = annotations_of(kube.get("Secret", naming.node_certificates(ctx.name), ns)).get(
        naming.CERTIFICATE_GENERATION_ANNOTATION, "0")
    clients = decoded(kube.get("Secret", naming.clients_ca_cert(ctx.name), ns)).get(naming.CA_CERT_KEY, "")
    trusted = certs.split_bundle(trust)
    return ClusterPki(trusted, certificates.running_marker(trusted, int(generation or 0)), operator,
                      certs.split_bundle(clients))
