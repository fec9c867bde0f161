"""One pass over all KafkaUsers of one KafkaCluster: credentials into their Secrets, then ACLs, SCRAM
credentials and quotas into Kafka with batched Admin calls (krafty.decide.users plans them).

Per pass: one read each of the ACLs, SCRAM credentials and quotas Kafka holds, and at most one request per
kind of change for all users together. Quotas are validated by Kafka first; a user any part of whose change
Kafka refuses gets none of it. A password is kept in the user's Secret before Kafka hears of it, so a
generated one is never lost; the Secret then records it as applied. Every credential issued and every
change made behind the operator's back is logged and emitted as an Event; no password or key is logged.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from krafty import naming
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kafka_users import UserAdmin
from krafty.clients.kube import Kube
from krafty.clients.pki_process import Issuer
from krafty.decide import certificates, users
from krafty.decide.certificates import Subject
from krafty.decide.status import READY, Condition
from krafty.decide.verdicts import Refusal, Verdict
from krafty.facts import pods
from krafty.model import KafkaClusterSpec
from krafty.model.common import deleting, spec_of
from krafty.model.user import KafkaUserSpec, UserAuthenticationType
from krafty.pki.certs import KeyPair
from krafty.reconcile import writer
from krafty.reconcile.batched import BUSY_INTERVAL, CHECK_INTERVAL, add_finalizers, settled, unreachable
from krafty.reconcile.connection import Locate
from krafty.reconcile.pki import ca_held
from krafty.render.configmaps import client_settings
from krafty.render.secrets import annotations_of, decoded, owned_by, user_secret

_TLS_SECRET, _OPAQUE = "kubernetes.io/tls", "Opaque"


@dataclass
class Credential:
    """What one user's Secret is to hold after this pass (secret values: never printed)."""

    data: dict[str, str] = field(repr=False)
    kind: str
    annotations: dict[str, str]
    password: str | None = field(default=None, repr=False)  # scram-sha-512: the password to put into Kafka
    issued: str = ""  # a certificate issued this pass: the Event's message
    kept: tuple[dict[str, str], dict[str, str]] = field(default=({}, {}), repr=False)  # the Secret's data and
    # annotations as last read or written this pass


@dataclass(frozen=True)
class _Renewal:
    """A user's renewal annotation, and the value of it its Secret says was acted on."""

    requested: str
    done: str

    @property
    def due(self) -> bool:
        return bool(self.requested) and self.requested != self.done

    @property
    def annotations(self) -> dict[str, str]:
        """What the user's Secret records of it."""
        return {naming.RENEWED_FOR_ANNOTATION: self.requested} if self.requested else {}


def _jaas(user: str, password: str) -> str:
    escaped = password.replace("\\", "\\\\").replace('"', '\\"')
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{escaped}";'


class UserReconciler:
    def __init__(self, kube: Kube, locate: Locate, admin: Callable[[Connection], UserAdmin],
                 clock: Callable[[], datetime.datetime] = writer.now, cluster_domain: str = "cluster.local") -> None:
        self.kube = kube
        self.cluster_domain = cluster_domain
        self.locate = locate
        self.admin = admin
        self.clock = clock

    def bodies(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        return [b for b in self.kube.list(naming.USER_KIND, namespace)
                if (b.get("spec") or {}).get("clusterRef", {}).get("name") == cluster]

    # -- the pass ----------------------------------------------------------------
    def reconcile(self, namespace: str, cluster: str) -> float | None:
        bodies = self.bodies(namespace, cluster)
        if not bodies:
            return None
        live = [b for b in bodies if not deleting(b)]
        add_finalizers(self.kube, naming.USER_KIND, naming.USER_FINALIZER, live)
        cluster_body = self.kube.get(naming.CLUSTER_KIND, cluster, namespace)
        spec = spec_of(KafkaClusterSpec, cluster_body)
        if spec is None or deleting(cluster_body):
            self._without_cluster(bodies, cluster, cluster_body)
            return CHECK_INTERVAL
        clients_ca = ca_held(self.kube.get("Secret", naming.clients_ca(cluster), namespace))
        trust = decoded(self.kube.get("Secret", naming.cluster_ca_cert(cluster), namespace)).get(naming.CA_CERT_KEY)
        if clients_ca.current is None or trust is None:
            self._report_all(live, "CredentialPending", f"the PKI of KafkaCluster {cluster} is not made yet")
            return BUSY_INTERVAL
        with Issuer() as issuer:  # (a process of its own, started if a certificate is issued)
            resources, credentials, refused = self._users(bodies, spec, certificates.clients_signer(clients_ca), trust,
                                                          issuer)
        try:
            admin = self.admin(self.locate(namespace, cluster))
            kafka = self._kafka(admin, spec)
        except KafkaUnavailable as error:
            return unreachable(self.kube, naming.USER_KIND, live, error, self.clock())
        plan = users.plan(resources, kafka, spec, self._authorizing(namespace, cluster, spec))
        if naming.paused(cluster_body):
            plan = users.withhold(plan, "Paused", f"KafkaCluster {cluster} is paused")
        try:
            plan = users.settle(plan, self._act(admin, plan, {b["metadata"]["name"]: b for b in bodies}, credentials,
                                                cluster))
            after = self._kafka(admin, spec) if plan.acl_creates or plan.acl_deletes else kafka
        except KafkaUnavailable as error:  # a request Kafka never answered: as when it cannot be read
            return unreachable(self.kube, naming.USER_KIND, live, error, self.clock())
        self._report(live, plan, refused, after)
        for key in plan.released:
            self._release(next(b for b in bodies if _key(b) == key))
        busy = any(v.progressing for v in plan.verdicts.values()) or len(plan.released) < sum(map(deleting, bodies))
        return BUSY_INTERVAL if busy else CHECK_INTERVAL

    def _authorizing(self, namespace: str, cluster: str, spec: KafkaClusterSpec) -> bool:
        """Whether every node runs with the authorizer the spec turns on (asked only then)."""
        if not spec.authorization.enabled:
            return True
        nodes = pods.node_pods(self.kube.list("Pod", namespace, naming.selector_labels(cluster)))
        return bool(nodes) and all(map(pods.authorizes, nodes))

    @staticmethod
    def _kafka(admin: UserAdmin, spec: KafkaClusterSpec) -> users.KafkaUsers:
        # (a cluster without an authorizer holds no ACLs: not asked)
        return users.KafkaUsers(admin.acls() if spec.authorization.enabled else frozenset(), admin.scram_users(),
                                admin.quotas())

    # -- observing the users ---------------------------------------------------------
    def _users(self, bodies: list[dict[str, Any]], spec: KafkaClusterSpec, clients_ca: KeyPair, trust: str,
               issuer: Issuer) -> tuple[list[users.UserResource], dict[tuple[str, str], Credential],
                          dict[tuple[str, str], Verdict]]:
        """The users to plan for, the credentials their Secrets are to hold, and the users refused outright."""
        resources, credentials, refused = [], {}, {}
        for body in bodies:
            resource, credential, verdict = self._user(body, spec, clients_ca, trust, issuer)
            if resource is None and deleting(body):  # (unparseable: the operator never acted for it)
                self._release(body)
            elif verdict is not None:
                refused[_key(body)] = verdict
            elif resource is not None:
                resources.append(resource)
                if credential is not None:
                    credentials[resource.key] = credential
        return resources, credentials, refused

    def _user(self, body: dict[str, Any], cluster: KafkaClusterSpec, clients_ca: KeyPair, trust: str,
              issuer: Issuer) -> tuple[users.UserResource | None, Credential | None, Verdict | None]:
        """The user as the planner sees it, the credential its Secret is to hold, or why it is refused."""
        meta = body["metadata"]
        spec = spec_of(KafkaUserSpec, body)
        if spec is None:
            return None, None, Verdict(False, "InvalidSpec", "the spec cannot be parsed", manage=False)
        resource = users.UserResource(
            meta["namespace"], meta["name"], spec, bool((body.get("status") or {}).get("username")),
            settled=settled(body), force_adopt=(meta.get("annotations") or {}).get(naming.ADOPT_ANNOTATION) == "force",
            deleting=deleting(body))
        if resource.deleting:
            return resource, None, None
        held = self.kube.get("Secret", naming.user_secret(meta["name"]), meta["namespace"])
        if held is not None and not owned_by(held, body):
            return resource, None, Verdict(
                False, "SecretConflict", f"Secret {naming.user_secret(meta['name'])} exists and does not belong to "
                "this KafkaUser: nothing was changed (rename or remove that Secret)", manage=False)
        data = decoded(held)
        renewal = _Renewal((meta.get("annotations") or {}).get(naming.RENEW_CREDENTIAL_ANNOTATION, ""),
                           annotations_of(held).get(naming.RENEWED_FOR_ANNOTATION, ""))
        listener = users.listener_for(spec, cluster)
        # (what reaches the listener this user authenticates on: its Secret alone configures a client)
        common = {naming.CA_CERT_KEY: trust, **(client_settings(listener, naming.bootstrap_address(
            spec.cluster_ref.name, meta["namespace"], self.cluster_domain, listener.port)) if listener else {})}
        if spec.authentication.type is UserAuthenticationType.TLS:
            credential = self._certificate(meta["name"], data, cluster, clients_ca, common, renewal, issuer)
            credential.kept = (data, annotations_of(held))
            return resource, credential, None
        password, missing = self._password(spec, meta["namespace"], data, renewal.due)
        applied = annotations_of(held).get(naming.APPLIED_PASSWORD_ANNOTATION, "")
        digest = users.password_digest(password) if password is not None else None
        # (a credential this user's own Secret says was applied is the operator's, status written or not)
        resource = replace(resource, password=users.Password(digest, applied, missing),
                           managed=resource.managed or bool(applied))
        if password is None:
            return resource, None, None
        credential = Credential({naming.PASSWORD_KEY: password, naming.SASL_JAAS_KEY: _jaas(meta["name"], password),
                                 naming.USERNAME_KEY: meta["name"], **common}, _OPAQUE,
                                {naming.APPLIED_PASSWORD_ANNOTATION: applied, **renewal.annotations}, password,
                                kept=(data, annotations_of(held)))
        return resource, credential, None

    def _certificate(self, user: str, data: dict[str, str], cluster: KafkaClusterSpec, clients_ca: KeyPair,
                     common: dict[str, str], renewal: _Renewal, issuer: Issuer) -> Credential:
        """`common`: what the Secret holds beside the certificate and key (CA certificates, client settings)."""
        pair = (KeyPair(data[naming.TLS_CERT_KEY], data[naming.TLS_KEY_KEY])
                if {naming.TLS_CERT_KEY, naming.TLS_KEY_KEY} <= data.keys() else None)
        now = self.clock()
        reason = certificates.certificate_reason(Subject(user, user, ()), pair, clients_ca, now,
                                                 cluster.tls.certificates)
        if reason is None and renewal.due:
            reason = certificates.IssueReason.REQUESTED
        issued = ""
        if reason is not None or pair is None:
            pair = issuer.issue(clients_ca, user, (), now,
                                datetime.timedelta(days=cluster.tls.certificates.validity_days))
            issued = (reason or certificates.IssueReason.NEW).message(f"the client certificate of User:{user}")
        return Credential({naming.TLS_CERT_KEY: pair.cert, naming.TLS_KEY_KEY: pair.key, **common}, _TLS_SECRET,
                          dict(renewal.annotations), issued=issued)

    def _password(self, spec: KafkaUserSpec, namespace: str, held: dict[str, str], renew: bool
                  ) -> tuple[str | None, str]:
        """The password to use, or None and why it cannot be read. `renew`: a new one is asked for (a password
        from the user's own Secret changes there, not here)."""
        source = spec.authentication.password
        if source is None:  # generated once, then kept in the user's Secret
            return (None if renew else held.get(naming.PASSWORD_KEY)) or secrets.token_urlsafe(24), ""
        ref = source.secret_key_ref
        found = decoded(self.kube.get("Secret", ref.name, namespace)).get(ref.key)
        if not found:
            return None, f"Secret {ref.name} does not exist or has no key {ref.key} (or it is empty)"
        return found, ""

    # -- acting ---------------------------------------------------------------------
    def _act(self, admin: UserAdmin, plan: users.UserPlan, bodies: dict[str, dict[str, Any]],
             credentials: dict[tuple[str, str], Credential], cluster: str) -> dict[str, Refusal[users.Refused]]:
        """Carries the plan out; returns what Kafka refused, by user (the last refusal of each)."""
        # Kafka's own verdict on the quotas first: a user it refuses gets none of its changes
        refused = {user: Refusal(users.Refused.QUOTA, f"spec.quotas: Kafka refused them: {error}")
                   for user, error in admin.alter_quotas(plan.quota_changes, validate_only=True).items()}
        plan = plan.without(refused)
        managed = {key for key, verdict in plan.verdicts.items() if verdict.manage and key[1] not in refused}
        for key in managed:  # the credential is kept before Kafka hears of it
            self._write_secret(bodies[key[1]], cluster, credentials.get(key))
        upserts = {user: credential.password for (_, user), credential in credentials.items()
                   if user in plan.scram_upserts and credential.password is not None}
        for user, error in admin.alter_scram(upserts, plan.scram_deletes).items():
            refused[user] = Refusal(users.Refused.CREDENTIAL, f"Kafka refused the SCRAM credential: {error}")
        for acl, error in {**admin.create_acls(plan.acl_creates), **admin.delete_acls(plan.acl_deletes)}.items():
            refused[acl.principal.removeprefix("User:")] = Refusal(users.Refused.ACL, f"{acl.describe()}: {error}")
        for user, error in admin.alter_quotas(plan.quota_changes, validate_only=False).items():
            refused[user] = Refusal(users.Refused.QUOTA, f"spec.quotas: {error}")
        for key in managed:
            credential = credentials.get(key)
            if credential is not None and key[1] in upserts and key[1] not in refused:
                credential.annotations[naming.APPLIED_PASSWORD_ANNOTATION] = users.password_digest(upserts[key[1]])
                self._write_secret(bodies[key[1]], cluster, credential)
                self._tell(bodies[key[1]], "CredentialSet", f"the SCRAM-SHA-512 credential of User:{key[1]} is set")
        return refused

    def _write_secret(self, body: dict[str, Any], cluster: str, credential: Credential | None) -> None:
        if credential is None:
            return
        if credential.issued:
            self._tell(body, "CertificateIssued", credential.issued)
            credential.issued = ""
        if credential.kept != (credential.data, credential.annotations):  # (the Secret as read this pass)
            self.kube.apply(user_secret(body, cluster, credential.data, credential.annotations, credential.kind))
            credential.kept = (dict(credential.data), dict(credential.annotations))

    def _release(self, body: dict[str, Any]) -> None:
        if self.kube.remove_finalizer(naming.USER_KIND, body, naming.USER_FINALIZER):
            self._tell(body, "UserDeleted", f"User:{body['metadata']['name']} holds nothing in Kafka any more")

    # -- reporting ------------------------------------------------------------------
    def _tell(self, body: dict[str, Any], reason: str, message: str, warning: bool = False) -> None:
        self.kube.event(body, naming.USER_KIND, reason, message, warning=warning)

    def _without_cluster(self, bodies: list[dict[str, Any]], cluster: str, cluster_body: dict[str, Any] | None
                         ) -> None:
        """No cluster to hold anything: deleted users go at once, the others say why they wait."""
        gone = cluster_body is None or deleting(cluster_body)
        for body in bodies:
            if deleting(body):
                self._release(body)
        reason, message = ("ClusterNotFound", f"KafkaCluster {cluster} does not exist (or is being deleted)") if gone \
            else ("ClusterInvalid", f"the spec of KafkaCluster {cluster} cannot be parsed")
        self._report_all([b for b in bodies if not deleting(b)], reason, message)

    def _report_all(self, bodies: list[dict[str, Any]], reason: str, message: str) -> None:
        writer.for_each(bodies, lambda body: writer.write(
            self.kube, naming.USER_KIND, body, {}, [Condition(READY, False, reason, message)], self.clock()))

    def _report(self, bodies: list[dict[str, Any]], plan: users.UserPlan,
                refused: dict[tuple[str, str], Verdict], kafka: users.KafkaUsers) -> None:
        writer.for_each(bodies, lambda body: self._report_one(body, plan, refused, kafka))

    def _report_one(self, body: dict[str, Any], plan: users.UserPlan, refused: dict[tuple[str, str], Verdict],
                    kafka: users.KafkaUsers) -> None:
        key = _key(body)
        verdict = refused.get(key) or plan.verdicts.get(key) or Verdict(
            False, "InvalidSpec", "the spec cannot be parsed", manage=False)
        events = verdict.events or ((verdict.reason, verdict.message, True),) * (not verdict.ready)
        for reason, message, warning in events:
            self._tell(body, reason, message, warning)
        status: dict[str, Any] = {}
        if verdict.manage:
            acls, _, _ = kafka.held_by(key[1])
            status = {"username": key[1], "secret": naming.user_secret(key[1]), "acls": len(acls)}
        writer.write(self.kube, naming.USER_KIND, body, status,
                     [Condition(READY, verdict.ready, verdict.reason, verdict.message)], self.clock())


def _key(body: dict[str, Any]) -> tuple[str, str]:
    return body["metadata"]["namespace"], body["metadata"]["name"]
