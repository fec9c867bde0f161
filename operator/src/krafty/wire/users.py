"""What Kafka holds for users: ACLs (DescribeAcls, CreateAcls, DeleteAcls v3) and SCRAM credentials
(DescribeUserScramCredentials, AlterUserScramCredentials v0). Any broker answers or forwards these to the active
controller (librdkafka sends them to the broker its metadata last named controller)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import NamedTuple

from krafty.wire.codec import Reader, Writer, check, item_error

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
ANY = 1  # the filters' "any" of resource type, pattern type, operation and permission
SCRAM_SHA_512 = 2
SECURITY_DISABLED = 54  # no authorizer configured


class AclEntry(NamedTuple):
    """One ACL binding in Kafka's codes: resource type (2 topic, 3 group, 4 cluster, 5 transactional id), pattern
    (3 literal, 4 prefixed), operation (2 all, 3 read, ...) and permission (2 deny, 3 allow)."""
    resource_type: int
    name: str
    pattern: int
    principal: str
    host: str
    operation: int
    permission: int


def _write_acl(w: Writer, acl: AclEntry) -> None:
    w.int8(acl.resource_type).compact_string(acl.name).int8(acl.pattern).compact_string(acl.principal)
    w.compact_string(acl.host).int8(acl.operation).int8(acl.permission).tags()


def encode_describe_every_acl() -> Writer:
    w = Writer().int8(ANY).compact_string(None).int8(ANY).compact_string(None).compact_string(None)
    return w.int8(ANY).int8(ANY).tags()


def decode_describe_acls(r: Reader) -> list[AclEntry]:
    """Every ACL held; none on a cluster without an authorizer."""
    r.int32()
    code, message = r.int16(), r.compact_string()
    if code == SECURITY_DISABLED:
        return []
    check("DescribeAcls", code, message)
    found: list[AclEntry] = []

    def resource(x: Reader) -> None:
        kind, name, pattern = x.int8(), x.compact_string() or "", x.int8()

        def acl(a: Reader) -> None:
            principal, host, operation, permission = a.compact_string() or "", a.compact_string() or "", \
                a.int8(), a.int8()
            a.skip_tags()
            found.append(AclEntry(kind, name, pattern, principal, host, operation, permission))

        x.compact_array(acl)
        x.skip_tags()

    r.compact_array(resource)
    r.skip_tags()
    return found


def encode_create_acls(acls: Sequence[AclEntry]) -> Writer:
    return Writer().compact_array(list(acls), _write_acl).tags()


def decode_create_acls(r: Reader) -> list[str | None]:
    """Kafka's refusal of each ACL, in the request's order (None: created)."""
    r.int32()

    def result(x: Reader) -> str | None:
        code, message = x.int16(), x.compact_string()
        x.skip_tags()
        return item_error("CreateAcls", code, message)

    results = r.compact_array(result)
    r.skip_tags()
    return results


def encode_delete_acls(acls: Sequence[AclEntry]) -> Writer:
    """Each ACL as a filter that matches it alone: a filter's fields are a binding's, in the same order."""
    return encode_create_acls(acls)


def decode_delete_acls(r: Reader) -> list[str | None]:
    """Kafka's refusal of each filter, in the request's order (None: deleted, or nothing matched)."""
    r.int32()

    def matching(m: Reader) -> str | None:
        code, message = m.int16(), m.compact_string()
        m.int8()
        m.compact_string()
        m.int8()
        m.compact_string()
        m.compact_string()
        m.take(2)  # operation, permission
        m.skip_tags()
        return item_error("DeleteAcls", code, message)

    def result(x: Reader) -> str | None:
        code, message = x.int16(), x.compact_string()
        errors = [e for e in x.compact_array(matching) if e]
        x.skip_tags()
        return item_error("DeleteAcls", code, message) or (errors[0] if errors else None)

    results = r.compact_array(result)
    r.skip_tags()
    return results


def encode_describe_every_scram_user() -> Writer:
    return Writer().compact_array(None, lambda w, _: w).tags()


def decode_describe_scram_users(r: Reader) -> dict[str, frozenset[int]]:
    """The SCRAM mechanisms each user has a credential for."""
    r.int32()
    check("DescribeUserScramCredentials", r.int16(), r.compact_string())

    def mechanism(m: Reader) -> int:
        kind = m.int8()
        m.int32()  # iterations
        m.skip_tags()
        return kind

    def result(x: Reader) -> tuple[str, int, frozenset[int]]:
        user, code = x.compact_string() or "", x.int16()
        x.compact_string()
        mechanisms = frozenset(x.compact_array(mechanism))
        x.skip_tags()
        return user, code, mechanisms

    results = r.compact_array(result)
    r.skip_tags()
    return {user: mechanisms for user, code, mechanisms in results if not code}


class ScramUpsert(NamedTuple):
    user: str
    iterations: int
    salt: bytes
    salted_password: bytes


def salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    """SCRAM-SHA-512's SaltedPassword (RFC 5802's Hi): what the broker keeps instead of the password."""
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)


def encode_alter_scram(upserts: Sequence[ScramUpsert], deletes: Sequence[str]) -> Writer:
    """SCRAM-SHA-512 credentials set (salted here, as Kafka's own clients do) and removed."""
    def deletion(w: Writer, user: str) -> None:
        w.compact_string(user).int8(SCRAM_SHA_512).tags()

    def upsertion(w: Writer, u: ScramUpsert) -> None:
        w.compact_string(u.user).int8(SCRAM_SHA_512).int32(u.iterations)
        w.compact_bytes(u.salt).compact_bytes(u.salted_password).tags()

    return Writer().compact_array(list(deletes), deletion).compact_array(list(upserts), upsertion).tags()


def decode_alter_scram(r: Reader) -> dict[str, str | None]:
    """Kafka's refusal per user (None: done)."""
    r.int32()

    def result(x: Reader) -> tuple[str, str | None]:
        user, code, message = x.compact_string() or "", x.int16(), x.compact_string()
        x.skip_tags()
        return user, item_error("AlterUserScramCredentials", code, message)

    results = dict(r.compact_array(result))
    r.skip_tags()
    return results
