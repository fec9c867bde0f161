"""What Kafka holds for users: ACLs, SCRAM credentials and client quotas, through the wire client
(krafty.clients.kraft), which sends them to whichever broker answers (librdkafka sent the ACL and SCRAM requests
to the broker its metadata last named controller, and has no quota calls)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

from krafty import wire
from krafty.clients import kraft
from krafty.clients.kafka_admin import KafkaAdmin, _wire_call
from krafty.facts.observed import Acl
from krafty.model.user import AclEffect, AclOperation, AclPatternType, AclResourceType

SCRAM_ITERATIONS = 8192
SALT_BYTES = 32
# Kafka's codes (org.apache.kafka.common.resource.ResourceType, PatternType, acl.AclOperation, AclPermissionType)
_TYPES = {AclResourceType.TOPIC: 2, AclResourceType.GROUP: 3, AclResourceType.CLUSTER: 4,
          AclResourceType.TRANSACTIONAL_ID: 5}
_PATTERNS = {AclPatternType.LITERAL: 3, AclPatternType.PREFIX: 4}
_EFFECTS = {AclEffect.DENY: 2, AclEffect.ALLOW: 3}
_OPERATIONS = {AclOperation.ALL: 2, AclOperation.READ: 3, AclOperation.WRITE: 4, AclOperation.CREATE: 5,
               AclOperation.DELETE: 6, AclOperation.ALTER: 7, AclOperation.DESCRIBE: 8,
               AclOperation.CLUSTER_ACTION: 9, AclOperation.DESCRIBE_CONFIGS: 10, AclOperation.ALTER_CONFIGS: 11,
               AclOperation.IDEMPOTENT_WRITE: 12}
_FROM_TYPES = {code: ours for ours, code in _TYPES.items()}
_FROM_PATTERNS = {code: ours for ours, code in _PATTERNS.items()}
_FROM_EFFECTS = {code: ours for ours, code in _EFFECTS.items()}
_FROM_OPERATIONS = {code: ours for ours, code in _OPERATIONS.items()}


def _entry(acl: Acl) -> wire.AclEntry:
    return wire.AclEntry(_TYPES[acl.resource_type], acl.name, _PATTERNS[acl.pattern], acl.principal, acl.host,
                         _OPERATIONS[acl.operation], _EFFECTS[acl.effect])


def _acl(entry: wire.AclEntry) -> Acl | None:
    """Kafka's binding as ours; None for what a KafkaUser cannot declare (left alone)."""
    kind, pattern = _FROM_TYPES.get(entry.resource_type), _FROM_PATTERNS.get(entry.pattern)
    operation, effect = _FROM_OPERATIONS.get(entry.operation), _FROM_EFFECTS.get(entry.permission)
    if kind is None or pattern is None or operation is None or effect is None:
        return None
    return Acl(entry.principal, kind, entry.name, pattern, operation, effect, entry.host)


def _failed(acls: list[Acl], errors: list[str | None]) -> dict[Acl, str]:
    return {acl: error for acl, error in zip(acls, errors, strict=True) if error}


class UserAdmin(KafkaAdmin):
    """The user pass's own client (its calls never wait behind a roll's)."""

    @_wire_call
    def acls(self) -> frozenset[Acl]:
        """Every ACL in the cluster."""
        return frozenset(acl for acl in map(_acl, kraft.acls(self.connection, self.timeout)) if acl is not None)

    @_wire_call
    def create_acls(self, acls: Iterable[Acl]) -> dict[Acl, str]:
        """Creates ACLs in one request; returns the error of each that failed."""
        wanted = list(dict.fromkeys(acls))
        return _failed(wanted, kraft.create_acls(self.connection, [_entry(a) for a in wanted], self.timeout))

    @_wire_call
    def delete_acls(self, acls: Iterable[Acl]) -> dict[Acl, str]:
        doomed = list(dict.fromkeys(acls))
        return _failed(doomed, kraft.delete_acls(self.connection, [_entry(a) for a in doomed], self.timeout))

    @_wire_call
    def scram_users(self) -> frozenset[str]:
        """Users with a SCRAM-SHA-512 credential."""
        return frozenset(user for user, mechanisms in kraft.scram_users(self.connection, self.timeout).items()
                         if wire.SCRAM_SHA_512 in mechanisms)

    @_wire_call
    def alter_scram(self, upserts: Mapping[str, str], deletes: Iterable[str]) -> dict[str, str]:
        """Sets users' SCRAM-SHA-512 passwords (a new random salt each) and removes others' credentials;
        returns the error per user that failed."""
        salted = []
        for user, password in upserts.items():
            salt = secrets.token_bytes(SALT_BYTES)
            salted.append(wire.ScramUpsert(user, SCRAM_ITERATIONS, salt,
                                           wire.salted_password(password, salt, SCRAM_ITERATIONS)))
        errors = kraft.alter_scram(self.connection, salted, list(deletes), self.timeout)
        return {user: error for user, error in errors.items() if error}

    @_wire_call
    def quotas(self) -> dict[str, dict[str, float]]:
        return kraft.user_quotas(self.connection)

    @_wire_call
    def alter_quotas(self, changes: Mapping[str, Mapping[str, float | None]], validate_only: bool) -> dict[str, str]:
        return kraft.alter_user_quotas(self.connection, changes, validate_only)
