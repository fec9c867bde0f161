"""User decisions: only the cluster's own users' principals are touched, nothing of a refused user changes,
a principal Kafka already holds is taken over only when asked, drift is put back, deletion removes all."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from krafty.decide.users import KafkaUsers, Password, Refused, UserResource, password_digest, plan, settle, withhold
from krafty.decide.verdicts import Refusal
from krafty.facts.observed import Acl
from krafty.model import KafkaClusterSpec
from krafty.model.user import AclEffect, AclOperation, AclPatternType, AclResourceType, KafkaUserSpec
from krafty.wire import Reader, Writer, decode_alter_user_quotas, decode_describe_user_quotas
from krafty.wire.quotas import encode_alter_user_quotas

LISTENERS = [{"name": "mtls", "port": 9094, "tls": True, "authentication": "tls"},
             {"name": "scram", "port": 9095, "tls": True, "authentication": "scram-sha-512"}]
READ_ORDERS = {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]}


def cluster(authorization: bool = True, listeners: list[dict[str, Any]] | None = None) -> KafkaClusterSpec:
    return KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}, "listeners": listeners or LISTENERS,
                                            "authorization": {"enabled": authorization}})


def user(name: str = "alice", auth: str = "tls", acls: tuple[dict[str, Any], ...] = (READ_ORDERS,),
         quotas: dict[str, int] | None = None, **options: Any) -> UserResource:
    spec = KafkaUserSpec.model_validate({"clusterRef": {"name": "prod"}, "authentication": {"type": auth},
                                         "authorization": {"acls": list(acls)}, "quotas": quotas or {}})
    return UserResource("ns", name, spec, **{"managed": True, **options})


def acl(principal: str = "User:alice", name: str = "orders", operation: AclOperation = AclOperation.READ) -> Acl:
    return Acl(principal, AclResourceType.TOPIC, name, AclPatternType.LITERAL, operation, AclEffect.ALLOW, "*")


def kafka(*acls: Acl, scram: frozenset[str] = frozenset(), quotas: dict[str, dict[str, float]] | None = None
          ) -> KafkaUsers:
    return KafkaUsers(frozenset(acls), scram, quotas or {})


ALICE = {acl(), acl(operation=AclOperation.DESCRIBE)}


def test_a_new_user_gets_its_acls_and_quotas_and_nobody_elses_change():
    # Given Kafka holding an ACL of an unmanaged principal
    other = acl("User:legacy", "payments")
    result = plan([user(quotas={"producerByteRate": 1048576})], kafka(other), cluster())
    # Then alice's ACLs and quota are made, and legacy's ACL is not touched
    assert set(result.acl_creates) == ALICE
    assert result.acl_deletes == ()
    assert result.quota_changes == {"alice": {"producer_byte_rate": 1048576.0}}
    verdict = result.verdicts[("ns", "alice")]
    assert (verdict.ready, verdict.reason, verdict.progressing) == (True, "UserReady", True)


@pytest.mark.parametrize(("auth", "listeners", "reason", "field"), [
    ("tls", [LISTENERS[1]], "AuthenticationUnavailable", "spec.authentication.type: tls"),
    ("scram-sha-512", [LISTENERS[0]], "AuthenticationUnavailable", "spec.authentication.type: scram-sha-512"),
])
def test_a_user_no_listener_can_serve_changes_nothing(auth, listeners, reason, field):
    result = plan([user(auth=auth, password=Password("d", ""))], kafka(), cluster(listeners=listeners))
    verdict = result.verdicts[("ns", "alice")]
    assert (verdict.ready, verdict.reason, verdict.manage) == (False, reason, False)
    assert field in verdict.message
    assert not result.changes_of("alice")


def test_a_missing_password_secret_changes_nothing_and_names_the_field():
    missing = Password(None, "", "Secret pw does not exist or has no key password (or it is empty)")
    result = plan([user(auth="scram-sha-512", password=missing)], kafka(), cluster())
    verdict = result.verdicts[("ns", "alice")]
    assert verdict.reason == "PasswordSecretMissing"
    assert "spec.authentication.password.secretKeyRef: Secret pw does not exist" in verdict.message
    assert not result.changes_of("alice")


def test_a_principal_kafka_already_holds_is_taken_over_only_when_asked():
    # Given Kafka holding an ACL and a SCRAM credential for alice, made by someone else
    existing = kafka(acl(name="legacy-topic"), scram=frozenset({"alice"}))
    # When a new KafkaUser alice appears, Then nothing changes and it says what Kafka holds
    pending = plan([user(managed=False)], existing, cluster())
    verdict = pending.verdicts[("ns", "alice")]
    assert (verdict.reason, verdict.manage) == ("AdoptionPending", False)
    assert "1 ACLs, a SCRAM credential" in verdict.message
    assert not pending.changes_of("alice")
    # When it is annotated adopt=force, Then it is made to match the spec (its password dropped: tls user)
    adopted = plan([user(managed=False, force_adopt=True)], existing, cluster())
    assert set(adopted.acl_creates) == ALICE
    assert adopted.acl_deletes == (acl(name="legacy-topic"),)
    assert adopted.scram_deletes == ("alice",)
    assert adopted.verdicts[("ns", "alice")].events[0][0] == "UserAdopted"


def test_drift_is_put_back_and_said_only_once_the_user_was_settled():
    # Given alice's ACLs in Kafka plus one added behind the operator's back, and a quota changed
    extra = acl(name="secrets", operation=AclOperation.WRITE)
    drifted = kafka(*ALICE, extra, acl("User:bob", "secrets"), quotas={"alice": {"producer_byte_rate": 1.0}})
    result = plan([user(settled=True)], drifted, cluster())
    # Then only alice's extra ACL goes, bob's stays, and the quota goes back to none
    assert result.acl_deletes == (extra,)
    assert result.acl_creates == ()
    assert result.quota_changes == {"alice": {"producer_byte_rate": None}}
    reason, message, warning = result.verdicts[("ns", "alice")].events[0]
    assert (reason, warning) == ("DriftReverted", True)
    assert "1 ACLs not declared" in message
    # And the same difference right after a spec change is no drift
    assert plan([user(settled=False)], drifted, cluster()).verdicts[("ns", "alice")].events == ()


def test_a_deleted_user_loses_everything_and_is_let_go_once_kafka_holds_nothing():
    holding = kafka(*ALICE, acl("User:bob"), scram=frozenset({"alice", "bob"}),
                    quotas={"alice": {"consumer_byte_rate": 2048.0}})
    result = plan([user(deleting=True)], holding, cluster())
    assert set(result.acl_deletes) == ALICE
    assert result.scram_deletes == ("alice",)
    assert result.quota_changes == {"alice": {"consumer_byte_rate": None}}
    assert result.released == ()
    assert plan([user(deleting=True)], kafka(acl("User:bob")), cluster()).released == (("ns", "alice"),)
    # And one the operator never managed is let go without touching what Kafka holds
    untouched = plan([user(deleting=True, managed=False)], holding, cluster())
    assert (untouched.acl_deletes, untouched.released) == ((), (("ns", "alice"),))


def test_without_authorization_acls_are_neither_made_nor_removed_and_the_user_is_told():
    result = plan([user()], kafka(), cluster(authorization=False))
    assert (result.acl_creates, result.acl_deletes) == ((), ())
    assert "the ACLs are not applied" in result.verdicts[("ns", "alice")].message


@pytest.mark.parametrize(("password", "in_kafka", "upsert"), [
    (Password(password_digest("s3cret"), ""), False, True),  # new
    (Password(password_digest("s3cret"), password_digest("s3cret")), True, False),  # applied
    (Password(password_digest("rotated"), password_digest("s3cret")), True, True),  # the Secret changed
    (Password(password_digest("s3cret"), password_digest("s3cret")), False, True),  # removed behind our back
])
def test_a_scram_credential_is_set_when_new_changed_or_gone(password, in_kafka, upsert):
    result = plan([user(auth="scram-sha-512", acls=(), password=password)],
                  kafka(scram=frozenset({"alice"} if in_kafka else set())), cluster())
    assert (result.scram_upserts == ("alice",)) is upsert


def test_a_paused_cluster_changes_nothing_and_a_refused_user_gets_none_of_its_changes():
    result = plan([user(), user("bob", quotas={"requestPercentage": 10})], kafka(), cluster())
    paused = withhold(result, "Paused", "KafkaCluster prod is paused")
    assert not paused.changes_of("alice")
    assert paused.verdicts[("ns", "alice")].reason == "Paused"
    dropped = result.without({"bob"})
    assert not dropped.changes_of("bob")
    assert dropped.changes_of("alice")
    assert result.changes_of("bob")  # (the plan it was made from is as it was)


@pytest.mark.parametrize(("reason", "managed"), [(Refused.QUOTA, False), (Refused.CREDENTIAL, True),
                                                 (Refused.ACL, True)])
def test_what_kafka_refused_withdraws_that_users_changes_and_says_why(reason, managed):
    # Given two users with ACLs and quotas to make, and Kafka refusing part of bob's change
    done = plan([user(quotas={"requestPercentage": 10}), user("bob", acls=(READ_ORDERS,),
                                                             quotas={"requestPercentage": 20})], kafka(), cluster())
    refusal = Refusal(reason, "POLICY_VIOLATION")
    settled = settle(done, {"bob": refusal})
    # Then bob has none of its changes left, says what Kafka answered in a warning, and is still managed unless
    # its quotas were refused (then its Secret is not written); alice is as planned
    bob = settled.verdicts[("ns", "bob")]
    assert (bob.ready, bob.reason, bob.message, bob.events, bob.manage) == \
        (False, reason.value, "POLICY_VIOLATION", ((reason.value, "POLICY_VIOLATION", True),), managed)
    assert not settled.changes_of("bob")
    assert settled.verdicts[("ns", "alice")] == done.verdicts[("ns", "alice")]
    assert settled.changes_of("alice")
    # And the plan it settled is as it was; nothing refused settles to the same plan
    assert done.changes_of("bob")
    assert settle(done, {}) == done


def test_while_the_nodes_restart_into_the_authorizer_no_acl_is_made_and_none_is_taken_for_drift():
    # Given alice settled, and Kafka answering from a node without the authorizer yet (it holds no ACLs)
    alice = user(settled=True, quotas={"requestPercentage": 10})
    restarting = plan([alice], kafka(), cluster(), authorizing=False)
    # Then nothing changes, nothing is reported as drift, and alice waits without a warning
    assert not restarting.changes_of("alice")
    verdict = restarting.verdicts[("ns", "alice")]
    assert (verdict.ready, verdict.reason, verdict.events) == (False, "AuthorizationPending", ())
    # And once every node authorizes, the missing ACLs are drift put back
    rolled = plan([alice], kafka(), cluster(), authorizing=True)
    assert set(rolled.acl_creates) == ALICE
    assert [e[0] for e in rolled.verdicts[("ns", "alice")].events] == ["DriftReverted"]
    # And a cluster without authorization never waits for it
    assert plan([alice], kafka(), cluster(authorization=False), authorizing=False).verdicts[
        ("ns", "alice")].reason == "UserReady"


@pytest.mark.parametrize(("rule", "message"), [
    ({"resource": {"type": "group", "name": "g"}, "operations": ["Write"]}, "operations Write do not apply"),
    ({"resource": {"type": "topic"}, "operations": ["Read"]}, "a topic resource needs a name"),
    ({"resource": {"type": "cluster", "name": "other"}, "operations": ["Alter"]}, "a cluster resource has no name"),
])
def test_acl_rules_kafka_could_never_match_are_refused(rule, message):
    with pytest.raises(ValidationError, match=message):
        KafkaUserSpec.model_validate({"clusterRef": {"name": "c"}, "authentication": {"type": "tls"},
                                      "authorization": {"acls": [rule]}})


def _entity(w: Writer, user: str | None) -> None:
    w.compact_array([user], lambda ww, name: ww.compact_string("user").compact_string(name).tags())


def test_quota_messages_follow_kafkas_layout():
    # AlterClientQuotas v1: entries of (entity, ops (key, value, remove)), then validateOnly
    encoded = encode_alter_user_quotas({"alice": {"producer_byte_rate": 1024.0, "request_percentage": None}},
                                       validate_only=True).bytes()
    reader = Reader(encoded)
    assert reader.uvarint() == 2
    assert reader.compact_array(lambda r: (r.compact_string(), r.compact_string(), r.skip_tags())) == [
        ("user", "alice", None)]
    ops = reader.compact_array(lambda r: (r.compact_string(), r.float64(), r.boolean(), r.skip_tags()))
    assert ops == [("producer_byte_rate", 1024.0, False, None), ("request_percentage", 0.0, True, None)]
    reader.skip_tags()
    assert reader.boolean() is True
    # DescribeClientQuotas v1 response: a user's own quotas kept, a user and client-id pair's left out
    response = Writer().int32(0).int16(0).compact_string(None)

    def entry(w: Writer, item: tuple[list[tuple[str, str]], float]) -> None:
        w.compact_array(item[0], lambda ww, e: ww.compact_string(e[0]).compact_string(e[1]).tags())
        w.compact_array([("consumer_byte_rate", item[1])], lambda ww, v: ww.compact_string(v[0]).float64(v[1]).tags())
        w.tags()

    response.compact_array([([("user", "alice")], 2048.0), ([("user", "alice"), ("client-id", "app")], 1.0)],
                           entry).tags()
    assert decode_describe_user_quotas(Reader(response.bytes())) == {"alice": {"consumer_byte_rate": 2048.0}}
    # AlterClientQuotas v1 response: Kafka's refusal per user
    refusal = Writer().int32(0).compact_array([None], lambda w, _: (
        w.int16(42).compact_string("unknown quota"), _entity(w, "erin"), w.tags())).tags()
    assert decode_alter_user_quotas(Reader(refusal.bytes())) == {"erin": "INVALID_REQUEST: unknown quota"}


def _scram(name: str = "alice", applied: str = "", **options: Any) -> UserResource:
    return user(name, auth="scram-sha-512", acls=(), password=Password(password_digest("pw"), applied), **options)


# One pass over one KafkaUser, whole: (the resource, what Kafka holds, what Kafka refuses) -> (what the pass asks
# Kafka for, and the verdict its status is written from)
PASSES: dict[str, tuple[UserResource, KafkaUsers, Refused | None, tuple[str, ...], tuple[str, bool]]] = {
    "new certificate user": (user(), kafka(), None, ("acl+ 2",), ("UserReady", True)),
    "calm": (user(settled=True), kafka(*ALICE), None, (), ("UserReady", True)),
    "new SCRAM user": (_scram(), kafka(), None, ("scram+ alice",), ("UserReady", True)),
    "SCRAM password unchanged": (_scram(applied=password_digest("pw")), kafka(scram=frozenset({"alice"})), None, (),
                                 ("UserReady", True)),
    "SCRAM credential refused": (_scram(), kafka(), Refused.CREDENTIAL, (), ("CredentialRefused", False)),
    "quota refused": (user(quotas={"requestPercentage": 10}), kafka(*ALICE), Refused.QUOTA, (),
                      ("QuotaRefused", False)),
    "ACL added behind its back": (user(settled=True), kafka(*ALICE, acl(name="payments")), None,
                                  ("acl- 1", "DriftReverted"), ("UserReady", True)),
    "spec changed: no drift said": (user(acls=()), kafka(*ALICE), None, ("acl- 2",), ("UserReady", True)),
    "principal held by another": (user(managed=False), kafka(acl()), None, (), ("AdoptionPending", False)),
    "taken over when asked": (user(managed=False, force_adopt=True), kafka(acl()), None, ("acl+ 1", "UserAdopted"),
                              ("UserReady", True)),
    "deleted": (user(deleting=True), kafka(*ALICE, quotas={"alice": {"request_percentage": 10.0}}), None,
                ("acl- 2", "quota alice"), ("(gone)", False)),
}


def _asked(done: Any) -> tuple[str, ...]:
    return (*(f"acl+ {len(done.acl_creates)}",) * bool(done.acl_creates),
            *(f"acl- {len(done.acl_deletes)}",) * bool(done.acl_deletes),
            *(f"scram+ {u}" for u in done.scram_upserts), *(f"scram- {u}" for u in done.scram_deletes),
            *(f"quota {u}" for u in done.quota_changes))


@pytest.mark.parametrize(("resource", "before", "refusal", "asked", "verdict"), PASSES.values(), ids=PASSES.keys())
def test_one_pass_over_a_user(resource: UserResource, before: KafkaUsers, refusal: Refused | None,
                              asked: tuple[str, ...], verdict: tuple[str, bool]):
    # Given a KafkaUser and what Kafka holds, When a pass plans, Kafka answers (or refuses), and the pass settles
    done = plan([resource], before, cluster())
    settled = settle(done, {resource.name: Refusal(refusal, "Kafka said no")} if refusal else {})
    # Then the pass asked Kafka for these changes (none left of a refused user), said these Events, and reports
    # this verdict (a deleted user has none: it is let go once Kafka holds nothing)
    found = settled.verdicts.get(resource.key)
    events = tuple(reason for reason, _, _ in found.events if reason != getattr(refusal, "value", None)) \
        if found else ()
    assert (*_asked(settled), *events) == asked
    assert ((found.reason, found.ready) if found else ("(gone)", False)) == verdict
