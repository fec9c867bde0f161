"""KafkaUsers: from the KafkaUser resources of one cluster and what Kafka holds for their principals (ACLs,
SCRAM credentials, quotas), the changes to make, batched per kind, and what to report per resource.

Only the principals of the cluster's KafkaUsers are ever touched: an ACL, credential or quota of any other
principal is left alone. A principal that already holds something in Kafka when its KafkaUser appears is
taken over only when the user says so (annotation kafka.krafty.io/adopt=force); a user whose spec cannot
work (no listener for its authentication, a missing password) changes nothing at all. A managed user's ACLs
and quotas changed behind the operator's back are put back as declared; a user being deleted loses
everything it held, and its finalizer goes once Kafka holds nothing for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from krafty import naming
from krafty.decide.verdicts import Refusal, Verdict, withheld
from krafty.facts.observed import Acl
from krafty.model.cluster import ClientAuthentication, KafkaClusterSpec, Listener
from krafty.model.user import KafkaUserSpec, Quotas, UserAuthenticationType

# Kafka's quota keys: the Quotas fields' names in snake case
QUOTA_KEYS = tuple(Quotas.model_fields)
_LISTENER_FOR = {UserAuthenticationType.TLS: ClientAuthentication.TLS,
                 UserAuthenticationType.SCRAM_SHA_512: ClientAuthentication.SCRAM_SHA_512}


def password_digest(password: str) -> str:
    """What a user's Secret records of the password last put into Kafka (Kafka itself never tells)."""
    return hashlib.sha256(password.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Password:
    """A SCRAM user's password as the pass found it."""

    digest: str | None  # of the password to use; None: it cannot be read (see `missing`)
    applied: str  # the digest of the one last put into Kafka ("" when none)
    missing: str = ""  # why it cannot be read


@dataclass(frozen=True)
class UserResource:
    namespace: str
    name: str
    spec: KafkaUserSpec
    managed: bool  # the operator manages this principal (status.username is set)
    settled: bool = False  # Ready at the current generation: a difference now was made behind its back
    force_adopt: bool = False
    deleting: bool = False
    password: Password | None = None  # scram-sha-512 users only

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def principal(self) -> str:
        return naming.user_principal(self.name)


@dataclass(frozen=True)
class KafkaUsers:
    """What Kafka holds, for every principal."""

    acls: frozenset[Acl]
    scram: frozenset[str]  # users with a SCRAM-SHA-512 credential
    quotas: Mapping[str, Mapping[str, float]]  # per user name

    def held_by(self, user: str) -> tuple[frozenset[Acl], bool, Mapping[str, float]]:
        principal = naming.user_principal(user)
        return (frozenset(a for a in self.acls if a.principal == principal), user in self.scram,
                self.quotas.get(user, {}))


@dataclass(frozen=True)
class UserPlan:
    """Every change of one pass, and a verdict per live KafkaUser; carried out as it is (what Kafka refuses comes
    back as Refusals, and settle() makes the verdicts of them)."""

    acl_creates: tuple[Acl, ...] = ()
    acl_deletes: tuple[Acl, ...] = ()
    scram_upserts: tuple[str, ...] = ()
    scram_deletes: tuple[str, ...] = ()
    quota_changes: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    verdicts: Mapping[tuple[str, str], Verdict] = field(default_factory=dict)
    released: tuple[tuple[str, str], ...] = ()  # deleted users Kafka holds nothing for

    def changes_of(self, user: str) -> bool:
        principal = naming.user_principal(user)
        return (any(a.principal == principal for a in [*self.acl_creates, *self.acl_deletes])
                or user in self.scram_upserts or user in self.scram_deletes or user in self.quota_changes)

    def without(self, refused: Collection[str]) -> UserPlan:
        """The same plan with every change of these users withdrawn (Kafka refused part of it: nothing is
        half-applied)."""
        principals = {naming.user_principal(user) for user in refused}
        return replace(self, acl_creates=tuple(a for a in self.acl_creates if a.principal not in principals),
                       acl_deletes=tuple(a for a in self.acl_deletes if a.principal not in principals),
                       scram_upserts=tuple(u for u in self.scram_upserts if u not in refused),
                       scram_deletes=tuple(u for u in self.scram_deletes if u not in refused),
                       quota_changes={u: c for u, c in self.quota_changes.items() if u not in refused})


class Refused(Enum):
    """Why Kafka did not take a change of one user."""

    QUOTA = "QuotaRefused"  # its quotas (validated first: then the user gets none of its changes)
    CREDENTIAL = "CredentialRefused"  # its SCRAM credential
    ACL = "AclRefused"  # one of its ACLs


@dataclass
class _Draft:
    """A plan while plan() makes it."""

    acl_creates: list[Acl] = field(default_factory=list)
    acl_deletes: list[Acl] = field(default_factory=list)
    scram_upserts: list[str] = field(default_factory=list)
    scram_deletes: list[str] = field(default_factory=list)
    quota_changes: dict[str, dict[str, float | None]] = field(default_factory=dict)
    verdicts: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    released: list[tuple[str, str]] = field(default_factory=list)

    def frozen(self) -> UserPlan:
        return UserPlan(tuple(self.acl_creates), tuple(self.acl_deletes), tuple(self.scram_upserts),
                        tuple(self.scram_deletes), self.quota_changes, self.verdicts, tuple(self.released))


def desired_acls(name: str, spec: KafkaUserSpec) -> frozenset[Acl]:
    principal = naming.user_principal(name)
    return frozenset(Acl(principal, rule.resource.type, rule.resource.kafka_name, rule.resource.pattern_type,
                         operation, rule.type, rule.host)
                     for rule in spec.authorization.acls for operation in rule.operations)


def desired_quotas(quotas: Quotas) -> dict[str, float]:
    return {key: float(value) for key in QUOTA_KEYS if (value := getattr(quotas, key)) is not None}


def quota_diff(desired: Mapping[str, float], actual: Mapping[str, float]) -> dict[str, float | None]:
    changes: dict[str, float | None] = {k: v for k, v in desired.items() if actual.get(k) != v}
    changes |= {k: None for k in actual if k not in desired}
    return changes


def listener_for(spec: KafkaUserSpec, cluster: KafkaClusterSpec) -> Listener | None:
    """The first of the cluster's listeners that authenticates this user (None: none does)."""
    wanted = _LISTENER_FOR[spec.authentication.type]
    return next((listener for listener in cluster.listeners if listener.authentication is wanted), None)


def problems(resource: UserResource, cluster: KafkaClusterSpec) -> list[tuple[str, str]]:
    """Why the user cannot work on this cluster: (reason, message naming the field)."""
    out = []
    kind = resource.spec.authentication.type
    if listener_for(resource.spec, cluster) is None:
        out.append(("AuthenticationUnavailable",
                    f"spec.authentication.type: {kind.value}, but KafkaCluster {resource.spec.cluster_ref.name} has "
                    f"no listener with authentication {_LISTENER_FOR[kind].value} to serve it; add one to "
                    "its spec.listeners"))
    if resource.password is not None and resource.password.digest is None:
        out.append(("PasswordSecretMissing", f"spec.authentication.password.secretKeyRef: {resource.password.missing}"))
    return out


def _held_description(acls: frozenset[Acl], scram: bool, quotas: Mapping[str, float]) -> list[str]:
    held = [f"{len(acls)} ACLs"] * bool(acls) + ["a SCRAM credential"] * scram
    return held + [f"quotas {', '.join(sorted(quotas))}"] * bool(quotas)


def _plan_live(plan: _Draft, resource: UserResource, kafka: KafkaUsers, cluster: KafkaClusterSpec) -> Verdict:
    acls, has_scram, quotas = kafka.held_by(resource.name)
    found = _held_description(acls, has_scram, quotas)
    if not resource.managed and found and not resource.force_adopt:
        return Verdict(False, "AdoptionPending",
                       f"Kafka already holds {', '.join(found)} for {resource.principal}, which this resource did "
                       "not create. Nothing was changed: annotate kafka.krafty.io/adopt=force to take them over "
                       "(they are then made to match the spec)", manage=False)
    want = desired_acls(resource.name, resource.spec)
    # Without an authorizer Kafka holds no ACLs and takes none
    creates, deletes = (sorted(want - acls), sorted(acls - want)) if cluster.authorization.enabled else ([], [])
    quota_changes = quota_diff(desired_quotas(resource.spec.quotas), quotas)
    scram = resource.spec.authentication.type is UserAuthenticationType.SCRAM_SHA_512
    password = resource.password
    upsert = scram and password is not None and (not has_scram or password.digest != password.applied)
    plan.acl_creates += creates
    plan.acl_deletes += deletes
    if quota_changes:
        plan.quota_changes[resource.name] = quota_changes
    if upsert:
        plan.scram_upserts.append(resource.name)
    if has_scram and not scram:  # moved to certificates: the password no longer works
        plan.scram_deletes.append(resource.name)
    events: list[tuple[str, str, bool]] = []
    if not resource.managed and found:
        events.append(("UserAdopted", f"took over {', '.join(found)} of {resource.principal}", False))
    changed = [f"{len(creates)} ACLs missing"] * bool(creates) + [f"{len(deletes)} ACLs not declared"] * bool(
        deletes) + [f"quotas {', '.join(sorted(quota_changes))}"] * bool(quota_changes)
    if resource.settled and changed:
        events.append(("DriftReverted", f"{resource.principal} was changed outside the operator: "
                                        f"{'; '.join(changed)}; making it match the spec", True))
    limits = sorted(desired_quotas(resource.spec.quotas))
    message = (f"{resource.principal}: credential issued, {len(want) if cluster.authorization.enabled else 0} ACLs "
               f"and {'quotas ' + ', '.join(limits) if limits else 'no quotas'} as declared")
    if want and not cluster.authorization.enabled:
        message += ("; the ACLs are not applied: KafkaCluster "
                    f"{resource.spec.cluster_ref.name} has spec.authorization off, so every client may do anything")
    return Verdict(True, "UserReady", message, events=tuple(events), progressing=bool(changed or upsert))


def _plan_deleted(plan: _Draft, resource: UserResource, kafka: KafkaUsers) -> None:
    acls, has_scram, quotas = kafka.held_by(resource.name)
    if not resource.managed or not (acls or has_scram or quotas):
        plan.released.append(resource.key)
        return
    plan.acl_deletes += sorted(acls)
    if has_scram:
        plan.scram_deletes.append(resource.name)
    if quotas:
        plan.quota_changes[resource.name] = dict.fromkeys(quotas)


def plan(resources: Iterable[UserResource], kafka: KafkaUsers, cluster: KafkaClusterSpec,
         authorizing: bool = True) -> UserPlan:
    """Every change for one cluster's users, and a verdict per live KafkaUser. `authorizing`: every node runs
    with the authorizer when the spec turns it on (False while they restart into it: a node without it holds
    no ACLs and takes none, so nothing is changed, and no ACL it lacks is taken for drift)."""
    result = _plan(resources, kafka, cluster)
    if cluster.authorization.enabled and not authorizing:
        return withhold(result, "AuthorizationPending", "the nodes are restarting to turn spec.authorization on")
    return result


def _plan(resources: Iterable[UserResource], kafka: KafkaUsers, cluster: KafkaClusterSpec) -> UserPlan:
    result = _Draft()
    for resource in sorted(resources, key=lambda r: r.name):
        if resource.deleting:
            _plan_deleted(result, resource, kafka)
            continue
        found = problems(resource, cluster)
        if found:
            result.verdicts[resource.key] = Verdict(False, found[0][0], "; ".join(m for _, m in found), manage=False)
        else:
            result.verdicts[resource.key] = _plan_live(result, resource, kafka, cluster)
    return result.frozen()


def settle(done: UserPlan, refused: Mapping[str, Refusal[Refused]]) -> UserPlan:
    """The plan once carried out: a user any part of whose change Kafka refused (`refused`, by user) has none of
    its changes left and a verdict that says what Kafka answered, with a warning Event; one whose quotas Kafka
    refused is not managed (its Secret is not written)."""
    verdicts = dict(done.verdicts)
    for key, verdict in done.verdicts.items():
        refusal = refused.get(key[1])
        if refusal is not None:
            verdicts[key] = Verdict(False, refusal.reason.value, refusal.message, events=refusal.events,
                                    manage=verdict.manage and refusal.reason is not Refused.QUOTA)
    return replace(done.without(refused), verdicts=verdicts)


def withhold(plan: UserPlan, reason: str, why: str) -> UserPlan:
    """The same verdicts with every change to Kafka withheld (a paused cluster changes nothing)."""
    return UserPlan(verdicts=withheld(plan.verdicts, reason, why))
