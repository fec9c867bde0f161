"""Real KRaft clusters from the fixture library: durability, controlled shutdown, clean-up."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from krafty_testkit import kafka_admin, traffic
from krafty_testkit.local_kafka import START_TIMEOUT_S, ClusterStartError, Layout, LocalKafkaCluster
from krafty_testkit.waiting import wait_for

DURABLE = {"min.insync.replicas": "2"}


@pytest.fixture(scope="module")
def combined(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(3))


def test_combined_cluster_forms_a_quorum_of_every_node(combined: LocalKafkaCluster):
    # Given a running 3-node combined cluster, Then all three vote and all three are brokers.
    quorum = combined.quorum()
    assert quorum.voter_ids() == {0, 1, 2}
    assert combined.registered_brokers() == {0, 1, 2}
    assert combined.ready_seconds is not None


def test_a_steady_producer_that_dies_fails_its_test_rather_than_report_nothing_written(combined: LocalKafkaCluster):
    # Given a steady producer the Kafka client refuses to build (a setting librdkafka does not know)
    producer = traffic.SteadyProducer(combined.bootstrap_servers, "never-written", rate=100,
                                      **{"no.such.setting": "1"})
    producer.start()
    producer.join(30)
    # When it is stopped, Then it says it died and why, instead of an empty report of nothing lost
    with pytest.raises(traffic.ProducerFailed, match=r"the producer to never-written died: .*no\.such\.setting"):
        producer.stop()


def test_acked_writes_survive_a_sigkilled_broker(combined: LocalKafkaCluster):
    # Given a topic with RF 3 and min ISR 2, and a producer writing with acks=all
    admin = combined.admin()
    kafka_admin.create_topic(admin, "survive-kill", 6, 3, **DURABLE)
    kafka_admin.wait_fully_in_sync(admin, "survive-kill")
    producer = traffic.SteadyProducer(combined.bootstrap_servers, "survive-kill", rate=300)
    producer.start()
    wait_for(lambda: len(producer.report.acked), lambda n: n > 300, 30, "first acknowledged writes")
    # When one broker is SIGKILLed mid-stream, and writes continue
    victim = 1
    combined.kill_node(victim)
    acked_at_kill = len(producer.report.acked)
    wait_for(lambda: len(producer.report.acked), lambda n: n > acked_at_kill + 600, 60,
             "writes acknowledged with one broker down")
    report = producer.stop()
    # Then nothing failed, and every acknowledged record is read back exactly once, in order
    assert report.failures == 0, report.failed
    combined.start_node(victim)
    combined.wait_ready()
    kafka_admin.wait_fully_in_sync(admin, "survive-kill", timeout=90)
    result = traffic.verify(report.acked, traffic.consume_all(combined.bootstrap_servers, "survive-kill"))
    assert result.ok, str(result)


def test_sigterm_moves_leadership_away_before_the_broker_exits(combined: LocalKafkaCluster):
    # Given a broker that leads partitions of a fully replicated topic
    admin = combined.admin()
    kafka_admin.create_topic(admin, "controlled", 12, 3, **DURABLE)
    kafka_admin.wait_fully_in_sync(admin, "controlled")
    leaders = kafka_admin.leaders(admin, "controlled")
    broker = max(set(leaders.values()), key=lambda b: list(leaders.values()).count(b))
    led = [p for p, leader in leaders.items() if leader == broker]
    assert led
    process = combined.nodes[broker].process
    assert process is not None
    observations: list[tuple[float, dict[int, int]]] = []
    stop = threading.Event()

    def observe() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # metadata may be briefly unavailable
                observations.append((time.monotonic(), kafka_admin.leaders(admin, "controlled")))
            time.sleep(0.02)

    watcher = threading.Thread(target=observe, daemon=True)
    watcher.start()
    # When it receives SIGTERM
    code = combined.stop_node(broker)
    exited_at = time.monotonic()
    stop.set()
    watcher.join()
    # Then while it was still running the Admin API already showed every partition led elsewhere
    moved_before_exit = [t for t, seen in observations
                         if t < exited_at and seen and all(leader not in (broker, -1) for leader in seen.values())]
    assert moved_before_exit, f"broker {broker} exited before its partitions {led} were led elsewhere"
    assert code in (0, 143), f"broker {broker} exited with {code}"
    combined.start_node(broker)
    combined.wait_ready()
    kafka_admin.wait_fully_in_sync(admin, "controlled", timeout=90)


def test_kafka_tools_run_against_the_cluster(combined: LocalKafkaCluster):
    # Given the pinned distribution, Then the tools users know work against a real cluster.
    bootstrap = combined.bootstrap_servers
    combined.tool("kafka-topics.sh", "--bootstrap-server", bootstrap, "--create", "--topic", "tools",
                  "--partitions", "3", "--replication-factor", "3")
    assert "tools" in combined.tool("kafka-topics.sh", "--bootstrap-server", bootstrap, "--list").stdout
    combined.tool("kafka-console-producer.sh", "--bootstrap-server", bootstrap, "--topic", "tools",
                  input="one\ntwo\nthree\n")
    consumed = combined.tool("kafka-console-consumer.sh", "--bootstrap-server", bootstrap, "--topic", "tools",
                             "--from-beginning", "--max-messages", "3", "--group", "tools-reader")
    assert sorted(consumed.stdout.split()) == ["one", "three", "two"]
    groups = combined.tool("kafka-consumer-groups.sh", "--bootstrap-server", bootstrap, "--describe",
                           "--group", "tools-reader")
    assert "tools" in groups.stdout
    quorum = combined.tool("kafka-metadata-quorum.sh", "--bootstrap-server", bootstrap, "describe", "--status")
    assert f"LeaderId:               {combined.quorum().leader_id}" in quorum.stdout
    combined.tool("kafka-leader-election.sh", "--bootstrap-server", bootstrap, "--election-type", "PREFERRED",
                  "--all-topic-partitions", check=False)
    listing = combined.tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap, "--list")
    assert listing.returncode == 0
    perf = combined.tool("kafka-producer-perf-test.sh", "--topic", "tools", "--num-records", "2000",
                         "--record-size", "100", "--throughput", "-1", "--command-property",
                         f"bootstrap.servers={bootstrap}")
    assert "2000 records sent" in perf.stdout
    consumer_perf = combined.tool("kafka-consumer-perf-test.sh", "--bootstrap-server", bootstrap,
                                  "--topic", "tools", "--messages", "2000")
    assert consumer_perf.returncode == 0
    configs = combined.tool("kafka-configs.sh", "--bootstrap-server", bootstrap, "--entity-type", "topics",
                            "--entity-name", "tools", "--describe")
    assert "tools" in configs.stdout


def test_dedicated_cluster_refuses_acks_all_with_two_brokers_down(local_kafka):
    # Given 3 controllers + 3 brokers and a topic with RF 3 and min ISR 2
    cluster = local_kafka(Layout.dedicated(3, 3))
    assert cluster.quorum().voter_ids() == {1000, 1001, 1002}
    admin = cluster.admin()
    kafka_admin.create_topic(admin, "strict", 3, 3, **DURABLE)
    kafka_admin.wait_fully_in_sync(admin, "strict")
    # When two brokers are SIGKILLed and the controller has fenced them out of the ISR
    cluster.kill_node(1)
    cluster.kill_node(2)
    wait_for(lambda: kafka_admin.partition_states(admin, "strict"),
             lambda states: all(isr == (0,) for _, _, isr in states.values()), 60, "ISR shrunk to broker 0")
    # Then acks=all writes are refused with NOT_ENOUGH_REPLICAS, not silently accepted
    errors: list[str] = []
    producer = Producer(traffic.client_config(f"127.0.0.1:{cluster.nodes[0].broker_port}", **{
        "acks": "all", "retries": 0, "message.timeout.ms": 10000}))
    for i in range(5):
        producer.produce("strict", key=b"k", value=str(i).encode(),
                         on_delivery=lambda err, _msg: errors.append(err.name() if err else "ACKED"))
    producer.flush(30)
    assert errors == ["NOT_ENOUGH_REPLICAS"] * 5
    # And once the brokers are back, none of the refused records is there
    cluster.start_node(1)
    cluster.start_node(2)
    cluster.wait_ready()
    assert traffic.consume_all(cluster.bootstrap_servers, "strict", idle_seconds=3) == []


def test_brokers_wait_for_the_quorum_as_long_as_a_start_waits_for_them(tmp_path: Path):
    # Given a dedicated layout, whose brokers cannot register before the controllers have a leader
    cluster = LocalKafkaCluster(Layout.dedicated(1, 2), tmp_path)
    # When its brokers' configuration is written, Then they give up on the quorum no sooner than the start gives up
    for broker in cluster.brokers:
        waits_ms = int(cluster.server_properties(broker)["initial.broker.registration.timeout.ms"])
        assert waits_ms >= START_TIMEOUT_S * 1000


def test_a_broker_that_gives_up_on_the_quorum_is_reported_with_its_reason(tmp_path: Path):
    # Given a broker told to give up on registering at once
    cluster = LocalKafkaCluster(Layout.dedicated(1, 1), tmp_path,
                                config={"initial.broker.registration.timeout.ms": "1"})
    try:
        # When the cluster starts, Then the start fails naming the broker and the reason from its log,
        # not only the shutdown lines that end it
        reason = r"(?s)node 0 exited with 1.*unable to register with the controller"
        with pytest.raises(ClusterStartError, match=reason):
            cluster.start(timeout=60)
    finally:
        cluster.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_close_leaves_no_process_behind(kafka_home, tmp_path: Path):
    cluster = LocalKafkaCluster(Layout.combined(1), tmp_path)
    cluster.start()
    pids = cluster.pids()
    assert pids
    assert all(_alive(p) for p in pids)
    cluster.close()
    assert not any(_alive(p) for p in pids)


def test_a_killed_test_process_takes_its_brokers_with_it(tmp_path: Path):
    # Given a test process that started a cluster
    script = textwrap.dedent(f"""
        import pathlib, sys, time
        from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
        c = LocalKafkaCluster(Layout.combined(1), pathlib.Path({str(tmp_path)!r}))
        c.start()
        print(*c.pids(), flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    pids = [int(p) for p in child.stdout.readline().split()]
    assert pids
    assert all(_alive(p) for p in pids)
    # When that process is SIGKILLed (no finalizer can run)
    child.send_signal(signal.SIGKILL)
    child.wait()
    # Then its Kafka processes die too
    wait_for(lambda: [p for p in pids if _alive(p)], lambda alive: not alive, 15, "brokers to die with the parent")
