"""The KafkaUser spec (crds/kafkausers.kafka.krafty.io.yaml): how a user proves who it is, what it may do
(ACLs) and how much it may use (quotas). The principal is User:<metadata.name>."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from krafty.model.cluster import SecretKeyRef
from krafty.model.common import Spec
from krafty.model.topic import ClusterRef


class UserAuthenticationType(StrEnum):
    TLS = "tls"  # a client certificate the operator issues from the clients CA; its common name is the user
    SCRAM_SHA_512 = "scram-sha-512"  # a password the operator generates, or one from the user's Secret


class PasswordSource(Spec):
    secret_key_ref: SecretKeyRef


class UserAuthentication(Spec):
    type: UserAuthenticationType
    password: PasswordSource | None = None

    @model_validator(mode="after")
    def _password_for_scram_only(self) -> UserAuthentication:
        if self.password is not None and self.type is not UserAuthenticationType.SCRAM_SHA_512:
            raise ValueError("authentication.password is for type scram-sha-512 only")
        return self


class AclResourceType(StrEnum):
    TOPIC = "topic"
    GROUP = "group"
    CLUSTER = "cluster"
    TRANSACTIONAL_ID = "transactionalId"


class AclPatternType(StrEnum):
    LITERAL = "literal"  # exactly this name ("*": every resource of the type)
    PREFIX = "prefix"  # every name that starts with it


class AclOperation(StrEnum):
    ALL = "All"
    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"


class AclEffect(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


_O = AclOperation
# What Kafka's authorizer checks on each resource type (an ACL for anything else would never match a request)
OPERATIONS_OF: dict[AclResourceType, frozenset[AclOperation]] = {
    AclResourceType.TOPIC: frozenset({_O.ALL, _O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE,
                                      _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    AclResourceType.GROUP: frozenset({_O.ALL, _O.READ, _O.DELETE, _O.DESCRIBE}),
    AclResourceType.CLUSTER: frozenset({_O.ALL, _O.CREATE, _O.ALTER, _O.DESCRIBE, _O.CLUSTER_ACTION,
                                        _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE}),
    AclResourceType.TRANSACTIONAL_ID: frozenset({_O.ALL, _O.WRITE, _O.DESCRIBE}),
}
CLUSTER_RESOURCE_NAME = "kafka-cluster"  # the one cluster resource's name in Kafka


class AclResource(Spec):
    type: AclResourceType
    # Topic, group or transactional id name ("*" with patternType literal: all of them); none for cluster
    name: str | None = Field(default=None, min_length=1, max_length=249)
    pattern_type: AclPatternType = AclPatternType.LITERAL

    @model_validator(mode="after")
    def _named_unless_cluster(self) -> AclResource:
        if self.type is AclResourceType.CLUSTER:
            if self.name not in (None, CLUSTER_RESOURCE_NAME) or self.pattern_type is not AclPatternType.LITERAL:
                raise ValueError("a cluster resource has no name and no patternType")
        elif self.name is None:
            raise ValueError(f"a {self.type.value} resource needs a name")
        return self

    @property
    def kafka_name(self) -> str:
        return self.name or CLUSTER_RESOURCE_NAME


class AclRule(Spec):
    resource: AclResource
    operations: tuple[AclOperation, ...] = Field(min_length=1, max_length=11)
    type: AclEffect = AclEffect.ALLOW
    host: str = Field(default="*", min_length=1, max_length=253, pattern=r"^(\*|[0-9a-fA-F.:]+)$")

    @model_validator(mode="after")
    def _operations_of_the_resource(self) -> AclRule:
        wrong = [op.value for op in self.operations if op not in OPERATIONS_OF[self.resource.type]]
        if wrong:
            allowed = ", ".join(sorted(op.value for op in OPERATIONS_OF[self.resource.type]))
            raise ValueError(f"operations {', '.join(wrong)} do not apply to a {self.resource.type.value} "
                             f"resource (it takes {allowed})")
        return self


class UserAuthorization(Spec):
    acls: tuple[AclRule, ...] = Field(default=(), max_length=200)


class Quotas(Spec):
    """Kafka's client quotas for this user; one left out has no limit."""

    producer_byte_rate: int | None = Field(default=None, ge=1024, le=2**53)  # bytes per second, per broker
    consumer_byte_rate: int | None = Field(default=None, ge=1024, le=2**53)
    request_percentage: int | None = Field(default=None, ge=1, le=10000)  # of one I/O and network thread
    controller_mutation_rate: int | None = Field(default=None, ge=1, le=100000)  # partitions made or removed /s


class KafkaUserSpec(Spec):
    cluster_ref: ClusterRef
    authentication: UserAuthentication
    authorization: UserAuthorization = Field(default_factory=UserAuthorization)
    quotas: Quotas = Field(default_factory=Quotas)
