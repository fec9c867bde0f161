"""The lag pass's reads against real brokers that restart: complete and right, or marked unknown."""

from __future__ import annotations

import gc
import math
import os
import re
import threading
import time

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from krafty import wire
from krafty.clients import kraft, kraft_transport
from krafty.clients.connection import Connection
from krafty.clients.lag import LagReader
from krafty.decide.lag import GroupSelection, LagRead, LogRange, Retention, SelectedGroups, by_topic, partition_lag
from krafty_testkit import kafka_admin
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.procfs import librdkafka_threads
from krafty_testkit.waiting import wait_for

GROUPS = ("g1", "g2", "g3")


def consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    while seen < count:
        message = consumer.poll(1.0)
        seen += message is not None and not message.error()
    consumer.commit(asynchronous=False)
    consumer.close()


def tool_offsets(cluster: LocalKafkaCluster, group: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(committed offset, log end offset) per partition, as kafka-consumer-groups.sh shows them."""
    out = cluster.tool("kafka-consumer-groups.sh", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                       "--group", group).stdout
    return {(m[0], int(m[1])): (int(m[2]), int(m[3]))
            for m in re.findall(rf"^{group}\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)}


@pytest.fixture
def lagged(local_kafka) -> LocalKafkaCluster:
    """Three brokers, a topic of 3 partitions (RF 3) with 300 records, groups g1..g3 that read 100."""
    cluster = local_kafka(Layout.dedicated(1, 3))
    kafka_admin.create_topic(cluster.admin(), "lagged", 3, 3)
    kafka_admin.wait_fully_in_sync(cluster.admin(), "lagged")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(300):
        producer.produce("lagged", key=str(i).encode(), value=b"v")
    assert producer.flush(30) == 0
    for group in GROUPS:
        consume_and_commit(cluster.bootstrap_servers, group, "lagged", 100)
    return cluster


def _as_tool_shows(read: LagRead, group: str) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    logs = {tp: (r.end if r else None) for tp, r in read.logs.items()}
    return {tp: (offset, logs.get(tp)) for tp, offset in read.committed[group].items()}


def test_the_groups_are_those_every_broker_coordinates_and_none_keeps_no_librdkafka_handle(local_kafka):
    cluster = local_kafka(Layout.dedicated(1, 3))
    # Given no consumer group, Then a read lists none, and makes no librdkafka handle
    reader = LagReader(Connection(cluster.bootstrap_servers))
    gc.collect()  # (the handles of the tests before, destroyed now with their threads, not while this one counts)
    before = librdkafka_threads()
    assert reader.read().selected == SelectedGroups((), 0, 0)
    assert librdkafka_threads() <= before
    # Given groups whose coordinators are spread over the brokers, Then a read lists them as Kafka's tool does
    kafka_admin.create_topic(cluster.admin(), "listed", 1, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    producer.produce("listed", b"v")
    assert producer.flush(30) == 0
    groups = [f"listed-{i}" for i in range(6)]
    for group in groups:
        consume_and_commit(cluster.bootstrap_servers, group, "listed", 1)
    tool = cluster.tool("kafka-consumer-groups.sh", "--bootstrap-server", cluster.bootstrap_servers, "--list").stdout
    assert sorted(tool.split()) == groups
    coordinators = kraft_transport.call(Connection(cluster.bootstrap_servers), wire.FIND_COORDINATOR, 4,
                              wire.encode_find_coordinators(groups), wire.decode_find_coordinators)
    assert len({c.node_id for c in coordinators.values()}) > 1
    assert kraft.group_ids(cluster.bootstrap_servers).keys() == set(groups)
    assert sorted(reader.read().selected.groups) == groups


def test_committed_offsets_match_kafka_and_survive_coordinators_restarting(lagged: LocalKafkaCluster):
    reader = LagReader(Connection(lagged.bootstrap_servers))
    # Then the offsets and log ends are the ones Kafka's own tool shows
    before = reader.read()
    assert {g: _as_tool_shows(before, g) for g in GROUPS} == {g: tool_offsets(lagged, g) for g in GROUPS}
    # And reading while each broker (so each group coordinator) restarts neither crashes nor loses offsets
    # (librdkafka's ListConsumerGroupOffsets killed the process with SIGSEGV here)
    stop = threading.Event()
    reads: list[LagRead | None] = []

    def read() -> None:
        while not stop.is_set():
            try:
                reads.append(reader.read())
            except Exception:  # noqa: BLE001 - a broker being down may fail a read; a crash would end the test
                reads.append(None)

    threads = [threading.Thread(target=read, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for broker in (0, 1, 2):
        lagged.kill_node(broker) if broker == 1 else lagged.stop_node(broker)
        lagged.start_node(broker)
        kafka_admin.wait_fully_in_sync(lagged.admin(), "lagged")
    stop.set()
    for thread in threads:
        thread.join(60)
    made = [read for read in reads if read is not None]  # (a failed read checks nothing)
    assert len(made) > 3, f"{len(made)} of {len(reads)} reads answered while the brokers restarted"
    # And every read made meanwhile was right where it said it knew the offset, and some knew offsets
    truth = {g: before.committed[g] for g in GROUPS}
    compared = 0
    for seen in made:
        for group in GROUPS:
            for tp, offset in seen.committed.get(group, {}).items():
                assert offset in (None, truth[group][tp]), (group, tp, offset)
                compared += offset is not None
    assert compared > 0, "no read during the restarts knew a committed offset to compare"
    after = wait_for(reader.read, lambda r: not r.unknown_groups and all(r.logs.values()), 60, "a complete read")
    assert {g: after.committed[g] for g in GROUPS} == truth


def test_log_ends_are_read_right_after_leaders_move(lagged: LocalKafkaCluster):
    # Given a client that has cached each partition's leader epoch, as librdkafka does
    cached = AdminClient({"bootstrap.servers": lagged.bootstrap_servers})
    reader = LagReader(Connection(lagged.bootstrap_servers))
    partitions = [("lagged", p) for p in range(3)]
    assert all(reader.log_ranges(partitions).values())
    cached.list_topics(timeout=10)
    # When a broker restarts and its leadership comes back to it (every partition's leader epoch moves on)
    lagged.restart_node(1)
    kafka_admin.wait_fully_in_sync(lagged.admin(), "lagged")
    lagged.admin().elect_leaders(ElectionType.PREFERRED,
                                 [TopicPartition(t, p) for t, p in partitions]).result(timeout=30)
    # Then the cached epochs are refused (the trap: librdkafka refreshes them only every few minutes, so a
    # lag read that dropped what failed showed a smaller lag for minutes)
    futures = cached.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions},
                                  request_timeout=10)
    refused = []
    for tp, future in futures.items():
        try:
            future.result(timeout=15)
        except KafkaException as error:
            refused.append(f"{tp.partition}: {error.args[0].name()}")
    assert refused, "the cached leader epochs were still accepted: this test no longer shows the trap"
    print(f"\nlist_offsets with cached leader epochs after the election: refused for {refused}")
    # And the lag reader, which sends no leader epoch (it asks each leader through the wire client), reads every
    # partition right
    ranges = reader.log_ranges(partitions)
    shown = lagged.tool("kafka-get-offsets.sh", "--bootstrap-server", lagged.bootstrap_servers, "--topic",
                        "lagged").stdout
    ends = {("lagged", int(p)): int(end) for p, end in re.findall(r"^lagged:(\d+):(\d+)$", shown, re.M)}
    assert ranges == {tp: LogRange(0, ends[tp]) for tp in partitions}


def test_a_read_of_groups_with_nothing_unread_keeps_no_librdkafka_handle(lagged: LocalKafkaCluster):
    # Given groups that have read every record of their topic
    for group in ("done-1", "done-2"):
        consume_and_commit(lagged.bootstrap_servers, group, "lagged", 300)
    reader = LagReader(Connection(lagged.bootstrap_servers), GroupSelection(include=("done-.*",)))
    gc.collect()  # (the handles of the tests before, destroyed now with their threads, not while this one counts)
    before = librdkafka_threads()
    # When their lag is read
    read = reader.read()
    # Then it is whole: each group's offsets, the log range of each of its partitions, the topic's retention
    shown = tool_offsets(lagged, "done-1")
    ends = {tp: end for tp, (_, end) in shown.items()}
    assert {tp: committed for tp, (committed, _) in shown.items()} == ends
    assert read.committed == {"done-1": ends, "done-2": ends}
    assert read.logs == {tp: LogRange(0, end) for tp, end in ends.items()}
    assert read.retention == {"lagged": Retention(7 * 24 * 3600.0)}
    # And no librdkafka handle was made for it (an Admin client asked for every topic's metadata each pass, at
    # thousands of topics most of the pass): no record to fetch a timestamp of, so no consumer either
    assert librdkafka_threads() <= before


def test_only_the_selected_groups_are_read_and_the_others_are_counted(lagged: LocalKafkaCluster):
    # Given groups g1..g3, a selection that excludes g3 and reads at most one group
    reader = LagReader(Connection(lagged.bootstrap_servers), GroupSelection(exclude=("g3",), limit=1))
    read = reader.read()
    # Then only g1 was read (the first by name), g3 counted as excluded and g2 as over the limit
    assert sorted(read.committed) == ["g1"]
    assert read.selected == SelectedGroups(("g1",), excluded=1, over_limit=1, types={"g1": "classic"})


def _sockets() -> int:
    return sum(os.readlink(f"/proc/self/fd/{fd}").startswith("socket:") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}"))


def test_a_read_asks_for_the_groups_own_partitions_and_holds_no_connection_per_group(lagged: LocalKafkaCluster):
    # Given a topic of 12 partitions no group reads, and 40 groups more that committed on one partition of lagged
    kafka_admin.create_topic(lagged.admin(), "bystander", 12, 1)
    for index in range(40):
        committer = Consumer({"bootstrap.servers": lagged.bootstrap_servers, "group.id": f"many-{index:02}"})
        committer.commit(offsets=[TopicPartition("lagged", index % 3, index)], asynchronous=False)
        committer.close()
    reader = LagReader(Connection(lagged.bootstrap_servers))
    before = _sockets()
    # When the lag is read
    read = reader.read()
    # Then every group's committed offsets are there, and only its own partitions were asked about
    assert len(read.committed) == 43
    assert not read.unknown_groups
    assert read.committed["many-07"] == {("lagged", 1): 7}
    assert set(read.logs) == {("lagged", p) for p in range(3)}
    # And the reader holds no connection per group (one consumer handle per group held 40 more): its Admin
    # client and its timestamp consumer hold one to each broker and to the bootstrap address
    held = _sockets() - before
    print(f"\nsockets held after reading 43 groups: {held}")
    assert held <= 10, held


def test_lag_in_seconds_comes_from_the_timestamp_of_the_first_unread_record(lagged: LocalKafkaCluster):
    # Given records stamped one second apart (from 1,000,000 ms) on a topic that keeps them for an hour
    kafka_admin.create_topic(lagged.admin(), "stamped", 2, 3, **{"retention.ms": "3600000"})
    producer = Producer({"bootstrap.servers": lagged.bootstrap_servers, "acks": "all"})
    for offset in range(50):
        for partition in (0, 1):
            producer.produce("stamped", value=b"v", partition=partition, timestamp=1_000_000 + 1000 * offset)
    assert producer.flush(30) == 0
    # and a group that read 10 records of partition 0 and all of partition 1
    committer = Consumer({"bootstrap.servers": lagged.bootstrap_servers, "group.id": "stamps"})
    committer.commit(offsets=[TopicPartition("stamped", 0, 10), TopicPartition("stamped", 1, 50)], asynchronous=False)
    committer.close()
    reader = LagReader(Connection(lagged.bootstrap_servers), GroupSelection(include=("stamps",)))
    # When its lag is read
    read = reader.read()
    # Then the record at offset 10 of partition 0 was fetched (none of partition 1: nothing is unread there)
    assert read.timestamps == {("stamped", 0, 10): 1_010_000}
    assert read.retention == {"stamped": Retention(3600.0)}
    entries = {e.partition: e for e in partition_lag(read)}
    assert entries[0].seconds == pytest.approx(read.at - 1010.0)
    assert entries[1].seconds == 0.0
    # When retention's work is done by hand: records before offset 30 of partition 0 are deleted
    lagged.admin().delete_records([TopicPartition("stamped", 0, 30)])[TopicPartition("stamped", 0, 30)].result(30)
    read = reader.read()
    # Then the oldest unread record still retained, offset 30, gives the age, and the group lost records
    assert read.timestamps == {("stamped", 0, 30): 1_030_000}
    [topic] = by_topic(partition_lag(read))
    assert topic.unread_deleted == 1
    assert topic.seconds == pytest.approx(read.at - 1030.0)
    # And the consumer that reads timestamps joined no group and committed nothing
    assert sorted(g.group_id for g in lagged.admin().list_consumer_groups().result().valid) == [*GROUPS, "stamps"]


def test_a_group_behind_only_a_transaction_marker_is_not_behind_in_time(lagged: LocalKafkaCluster):
    # Given a transaction of 5 records, committed (offsets 0-4, its marker at 5), and a group that read all 5
    kafka_admin.create_topic(lagged.admin(), "txn", 1, 3)
    producer = Producer({"bootstrap.servers": lagged.bootstrap_servers, "transactional.id": "lag-test"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce("txn", value=b"v", partition=0)
    producer.commit_transaction(30)
    committer = Consumer({"bootstrap.servers": lagged.bootstrap_servers, "group.id": "txn-reader"})
    committer.commit(offsets=[TopicPartition("txn", 0, 5)], asynchronous=False)
    committer.close()
    reader = LagReader(Connection(lagged.bootstrap_servers), GroupSelection(include=("txn-reader",)))
    # Then its lag is the marker, 1, and nothing is left for it to process: 0 s behind, not heading for any loss
    [entry] = partition_lag(reader.read())
    assert (entry.lag, entry.seconds, entry.retention_left) == (1, 0.0, math.inf)
    # When a record of an open transaction follows, the group waits behind it: its age counts
    producer.begin_transaction()
    producer.produce("txn", value=b"v", partition=0, timestamp=int(time.time() * 1000) - 60_000)
    producer.flush(30)
    [entry] = partition_lag(reader.read())
    assert entry.lag == 2
    assert entry.seconds == pytest.approx(60, abs=5)
    producer.abort_transaction(30)


def test_consumer_protocol_and_share_groups_are_read_beside_classic_ones_as_kafkas_tools_show_them(
        lagged: LocalKafkaCluster):
    # Given beside the classic groups a group of the consumer protocol (KIP-848) that read 100 records, and a share
    # group (KIP-932) whose console consumer took 50 from the start
    bootstrap = lagged.bootstrap_servers
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "next-gen", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["lagged"])
    seen = 0
    while seen < 100:
        message = consumer.poll(1.0)
        seen += message is not None and not message.error()
    consumer.commit(asynchronous=False)
    consumer.close()
    lagged.tool("kafka-configs.sh", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups",
                "--entity-name", "pickers", "--add-config", "share.auto.offset.reset=earliest")
    lagged.tool("kafka-run-class.sh", "org.apache.kafka.tools.consumer.ConsoleShareConsumer", "--bootstrap-server",
                bootstrap, "--topic", "lagged", "--group", "pickers", "--max-messages", "50", "--timeout-ms", "30000",
                timeout=120)
    # When the lag pass reads the groups
    listed = kraft.group_ids(bootstrap)
    read = LagReader(Connection(bootstrap)).read()
    # Then each has its type, and each is where Kafka's own tools put it: the consumer group's committed offsets
    # as kafka-consumer-groups.sh shows them, the share group's start offsets as kafka-share-groups.sh does
    assert {group: listed[group] for group in ("g1", "next-gen", "pickers")} == {
        "g1": "classic", "next-gen": "consumer", "pickers": wire.SHARE_GROUP}
    assert _as_tool_shows(read, "next-gen") == tool_offsets(lagged, "next-gen")
    assert sum(offset or 0 for offset in read.committed["next-gen"].values()) == 100
    out = wait_for(lambda: lagged.tool("kafka-run-class.sh", "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                                       "--bootstrap-server", bootstrap, "--describe", "--group", "pickers",
                                       "--offsets").stdout,
                   lambda text: "lagged" in text, 30, "the share group's offsets described")
    shown = {("lagged", int(m[0])): (int(m[1]), int(m[2]))
             for m in re.findall(r"^pickers\s+lagged\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)}  # start offset, lag
    assert shown, out
    assert read.committed["pickers"] == {tp: start for tp, (start, _) in shown.items()}, out
    assert 0 < sum(start for start, _ in shown.values()) <= 300
    # And the share group's lag is the records from there to the end of each partition not yet acknowledged, as
    # Kafka counts it (DescribeShareGroupOffsets v1) and the tool shows it
    assert read.counted["pickers"] == {tp: lag for tp, (_, lag) in shown.items()}, out
    lags = {(p.topic, p.partition): p.lag for p in partition_lag(read) if p.group == "pickers"}
    assert lags == {tp: lag for tp, (_, lag) in shown.items()}, out
