"""The operator's Kafka clients against real brokers, checked against Kafka's own tools."""

from __future__ import annotations

import gc
import os
import re
import signal
import subprocess
import threading
import time
import weakref
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from prometheus_client import REGISTRY

from krafty import wire
from krafty.clients import kraft, kraft_transport
from krafty.clients.canary import Canary, CanarySettings
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kafka_admin import IDLE_AFTER, AdminPool, KafkaAdmin, admin_config
from krafty.clients.lag import LagReader
from krafty.decide.lag import partition_lag
from krafty.model import versions
from krafty.naming import CANARY_TOPIC, THROTTLED_REPLICAS_KEYS
from krafty.wire import KafkaProtocolError
from krafty_testkit import kafka_admin, kafka_dist, streams_app
from krafty_testkit.kafka_proxy import OVERSTATED, KafkaProxy
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.procfs import librdkafka_threads
from krafty_testkit.resolver import Resolver
from krafty_testkit.traffic import client_config
from krafty_testkit.waiting import wait_for

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}  # a librdkafka handle that reaches no broker


def test_calls_to_a_broker_share_a_kept_connection_and_one_the_broker_closed_is_replaced(
        cluster: LocalKafkaCluster, tmp_path: Path):
    # Given a broker behind a name (as a pod's DNS name) served by a real DNS server, through a proxy that counts
    # connections, and the wire client in a process resolving through that server
    proxy = KafkaProxy(cluster.brokers[0].broker_port)
    registered = sorted(b.node_id for b in kraft.describe_brokers(cluster.bootstrap_servers))
    describe = f"sorted(b.node_id for b in kraft.describe_brokers('broker-0.brokers:{proxy.port}'))"
    try:
        with Resolver(tmp_path, {"broker-0.brokers": ["127.0.0.1"]}) as dns, dns.python() as client:
            # When it asks five times: one connection, one name lookup (each call used to cost both, and a TLS
            # handshake on both sides)
            for _ in range(5):
                assert client.eval(describe) == registered
            assert (proxy.accepted, dns.lookups("broker-0.brokers")) == (1, 1)
            # The broker closed it meanwhile: the next call looks the name up and connects again, and fails nothing
            proxy.close_connections()
            assert client.eval(describe) == registered
            assert (proxy.accepted, dns.lookups("broker-0.brokers")) == (2, 2)
            # It hangs up on the request a kept connection carries: the request goes again on a new one
            proxy.hang_up_on_next_request()
            assert client.eval(describe) == registered
            assert proxy.accepted == 3
    finally:
        proxy.close()


def test_an_answer_longer_than_the_cap_fails_the_call_unread(cluster: LocalKafkaCluster):
    # Given a real broker's DescribeCluster answer (three brokers and the cluster id), read whole under the cap
    proxy = KafkaProxy(cluster.brokers[0].broker_port)
    try:
        brokers = kraft.describe_brokers(proxy.address)
        assert len(brokers) == 3
        # When the server's answers claim more bytes than the cap (as a broken or hostile server's frame would)
        proxy.overstate_answers()
        # Then the call fails as Kafka unavailable, naming the length, and nothing was read into memory
        cap = kraft_transport.MAX_RESPONSE_BYTES
        with pytest.raises(KafkaUnavailable, match=rf"DescribeCluster: no server answered: .*an answer of "
                                                   rf"{OVERSTATED:,} bytes, over the {cap:,}"):
            kraft.describe_brokers(proxy.address)
        # And once the server answers truly, the next call is answered (no connection was kept half read)
        proxy.overstate_answers(False)
        assert kraft.describe_brokers(proxy.address) == brokers
    finally:
        proxy.close()


@pytest.fixture(scope="module")
def cluster(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.dedicated(3, 3))


def test_describe_quorum_agrees_with_kafka_metadata_quorum(cluster: LocalKafkaCluster):
    # Given the quorum as our wire client reads it from the controllers
    ours = kraft.describe_quorum(cluster.controller_bootstrap_servers)
    # When Kafka's own tool describes it through the brokers
    tool = cluster.tool("kafka-metadata-quorum.sh", "--bootstrap-server", cluster.bootstrap_servers,
                        "describe", "--status").stdout
    # Then both name the same leader and the same voters
    assert f"LeaderId:               {ours.leader_id}" in tool
    voters = re.search(r"CurrentVoters:\s+\[(.*)\]", tool)
    assert voters is not None
    assert {int(v) for v in re.findall(r'"id":\s*(\d+)', voters.group(1))} == ours.voter_ids() == {1000, 1001, 1002}
    # And the brokers answer it too (they forward it to the controller)
    assert kraft.describe_quorum(cluster.bootstrap_servers).leader_id == ours.leader_id


def test_partitions_carry_their_topics_min_isr_and_throttled_topics_are_seen(cluster: LocalKafkaCluster):
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers))
    kafka_admin.create_topic(cluster.admin(), "clients-a", 3, 3, **{"min.insync.replicas": "2"})
    kafka_admin.create_topic(cluster.admin(), "clients-b", 2, 1, **{"leader.replication.throttled.replicas": "*"})
    kafka_admin.wait_fully_in_sync(cluster.admin(), "clients-a")
    kafka_admin.wait_fully_in_sync(cluster.admin(), "clients-b")
    # (a fresh client may see a new topic's metadata, and the broker it asks its configs, a moment later
    # than the one that created it)
    partitions, throttled = wait_for(admin.topic_state, lambda found: {"clients-a-2", "clients-b-1"} <= {
        p.name for p in found[0]} and "clients-b" in found[1], 30, "both topics and their configs")
    by_name = {p.name: p for p in partitions}
    assert by_name["clients-a-0"].min_isr == 2
    assert by_name["clients-b-1"].min_isr == 1
    assert len(by_name["clients-a-2"].isr) == 3
    assert throttled == frozenset({"clients-b"})
    assert admin.registered_brokers() == {0, 1, 2}
    # And a read of some keys brings those only (the cluster pass reads min.insync.replicas and the throttles)
    only_min_isr = kraft.topic_configs(cluster.bootstrap_servers, ["clients-a", "clients-b"],
                                       keys=["min.insync.replicas"])
    assert {name: (c.overrides, c.min_isr) for name, c in only_min_isr.items()} == {
        "clients-a": ({"min.insync.replicas": "2"}, 2), "clients-b": ({}, 1)}


def test_describe_brokers_sees_fenced_brokers_that_describe_cluster_leaves_out(cluster: LocalKafkaCluster):
    # Given every broker up, the wire client's DescribeCluster (v2) lists them as Kafka's tool does
    brokers = kraft.describe_brokers(cluster.bootstrap_servers)
    assert {(b.node_id, b.fenced) for b in brokers} == {(0, False), (1, False), (2, False)}
    tool = cluster.tool("kafka-cluster.sh", "list-endpoints", "--bootstrap-server", cluster.bootstrap_servers).stdout
    assert {int(i) for i in re.findall(r"^(\d+)\s", tool, re.M)} == {0, 1, 2}
    # When a broker stops, Then it is still registered, fenced (librdkafka's describe_cluster drops it)
    cluster.stop_node(1)
    try:
        fenced = wait_for(lambda: kraft.describe_brokers(cluster.running_bootstrap_servers),
                          lambda found: (1, True) in {(b.node_id, b.fenced) for b in found}, 60, "broker 1 fenced")
        assert {b.node_id for b in fenced} == {0, 1, 2}
        assert KafkaAdmin(Connection(cluster.running_bootstrap_servers)).registered_brokers() == {0, 2}
    finally:
        cluster.start_node(1)
        cluster.wait_ready()


def test_a_stuck_handle_is_replaced_though_reads_through_the_wire_client_succeed_beside_it(
        cluster: LocalKafkaCluster):
    # Given a client whose first librdkafka handle cannot reach any broker (the next one made as the operator's)
    handles = iter([UNREACHABLE, None])
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers), timeout=2.0, recycle_after=1.0,
                       handle=lambda reach: AdminClient(next(handles) or admin_config(reach, "krafty-operator")))
    # When a call through it has no answer, Then it fails
    with pytest.raises(KafkaUnavailable):
        admin.groups_reading({"stuck"})
    # And while the pass's calls through the wire client succeed
    assert admin.create_topics([("stuck", 1, 1, {})]) == {"stuck": None}
    time.sleep(1.0)
    with pytest.raises(KafkaUnavailable):
        admin.groups_reading({"stuck"})
    # Then the handle, failing for longer than its bound, has been replaced and the call answered
    assert admin.groups_reading({"stuck"}) == {"stuck": []}


def test_a_client_whose_calls_go_through_the_wire_client_keeps_no_librdkafka_handle(cluster: LocalKafkaCluster):
    # Given a pass's client, When it makes the calls the cluster and topic passes make while nothing changes,
    # those of the cluster pass around replica moves (throttles, preferred leaders)
    kafka_admin.create_topic(cluster.admin(), "calm", 1, 1)
    now = [0.0]
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers), clock=lambda: now[0])
    gc.collect()  # (the handles of the tests before, destroyed now with their threads, not while this one counts)
    before = librdkafka_threads()
    assert admin.topic_state()[0]
    assert "calm" in wait_for(lambda: admin.describe_topics(["calm"]), bool, 30, "topic calm described")
    assert isinstance(admin.dynamic_cluster_defaults(), dict)
    assert admin.registered_brokers() == {0, 1, 2}
    assert admin.alter_topic_configs({"calm": {"retention.ms": "3600000"}}) == {"calm": None}
    assert admin.elect_preferred([("calm", 0)]) == {}
    # and those that create, grow and delete topics
    assert admin.create_topics([("fleeting", 1, 1, {})]) == {"fleeting": None}
    assert admin.create_partitions({"calm": 2}) == {"calm": None}
    assert admin.delete_topics(["fleeting"]) == {"fleeting": None}
    # Then it holds no librdkafka handle (a thread per broker, their buffers, seen in /proc) ...
    assert librdkafka_threads() <= before
    # ... until a call that needs one (the groups reading a topic about to be deleted)
    assert admin.groups_reading({"calm"}) == {"calm": []}
    assert librdkafka_threads() > before
    # And it lets the handle go, with its threads, once no call has used it for IDLE_AFTER
    now[0] += IDLE_AFTER - 1
    assert admin.topic_overrides(["calm"])["calm"]["retention.ms"] == "3600000"
    gc.collect()  # (a handle let go too early would be destroyed now, its threads ended)
    assert librdkafka_threads() > before
    now[0] += 1
    assert admin.topic_overrides(["calm"])["calm"]["retention.ms"] == "3600000"
    wait_for(librdkafka_threads, lambda n: n <= before, 10, "librdkafka's threads ended")


def test_changes_the_controller_answers_do_not_wait_on_the_broker_librdkafka_last_named_controller(
        cluster: LocalKafkaCluster):
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers), timeout=5.0)
    # Given a client whose librdkafka handle has read the cluster's metadata, which names a broker as controller
    # (in KRaft any broker, at random), and a topic on the two others
    named = admin.client.list_topics(timeout=10).controller_id
    others = [b.node_id for b in cluster.brokers if b.node_id != named]
    assert admin.create_placed_topic("elsewhere", (tuple(others),), {}) is None
    kafka_admin.wait_fully_in_sync(cluster.admin(), "elsewhere")
    # When that broker stops answering (after a scale-down it is gone for good; here it is frozen: it accepts
    # connections and answers nothing)
    frozen = cluster.nodes[named].process
    assert frozen is not None
    frozen.send_signal(signal.SIGSTOP)
    try:
        # Then the throttles of a replica move are set and removed, and a preferred leader elected, through the
        # other brokers (before, each waited on the frozen one: "Failed while waiting for controller")
        throttled = dict.fromkeys(THROTTLED_REPLICAS_KEYS, "*")
        assert admin.alter_topic_configs({"elsewhere": throttled}) == {"elsewhere": None}
        assert admin.alter_topic_configs({"elsewhere": dict.fromkeys(THROTTLED_REPLICAS_KEYS)}) == {"elsewhere": None}
        assert admin.elect_preferred([("elsewhere", 0)]) == {}
        # and topics are created, grown and deleted
        assert admin.create_placed_topic("elsewhere-2", (tuple(others),), {}) is None
        assert admin.add_placed_partitions("elsewhere-2", 2, (tuple(reversed(others)),)) is None
        assert admin.delete_topics(["elsewhere-2"]) == {"elsewhere-2": None}
    finally:
        frozen.send_signal(signal.SIGCONT)
    assert not kraft.topic_configs(cluster.bootstrap_servers, ["elsewhere"])["elsewhere"].overrides
    # And Kafka's refusal of a config is the topic's, with Kafka's words
    refused = admin.alter_topic_configs({"elsewhere": {"retention.ms": "soon"}}, validate_only=True)
    assert re.match(r"INVALID_CONFIG: .*retention\.ms", refused["elsewhere"] or "")
    wait_for(admin.registered_brokers, lambda found: found == {0, 1, 2}, 60, "every broker registered again")


def test_the_groups_reading_a_topic_are_not_said_to_be_none_while_a_broker_does_not_list_its_own(
        cluster: LocalKafkaCluster):
    # (the topic pass deletes a topic only once no live group reads it: a group whose coordinator did not answer
    # had been left out of the list, and its topic deleted under it)
    kafka_admin.create_topic(cluster.admin(), "read", 1, 3)
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers), timeout=3.0)
    # Given a consumer group reading a topic
    stop = threading.Event()

    def consume() -> None:
        consumer = Consumer(client_config(cluster.bootstrap_servers, **{"group.id": "readers"}))
        consumer.subscribe(["read"])
        while not stop.is_set():
            consumer.poll(0.2)
        consumer.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    try:
        wait_for(lambda: admin.groups_reading({"read"}), lambda found: found == {"read": ["readers"]}, 60,
                 "the group seen reading")
        coordinator = admin.client.describe_consumer_groups(["readers"])["readers"].result(timeout=10).coordinator
        frozen = cluster.nodes[coordinator.id].process
        assert frozen is not None
        # When the broker that coordinates it stops answering
        frozen.send_signal(signal.SIGSTOP)
        try:
            # Then the groups reading the topic cannot be known: the call fails, it does not answer "none"
            with pytest.raises(KafkaUnavailable):
                admin.groups_reading({"read"})
        finally:
            frozen.send_signal(signal.SIGCONT)
    finally:
        stop.set()
        reader.join(30)
    wait_for(admin.registered_brokers, lambda found: found == {0, 1, 2}, 60, "every broker registered again")


def test_a_deleted_clusters_client_is_closed_though_something_still_holds_it():
    # Given the client of a cluster that is deleted since (its brokers' address no longer resolves), still held
    # by something the garbage collector has not reached (the operator's handles of deleted clusters went on
    # connecting for as long as it ran)
    before = librdkafka_threads()
    pool = AdminPool(KafkaAdmin)
    held = pool.get(Connection("gone-brokers.ns.svc.cluster.local:9091"))
    other = pool.get(Connection("kept-brokers.ns.svc.cluster.local:9091"))
    handle = weakref.ref(held.client)
    assert librdkafka_threads() > before
    # When its cluster is released
    pool.release("ns", "gone")
    # Then its librdkafka handle is gone with its threads, a call says it is closed, and another cluster's stays
    assert handle() is None
    closed = re.escape("the client for gone-brokers.ns.svc.cluster.local:9091 is closed")
    with pytest.raises(KafkaUnavailable, match=closed):
        held.registered_brokers()
    assert pool.get(Connection("kept-brokers.ns.svc.cluster.local:9091")) is other
    assert not other.closed
    pool.release("ns", "kept")
    assert librdkafka_threads() <= before


def _cluster_defaults_by_the_cli(cluster: LocalKafkaCluster) -> dict[str, str]:
    """The cluster-wide dynamic broker configs as kafka-configs.sh describes them ("  name=value sensitive=...")."""
    out = cluster.tool("kafka-configs.sh", "--bootstrap-server", cluster.bootstrap_servers,
                       "--entity-type", "brokers", "--entity-default", "--describe").stdout
    return dict(re.findall(r"^\s+([\w.]+)=(\S*) sensitive=", out, re.MULTILINE))


def test_dynamic_cluster_defaults_round_trip(cluster: LocalKafkaCluster):
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers))
    before = admin.dynamic_cluster_defaults()
    assert before == _cluster_defaults_by_the_cli(cluster)
    admin.alter_dynamic_cluster_defaults({"log.retention.ms": "3600000", "num.io.threads": "6"}, [])
    # (brokers apply the change from the metadata log: the one asked may see it a moment later)
    wanted = before | {"log.retention.ms": "3600000", "num.io.threads": "6"}
    wait_for(admin.dynamic_cluster_defaults, lambda found: found == wanted, 30, "the new cluster defaults")
    assert _cluster_defaults_by_the_cli(cluster) == wanted
    # The read goes over a connection of its own: a librdkafka handle stuck on a broker (seen on kind after a
    # restart: "Failed while waiting for broker" pass after pass) cannot hold it up
    stuck = KafkaAdmin(Connection(cluster.bootstrap_servers), handle=lambda _reach: AdminClient(UNREACHABLE))
    assert stuck.client is not None  # (made now: the handle is there, stuck)
    assert stuck.dynamic_cluster_defaults() == wanted
    admin.alter_dynamic_cluster_defaults({}, ["log.retention.ms", "num.io.threads"])
    wait_for(admin.dynamic_cluster_defaults, lambda found: found == before, 30, "the defaults removed")


def test_reassignment_and_preferred_election(cluster: LocalKafkaCluster):
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers))
    kafka_admin.create_topic(cluster.admin(), "moves", 1, 2)
    kafka_admin.wait_fully_in_sync(cluster.admin(), "moves")
    replicas = kafka_admin.partition_states(cluster.admin(), "moves")[0][1]
    target = [b for b in (0, 1, 2) if b not in replicas] + [replicas[0]]
    # When the partition is reassigned to a new replica list
    errors = kraft.alter_reassignments(cluster.bootstrap_servers, {("moves", 0): target})
    assert errors == {}
    wait_for(lambda: kraft.list_reassignments(cluster.bootstrap_servers), lambda ongoing: not ongoing, 60,
             "the reassignment to finish")
    # Then Kafka holds it, and a preferred election moves leadership to the new first replica
    wait_for(lambda: kafka_admin.partition_states(cluster.admin(), "moves")[0][1], lambda r: list(r) == target, 30,
             "the new replica list")
    assert admin.elect_preferred([("moves", 0)]) == {}
    wait_for(lambda: kafka_admin.leaders(cluster.admin(), "moves")[0], lambda leader: leader == target[0], 30,
             "the preferred leader")


def test_the_canary_writes_every_partition_and_a_frozen_follower_shows_at_once_not_when_it_thaws(
        cluster: LocalKafkaCluster):
    # Given the canary topic, one partition led by each broker, made with the operator's admin client (once every
    # broker is registered again after the tests before: a placement naming a fenced one is refused; the test
    # after this one removes broker 2 for good)
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers))
    wait_for(admin.registered_brokers, lambda found: found == {0, 1, 2}, 60, "every broker registered")
    assert admin.create_placed_topic(CANARY_TOPIC, ((0, 1, 2), (1, 2, 0), (2, 0, 1)), {"min.insync.replicas": "2"}) \
        is None
    kafka_admin.wait_fully_in_sync(cluster.admin(), CANARY_TOPIC)
    described = wait_for(admin.topic_state, lambda found: len([p for p in found[0] if p.topic == CANARY_TOPIC]) == 3,
                         30, "the canary topic's partitions")[0]
    assert {p.partition: p.leader for p in described if p.topic == CANARY_TOPIC} == {0: 0, 1: 1, 2: 2}
    # When the canary runs (a record to each partition every 50 ms, figures of the last 5 s)
    running = Canary("ns", "clients", CanarySettings(Connection(cluster.bootstrap_servers), 0.05, 5)).start()
    try:
        # Then, once its first window (connections being made) has passed, its writes are acknowledged and read
        # back in well under a second, with nothing failed
        calm = wait_for(running.reading, lambda r: r.written >= 150 and (r.produce_p99_ms or 10**6) < 1000
                        and (r.end_to_end_p99_ms or 10**6) < 1000, 60, "calm figures", interval=1)
        assert calm.failed == 0
        # And Kafka's own consumer finds its records in every partition
        for partition in range(3):
            found = cluster.tool("kafka-console-consumer.sh", "--bootstrap-server", cluster.bootstrap_servers,
                                 "--topic", CANARY_TOPIC, "--partition", str(partition), "--offset", "0",
                                 "--max-messages", "3", "--timeout-ms", "20000").stdout
            assert len(re.findall(r"^[0-9a-f]{8}:\d+$", found, re.MULTILINE)) == 3
        # When a broker freezes (a GC pause, a stuck disk): still registered and in every ISR for seconds
        frozen = cluster.brokers[1].process
        assert frozen is not None
        frozen.send_signal(signal.SIGSTOP)
        try:
            # Then the writes waiting on it count at their age: both p99s pass 2 s while none has come back yet
            # (in one reading; the two lists differ in length, so the 99th rank of one may cross a tick later)
            wait_for(running.reading, lambda r: (r.produce_p99_ms or 0) > 2000 and (r.end_to_end_p99_ms or 0) > 2000,
                     8, "the stall seen in the write and end-to-end p99s")
        finally:
            frozen.send_signal(signal.SIGCONT)
        # And once it is back, the figures of the next window are calm again
        wait_for(running.reading, lambda r: (r.produce_p99_ms or 10**6) < 1000 and (r.end_to_end_p99_ms or 10**6)
                 < 1000, 60, "calm figures after the thaw", interval=1)
        assert REGISTRY.get_sample_value("krafty_canary_produce_latency_seconds_count",
                                         {"namespace": "ns", "cluster": "clients"}) >= calm.written
    finally:
        running.stop()
    # And a stopped canary leaves no series behind
    assert not running.running
    assert REGISTRY.get_sample_value("krafty_canary_produce_latency_seconds_count",
                                     {"namespace": "ns", "cluster": "clients"}) is None


def test_unregister_a_stopped_broker(cluster: LocalKafkaCluster):
    # Given a broker stopped for good, When it is unregistered, Then the cluster forgets it
    cluster.stop_node(2)
    wait_for(cluster.registered_brokers, lambda b: 2 not in b, 60, "broker 2 fenced")
    kraft.unregister_broker(cluster.controller_bootstrap_servers, 2)
    # (the brokers learn it from the metadata log a moment later)
    wait_for(lambda: {b.node_id for b in kraft.describe_brokers(cluster.running_bootstrap_servers)},
             lambda ids: 2 not in ids, 30, "broker 2 gone from the brokers' metadata")
    described = cluster.tool("kafka-cluster.sh", "list-endpoints", "--bootstrap-server", cluster.bootstrap_servers,
                             check=False)
    assert "2" not in re.findall(r"^(\d+)\s", described.stdout, re.M)


def test_remove_a_voter_and_errors_are_named(cluster: LocalKafkaCluster):
    quorum = kraft.describe_quorum(cluster.controller_bootstrap_servers)
    voter = next(v for v in quorum.voters if v.node_id != quorum.leader_id)
    with pytest.raises(KafkaProtocolError, match=r"VOTER_NOT_FOUND|INVALID_REQUEST"):
        kraft.remove_voter(cluster.controller_bootstrap_servers, None, 1999, voter.directory_id)
    cluster.stop_node(voter.node_id)
    kraft.remove_voter(cluster.controller_bootstrap_servers, None, voter.node_id, voter.directory_id)
    after = wait_for(lambda: kraft.describe_quorum(cluster.running_controller_bootstrap()),
                     lambda q: voter.node_id not in q.voter_ids(), 30, "the voter removed")
    assert len(after.voters) == 2
    # When it runs again it is only an observer (no auto-join), until it is added back
    cluster.start_node(voter.node_id)
    wait_for(lambda: kraft.describe_quorum(cluster.controller_bootstrap_servers),
             lambda q: voter.node_id in {o.node_id for o in q.observers}, 60, "the controller back as an observer")
    node = cluster.nodes[voter.node_id]

    def add() -> str:
        # (the leader checks the new voter's listener first: refused while it is still opening, retried)
        try:
            kraft.add_voter(cluster.controller_bootstrap_servers, None, voter.node_id, voter.directory_id,
                            "127.0.0.1", node.controller_port, "CONTROLLER", timeout=10)
        except KafkaUnavailable as error:
            return str(error)
        return "added"

    wait_for(add, lambda result: result == "added", 90, "AddRaftVoter accepted")
    back = wait_for(lambda: kraft.describe_quorum(cluster.controller_bootstrap_servers),
                    lambda q: voter.node_id in q.voter_ids(), 60, "the voter added back")
    assert len(back.voters) == 3


def test_a_frozen_broker_behind_one_name_costs_one_timeout_not_every_call(cluster: LocalKafkaCluster,
                                                                         tmp_path: Path):
    # Given one name that resolves to two brokers, as a headless Service's does to its pods (a real DNS server,
    # which rotates the order of its answers; the brokers behind proxies on two addresses, one port): the first
    # frozen (SIGSTOP: its kernel still accepts connections, nothing answers), the second running
    frozen, running = cluster.brokers[0], cluster.brokers[1]
    to_frozen = KafkaProxy(frozen.broker_port, listen=("127.0.0.2", 0))
    to_running = KafkaProxy(running.broker_port, listen=("127.0.0.3", to_frozen.port))
    registered = sorted(b.node_id for b in kraft.describe_brokers(f"127.0.0.1:{running.broker_port}"))
    describe = f"sorted(b.node_id for b in kraft.describe_brokers('brokers.headless:{to_frozen.port}', timeout=3))"
    assert frozen.process is not None
    frozen.process.send_signal(signal.SIGSTOP)
    try:
        with Resolver(tmp_path, {"brokers.headless": ["127.0.0.2", "127.0.0.3"]}) as dns, dns.python() as client:
            # When the wire client asks that name, the frozen broker's address first
            assert client.eval(describe) == registered
            # Then the running broker answered after the frozen one's timeout
            assert (to_frozen.accepted, to_running.accepted) == (1, 1)
            # And in the next calls, each resolving the name again (the running broker closed the kept connection),
            # the frozen one is tried last, whatever order the server answers in: never asked again
            for calls in range(2, 6):
                to_running.close_connections()
                assert client.eval(describe) == registered
                assert (to_frozen.accepted, to_running.accepted) == (1, calls)
            assert dns.lookups("brokers.headless") == 5
    finally:
        frozen.process.send_signal(signal.SIGCONT)
        to_frozen.close()
        to_running.close()


def test_every_feature_level_and_supported_range_is_what_kafkas_own_tool_describes(cluster: LocalKafkaCluster):
    # Given a running cluster, When the wire client reads its features
    finalized, supported = kraft.features(cluster.bootstrap_servers)
    # Then each is what kafka-features.sh describes ("Feature: group.version  SupportedMinVersion: 0
    # SupportedMaxVersion: 1  FinalizedVersionLevel: 1 ..."; metadata.version by the names of its levels)
    out = cluster.tool("kafka-features.sh", "--bootstrap-server", cluster.bootstrap_servers, "describe").stdout
    described = {name: (low, high, level) for name, low, high, level in re.findall(
        r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+FinalizedVersionLevel: (\S+)",
        out)}
    ours = {name: (str(low), str(high), str(finalized.get(name, 0))) for name, (low, high) in supported.items()}
    metadata = described.pop(wire.METADATA_VERSION)
    assert metadata[2] == versions.metadata_name(ours.pop(wire.METADATA_VERSION) and finalized[wire.METADATA_VERSION])
    assert len(ours) >= 4, out  # (kraft.version, group.version, share.version, transaction.version, ...)
    assert ours == described, out


def test_a_live_share_consumer_reads_its_topic_until_it_leaves(local_kafka):
    # Given a topic a share group's console consumer reads (KIP-932: no commits, no classic group), on a cluster
    # of its own (on the module's, whose nodes earlier tests stopped and started, the share group's member was
    # never assigned a partition in 180 s)
    cluster = local_kafka(Layout.combined(1))
    admin = KafkaAdmin(Connection(cluster.bootstrap_servers))
    kafka_admin.create_topic(cluster.admin(), "shared", 2, 1)
    reader = subprocess.Popen([str(kafka_dist.tool_path("kafka-run-class.sh")),
                               "org.apache.kafka.tools.consumer.ConsoleShareConsumer", "--bootstrap-server",
                               cluster.bootstrap_servers, "--topic", "shared", "--group", "share-readers",
                               "--timeout-ms", "300000"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"})

    def reading() -> dict[str, list[str]]:
        if reader.poll() is not None:  # (the consumer died: say why, not "not yet")
            raise AssertionError(f"the share consumer exited {reader.returncode}: {reader.stderr.read()}")  # type: ignore[union-attr]
        return admin.groups_reading({"shared", "other"})

    try:
        # When the topic pass asks which groups read it, Then the share group is one, as a live consumer group
        # would be (its deletion waits); (a JVM starting beside other runs takes a while to join)
        found = wait_for(reading, lambda r: r["shared"], 180, "the share group assigned the topic")
        assert found == {"shared": ["share-readers"], "other": []}
    finally:
        reader.terminate()
        reader.wait(30)
    # And once its only member has left, it reads nothing
    wait_for(lambda: admin.groups_reading({"shared"}), lambda r: r == {"shared": []}, 90, "the member gone")


def _streams_tool_lag(cluster: LocalKafkaCluster, group: str, topic: str) -> dict[int, int]:
    """Each partition's lag as kafka-streams-groups.sh --describe --offsets shows it (for a group with members:
    the tool shows nothing of an empty one)."""
    out = cluster.tool("kafka-streams-groups.sh", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                       "--group", group, "--offsets").stdout
    return {int(m[0]): int(m[1]) for m in re.findall(rf"^{group}\s+{topic}\s+(\d+)\s+(\d+)\s*$", out, re.M)}


def test_a_streams_application_is_a_group_of_its_type_that_reads_its_topic_and_lags_as_kafkas_tool_says(
        local_kafka):
    # Given a Kafka Streams application of the Streams protocol (KIP-1071) that copied a topic's 100 records and
    # holds on the next one, a live member (stuck on a record), when 200 more arrive
    cluster = local_kafka(Layout.combined(1))
    bootstrap = cluster.bootstrap_servers
    admin = KafkaAdmin(Connection(bootstrap))
    for topic in ("clicks", "clicks-copied"):
        kafka_admin.create_topic(cluster.admin(), topic, 2, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})

    def produce(count: int) -> None:
        for i in range(count):
            producer.produce("clicks", key=str(i).encode(), value=b"v")
        assert producer.flush(30) == 0

    def committed() -> int:
        return sum(o or 0 for o in LagReader(Connection(bootstrap)).read().committed.get("copier", {}).values())

    produce(100)
    with streams_app.running("copier", bootstrap, "clicks", "clicks-copied", hold_after=100) as app:
        def reading() -> dict[str, list[str]]:
            if app.poll() is not None:  # (the application died: say why, not "not yet")
                raise AssertionError(f"the Streams application exited {app.returncode}")
            return admin.groups_reading({"clicks", "clicks-copied"})

        wait_for(committed, lambda count: count == 100, 180, "the first 100 records copied and committed")
        produce(200)
        # When the topic pass asks which groups read its topics, Then the application's group reads its source
        # (not its sink), as a live consumer group would (the topic's deletion waits)
        assert reading() == {"clicks": ["copier"], "clicks-copied": []}
        # And ListGroups gives it the streams type
        assert kraft.group_ids(bootstrap)["copier"] == wire.STREAMS_GROUP

        # And the lag pass reads its lag (the 200 records) partition by partition as kafka-streams-groups.sh does
        def lags() -> tuple[dict[int, int | None], dict[int, int]]:
            read = LagReader(Connection(bootstrap)).read()
            ours = {p.partition: p.lag for p in partition_lag(read) if p.group == "copier" and p.topic == "clicks"}
            return ours, _streams_tool_lag(cluster, "copier", "clicks")

        ours, _ = wait_for(lags, lambda seen: sum(v or 0 for v in seen[0].values()) == 200 and seen[0] == seen[1],
                           120, "the held group's lag as kafka-streams-groups.sh shows it")
        assert len(ours) == 2, ours
    # And once it has stopped, it reads nothing
    wait_for(lambda: admin.groups_reading({"clicks"}), lambda r: r == {"clicks": []}, 90, "the member gone")
