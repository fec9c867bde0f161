"""What Kafka holds for users, through the Admin API: ACLs and SCRAM credentials (confluent-kafka), and
client quotas (krafty.clients.kraft: librdkafka has no quota calls)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any, cast

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from krafty.clients import kraft
from krafty.clients.kafka_admin import TIMEOUT, KafkaAdmin, _error_of, _kafka_call
from krafty.model.user import AclEffect, AclPatternType, AclResourceType
from krafty.model.user import AclOperation as Operation
from krafty.observed import Acl

SCRAM_ITERATIONS = 8192
_TYPES = {AclResourceType.TOPIC: ResourceType.TOPIC, AclResourceType.GROUP: ResourceType.GROUP,
          AclResourceType.CLUSTER: ResourceType.BROKER, AclResourceType.TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID}
_PATTERNS = {AclPatternType.LITERAL: ResourcePatternType.LITERAL, AclPatternType.PREFIX: ResourcePatternType.PREFIXED}
_EFFECTS = {AclEffect.ALLOW: AclPermissionType.ALLOW, AclEffect.DENY: AclPermissionType.DENY}
_OPERATIONS = {op: AclOperation[op.name] for op in Operation}


def _binding(acl: Acl) -> AclBinding:
    return AclBinding(_TYPES[acl.resource_type], acl.name, _PATTERNS[acl.pattern], acl.principal, acl.host,
                      _OPERATIONS[acl.operation], _EFFECTS[acl.effect])


def _filter(acl: Acl) -> AclBindingFilter:
    return AclBindingFilter(_TYPES[acl.resource_type], acl.name, _PATTERNS[acl.pattern], acl.principal, acl.host,
                            _OPERATIONS[acl.operation], _EFFECTS[acl.effect])


_FROM_TYPES: Mapping[Any, AclResourceType] = {theirs: ours for ours, theirs in _TYPES.items()}
_FROM_PATTERNS: Mapping[Any, AclPatternType] = {theirs: ours for ours, theirs in _PATTERNS.items()}
_FROM_EFFECTS: Mapping[Any, AclEffect] = {theirs: ours for ours, theirs in _EFFECTS.items()}
_FROM_OPERATIONS: Mapping[Any, Operation] = {theirs: ours for ours, theirs in _OPERATIONS.items()}


def _acl(binding: AclBinding) -> Acl | None:
    """Kafka's binding as ours; None for what a KafkaUser cannot declare (left alone)."""
    kind, pattern = _FROM_TYPES.get(binding.restype), _FROM_PATTERNS.get(binding.resource_pattern_type)
    operation, effect = _FROM_OPERATIONS.get(binding.operation), _FROM_EFFECTS.get(binding.permission_type)
    if kind is None or pattern is None or operation is None or effect is None:
        return None
    return Acl(binding.principal, kind, binding.name, pattern, operation, effect, binding.host)


class UserAdmin(KafkaAdmin):
    """The user pass's own client (its calls never wait behind a roll's)."""

    @_kafka_call
    def acls(self) -> frozenset[Acl]:
        """Every ACL in the cluster."""
        anything: Any = None
        every = AclBindingFilter(ResourceType.ANY, anything, ResourcePatternType.ANY, anything, anything,
                                 AclOperation.ANY, AclPermissionType.ANY)
        bindings = self.client.describe_acls(every, request_timeout=TIMEOUT).result(timeout=TIMEOUT + 5)
        return frozenset(acl for acl in map(_acl, bindings) if acl is not None)

    @_kafka_call
    def create_acls(self, acls: Iterable[Acl]) -> dict[Acl, str]:
        """Creates ACLs in one request; returns the error of each that failed."""
        bindings = {_binding(acl): acl for acl in acls}
        if not bindings:
            return {}
        futures = self.client.create_acls(list(bindings), request_timeout=TIMEOUT)
        return {bindings[b]: error for b, future in futures.items() if (error := _error_of(future))}

    @_kafka_call
    def delete_acls(self, acls: Iterable[Acl]) -> dict[Acl, str]:
        filters = {_filter(acl): acl for acl in acls}
        if not filters:
            return {}
        futures = self.client.delete_acls(list(filters), request_timeout=TIMEOUT)
        return {filters[f]: error for f, future in futures.items() if (error := _error_of(future))}

    @_kafka_call
    def scram_users(self) -> frozenset[str]:
        """Users with a SCRAM-SHA-512 credential."""
        future = cast("Future[Any]", self.client.describe_user_scram_credentials(request_timeout=TIMEOUT))
        described = future.result(timeout=TIMEOUT + 5)
        return frozenset(user for user, description in described.items()
                         if any(info.mechanism == ScramMechanism.SCRAM_SHA_512
                                for info in description.scram_credential_infos))

    @_kafka_call
    def alter_scram(self, upserts: Mapping[str, str], deletes: Iterable[str]) -> dict[str, str]:
        """Sets users' SCRAM-SHA-512 passwords (a new random salt each) and removes others' credentials;
        returns the error per user that failed."""
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
        changes: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(user, info, password.encode()) for user, password in upserts.items()]
        changes += [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512) for user in deletes]
        if not changes:
            return {}
        futures = self.client.alter_user_scram_credentials(changes, request_timeout=TIMEOUT)
        return {user: error for user, future in futures.items() if (error := _error_of(future))}

    @_kafka_call
    def quotas(self) -> dict[str, dict[str, float]]:
        return kraft.user_quotas(self.connection)

    @_kafka_call
    def alter_quotas(self, changes: Mapping[str, Mapping[str, float | None]], validate_only: bool) -> dict[str, str]:
        return kraft.alter_user_quotas(self.connection, changes, validate_only)
