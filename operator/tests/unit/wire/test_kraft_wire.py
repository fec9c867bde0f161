"""The KRaft admin wire format, byte for byte (the integration tests check it against real Kafka)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from krafty import wire


def test_uvarint_round_trip():
    for value in (0, 1, 127, 128, 300, 16383, 16384, 2**31):
        assert wire.Reader(wire.Writer().uvarint(value).bytes()).uvarint() == value


def test_request_header_v2_keeps_the_two_byte_client_id():
    assert wire.request_header(55, 2, 7, "ab").bytes() == bytes([0, 55, 0, 2, 0, 0, 0, 7, 0, 2]) + b"ab" + b"\x00"


def test_kafka_uuid_round_trip():
    text = "lFpjFhR_q_VxmZwGvhJXew"
    assert wire.uuid_to_kafka(wire.uuid_from_kafka(text)) == text


def test_new_ids_never_start_with_a_dash_nor_are_reserved():
    # A cluster id starting with "-" made kafka-storage read it as an option: every broker crash-looped.
    dash = bytes([0xF8]) + bytes(15)
    reserved = bytes(15) + bytes([2])
    good = bytes(range(1, 17))
    candidates = iter([dash, reserved, good])
    assert wire.uuid_to_kafka(dash).startswith("-")
    assert wire.random_kafka_uuid(lambda: next(candidates)) == wire.uuid_to_kafka(good)


def test_describe_quorum_request_names_the_metadata_partition():
    body = wire.encode_describe_quorum().bytes()
    assert body == bytes([2, 19]) + b"__cluster_metadata" + bytes([2, 0, 0, 0, 0, 0, 0, 0])


def _replica(w: wire.Writer, node: int, leo: int) -> None:
    w.int32(node).uuid("lFpjFhR_q_VxmZwGvhJXew").parts.append((leo).to_bytes(8, "big", signed=True))
    w.parts.append((-1).to_bytes(8, "big", signed=True))
    w.parts.append((-1).to_bytes(8, "big", signed=True))
    w.tags()


def test_describe_quorum_response_decodes_leader_voters_and_lag():
    w = wire.Writer().int16(0).compact_string(None)
    w.uvarint(2).compact_string("__cluster_metadata").uvarint(2)
    w.int32(0).int16(0).compact_string(None).int32(1001).int32(4)
    w.parts.append((120).to_bytes(8, "big"))
    w.uvarint(3)
    _replica(w, 1000, 100)
    _replica(w, 1001, 120)
    w.uvarint(1)  # no observers
    w.tags().tags()  # partition, topic
    w.uvarint(2).int32(1000).uvarint(2).compact_string("CONTROLLER").compact_string("c0").parts.append(b"\x23\x85")
    w.tags().tags()  # listener, node
    w.tags()
    quorum = wire.decode_describe_quorum(wire.Reader(w.bytes()))
    assert quorum.leader_id == 1001
    assert quorum.voter_ids() == {1000, 1001}
    assert [quorum.lag(v) for v in quorum.voters] == [20, 0]
    assert quorum.endpoints == {1000: ("c0", 9093)}


def test_error_codes_become_named_errors():
    w = wire.Writer().int32(0).int16(127).compact_string("no such voter").tags()
    with pytest.raises(wire.KafkaProtocolError, match="RemoveRaftVoter: VOTER_NOT_FOUND: no such voter"):
        wire.decode_simple("RemoveRaftVoter")(wire.Reader(w.bytes()))


def test_alter_reassignments_groups_partitions_by_topic():
    body = wire.encode_alter_reassignments({("t", 1): [1, 2], ("t", 0): None}, 30000).bytes()
    reader = wire.Reader(body)
    assert reader.int32() == 30000
    assert reader.uvarint() == 2
    assert reader.compact_string() == "t"
    assert reader.uvarint() == 3
    assert reader.int32() == 0
    assert reader.uvarint() == 0
    reader.skip_tags()
    assert reader.int32() == 1
    assert reader.compact_array(lambda r: r.int32()) == [1, 2]


def test_topic_config_changes_set_and_delete_keys_of_many_topics_in_one_request():
    body = wire.encode_alter_topic_configs({"b": {"retention.ms": "1000"}, "a": {"x.y": None}}, True).bytes()
    reader = wire.Reader(body)

    def config(r: wire.Reader) -> tuple[str | None, int, str | None]:
        key, op, value = r.compact_string(), r.int8(), r.compact_string()
        r.skip_tags()
        return key, op, value

    def resource(r: wire.Reader) -> tuple[int, str | None, list[tuple[str | None, int, str | None]]]:
        kind, name, configs = r.int8(), r.compact_string(), r.compact_array(config)
        r.skip_tags()
        return kind, name, configs

    # topics (resource type 2) in name order; DELETE (1) for None, SET (0) for a value; then validate_only
    assert reader.compact_array(resource) == [(2, "a", [("x.y", 1, None)]), (2, "b", [("retention.ms", 0, "1000")])]
    assert reader.int8() == 1


def _alter_configs_answer(rows: list[tuple[int, str | None, str]]) -> wire.Reader:
    def response(w: wire.Writer, row: tuple[int, str | None, str]) -> None:
        w.int16(row[0]).compact_string(row[1]).int8(2).compact_string(row[2]).tags()

    return wire.Reader(wire.Writer().int32(0).compact_array(rows, response).tags().bytes())


def test_topic_config_answers_give_kafkas_refusal_per_topic():
    answer = _alter_configs_answer([(0, None, "a"), (40, "Invalid value x for configuration retention.ms", "b")])
    assert wire.decode_alter_config_errors(answer) == {
        "a": None, "b": "INVALID_CONFIG: Invalid value x for configuration retention.ms"}


def test_a_topic_config_answer_that_says_the_controller_was_not_reached_fails_the_whole_request():
    # (a refusal would be shown on the Topic as Kafka's word on its config; this says nothing of the config)
    with pytest.raises(wire.KafkaProtocolError, match="REQUEST_TIMED_OUT"):
        wire.decode_alter_config_errors(_alter_configs_answer([(0, None, "a"), (7, None, "b")]))


def test_a_preferred_election_names_each_topics_partitions_and_the_time_kafka_may_take():
    reader = wire.Reader(wire.encode_elect_preferred([("t", 2), ("s", 0), ("t", 0), ("t", 2)], 15000).bytes())
    assert reader.int8() == 0  # PREFERRED

    def topic(r: wire.Reader) -> tuple[str | None, list[int]]:
        name, partitions = r.compact_string(), r.compact_array(lambda p: p.int32())
        r.skip_tags()
        return name, partitions

    assert reader.compact_array(topic) == [("s", [0]), ("t", [0, 2])]
    assert reader.int32() == 15000


def test_an_election_answer_names_the_partitions_that_failed_and_not_those_already_led_by_their_first_replica():
    def partition(w: wire.Writer, row: tuple[int, int, str | None]) -> None:
        w.int32(row[0]).int16(row[1]).compact_string(row[2]).tags()

    def topic(w: wire.Writer, row: tuple[str, list[tuple[int, int, str | None]]]) -> None:
        w.compact_string(row[0]).compact_array(row[1], partition).tags()

    results = [("t", [(0, 0, None), (1, 84, "Leader election not needed"), (2, 80, "Not in sync")])]
    answer = wire.Writer().int32(0).int16(0).compact_array(results, topic).tags()
    assert wire.decode_elect_leaders(wire.Reader(answer.bytes())) == {
        ("t", 2): "PREFERRED_LEADER_NOT_AVAILABLE: Not in sync"}
    refused = wire.Writer().int32(0).int16(31).compact_array([], topic).tags()
    with pytest.raises(wire.KafkaProtocolError, match="ElectLeaders: CLUSTER_AUTHORIZATION_FAILED"):
        wire.decode_elect_leaders(wire.Reader(refused.bytes()))


def test_a_create_names_counts_for_kafka_to_place_or_the_replicas_placed_and_each_topics_config():
    topics = [wire.NewTopic("auto", 4, 3, {"retention.ms": "60000"}),
              wire.NewTopic("placed", replicas=((0, 1), (1, 2)), config={})]
    reader = wire.Reader(wire.encode_create_topics(topics, 15000, True).bytes())

    def assignment(r: wire.Reader) -> tuple[int, list[int]]:
        index, brokers = r.int32(), r.compact_array(lambda b: b.int32())
        r.skip_tags()
        return index, brokers

    def config(r: wire.Reader) -> tuple[str | None, str | None]:
        key, value = r.compact_string(), r.compact_string()
        r.skip_tags()
        return key, value

    def topic(r: wire.Reader) -> tuple[object, ...]:
        row = (r.compact_string(), r.int32(), r.int16(), r.compact_array(assignment), r.compact_array(config))
        r.skip_tags()
        return row

    assert reader.compact_array(topic) == [("auto", 4, 3, [], [("retention.ms", "60000")]),
                                           ("placed", -1, -1, [(0, [0, 1]), (1, [1, 2])], [])]
    assert (reader.int32(), reader.int8()) == (15000, 1)


def _created(w: wire.Writer, row: tuple[str, int, str | None]) -> None:
    w.compact_string(row[0]).parts.append(bytes(16))  # topic id
    w.int16(row[1]).compact_string(row[2]).int32(4).int16(3)
    w.compact_array([("cleanup.policy", "delete")], lambda c, kv: c.compact_string(kv[0]).compact_string(kv[1])
                    .int8(0).int8(5).int8(0).tags())
    w.tags()


def test_a_create_answer_gives_kafkas_refusal_per_topic_past_each_new_topics_config():
    rows = [("made", 0, None), ("taken", 36, "Topic 'taken' already exists.")]
    answer = wire.Writer().int32(0).compact_array(rows, _created).tags()
    assert wire.decode_create_topics(wire.Reader(answer.bytes())) == {
        "made": None, "taken": "TOPIC_ALREADY_EXISTS: Topic 'taken' already exists."}
    unanswered = wire.Writer().int32(0).compact_array([("made", 0, None), ("late", 7, None)], _created).tags()
    with pytest.raises(wire.KafkaProtocolError, match="CreateTopics: REQUEST_TIMED_OUT"):
        wire.decode_create_topics(wire.Reader(unanswered.bytes()))


def test_partitions_are_added_where_kafka_places_them_or_where_given():
    body = wire.encode_create_partitions({"b": 6, "a": 3}, {"a": ((2, 0),)}, 15000, False).bytes()
    reader = wire.Reader(body)

    def assignment(r: wire.Reader) -> list[int]:
        brokers = r.compact_array(lambda b: b.int32())
        r.skip_tags()
        return brokers

    def topic(r: wire.Reader) -> tuple[object, ...]:
        name, total = r.compact_string(), r.int32()
        placed = None if r.data[r.pos] == 0 else r.compact_array(assignment)  # (0: a null array)
        r.pos += placed is None
        r.skip_tags()
        return name, total, placed

    assert reader.compact_array(topic) == [("a", 3, [[2, 0]]), ("b", 6, None)]
    assert (reader.int32(), reader.int8()) == (15000, 0)


def test_deletes_and_partition_answers_give_kafkas_refusal_per_topic():
    assert wire.encode_delete_topics(["x"], 1000).bytes() == bytes([2, 2]) + b"x" + bytes([0, 0, 3, 0xE8, 0])

    def result(w: wire.Writer, row: tuple[str, int, str | None]) -> None:
        w.compact_string(row[0]).int16(row[1]).compact_string(row[2]).tags()

    rows = [("gone", 0, None), ("never", 3, "This server does not host this topic-partition.")]
    answer = wire.Writer().int32(0).compact_array(rows, result).tags().bytes()
    expected = {"gone": None, "never": "UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition."}
    assert wire.decode_delete_topics(wire.Reader(answer)) == expected
    assert wire.decode_create_partitions(wire.Reader(answer)) == expected


def test_every_acl_is_asked_for_with_filters_of_any():
    # resource type ANY, no name, pattern ANY, no principal, no host, operation ANY, permission ANY, no tags
    assert wire.encode_describe_every_acl().bytes() == bytes([1, 0, 1, 0, 0, 1, 1, 0])


def test_acls_are_read_back_per_resource_and_made_and_deleted_as_exact_bindings():
    alice = wire.AclEntry(2, "orders", 4, "User:alice", "*", 4, 3)
    bob = wire.AclEntry(2, "orders", 4, "User:bob", "10.0.0.1", 3, 2)

    def acl(w: wire.Writer, e: wire.AclEntry) -> None:
        w.compact_string(e.principal).compact_string(e.host).int8(e.operation).int8(e.permission).tags()

    def resource(w: wire.Writer, entries: list[wire.AclEntry]) -> None:
        w.int8(entries[0].resource_type).compact_string(entries[0].name).int8(entries[0].pattern)
        w.compact_array(entries, acl).tags()

    answer = wire.Writer().int32(0).int16(0).compact_string(None).compact_array([[alice, bob]], resource).tags()
    assert wire.decode_describe_acls(wire.Reader(answer.bytes())) == [alice, bob]
    unsecured = wire.Writer().int32(0).int16(54).compact_string("No Authorizer is configured on the broker")
    assert wire.decode_describe_acls(wire.Reader(unsecured.compact_array([], resource).tags().bytes())) == []
    body = wire.encode_create_acls([alice]).bytes()
    assert body == bytes([2, 2, 7]) + b"orders" + bytes([4, 11]) + b"User:alice" + bytes([2]) + b"*" + \
        bytes([4, 3, 0, 0])
    assert wire.encode_delete_acls([alice]).bytes() == body


def test_acl_answers_give_kafkas_refusal_of_each_in_order():
    def result(w: wire.Writer, row: tuple[int, str | None]) -> None:
        w.int16(row[0]).compact_string(row[1]).tags()

    created = wire.Writer().int32(0).compact_array([(0, None), (40, "bad host")], result).tags()
    assert wire.decode_create_acls(wire.Reader(created.bytes())) == [None, "INVALID_CONFIG: bad host"]

    def matching(w: wire.Writer, row: tuple[int, str | None]) -> None:
        w.int16(row[0]).compact_string(row[1]).int8(2).compact_string("t").int8(3).compact_string("User:a")
        w.compact_string("*").int8(3).int8(3).tags()

    def filtered(w: wire.Writer, row: tuple[int, list[tuple[int, str | None]]]) -> None:
        w.int16(row[0]).compact_string(None).compact_array(row[1], matching).tags()

    rows = [(0, [(0, None)]), (0, []), (0, [(31, "not allowed")])]
    deleted = wire.Writer().int32(0).compact_array(rows, filtered).tags()
    assert wire.decode_delete_acls(wire.Reader(deleted.bytes())) == [None, None, "CLUSTER_AUTHORIZATION_FAILED: "
                                                                     "not allowed"]


def test_scram_credentials_are_read_per_user_and_set_salted_with_sha_512():
    def info(w: wire.Writer, mechanism: int) -> None:
        w.int8(mechanism).int32(8192).tags()

    def result(w: wire.Writer, row: tuple[str, int, list[int]]) -> None:
        w.compact_string(row[0]).int16(row[1]).compact_string(None).compact_array(row[2], info).tags()

    rows = [("carol", 0, [1, 2]), ("dan", 0, [1]), ("gone", 91, [])]
    answer = wire.Writer().int32(0).int16(0).compact_string(None).compact_array(rows, result).tags()
    assert wire.decode_describe_scram_users(wire.Reader(answer.bytes())) == {
        "carol": frozenset({1, 2}), "dan": frozenset({1})}
    upsert = wire.ScramUpsert("carol", 4096, b"salt", b"salted")
    body = wire.encode_alter_scram([upsert], ["dan"]).bytes()
    assert body == bytes([2, 4]) + b"dan" + bytes([2, 0, 2, 6]) + b"carol" + bytes([2, 0, 0, 16, 0, 5]) + \
        b"salt" + bytes([7]) + b"salted" + bytes([0, 0])


def test_the_salted_password_is_rfc_5802s_hi_over_hmac_sha_512():
    # Hi(p, s, i) = U1 ^ ... ^ Ui, U1 = HMAC(p, s + INT(1)), Uk = HMAC(p, Uk-1): what the broker keeps
    u = hmac.new(b"pencil", b"salt" + (1).to_bytes(4, "big"), hashlib.sha512).digest()
    hi = u
    for _ in range(2):
        u = hmac.new(b"pencil", u, hashlib.sha512).digest()
        hi = bytes(a ^ b for a, b in zip(hi, u, strict=True))
    assert wire.salted_password("pencil", b"salt", 3) == hi


def test_list_groups_asks_for_every_group_whatever_its_state_and_type():
    assert wire.encode_list_groups().bytes() == bytes([1, 1, 0])  # empty states and types filters, no tags


def test_list_groups_answer_names_the_groups_with_their_types_or_raises_the_brokers_error():
    def group(w: wire.Writer, row: tuple[str, str, str, str]) -> None:
        w.compact_string(row[0]).compact_string(row[1]).compact_string(row[2]).compact_string(row[3]).tags()

    rows = [("orders", "consumer", "Stable", "Consumer"), ("offsets-only", "", "Empty", "Classic"),
            ("pickers", "share", "Stable", "Share")]
    body = wire.Writer().int32(0).int16(0).compact_array(rows, group).tags()
    assert wire.decode_list_groups(wire.Reader(body.bytes())) == {
        "orders": "consumer", "offsets-only": "classic", "pickers": wire.SHARE_GROUP}
    refused = wire.Writer().int32(0).int16(15).compact_array([], group).tags()
    with pytest.raises(wire.KafkaProtocolError, match="COORDINATOR_NOT_AVAILABLE"):
        wire.decode_list_groups(wire.Reader(refused.bytes()))


def test_a_share_groups_start_offsets_are_its_positions_and_kafkas_own_lag_is_kept():
    # Given a DescribeShareGroupOffsets v1 answer: one partition started with the lag Kafka counts, one started
    # whose lag the coordinator cannot count now (-1), one not started yet (-1), one that errs, and a group the
    # coordinator does not know
    def partition(w: wire.Writer, row: tuple[int, int, int, int]) -> None:
        w.int32(row[0]).int64(row[1]).int32(0).int64(row[2]).int16(row[3]).compact_string(None).tags()

    def topic(w: wire.Writer, name: str) -> None:
        w.compact_string(name).uuid("AAAAAAAAAAAAAAAAAAAAAA").compact_array(
            [(0, 40, 6, 0), (3, 10, -1, 0), (1, -1, -1, 0), (2, 0, 0, 3)], partition).tags()

    def group(w: wire.Writer, row: tuple[str, list[str], int]) -> None:
        w.compact_string(row[0]).compact_array(row[1], topic).int16(row[2]).compact_string(None).tags()

    body = wire.Writer().int32(0).compact_array([("pickers", ["orders"], 0), ("gone", [], 69)], group).tags()
    # Then each started partition's start offset is the group's position, and the errors are said
    found = wire.decode_describe_share_group_offsets(wire.Reader(body.bytes()))
    assert found == {"pickers": wire.GroupOffsets({("orders", 0): 40, ("orders", 3): 10, ("orders", 2): None},
                                                  lags={("orders", 0): 6}),
                     "gone": wire.GroupOffsets({}, "GROUP_ID_NOT_FOUND")}
    # And the request asks for every topic of each group (topics null)
    assert wire.encode_describe_share_group_offsets(["pickers"]).bytes() == \
        bytes([2, 8]) + b"pickers" + bytes([0, 0, 0])


def test_describe_topic_partitions_asks_for_every_topic_a_page_at_a_time():
    # An empty topic list (every topic), a page of 2,000 partitions, no cursor (-1) or the one given, no tags
    assert wire.encode_describe_topic_partitions().bytes() == bytes([1, 0, 0, 7, 208, 255, 0])
    assert wire.encode_describe_topic_partitions(("orders", 4)).bytes() == \
        bytes([1, 0, 0, 7, 208, 1, 7]) + b"orders" + bytes([0, 0, 0, 4, 0, 0])


def test_describe_topic_partitions_answer_keeps_the_partitions_with_eligible_leaders_and_the_next_cursor():
    ints = wire.Writer.int32

    def partition(w: wire.Writer, row: tuple[int, int, tuple[int, ...], tuple[int, ...]]) -> None:
        code, index, isr, elr = row
        w.int16(code).int32(index).int32(-1).int32(3).compact_array([1, 2], ints).compact_array(list(isr), ints)
        w.compact_array(list(elr) or None, ints).compact_array([2], ints).compact_array([], ints).tags()

    def topic(w: wire.Writer, row: tuple[int, str, list[tuple[int, int, tuple[int, ...], tuple[int, ...]]]]) -> None:
        w.int16(row[0]).compact_string(row[1]).uuid("AAAAAAAAAAAAAAAAAAAAAA").int8(0)
        w.compact_array(row[2], partition).int32(-2147483648).tags()

    topics = [(0, "orders", [(0, 0, (), (1, 2)), (0, 1, (1, 2), ()), (9, 2, (), (1,))]),
              (3, "gone", [(0, 0, (), (1,))])]
    body = wire.Writer().int32(0).compact_array(topics, topic).int8(1).compact_string("payments").int32(7)
    page = wire.decode_describe_topic_partitions(wire.Reader(body.tags().tags().bytes()))
    # Only partitions with eligible leader replicas, none of a partition or topic that erred
    assert page == wire.EligiblePage({("orders", 0): (1, 2)}, ("payments", 7))
    last = wire.Writer().int32(0).compact_array([], topic).int8(-1).tags()
    assert wire.decode_describe_topic_partitions(wire.Reader(last.bytes())).next_cursor is None


def test_find_coordinators_asks_for_every_group_in_one_request():
    assert wire.encode_find_coordinators(["a", "bc"]).bytes() == bytes([0, 3, 2]) + b"a" + bytes([3]) + b"bc" + b"\x00"


def test_find_coordinators_answer_names_each_groups_broker_or_why_not():
    def coordinator(w: wire.Writer, row: tuple[str, int, str, int, int]) -> None:
        w.compact_string(row[0]).int32(row[1]).compact_string(row[2]).int32(row[3]).int16(row[4])
        w.compact_string(None).tags()

    body = wire.Writer().int32(0).compact_array([("a", 2, "b-2", 9092, 0), ("c", -1, "", -1, 15)], coordinator)
    found = wire.decode_find_coordinators(wire.Reader(body.tags().bytes()))
    assert found == {"a": wire.Coordinator(2, "b-2", 9092),
                     "c": wire.Coordinator(-1, "", -1, "COORDINATOR_NOT_AVAILABLE")}


def test_offset_fetch_asks_each_group_for_every_committed_partition():
    # topics null (0): the group answers with what it committed, nothing else; require_stable false
    body = wire.encode_offset_fetch(["g1", "g2"]).bytes()
    assert body == bytes([3, 3]) + b"g1" + bytes([0, 0, 3]) + b"g2" + bytes([0, 0, 0, 0])


def test_offset_fetch_answer_keeps_committed_offsets_and_marks_failed_ones():
    def partition(w: wire.Writer, row: tuple[int, int, int]) -> None:
        w.int32(row[0]).parts.append(row[1].to_bytes(8, "big", signed=True))
        w.int32(-1).compact_string(None).int16(row[2]).tags()

    def group(w: wire.Writer, row: tuple[str, list[tuple[int, int, int]], int]) -> None:
        w.compact_string(row[0])
        w.compact_array([row[1]] if row[1] else [], lambda t, parts: t.compact_string("t").compact_array(
            parts, partition).tags())
        w.int16(row[2]).tags()

    rows = [("g1", [(0, 42, 0), (1, -1, 0), (2, -1, 3)], 0), ("g2", [], 16)]
    found = wire.decode_offset_fetch(wire.Reader(wire.Writer().int32(0).compact_array(rows, group).tags().bytes()))
    # partition 1 was never committed (-1): left out; partition 2 failed: unknown
    assert found == {"g1": wire.GroupOffsets({("t", 0): 42, ("t", 2): None}),
                     "g2": wire.GroupOffsets({}, "NOT_COORDINATOR")}


def test_describe_log_dirs_asks_for_the_directories_without_any_partition():
    # topics: an empty compact array (1), not null (0), which would list every partition's size
    assert wire.encode_describe_log_dirs().bytes() == bytes([1, 0])


def test_describe_log_dirs_answer_gives_each_directorys_volume_and_whether_it_is_online():
    def int64(w: wire.Writer, value: int) -> wire.Writer:
        w.parts.append(value.to_bytes(8, "big", signed=True))
        return w

    def topic(w: wire.Writer, name: str) -> None:
        w.compact_string(name).compact_array([0], lambda p, i: int64(int64(p.int32(i), 1024), 0).int8(0).tags())
        w.tags()

    def result(w: wire.Writer, row: tuple[int, str, list[str], int, int]) -> None:
        w.int16(row[0]).compact_string(row[1]).compact_array(row[2], topic)
        int64(int64(w, row[3]), row[4]).tags()

    rows = [(0, "/var/lib/kafka/data", ["t"], 2 * 2**30, 2**29), (56, "/mnt/bad", [], -1, -1)]
    body = wire.Writer().int32(0).int16(0).compact_array(rows, result).tags()
    assert wire.decode_describe_log_dirs(wire.Reader(body.bytes())) == (
        wire.LogDir("/var/lib/kafka/data", 2 * 2**30, 2**29), wire.LogDir("/mnt/bad", -1, -1, "KAFKA_STORAGE_ERROR"))
    assert [d.online for d in wire.decode_describe_log_dirs(wire.Reader(body.bytes()))] == [True, False]


def test_metadata_asks_for_every_topic_without_creating_any():
    # topics null (0), allow auto creation false, no authorized operations, no tags
    assert wire.encode_metadata().bytes() == bytes([0, 0, 0, 0])


def test_metadata_asks_for_named_topics_by_name_alone():
    # two topics: each a zero topic id, its name and no tags; then the same three fields as above
    assert wire.encode_metadata(["ab", "c"]).bytes() == bytes(
        [3, *[0] * 16, 3, *b"ab", 0, *[0] * 16, 2, *b"c", 0, 0, 0, 0])


def _metadata_topic(w: wire.Writer, row: tuple[int, str, list[tuple[int, int, list[int], list[int]]]]) -> None:
    code, name, partitions = row

    def ints(p: wire.Writer, values: list[int]) -> None:
        p.compact_array(values, lambda q, v: q.int32(v))

    def partition(p: wire.Writer, part: tuple[int, int, list[int], list[int]]) -> None:
        p.int16(0).int32(part[0]).int32(part[1]).int32(7)
        ints(p, part[2])
        ints(p, part[3])
        ints(p, [])
        p.tags()

    w.int16(code).compact_string(name).uuid("AAAAAAAAAAAAAAAAAAAAAQ").int8(0)
    w.compact_array(partitions, partition).int32(-2147483648).tags()


def test_metadata_answer_gives_each_topics_partitions_in_order_and_leaves_out_failed_topics():
    brokers = [(1, "b1", 9092, "zone-a"), (2, "b2", 9092, None)]
    topics = [(0, "orders", [(1, 2, [2, 1], [2]), (0, -1, [1, 2], [])]), (3, "gone", [])]
    body = (wire.Writer().int32(0)
            .compact_array(brokers, lambda w, b: w.int32(b[0]).compact_string(b[1]).int32(b[2])
                           .compact_string(b[3]).tags())
            .compact_string("cluster").int32(1).compact_array(topics, _metadata_topic).tags())
    partitions = (wire.PartitionMetadata(0, -1, (1, 2), ()), wire.PartitionMetadata(1, 2, (2, 1), (2,)))
    assert wire.decode_metadata(wire.Reader(body.bytes())) == {
        "orders": wire.TopicMetadata("AAAAAAAAAAAAAAAAAAAAAQ", partitions)}


def test_describe_topic_configs_asks_for_every_key_without_synonyms_or_documentation():
    assert wire.encode_describe_topic_configs(["a"]).bytes() == bytes([2, 2, 2, ord("a"), 0, 0, 0, 0, 0])


def test_describe_topic_configs_asks_for_the_keys_given_only():
    assert wire.encode_describe_topic_configs(["a"], ["ab", "c"]).bytes() == bytes(
        [2, 2, 2, ord("a"), 3, 3, ord("a"), ord("b"), 2, ord("c"), 0, 0, 0, 0])


Entry = tuple[str, str | None, int, list[tuple[str, str, int]]]  # name, value, source, synonyms


def _config_result(w: wire.Writer, row: tuple[int, str, list[Entry]]) -> None:
    code, name, entries = row

    def entry(e: wire.Writer, item: Entry) -> None:
        e.compact_string(item[0]).compact_string(item[1]).int8(0).int8(item[2]).int8(0)
        e.compact_array(item[3], lambda s, syn: s.compact_string(syn[0]).compact_string(syn[1]).int8(syn[2]).tags())
        if item[3]:  # (with synonyms: documentation and one unknown tagged field too, all skipped)
            e.int8(2).compact_string("what it does " * 20)
            e.uvarint(1).uvarint(0).uvarint(2).parts.append(b"xy")
        else:  # as asked for: a type, no documentation, no tagged fields
            e.int8(2).compact_string(None).tags()

    w.int16(code).compact_string("refused" if code else None).int8(2).compact_string(name)
    w.compact_array(entries, entry).tags()


def test_describe_topic_configs_answer_keeps_the_topics_own_configs_and_its_effective_min_isr():
    long_value = "x" * 300  # a length of two varint bytes
    rows = [
        (0, "orders", [("cleanup.policy", "compact", 1, []), ("min.insync.replicas", "2", 5, []),
                       ("retention.ms", long_value, 1, [("retention.ms", long_value, 1), ("log.retention.ms", "1", 4)]),
                       ("segment.bytes", "1073741824", 5, []), ("sensitive", None, 1, [])]),
        (0, "defaults", [("min.insync.replicas", "1", 5, [])]),
        (3, "just-deleted", []),
    ]
    body = wire.Writer().int32(0).compact_array(rows, _config_result).tags()
    reader = wire.Reader(body.bytes())
    assert wire.decode_describe_topic_configs(reader) == {
        "orders": wire.TopicConfig({"cleanup.policy": "compact", "retention.ms": long_value}, 2),
        "defaults": wire.TopicConfig({}, 1)}
    assert reader.pos == len(reader.data)


def test_describe_cluster_defaults_asks_for_the_default_broker_resource():
    assert wire.encode_describe_cluster_defaults().bytes() == bytes([2, 4, 1, 0, 0, 0, 0, 0])


def test_describe_cluster_defaults_answer_keeps_what_is_set_for_every_broker():
    rows = [(0, "", [("min.insync.replicas", "2", 3, []), ("log.retention.ms", "3600000", 3, []),
                     ("num.io.threads", "8", 5, []), ("secret.password", None, 3, [])])]
    body = wire.Writer().int32(0).compact_array(rows, _config_result).tags()
    assert wire.decode_describe_cluster_defaults(wire.Reader(body.bytes())) == {
        "min.insync.replicas": "2", "log.retention.ms": "3600000"}


def test_describe_cluster_defaults_answer_raises_an_error_or_a_missing_resource():
    refused = wire.Writer().int32(0).compact_array([(31, "", [])], _config_result).tags()
    refusal = "DescribeConfigs of the cluster defaults: CLUSTER_AUTHORIZATION_FAILED: refused"
    with pytest.raises(wire.KafkaProtocolError, match=refusal):
        wire.decode_describe_cluster_defaults(wire.Reader(refused.bytes()))
    empty = wire.Writer().int32(0).compact_array([], _config_result).tags()
    with pytest.raises(wire.KafkaProtocolError, match="leaves out the cluster defaults"):
        wire.decode_describe_cluster_defaults(wire.Reader(empty.bytes()))


def test_describe_topic_configs_answer_raises_any_error_but_an_unknown_topic():
    body = wire.Writer().int32(0).compact_array([(29, "secret", [])], _config_result).tags()
    with pytest.raises(wire.KafkaProtocolError, match="DescribeConfigs of secret: TOPIC_AUTHORIZATION_FAILED: refused"):
        wire.decode_describe_topic_configs(wire.Reader(body.bytes()))


def test_describe_topic_values_answer_keeps_the_values_in_effect_wherever_they_are_set():
    rows = [(0, "orders", [("cleanup.policy", "compact,delete", 1, []), ("retention.ms", "604800000", 5, [])]),
            (0, "logs", [("cleanup.policy", "delete", 5, []), ("retention.ms", "3600000", 3, [])]),
            (3, "just-deleted", [])]
    body = wire.Writer().int32(0).compact_array(rows, _config_result).tags()
    assert wire.decode_describe_topic_values(wire.Reader(body.bytes())) == {
        "orders": {"cleanup.policy": "compact,delete", "retention.ms": "604800000"},
        "logs": {"cleanup.policy": "delete", "retention.ms": "3600000"}}


def test_list_offsets_asks_each_partition_once_by_topic_with_no_leader_epoch():
    body = wire.encode_list_offsets([("b", 1), ("a", 0), ("b", 0)], wire.LATEST).bytes()
    partition = b"".join(i.to_bytes(4, "big") + (-1).to_bytes(4, "big", signed=True)
                         + (-1).to_bytes(8, "big", signed=True) + bytes([0]) for i in (1, 0))
    # replica id -1 (a client), read uncommitted, topics by name in order, each partition: index, epoch -1, time
    assert body == ((-1).to_bytes(4, "big", signed=True) + bytes([0, 3, 2]) + b"a" + bytes([2])
                    + (0).to_bytes(4, "big") + (-1).to_bytes(4, "big", signed=True)
                    + (-1).to_bytes(8, "big", signed=True) + bytes([0, 0, 2]) + b"b" + bytes([3]) + partition
                    + bytes([0, 0]))


def test_list_offsets_answer_gives_each_partitions_offset_or_kafkas_error():
    def partition(w: wire.Writer, row: tuple[int, int, int]) -> None:
        w.int32(row[0]).int16(row[1]).int64(-1).int64(row[2]).int32(7).tags()

    topics = [("t", [(0, 0, 42), (1, 6, -1)])]
    body = wire.Writer().int32(0).compact_array(
        topics, lambda w, t: w.compact_string(t[0]).compact_array(t[1], partition).tags()).tags()
    reader = wire.Reader(body.bytes())
    assert wire.decode_list_offsets(reader) == {("t", 0): 42, ("t", 1): "NOT_LEADER_OR_FOLLOWER"}
    assert reader.pos == len(reader.data)


def test_an_api_versions_answer_gives_each_finalized_level_and_each_supported_range():
    # Given an ApiVersions v3 answer as Kafka 4 sends it: its APIs, then tagged fields (supported features,
    # the finalized epoch, finalized features) in tag order, one of them a tag this client does not know
    def feature(w: wire.Writer, item: tuple[str, int, int]) -> None:
        w.compact_string(item[0]).int16(item[1]).int16(item[2]).tags()

    supported = wire.Writer().compact_array([("metadata.version", 7, 29), ("share.version", 0, 1),
                                             ("kraft.version", 0, 1)], feature).bytes()
    epoch = wire.Writer().int64(12).bytes()
    finalized = wire.Writer().compact_array([("metadata.version", 27, 27), ("kraft.version", 1, 1)],
                                            feature).bytes()  # (max level, then min level)
    answer = wire.Writer().int16(0).compact_array([(18, 0, 4)], lambda w, api: w.int16(api[0]).int16(api[1])
                                                  .int16(api[2]).tags()).int32(0).uvarint(4)
    for tag, field in ((0, supported), (1, epoch), (2, finalized), (3, b"\x01")):
        answer.uvarint(tag).uvarint(len(field))
        answer.parts.append(field)
    # When it is read, Then every finalized level and every supported range is there; a feature supported but
    # not finalized (share.version) has no level
    levels, ranges = wire.decode_features(wire.Reader(answer.bytes()))
    assert levels == {"metadata.version": 27, "kraft.version": 1}
    assert ranges == {"metadata.version": (7, 29), "share.version": (0, 1), "kraft.version": (0, 1)}


def test_a_share_groups_members_give_the_topics_it_reads():
    # Given a ShareGroupDescribe answer: a group of two members assigned partitions of two topics, one unknown
    def assigned(w: wire.Writer, row: tuple[str, list[int]]) -> None:
        w.uuid("AAAAAAAAAAAAAAAAAAAAAA").compact_string(row[0]).compact_array(row[1], wire.Writer.int32).tags()

    def member(w: wire.Writer, topics: list[tuple[str, list[int]]]) -> None:
        w.compact_string("m").compact_string(None).int32(3).compact_string("c").compact_string("/10.0.0.1")
        w.compact_array([t for t, _ in topics], wire.Writer.compact_string).compact_array(topics, assigned).tags()
        w.tags()

    def group(w: wire.Writer, row: tuple[int, str, list[list[tuple[str, list[int]]]]]) -> None:
        w.int16(row[0]).compact_string(None).compact_string(row[1]).compact_string("Stable").int32(5).int32(5)
        w.compact_string("simple").compact_array(row[2], member).int32(-2147483648).tags()

    body = wire.Writer().int32(0).compact_array([
        (0, "pickers", [[("orders", [0, 1])], [("orders", [2]), ("returns", [0])]]), (69, "gone", [])], group).tags()
    # Then each group's topics are those of its members' assignments, and an error is said
    assert wire.decode_share_group_describe(wire.Reader(body.bytes())) == {
        "pickers": wire.GroupReaders(frozenset({"orders", "returns"})),
        "gone": wire.GroupReaders(frozenset(), "GROUP_ID_NOT_FOUND")}
    assert wire.encode_group_describe(["pickers"]).bytes() == bytes([2, 8]) + b"pickers" + bytes([0, 0])


def test_a_streams_groups_readers_are_the_source_topics_of_the_subtopologies_its_members_run():
    # Given a StreamsGroupDescribe answer: subtopology 0 reads "clicks", subtopology 1 its repartition topic; one
    # member runs tasks of 0 (and stands by for 1), a member of a group not initialized yet, and a group not found
    ints, strings = wire.Writer.int32, wire.Writer.compact_string

    def key_value(w: wire.Writer, item: tuple[str, str]) -> None:
        w.compact_string(item[0]).compact_string(item[1]).tags()

    def topic_info(w: wire.Writer, name: str) -> None:
        w.compact_string(name).int32(0).int16(0).compact_array([("cleanup.policy", "delete")], key_value).tags()

    def subtopology(w: wire.Writer, row: tuple[str, list[str], list[str]]) -> None:
        w.compact_string(row[0]).compact_array(row[1], strings).compact_array(["app-repartition"], strings)
        w.compact_array(["app-changelog"], topic_info).compact_array(row[2], topic_info).tags()

    def tasks(w: wire.Writer, row: tuple[str, list[int]]) -> None:
        w.compact_string(row[0]).compact_array(row[1], ints).tags()

    def assignment(w: wire.Writer, active: list[tuple[str, list[int]]], standby: list[tuple[str, list[int]]]) -> None:
        w.compact_array(active, tasks).compact_array(standby, tasks).compact_array([], tasks).tags()

    def task_offset(w: wire.Writer, row: tuple[str, int, int]) -> None:
        w.compact_string(row[0]).int32(row[1]).int64(row[2]).tags()

    def member(w: wire.Writer, row: tuple[list[tuple[str, list[int]]], list[tuple[str, list[int]]]]) -> None:
        w.compact_string("m1").int32(3).compact_string(None).compact_string("zone-a").compact_string("app-1")
        w.compact_string("/10.0.0.1").int32(1).compact_string("process-1")
        w.int8(1).compact_string("app-1.svc").uint16(8080).tags()  # user endpoint
        w.compact_array([("zone", "a")], key_value).compact_array([("0", 0, 40)], task_offset)
        w.compact_array([("0", 0, 50)], task_offset)
        assignment(w, *row)
        assignment(w, *row)
        w.int8(0).tags()  # not classic

    def group(w: wire.Writer, row: tuple[int, str, bool, list[Any]]) -> None:
        code, name, initialized, members = row
        w.int16(code).compact_string(None).compact_string(name).compact_string("Stable").int32(4).int32(4)
        if initialized:
            w.int8(1).int32(1).compact_array([("0", ["clicks"], []), ("1", [], ["app-repartition"])],
                                             subtopology).tags()
        else:
            w.int8(-1)
        w.compact_array(members, member).int32(-2147483648).tags()

    body = wire.Writer().int32(0).compact_array([
        (0, "app", True, [([("0", [0, 1])], [("1", [0])])]),
        (0, "starting", False, [([("0", [0])], [])]),
        (69, "gone", False, [])], group).tags()
    # Then the group reads the source topics of the subtopologies with active tasks (not those it stands by for)
    assert wire.decode_streams_group_describe(wire.Reader(body.bytes())) == {
        "app": wire.GroupReaders(frozenset({"clicks"})),
        "starting": wire.GroupReaders(frozenset()),
        "gone": wire.GroupReaders(frozenset(), "GROUP_ID_NOT_FOUND")}
