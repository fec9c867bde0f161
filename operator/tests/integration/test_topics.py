"""The topic reconciler against real brokers and a real API server.

Topic resources live in a real kube-apiserver; the Kafka cluster is three
real KRaft processes. The reconciler runs one pass at a time, as the operator
runs it, and every check reads Kafka itself (Admin API or Kafka's tools).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import NewTopic
from prometheus_client import REGISTRY

from krafty import naming, wire
from krafty.clients.connection import Connection
from krafty.clients.kafka_admin import KafkaAdmin
from krafty.clients.kraft_transport import wire_name
from krafty.clients.kube import Kube
from krafty.reconcile import writer
from krafty.reconcile.batched import CHECK_INTERVAL
from krafty.reconcile.connection import fixed
from krafty.reconcile.topics import DELETION_RETRY, TopicReconciler
from krafty.telemetry import metrics
from krafty_testkit import kafka_admin, traffic
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.kafka_proxy import KafkaProxy
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.waiting import wait_for

from ..conftest import CRDS, operator_kube

NS = "topics"
CLUSTER = "local"


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.combined(3))


@pytest.fixture(scope="module")
def kube(apiserver: LocalApiServer) -> Kube:
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", NS, check=False)
    apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
                     "metadata": {"name": CLUSTER, "namespace": NS},
                     "spec": {"brokers": {"replicas": 3}, "topicDefaults": {"partitions": 2}}})
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    return Kube(client)


@pytest.fixture
def reconciler(apiserver: LocalApiServer, kube: Kube, kafka: LocalKafkaCluster) -> TopicReconciler:
    """The topic pass with the rights the chart gives the operator, and no more; each pass looks at every Topic
    (the operator's passes in between look only at what changed: the test of that makes its own)."""
    admins: dict[Connection, KafkaAdmin] = {}

    def admin(connection: Connection) -> KafkaAdmin:
        return admins.setdefault(connection, KafkaAdmin(connection))

    return TopicReconciler(operator_kube(apiserver, (NS,)), fixed(kafka.bootstrap_servers), admin,
                           look_at_all_every=0)


class DescribingAdmin(KafkaAdmin):
    """A real client that notes which topics each pass describes."""

    def __init__(self, connection: Connection) -> None:
        super().__init__(connection)
        self.described: list[set[str]] = []

    def describe_topics(self, names):  # type: ignore[no-untyped-def]
        wanted = set(names)
        self.described.append(wanted)
        return super().describe_topics(wanted)


@pytest.fixture(autouse=True)
def clean_topics(apiserver: LocalApiServer, kube: Kube) -> Iterator[None]:
    yield
    apiserver.kubectl("delete", "topics", "--all", "-n", NS, "--wait=false")
    for body in kube.list("Topic", NS):  # (no pass runs after the test to let them go; their topics stay in Kafka)
        kube.remove_finalizer("Topic", body, naming.TOPIC_FINALIZER)


def topic_resource(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "Topic", "metadata": {"name": name, "namespace": NS},
            "spec": {"clusterRef": {"name": CLUSTER}, **spec}}


def apply(apiserver: LocalApiServer, name: str, **spec: Any) -> None:
    apiserver.apply(topic_resource(name, **spec))


def status(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get("Topic", name, NS)
    assert body is not None
    return dict(body.get("status") or {})


def condition(kube: Kube, name: str, kind: str = "Ready") -> dict[str, Any]:
    return next(c for c in status(kube, name).get("conditions", []) if c["type"] == kind)


def events(apiserver: LocalApiServer, name: str) -> list[str]:
    out = apiserver.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}",
                            "-o", "json").stdout
    return [f"{e['reason']}: {e['message']}" for e in json.loads(out)["items"]]


def overrides(kafka: LocalKafkaCluster, topic: str) -> dict[str, str]:
    return wait_for(lambda: KafkaAdmin(Connection(kafka.bootstrap_servers)).topic_overrides([topic])[topic],
                    lambda _: True, 30, f"the config of {topic}")


def states(kafka: LocalKafkaCluster, topic: str, partitions: int | None = None) -> dict[int, Any]:
    """The topic's partitions once every broker knows it (and, if given, once it has that many)."""
    return wait_for(lambda: kafka_admin.partition_states(kafka.admin(), topic),
                    lambda found: partitions is None or len(found) == partitions, 30, f"partitions of {topic}")


def delete(apiserver: LocalApiServer, *names: str) -> None:
    for name in names:
        apiserver.kubectl("delete", "topic", name, "-n", NS, "--wait=false")


def run_until(reconciler: TopicReconciler, done: Any, what: str, timeout: float = 60) -> None:
    wait_for(lambda: (reconciler.reconcile(NS, CLUSTER), done())[1], bool, timeout, what, interval=1)


def test_a_calm_pass_on_the_watched_cluster_reads_nothing_from_the_api_server(apiserver, kube, reconciler):
    # Given a Topic in Kafka and Ready, and the pass given the KafkaCluster and Topics as the watch has them
    apply(apiserver, "calm", partitions=1, replicas=3)
    run_until(reconciler, lambda: condition(kube, "calm")["status"] == "True", "calm Ready")
    cluster, topic = kube.get(naming.CLUSTER_KIND, CLUSTER, NS), kube.get("Topic", "calm", NS)
    watching = TopicReconciler(reconciler.kube, reconciler.locate, reconciler.admin, lambda _namespace: [topic],
                               lambda namespace, name: cluster if (namespace, name) == (NS, CLUSTER) else None)
    # When it passes with nothing changed
    before = _kube_requests()
    watching.reconcile(NS, CLUSTER)
    # Then it neither read nor wrote anything through the API server (it read the KafkaCluster each pass)
    assert _kube_requests() - before == Counter()


def test_a_calm_pass_counted_call_by_call(apiserver, kube, kafka):
    # Given a Topic Ready, and passes reaching Kafka through a proxy that counts each request, given the
    # KafkaCluster and Topics as the watch has them
    proxy = KafkaProxy(kafka.brokers[0].broker_port)
    try:
        admin = KafkaAdmin(Connection(proxy.address))
        whole = TopicReconciler(operator_kube(apiserver, (NS,)), fixed(proxy.address), lambda _: admin,
                                look_at_all_every=0)
        apply(apiserver, "counted", partitions=2, replicas=3)
        run_until(whole, lambda: condition(kube, "counted")["status"] == "True", "counted Ready")
        topic, cluster = kube.get("Topic", "counted", NS), kube.get(naming.CLUSTER_KIND, CLUSTER, NS)
        calls = {}
        for every in (0, CHECK_INTERVAL):  # (every pass looks at every Topic; the operator's passes between those)
            calm = TopicReconciler(whole.kube, whole.locate, whole.admin, lambda _namespace: [topic],
                                   lambda namespace, name: cluster if (namespace, name) == (NS, CLUSTER) else None,
                                   look_at_all_every=every)
            calm.reconcile(NS, CLUSTER)  # (the first pass of a process looks at every Topic)
            # When it passes again, nothing changed
            asked, requests = proxy.requests(), _kube_requests()
            calm.reconcile(NS, CLUSTER)
            calls[every] = (Counter({wire_name(key): n for key, n in (proxy.requests() - asked).items()}),
                            _kube_requests() - requests)
        # Then a pass that looks at every Topic asks Kafka four things, in one request each, and the API server
        # nothing; a pass between those asks neither anything
        assert calls == {0: (Counter({"Metadata": 1, "DescribeConfigs": 1, "DescribeCluster": 1,
                                      "ListPartitionReassignments": 1}), Counter()),
                         CHECK_INTERVAL: (Counter(), Counter())}
    finally:
        proxy.close()


def test_a_calm_pass_makes_no_report_again_and_a_change_in_kafka_still_reaches_the_status(apiserver, kube, kafka,
                                                                                          reconciler, monkeypatch):
    # Given a Topic Ready, and a pass on it as the watch has it that wrote nothing
    apply(apiserver, "quiet", partitions=2, replicas=3)
    run_until(reconciler, lambda: condition(kube, "quiet")["status"] == "True", "quiet Ready")
    topic = kube.get("Topic", "quiet", NS)
    watching = TopicReconciler(reconciler.kube, reconciler.locate, reconciler.admin, lambda _namespace: [topic],
                               look_at_all_every=0)
    watching.reconcile(NS, CLUSTER)
    made: list[str] = []
    pending = writer.pending
    monkeypatch.setattr(writer, "pending", lambda body, *rest: made.append(body["metadata"]["name"]) or pending(
        body, *rest))
    # When it passes again, nothing changed
    watching.reconcile(NS, CLUSTER)
    # Then it made no status to compare with the stored one
    assert made == []
    # And partitions added behind its back still reach the status
    kafka.tool("kafka-topics.sh", "--bootstrap-server", kafka.bootstrap_servers, "--alter", "--topic", "quiet",
               "--partitions", "3")
    run_until(watching, lambda: condition(kube, "quiet")["reason"] == "PartitionsAboveSpec",
              "the extra partition reported")
    assert "quiet" in made


def test_a_create_kafka_never_answers_says_it_cannot_be_asked_and_a_later_pass_makes_the_topic(
        apiserver, kube, kafka):
    # Given the pass's client reaching Kafka through a proxy that takes the next CreateTopics request and never
    # passes it on (a broker stuck forwarding it), its reads answered
    proxy = KafkaProxy(kafka.brokers[0].broker_port)
    admin = KafkaAdmin(Connection(proxy.address), timeout=2.0)
    stuck = TopicReconciler(operator_kube(apiserver, (NS,)), fixed(proxy.address), lambda _: admin,
                            look_at_all_every=0)
    apply(apiserver, "unanswered", partitions=1, replicas=3)
    proxy.leave_unanswered(wire.CREATE_TOPICS)
    try:
        # When a pass asks it to create the topic, Then the Topic says Kafka cannot be asked, not that Kafka
        # refused it (as it said before: InvalidConfig, "Kafka refused it: ... Timed out")
        stuck.reconcile(NS, CLUSTER)
        ready = condition(kube, "unanswered")
        assert (ready["status"], ready["reason"]) == ("False", "KafkaUnreachable"), ready
        assert not [e for e in events(apiserver, "unanswered") if e.startswith("InvalidConfig")]
        # And a later pass, answered, makes it
        run_until(stuck, lambda: condition(kube, "unanswered")["status"] == "True", "unanswered Ready")
        assert len(states(kafka, "unanswered")) == 1
    finally:
        proxy.close()


def test_a_pass_before_the_watch_brought_the_cluster_still_deletes_a_deleted_topics_kafka_topic(apiserver, kube, kafka,
                                                                                                 reconciler):
    # Given a Topic in Kafka, then deleted
    apply(apiserver, "early", partitions=1, replicas=3)
    run_until(reconciler, lambda: condition(kube, "early")["status"] == "True", "early Ready")
    delete(apiserver, "early")
    # When passes run on a watch that has brought the Topic but not its KafkaCluster yet (an operator just started)
    starting = TopicReconciler(reconciler.kube, reconciler.locate, reconciler.admin,
                               lambda _namespace: [b for b in [kube.get("Topic", "early", NS)] if b is not None],
                               lambda _namespace, _name: None)
    run_until(starting, lambda: kube.get("Topic", "early", NS) is None, "early let go")
    # Then its Kafka topic was deleted first (a cluster taken for gone lets Topics go and keeps their topics)
    assert "early" not in kafka.admin().list_topics(timeout=10).topics


def _kube_requests() -> Counter[tuple[str, ...]]:
    return Counter({tuple(s.labels.values()): int(s.value) for metric in REGISTRY.collect()
                    if metric.name == "krafty_kube_requests" for s in metric.samples if s.name.endswith("_total")})


def test_a_pass_on_a_view_one_write_behind_never_replaces_anothers_finalizer(apiserver, kube, kafka, reconciler):
    # Given the body of a new Topic as a watch delivered it, then another controller's finalizer added since
    apply(apiserver, "behind", partitions=1, replicas=3)
    seen = kube.get("Topic", "behind", NS)
    assert seen is not None
    assert not seen["metadata"].get("finalizers")
    other = "example.com/keep"
    apiserver.kubectl("patch", "topic", "behind", "-n", NS, "--type=json",
                      "-p", json.dumps([{"op": "add", "path": "/metadata/finalizers", "value": [other]}]))
    # When a pass runs on that view (it would add its finalizer as the whole list)
    behind = TopicReconciler(reconciler.kube, reconciler.locate, reconciler.admin, lambda namespace: [seen])
    behind.reconcile(NS, CLUSTER)
    # Then the other finalizer stays, and the pass still did its work: the topic exists, the status says so
    current = kube.get("Topic", "behind", NS)
    assert current is not None
    assert current["metadata"]["finalizers"] == [other]
    assert status(kube, "behind")["topicName"] == "behind"
    # And the next pass, on the current view, holds its own beside it
    reconciler.reconcile(NS, CLUSTER)
    current = kube.get("Topic", "behind", NS)
    assert current is not None
    assert current["metadata"]["finalizers"] == [other, naming.TOPIC_FINALIZER]
    apiserver.kubectl("patch", "topic", "behind", "-n", NS, "--type=json",
                      "-p", json.dumps([{"op": "remove", "path": "/metadata/finalizers/0"}]))


def test_status_writes_reuse_their_connections_to_the_api_server(apiserver, kube):
    # Given a Topic, When its status is written thirty times by one client
    apply(apiserver, "reused", partitions=1, replicas=3)
    client = Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))
    for i in range(30):
        client.patch_status("Topic", "reused", NS, {"partitions": i})
    assert status(kube, "reused")["partitions"] == 29
    # Then the writes went over one or two connections: each answer was read, so its connection went back to the
    # pool (an answer left unread kept its connection, and every write opened a new TLS connection)
    pools = client.api_client.rest_client.pool_manager.pools
    opened = sum(pools[key].num_connections for key in pools.keys())  # noqa: SIM118 (urllib3 refuses iter())
    assert 1 <= opened <= 2, opened


def test_passes_between_whole_ones_look_only_at_new_topics_and_drift_waits_for_the_whole_pass(
        apiserver, kube, kafka, reconciler):
    now = [0.0]
    spy = DescribingAdmin(Connection(kafka.bootstrap_servers))
    passes = TopicReconciler(reconciler.kube, reconciler.locate, lambda _connection: spy, clock=lambda: now[0])
    # Given three Topics made by a pass that looked at every Topic
    for name in ("burst-a", "burst-b", "burst-c"):
        apply(apiserver, name, partitions=1, replicas=3, config={"retention.ms": 86400000})
    assert passes.reconcile(NS, CLUSTER) == 30.0  # (the next pass that looks at every Topic: in 30 s)
    assert {"burst-a", "burst-b", "burst-c"} <= spy.described[0]
    assert [condition(kube, n)["reason"] for n in ("burst-a", "burst-b", "burst-c")] == ["TopicReady"] * 3
    # When one more Topic comes 10 s later
    now[0] = 10.0
    spy.described.clear()
    apply(apiserver, "burst-d", partitions=1, replicas=3)
    # Then the pass describes only its topic, creates it and says so, and comes back when a whole pass is due
    assert passes.reconcile(NS, CLUSTER) == 20.0
    # (the topics it looks at, then the one it created, again if the brokers did not describe it yet)
    assert spy.described[:2] == [{"burst-d"}, {"burst-d"}]
    assert all(d == {"burst-d"} for d in spy.described)
    assert condition(kube, "burst-d")["reason"] == "TopicReady"
    assert states(kafka, "burst-d", 1)
    # And a pass with nothing changed asks Kafka nothing
    spy.described.clear()
    passes.reconcile(NS, CLUSTER)
    assert spy.described == []
    # When someone changes a topic with Kafka's own tools, a pass in between leaves it (it looks at no Topic)...
    kafka.tool("kafka-configs.sh", "--bootstrap-server", kafka.bootstrap_servers, "--entity-type", "topics",
               "--entity-name", "burst-a", "--alter", "--add-config", "retention.ms=1000")
    # (brokers apply it from the metadata log: the one asked may show it a moment later)
    wait_for(lambda: overrides(kafka, "burst-a").get("retention.ms"), lambda value: value == "1000", 30,
             "the change made behind the operator's back")
    passes.reconcile(NS, CLUSTER)
    assert spy.described == []
    assert overrides(kafka, "burst-a")["retention.ms"] == "1000"
    # ...and the next whole pass, 30 s after the last one, puts it back
    now[0] = 30.0
    passes.reconcile(NS, CLUSTER)
    assert overrides(kafka, "burst-a") == {"retention.ms": "86400000"}
    passes.reconcile(NS, CLUSTER)  # (a Topic being changed is looked at again, with every other: then Ready)
    assert condition(kube, "burst-a")["reason"] == "TopicReady"
    # When a new Topic names a topic Kafka has (made outside), the pass looks at every Topic: it adopts it
    kafka.admin().create_topics([NewTopic("made-outside", 1, 3)])[  # type: ignore[index]
        "made-outside"].result(30)
    now[0] = 35.0
    spy.described.clear()
    apply(apiserver, "burst-e", topicName="made-outside", partitions=1, replicas=3)
    passes.reconcile(NS, CLUSTER)
    assert spy.described[0] == {"made-outside"}
    assert {"made-outside", "burst-a"} <= spy.described[1]
    assert status(kube, "burst-e")["topicName"] == "made-outside"
    assert any(e.startswith("TopicAdopted") for e in events(apiserver, "burst-e"))


def test_create_grow_and_configure(apiserver, kube, kafka, reconciler):
    # Given a Topic resource, When the reconciler runs, Then the topic exists as declared
    apply(apiserver, "orders", partitions=3, replicas=3, config={"retention.ms": 3600000, "cleanup.policy": "delete"})
    reconciler.reconcile(NS, CLUSTER)
    partitions = states(kafka, "orders", 3)
    assert len(partitions) == 3
    assert all(len(replicas) == 3 for _, replicas, _ in partitions.values())
    assert overrides(kafka, "orders") == {"retention.ms": "3600000", "cleanup.policy": "delete"}
    run_until(reconciler, lambda: condition(kube, "orders")["status"] == "True", "orders ready")
    assert status(kube, "orders")["topicId"]
    assert any(e.startswith("TopicCreated") for e in events(apiserver, "orders"))
    # When partitions grow and the config changes (a key set, a key changed, a key removed)
    apply(apiserver, "orders", partitions=6, replicas=3,
          config={"retention.ms": 7200000, "max.message.bytes": 2097152})
    reconciler.reconcile(NS, CLUSTER)
    # Then Kafka follows, and the removed key is back to the broker default
    assert len(states(kafka, "orders", 6)) == 6
    described = kafka.tool("kafka-configs.sh", "--bootstrap-server", kafka.bootstrap_servers, "--entity-type",
                           "topics", "--entity-name", "orders", "--describe").stdout
    assert "retention.ms=7200000" in described
    assert "max.message.bytes=2097152" in described
    assert "cleanup.policy" not in described
    run_until(reconciler, lambda: status(kube, "orders")["partitions"] == 6, "status to show 6 partitions")
    # And once it all settled, a pass that finds nothing to change writes nothing
    run_until(reconciler, lambda: condition(kube, "orders", "Progressing")["status"] == "False", "orders settled")
    before = writes()
    reconciler.reconcile(NS, CLUSTER)
    assert writes() == before


def writes() -> dict[tuple[str, ...], float]:
    """The operator's writes to the API server so far (its own request counter, by verb and kind)."""
    return {(s.labels["verb"], s.labels["kind"]): s.value for metric in metrics.KUBE_REQUESTS.collect()
            for s in metric.samples if s.name.endswith("_total") and s.labels["verb"] not in ("get", "list")}


def test_replication_factor_changes_by_reassignment(apiserver, kube, kafka, reconciler):
    apply(apiserver, "replicated", partitions=4, replicas=1, config={"min.insync.replicas": 1})
    run_until(reconciler, lambda: condition(kube, "replicated")["status"] == "True", "replicated created")
    report = traffic.produce_sequences(kafka.bootstrap_servers, "replicated", 400)
    assert report.failures == 0, report.failed
    assert len(report.acked) == 400
    # When the replication factor goes from 1 to 3
    apply(apiserver, "replicated", partitions=4, replicas=3, config={"min.insync.replicas": 1})
    reconciler.reconcile(NS, CLUSTER)
    reassignment = status(kube, "replicated").get("reassignment")
    assert reassignment is not None
    assert reassignment["partitionsTotal"] == 4
    # (throttled like scaling moves: the cluster pass removes the throttles once no move is in flight)
    throttled = overrides(kafka, "replicated")
    assert throttled["leader.replication.throttled.replicas"] == "*"
    assert throttled["follower.replication.throttled.replicas"] == "*"
    # Then every partition ends with 3 in-sync replicas, no record lost, and the reassignment done
    run_until(reconciler, lambda: status(kube, "replicated").get("replicationFactor") == 3 and
              condition(kube, "replicated")["status"] == "True", "replication factor 3")
    kafka_admin.wait_fully_in_sync(kafka.admin(), "replicated")
    assert len(traffic.consume_all(kafka.bootstrap_servers, "replicated", idle_seconds=3)) == 400
    assert status(kube, "replicated").get("reassignment") is None


def test_changing_the_clusters_topic_defaults_changes_only_new_topics(apiserver, kube, kafka, reconciler):
    # Given a Topic that leaves partitions and replicas to the cluster's defaults (2 partitions, RF 3)
    apply(apiserver, "defaulted")
    run_until(reconciler, lambda: condition(kube, "defaulted")["status"] == "True", "defaulted created")
    assert status(kube, "defaulted")["createdWith"] == {"partitions": 2, "replicationFactor": 3}
    # When the defaults change to 4 partitions and RF 2
    defaults = {"spec": {"topicDefaults": {"partitions": 4, "replicationFactor": 2, "minInsyncReplicas": 1}}}
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(defaults))
    try:
        apply(apiserver, "defaulted-new")
        run_until(reconciler, lambda: condition(kube, "defaulted-new")["status"] == "True", "defaulted-new created")
        # Then the existing topic keeps what it was made with; only the new one follows the new defaults
        assert [(len(r), len(i)) for _, r, i in states(kafka, "defaulted").values()] == [(3, 3), (3, 3)]
        assert len(states(kafka, "defaulted-new")) == 4
        assert all(len(r) == 2 for _, r, _ in states(kafka, "defaulted-new", 4).values())
        assert condition(kube, "defaulted")["status"] == "True"
    finally:
        back = {"spec": {"topicDefaults": {"partitions": 2, "replicationFactor": 3, "minInsyncReplicas": 2}}}
        apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(back))


def test_adopts_a_matching_topic_and_holds_a_different_one(apiserver, kube, kafka, reconciler):
    kafka_admin.create_topic(kafka.admin(), "legacy-same", 2, 3, **{"retention.ms": "60000"})
    kafka_admin.create_topic(kafka.admin(), "legacy-other", 2, 3, **{"retention.ms": "60000"})
    apply(apiserver, "legacy-same", partitions=2, replicas=3, config={"retention.ms": 60000})
    apply(apiserver, "legacy-other", partitions=4, replicas=3, config={"retention.ms": 120000})
    reconciler.reconcile(NS, CLUSTER)
    # Then the matching one is taken over
    assert condition(kube, "legacy-same")["status"] == "True"
    assert any(e.startswith("TopicAdopted") for e in events(apiserver, "legacy-same"))
    # And the different one is reported and left alone
    pending = condition(kube, "legacy-other")
    assert pending["reason"] == "AdoptionPending"
    assert "partitions 2 in Kafka, 4 in the spec" in pending["message"]
    assert "retention.ms=60000 in Kafka, 120000 in the spec" in pending["message"]
    assert len(states(kafka, "legacy-other")) == 2
    assert overrides(kafka, "legacy-other") == {"retention.ms": "60000"}
    # When the user tells the operator to apply the spec
    apiserver.kubectl("annotate", "topic", "legacy-other", "-n", NS, "kafka.krafty.io/adopt=force")
    reconciler.reconcile(NS, CLUSTER)
    assert len(states(kafka, "legacy-other", 4)) == 4
    assert overrides(kafka, "legacy-other") == {"retention.ms": "120000"}


def test_drift_is_detected_reported_and_reverted(apiserver, kube, kafka, reconciler):
    apply(apiserver, "drifting", partitions=2, replicas=3, config={"retention.ms": 86400000})
    reconciler.reconcile(NS, CLUSTER)
    # When someone changes it with Kafka's own tools
    kafka.tool("kafka-configs.sh", "--bootstrap-server", kafka.bootstrap_servers, "--entity-type", "topics",
               "--entity-name", "drifting", "--alter", "--add-config", "retention.ms=1000,segment.bytes=1048576")
    # Then the next pass reports and reverts it
    reconciler.reconcile(NS, CLUSTER)
    assert overrides(kafka, "drifting") == {"retention.ms": "86400000"}
    reported = events(apiserver, "drifting")
    assert any(e.startswith("DriftReverted") and "retention.ms=1000 in Kafka" in e for e in reported)
    # And partitions added behind its back are reported (Kafka cannot remove them)
    kafka.tool("kafka-topics.sh", "--bootstrap-server", kafka.bootstrap_servers, "--alter", "--topic", "drifting",
               "--partitions", "5")
    run_until(reconciler, lambda: condition(kube, "drifting")["reason"] == "PartitionsAboveSpec",
              "the extra partitions reported")
    assert "set spec.partitions to 5" in condition(kube, "drifting")["message"]


@pytest.mark.parametrize(("name", "spec", "reason", "message"), [
    ("bad-key", {"config": {"retention.msec": 5}}, "InvalidSpec", "retention.msec: not a topic configuration"),
    ("bad-value", {"config": {"cleanup.policy": "compact", "compression.type": "brotli"}}, "InvalidSpec",
     "brotli is not one of"),
    ("kafka-refuses", {"config": {"remote.storage.enable": "true"}}, "InvalidConfig", "Kafka refused it"),
    ("too-many-replicas", {"replicas": 5}, "InvalidSpec", "5 replicas cannot be placed on 3 brokers"),
    ("min-isr-too-high", {"replicas": 2, "config": {"min.insync.replicas": 2}}, "InvalidSpec",
     "min.insync.replicas (2) equals the replication factor (2)"),
    ("no-cluster", {"clusterRef": {"name": "missing"}}, "ClusterNotFound", "KafkaCluster 'missing' does not exist"),
])
def test_bad_input_gets_a_condition_and_changes_nothing(apiserver, kube, kafka, reconciler, name, spec, reason,
                                                        message):
    apply(apiserver, name, **spec)
    reconciler.reconcile(NS, spec.get("clusterRef", {}).get("name", CLUSTER))
    ready = condition(kube, name)
    assert ready["status"] == "False"
    assert ready["reason"] == reason
    assert message in ready["message"]
    assert name not in kafka.admin().list_topics(timeout=10).topics


def test_a_name_kafka_refuses(apiserver, kube, kafka, reconciler):
    # Given a topic "metrics.cpu" in Kafka, Kafka refuses "metrics_cpu" (their metric names would collide)
    kafka_admin.create_topic(kafka.admin(), "metrics.cpu", 1, 3)
    apply(apiserver, "metrics-cpu", topicName="metrics_cpu")
    reconciler.reconcile(NS, CLUSTER)
    ready = condition(kube, "metrics-cpu")
    assert ready["reason"] == "InvalidConfig"
    assert "collides" in ready["message"]
    assert "metrics_cpu" not in kafka.admin().list_topics(timeout=10).topics


def test_two_resources_claiming_one_topic(apiserver, kube, kafka, reconciler):
    apply(apiserver, "first-claim", topicName="Shared_Topic", partitions=2)
    reconciler.reconcile(NS, CLUSTER)
    apply(apiserver, "second-claim", topicName="Shared_Topic", partitions=8, config={"retention.ms": 1000})
    reconciler.reconcile(NS, CLUSTER)
    second = condition(kube, "second-claim")
    assert second["reason"] == "Conflict"
    assert "already managed by Topic first-claim" in second["message"]
    assert len(states(kafka, "Shared_Topic")) == 2
    assert overrides(kafka, "Shared_Topic") == {}
    # Deleting the losing claim never deletes the topic
    delete(apiserver, "second-claim")
    reconciler.reconcile(NS, CLUSTER)
    assert kube.get("Topic", "second-claim", NS) is None
    assert "TopicNotManaged: the operator never managed a Kafka topic for this resource: nothing to delete" in \
        events(apiserver, "second-claim")
    assert "Shared_Topic" in kafka.admin().list_topics(timeout=10).topics


def test_deletion_policies_and_live_readers(apiserver, kube, kafka, reconciler):
    apply(apiserver, "to-delete", partitions=1, deletionPolicy="Delete")
    apply(apiserver, "to-keep", partitions=1, deletionPolicy="Retain")
    apply(apiserver, "being-read", partitions=1, deletionPolicy="Delete")
    reconciler.reconcile(NS, CLUSTER)
    # Each holds the operator's finalizer from the first pass (kopf, which only watches, writes none)
    for name in ("to-delete", "to-keep", "being-read"):
        assert (kube.get("Topic", name, NS) or {})["metadata"].get("finalizers") == [naming.TOPIC_FINALIZER]
    traffic.produce_sequences(kafka.bootstrap_servers, "to-keep", 50)
    # A consumer group actively reading one of them
    reader = Consumer(traffic.client_config(kafka.bootstrap_servers, **{"group.id": "live-reader",
                                                                        "auto.offset.reset": "earliest"}))
    reader.subscribe(["being-read"])
    wait_for(lambda: (reader.poll(0.5), reader.assignment())[1], bool, 60, "the reader's assignment")
    try:
        # When all three are deleted, Then one pass deletes the topic no group reads, keeps the Retain one, and
        # holds the one being read (asked again soon)
        delete(apiserver, "to-delete", "to-keep", "being-read")
        assert reconciler.reconcile(NS, CLUSTER) == DELETION_RETRY
        assert (kube.get("Topic", "to-delete", NS), kube.get("Topic", "to-keep", NS)) == (None, None)
        assert "TopicDeleted: deleted to-delete from Kafka" in events(apiserver, "to-delete")
        assert "TopicRetained: to-keep stays in Kafka (deletionPolicy Retain)" in events(apiserver, "to-keep")
        blocked = condition(kube, "being-read")
        assert blocked["reason"] == "DeletionBlocked"
        assert "consumer groups live-reader are still reading it" in blocked["message"]
        reconciler.reconcile(NS, CLUSTER)
        assert kube.get("Topic", "being-read", NS) is not None
        # The user confirms: then it goes
        apiserver.kubectl("annotate", "topic", "being-read", "-n", NS, "kafka.krafty.io/confirm-deletion=true")
        assert reconciler.reconcile(NS, CLUSTER) is None  # (nothing left to look at)
        assert kube.get("Topic", "being-read", NS) is None
    finally:
        reader.close()
    topics = wait_for(lambda: kafka.admin().list_topics(timeout=10).topics,
                      lambda t: "to-delete" not in t and "being-read" not in t, 30, "deleted topics gone")
    assert "to-keep" in topics
    assert len(traffic.consume_all(kafka.bootstrap_servers, "to-keep", idle_seconds=3)) == 50


def test_many_topics_in_one_pass_and_one_bad_topic_holds_nothing(apiserver, kube, kafka, reconciler):
    docs = [topic_resource(f"bulk-{i:03d}", partitions=1, replicas=2, config={"retention.ms": 600000 + i})
            for i in range(120)]
    docs.append(topic_resource("bulk-bad", config={"remote.storage.enable": "true"}))
    apiserver.kubectl("apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))
    before = writes().get(("patch-status", "Topic"), 0)
    reconciler.reconcile(NS, CLUSTER)
    existing = kafka.admin().list_topics(timeout=10).topics
    assert all(f"bulk-{i:03d}" in existing for i in range(120))
    assert overrides(kafka, "bulk-077") == {"retention.ms": "600077"}
    assert condition(kube, "bulk-bad")["reason"] == "InvalidConfig"
    # every resource's status and Event written by that same pass (side by side, none left out), and whole: the
    # topics it created were described before it wrote, so each is Ready with its id after one status write
    assert [status(kube, f"bulk-{i:03d}").get("topicId") is not None for i in range(120)] == [True] * 120
    assert [condition(kube, f"bulk-{i:03d}")["status"] for i in range(120)] == ["True"] * 120
    assert writes()[("patch-status", "Topic")] - before == 121
    created = json.loads(apiserver.kubectl("get", "events", "-n", NS, "--field-selector", "reason=TopicCreated",
                                           "-o", "json").stdout)["items"]
    assert {e["involvedObject"]["name"] for e in created} >= {f"bulk-{i:03d}" for i in range(120)}
    reconciler.reconcile(NS, CLUSTER)
    assert writes()[("patch-status", "Topic")] - before == 121  # (the next pass: nothing to write)
    assert condition(kube, "bulk-bad")["reason"] == "InvalidConfig"


def test_consumer_sees_new_partitions(apiserver, kube, kafka, reconciler):
    apply(apiserver, "growing", partitions=1, replicas=3)
    reconciler.reconcile(NS, CLUSTER)
    apply(apiserver, "growing", partitions=4, replicas=3)
    reconciler.reconcile(NS, CLUSTER)
    consumer = Consumer(traffic.client_config(kafka.bootstrap_servers, **{"group.id": "growing-reader"}))
    try:
        metadata = consumer.list_topics("growing", timeout=10)
        assert len(metadata.topics["growing"].partitions) == 4
    finally:
        consumer.close()


def test_a_paused_cluster_changes_no_topic(apiserver, kube, kafka, reconciler):
    apiserver.kubectl("annotate", "kafkacluster", CLUSTER, "-n", NS, "kafka.krafty.io/paused=true", "--overwrite")
    try:
        apply(apiserver, "while-paused", partitions=2)
        reconciler.reconcile(NS, CLUSTER)
        assert condition(kube, "while-paused")["reason"] == "Paused"
        assert "while-paused" not in kafka.admin().list_topics(timeout=10).topics
    finally:
        apiserver.kubectl("annotate", "kafkacluster", CLUSTER, "-n", NS, "kafka.krafty.io/paused-")
    run_until(reconciler, lambda: condition(kube, "while-paused")["status"] == "True", "created after the pause")


def test_topics_of_a_cluster_being_deleted_are_let_go_without_waiting_for_kafka(apiserver, kube, kafka, reconciler):
    # Given a second cluster (held by a finalizer of the test's) with a Topic the operator made
    apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
                     "metadata": {"name": "going", "namespace": NS, "finalizers": ["test.krafty.io/hold"]},
                     "spec": {"brokers": {"replicas": 3}}})
    apiserver.apply({**topic_resource("goes-with-it", partitions=1, deletionPolicy="Delete"),
                     "spec": {"clusterRef": {"name": "going"}, "partitions": 1, "deletionPolicy": "Delete"}})
    reconciler.reconcile(NS, "going")
    # (made: every broker's metadata shows it within moments, the one asked perhaps not at once)
    wait_for(lambda: kafka.admin().list_topics(timeout=10).topics, lambda topics: "goes-with-it" in topics, 30,
             "goes-with-it in Kafka's metadata")
    try:
        # When the cluster is being deleted, Then the Topic's deletion lets go at once
        apiserver.kubectl("delete", "kafkacluster", "going", "-n", NS, "--wait=false")
        delete(apiserver, "goes-with-it")
        assert reconciler.reconcile(NS, "going") is None
        assert kube.get("Topic", "goes-with-it", NS) is None
        assert ("TopicLeftToCluster: KafkaCluster going is being deleted: goes-with-it goes with it (its data stays "
                "on kept volumes)") in events(apiserver, "goes-with-it")
        # And asks nothing of Kafka (whose brokers are on their way out): the topic is still there
        assert "goes-with-it" in kafka.admin().list_topics(timeout=10).topics
    finally:
        apiserver.kubectl("patch", "kafkacluster", "going", "-n", NS, "--type=merge", "-p",
                          json.dumps({"metadata": {"finalizers": None}}))


def test_a_decision_told_again_is_one_event_counted_again(apiserver, kube):
    apply(apiserver, "told", partitions=1)
    body = kube.get("Topic", "told", NS)
    assert body is not None
    for message in ("the same words", "the same words", "other words", "the same words"):
        kube.event(body, "Topic", "Checked", message)
    items = json.loads(apiserver.kubectl("get", "events", "-n", NS, "--field-selector",
                                         "involvedObject.name=told,reason=Checked", "-o", "json").stdout)["items"]
    assert sorted((e["message"], e["count"]) for e in items) == [("other words", 1), ("the same words", 3)]


def test_topics_whose_records_exceed_one_request_are_created_in_several(apiserver, kube, kafka, reconciler):
    # Given two Topics of 4,999 partitions (RF 1) and one config entry: 9,998 partitions, but 10,002 metadata
    # records (a topic, a partition, a config entry each), which Kafka refuses in one CreateTopics request
    names, config = ["wide-a", "wide-b"], {"min.insync.replicas": "1"}
    refused = kafka.admin().create_topics([NewTopic(f"{n}-direct", 4999, 1, config=config) for n in names],
                                          validate_only=True)
    assert all("excessively large batch" in str(f.exception(timeout=60)) for f in refused.values())
    for name in names:
        apply(apiserver, name, partitions=4999, replicas=1, config=config)
    try:
        # When one pass sees both, Then both are made (the second perhaps not yet described by the broker asked)
        reconciler.reconcile(NS, CLUSTER)
        assert {condition(kube, n)["reason"] for n in names} <= {"TopicReady", "Creating"}
        wait_for(lambda: kafka.admin().list_topics(timeout=60).topics,
                 lambda found: [len(found[n].partitions) if n in found else 0 for n in names] == [4999, 4999], 60,
                 "both topics with 4,999 partitions")
    finally:
        for future in kafka.admin().delete_topics(names, operation_timeout=120).values():
            future.exception(timeout=180)
