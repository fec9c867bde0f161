"""The KafkaCluster pass against real brokers and a real API server: observe once, plan, act.

The KafkaCluster, its StatefulSets and pods live in a real kube-apiserver. It
has no node, so the test creates the pods a StatefulSet controller would and
marks them ready as a kubelet would. Kafka is three controllers and three
brokers as real KRaft processes, reached through the operator's endpoint
setting for running outside Kubernetes. Every check reads Kafka or the API
server itself.
"""

from __future__ import annotations

import datetime
import json
import re
from collections import Counter
from typing import Any

import kubernetes
import pytest
from confluent_kafka import Consumer
from prometheus_client import REGISTRY

from krafty import naming
from krafty.clients.connection import Connection
from krafty.clients.kube import Kube
from krafty.naming import Pool
from krafty.pki import certs, signing
from krafty.planning.cluster import Pace, PassResult
from krafty.reconcile.applied import Applied
from krafty.reconcile.cluster import ClusterReconciler, Endpoints, Outcome, Settings
from krafty.reconcile.connection import Reached
from krafty.reconcile.plans import PlanPass
from krafty.render.secrets import decoded
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.waiting import wait_for

from ..conftest import CRDS, TEST_IMAGES, operator_kube

NS = "pass"
CLUSTER = "local"
SPEC = {"brokers": {"replicas": 3, "config": {"log.retention.ms": "86400000"}},
        "controllers": {"mode": "dedicated", "replicas": 3}, "topicDefaults": {"partitions": 2}}


@pytest.fixture(scope="module")
def kafka(local_kafka_module) -> LocalKafkaCluster:
    return local_kafka_module(Layout.dedicated(3, 3))


@pytest.fixture(scope="module")
def kube(apiserver: LocalApiServer) -> Kube:
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", NS, check=False)
    apiserver.apply({"apiVersion": naming.API_VERSION, "kind": naming.CLUSTER_KIND,
                     "metadata": {"name": CLUSTER, "namespace": NS}, "spec": SPEC})
    return Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))


def _never_read(namespace: str, cluster: str) -> Connection:
    raise AssertionError(f"{namespace}/{cluster} was located from Kubernetes")


@pytest.fixture(scope="module")
def reached() -> Reached:
    """How the passes reached each cluster, for the topic, user, lag and disk passes."""
    return Reached(_never_read)


@pytest.fixture(scope="module")
def reconciler(apiserver: LocalApiServer, kube: Kube, kafka: LocalKafkaCluster, reached: Reached
               ) -> ClusterReconciler:
    """The pass with the rights the chart gives the operator, and no more."""
    return ClusterReconciler(operator_kube(apiserver, (NS,)), Settings(TEST_IMAGES, endpoints=Endpoints(
        kafka.bootstrap_servers, kafka.controller_bootstrap_servers)), reached)


def _ready_pod(apiserver: LocalApiServer, pool: Pool, ordinal: int) -> None:
    apiserver.ready_pod(NS, naming.pod(CLUSTER, pool, ordinal), naming.labels(CLUSTER, pool), "krafty/kafka:test")


@pytest.fixture(scope="module")
def calm(apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler) -> Outcome:
    """The cluster after its first passes: children made, pods ready, dynamic config applied, quorum formed."""
    first = reconciler.reconcile(_body(kube))
    assert first.pace is not Pace.CALM, first
    for pool in Pool:
        for ordinal in range(3):
            _ready_pod(apiserver, pool, ordinal)
    outcome = first
    for _ in range(10):
        outcome = reconciler.reconcile(_body(kube))
        if outcome.pace is Pace.CALM:
            break
    return outcome


def _body(kube: Kube) -> dict[str, Any]:
    body = kube.get(naming.CLUSTER_KIND, CLUSTER, NS)
    assert body is not None
    return body


def _counts(name: str) -> Counter[tuple[str, ...]]:
    out: Counter[tuple[str, ...]] = Counter()
    for metric in REGISTRY.collect():
        if metric.name == name:
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    out[tuple(sample.labels.values())] += int(sample.value)
    return out


def test_the_first_passes_bring_the_cluster_to_ready(calm: Outcome, kube: Kube, kafka: LocalKafkaCluster,
                                                     reached: Reached):
    assert (calm.result, calm.pace) == (PassResult.RECONCILED, Pace.CALM)
    status = _body(kube)["status"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions == {"Ready": ("True", "ClusterReady"), "Available": ("True", "Serving"),
                          "Progressing": ("False", "Reconciled"), "Degraded": ("False", "AsExpected")}
    assert status["readyBrokers"] == 3
    assert status["quorum"]["voters"] == [1000, 1001, 1002]
    # Every feature's finalized level and supported range is in status, as the brokers answer them: the quorum
    # dynamic (kraft.version 1: formatted with its initial controllers), metadata.version the versions' level
    features = {f["name"]: f for f in status["features"]}
    assert features["kraft.version"] == {"name": "kraft.version", "level": 1, "supportedMin": 0, "supportedMax": 1}
    assert features["metadata.version"]["level"] == status["versions"]["metadataLevel"]
    assert {"group.version", "share.version", "transaction.version"} <= features.keys()
    # The other passes reach the brokers as the pass did, without reading the cluster's ConfigMap and Secret
    assert reached.locate(NS, CLUSTER).servers == kafka.bootstrap_servers
    # The spec's dynamic broker config went to Kafka without a restart, and Kafka's own tool shows it
    shown = kafka.tool("kafka-configs.sh", "--bootstrap-server", kafka.bootstrap_servers, "--describe",
                       "--entity-type", "brokers", "--entity-default").stdout
    assert "log.retention.ms=86400000" in shown
    # The first voters' list was retired once the quorum had formed
    config = kube.get("ConfigMap", naming.config_map(CLUSTER), NS)
    assert config is not None
    assert config["data"][naming.INITIAL_CONTROLLERS_KEY] == ""


def test_a_calm_pass_reads_each_object_and_each_kafka_fact_once(calm: Outcome, kube: Kube,
                                                               reconciler: ClusterReconciler):
    body = _body(kube)
    kube_before, kafka_before = _counts("krafty_kube_requests"), _counts("krafty_kafka_requests")
    outcome = reconciler.reconcile(body)
    kube_calls = _counts("krafty_kube_requests") - kube_before
    kafka_calls = _counts("krafty_kafka_requests") - kafka_before
    print("\nKubernetes requests of one calm pass:", dict(sorted(kube_calls.items())))
    print("Kafka calls of one calm pass:", dict(sorted(kafka_calls.items())))
    assert outcome.result is PassResult.RECONCILED
    reads = {key: n for key, n in kube_calls.items() if key[0] in ("get", "list")}
    # (the Secrets: the cluster CA, the clients CA, the node certificates and the operator's certificate; the
    # Services: which external ones exist, their node ports and load balancers)
    assert reads == {("get", "ConfigMap"): 1, ("get", "StatefulSet"): 2, ("list", "Pod"): 1,
                     ("list", "PersistentVolumeClaim"): 1, ("get", "Secret"): 4, ("list", "Service"): 1}
    assert ("patch-status", naming.CLUSTER_KIND) not in kube_calls  # nothing changed: nothing written
    # Nor a child sent again: each is as this process last applied it (a resync sends them all every 2 minutes)
    assert not [key for key in kube_calls if key[0] in ("apply", "delete")], kube_calls
    # (no topic yet: topic_state asks for no topic's configs; ELR is on, so each partition's eligible leaders are
    # read too: DescribeTopicPartitions)
    assert kafka_calls == {("DescribeCluster",): 1, ("ApiVersions",): 1, ("ListPartitionReassignments",): 1,
                           ("topic_state",): 1, ("Metadata",): 1, ("DescribeTopicPartitions",): 1,
                           ("dynamic_cluster_defaults",): 1, ("DescribeConfigs",): 1, ("DescribeQuorum",): 1}


def test_a_child_deleted_behind_the_operators_back_is_put_back_by_the_next_resync(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler):
    name = naming.connection_config_map(CLUSTER)
    apiserver.kubectl("delete", "configmap", name, "-n", NS)
    # A calm pass within the resync interval leaves the children alone
    reconciler.reconcile(_body(kube))
    assert kube.get("ConfigMap", name, NS) is None
    # Once the resync interval has passed, the next pass sends every child again
    reconciler.applied = Applied(resync=0.0)
    reconciler.reconcile(_body(kube))
    found = kube.get("ConfigMap", name, NS)
    assert found is not None
    assert found["data"]["bootstrap.servers"].startswith(f"{CLUSTER}-kafka-bootstrap.{NS}.svc")


def test_an_object_of_a_childs_name_that_is_not_the_clusters_is_left_alone_and_named(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler):
    # Given a tenant's own ConfigMap under the name of the cluster's connection ConfigMap (made while it was away)
    name = naming.connection_config_map(CLUSTER)
    apiserver.kubectl("delete", "configmap", name, "-n", NS)
    apiserver.kubectl("create", "configmap", name, "-n", NS, "--from-literal=bootstrap.servers=tenant:9092")
    # When the operator starts again (it has sent nothing yet) and a pass runs
    reconciler.applied = Applied()
    reconciler.reconcile(_body(kube))
    # Then the ConfigMap is the tenant's as it was, the status names it, and an Event says what to do
    held = kube.get("ConfigMap", name, NS)
    assert held is not None
    assert held["data"] == {"bootstrap.servers": "tenant:9092"}
    conditions = {c["type"]: c for c in _body(kube)["status"]["conditions"]}
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "NameConflict")
    assert conditions["Degraded"]["reason"] == "NameConflict"
    assert f"ConfigMap {name} exists and is left alone: it was not made by the operator for this cluster" in \
        conditions["Ready"]["message"]
    assert any(e["reason"] == "NameConflict" and name in e["message"] for e in kube.list("Event", NS))
    # And every other child was looked at and kept (the StatefulSets are the cluster's own)
    assert kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.BROKER), NS) is not None
    # When the tenant removes it, Then the next pass makes the cluster's own and the condition clears
    apiserver.kubectl("delete", "configmap", name, "-n", NS)
    reconciler.reconcile(_body(kube))
    made = kube.get("ConfigMap", name, NS)
    assert made is not None
    assert made["data"]["bootstrap.servers"].startswith(f"{CLUSTER}-kafka-bootstrap.{NS}.svc")
    assert {c["type"]: c["reason"] for c in _body(kube)["status"]["conditions"]}["Ready"] != "NameConflict"


def test_a_dynamic_config_change_reaches_kafka_in_one_pass_without_a_restart(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler,
        kafka: LocalKafkaCluster):
    # Given a spec change of a key Kafka changes at runtime
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge",
                      "-p", json.dumps({"spec": {"brokers": {"config": {"log.retention.ms": "3600000"}}}}))
    pids = kafka.pids()
    # When one pass runs
    reconciler.reconcile(_body(kube))
    # Then Kafka has it, no broker process restarted, and the cluster says what it did
    shown = kafka.tool("kafka-configs.sh", "--bootstrap-server", kafka.bootstrap_servers, "--describe",
                       "--entity-type", "brokers", "--entity-default").stdout
    assert "log.retention.ms=3600000" in shown
    assert kafka.pids() == pids
    events = kube.list("Event", NS)
    assert any(e["reason"] == "DynamicConfigApplied" and "log.retention.ms=3600000" in e["message"] for e in events)


def _described_features(kafka: LocalKafkaCluster) -> dict[str, int]:
    out = kafka.tool("kafka-features.sh", "--bootstrap-server", kafka.bootstrap_servers, "describe").stdout
    return {name: int(level) for name, level in re.findall(r"Feature: (\S+)\s.*?FinalizedVersionLevel: (\d+)", out)
            if name != "metadata.version"}


def _feature_status(kube: Kube) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in _body(kube)["status"]["features"]}


def _features(apiserver: LocalApiServer, levels: dict[str, int | None]) -> None:
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge",
                      "-p", json.dumps({"spec": {"features": levels}}))


def test_feature_levels_go_where_the_spec_says_one_at_a_time_and_what_cannot_go_back_is_refused(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler,
        kafka: LocalKafkaCluster):
    before = _described_features(kafka)
    assert before["share.version"] == before["eligible.leader.replicas.version"] == 1
    try:
        # Given a spec that turns share groups and eligible leader replicas off
        _features(apiserver, {"share.version": 0, "eligible.leader.replicas.version": 0})
        # When passes run, Then Kafka lowers them one a pass, as its own tool shows, and status says so
        for _ in range(3):
            reconciler.reconcile(_body(kube))
        assert {k: v for k, v in _described_features(kafka).items() if k in ("share.version",
                "eligible.leader.replicas.version")} == {"share.version": 0, "eligible.leader.replicas.version": 0}
        shown = _feature_status(kube)
        assert (shown["share.version"]["level"], shown["share.version"]["wanted"]) == (0, 0)
        lowered = [e["message"] for e in kube.list("Event", NS) if e["reason"] == "FeatureLowered"]
        assert any("lowering share.version from 1 to 0" in m for m in lowered), lowered
        # And raised again once the spec asks (the cluster healthy)
        _features(apiserver, {"share.version": 1, "eligible.leader.replicas.version": 1})
        for _ in range(3):
            reconciler.reconcile(_body(kube))
        assert _described_features(kafka) == before
        # And while a group of the consumer protocol exists, group.version is not turned off: status names it
        consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "next-gen",
                             "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        consumer.subscribe(["__krafty-probe"])
        consumer.poll(5)
        try:
            _features(apiserver, {"group.version": 0})
            reconciler.reconcile(_body(kube))
            held = _feature_status(kube)["group.version"]
            assert (held["level"], held["wanted"]) == (1, 0)
            assert "group.version stays 1 while consumer groups use it (next-gen)" in held["waiting"], held
        finally:
            consumer.close()
        # And a spec lowering kraft.version is refused before anything happens, naming it
        _features(apiserver, {"group.version": None, "kraft.version": 0})
        reconciler.reconcile(_body(kube))
        ready = next(c for c in _body(kube)["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["reason"], ready["message"]) == ("FeatureRefused", "spec.features.kraft.version 0 is below the "
                                                       "cluster's kraft.version 1, which Kafka cannot lower. Nothing "
                                                       "changes")
        assert _described_features(kafka) == before
    finally:
        _features(apiserver, {"share.version": None, "eligible.leader.replicas.version": None,
                              "group.version": None, "kraft.version": None})
        reconciler.reconcile(_body(kube))


def test_a_partition_waiting_for_an_eligible_leader_replica_is_shown_and_holds_elr_on(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler,
        kafka: LocalKafkaCluster):
    # Given ELR on (the release's default for a new cluster), and a partition on brokers 1 and 2 with min ISR 2
    assert _described_features(kafka)["eligible.leader.replicas.version"] == 1
    kafka.tool("kafka-topics.sh", "--bootstrap-server", kafka.bootstrap_servers, "--create", "--topic", "waiting",
               "--replica-assignment", "1:2", "--config", "min.insync.replicas=2")
    try:
        # When broker 1 stops (the ISR drops below min ISR: Kafka makes 1 an eligible leader replica) and then
        # broker 2 (the ISR is empty, the partition offline)
        kafka.stop_node(1)
        kafka.stop_node(2)
        described = wait_for(lambda: kafka.tool("kafka-topics.sh", "--bootstrap-server", kafka.bootstrap_servers,
                                                "--describe", "--topic", "waiting").stdout,
                             lambda out: re.search(r"Isr: \s*Elr: (1,2|2,1)\s", out) is not None, 60,
                             "an empty ISR and eligible leader replicas 1 and 2")
        reconciler.reconcile(_body(kube))
        # Then status counts it as Kafka's tool shows it: offline, waiting for an eligible leader replica
        status = _body(kube)["status"]
        assert (status["partitions"]["offline"], status["partitions"]["eligibleLeadersOnly"]) == (1, 1), described
        available = next(c for c in status["conditions"] if c["type"] == "Available")
        assert available["message"].endswith("1 of them wait for an eligible leader replica (ELR) to come back, "
                                             "with every committed record"), available
        # And a spec turning ELR off waits for it, naming the partition (lowering would clear its ELR)
        _features(apiserver, {"eligible.leader.replicas.version": 0})
        reconciler.reconcile(_body(kube))
        held = _feature_status(kube)["eligible.leader.replicas.version"]
        assert (held["level"], held["wanted"]) == (1, 0)
        assert "while partitions wait for an eligible leader replica (waiting-0)" in held["waiting"], held
        assert _described_features(kafka)["eligible.leader.replicas.version"] == 1
    finally:
        _features(apiserver, {"eligible.leader.replicas.version": None})
        for broker in (1, 2):
            if not kafka.nodes[broker].running:
                kafka.start_node(broker)
        kafka.wait_ready(120)
        kafka.tool("kafka-topics.sh", "--bootstrap-server", kafka.bootstrap_servers, "--delete", "--topic", "waiting")
        reconciler.reconcile(_body(kube))
    assert _body(kube)["status"]["partitions"]["eligibleLeadersOnly"] == 0


def test_a_kafkaclusterplan_gets_the_plan_of_its_spec_once_and_the_cluster_is_not_changed(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler):
    # Given a KafkaClusterPlan of a static change (every broker restarts) and a dynamic one, and one of a cluster
    # that does not exist; the plan pass with the chart's rights only
    spec = {**_body(kube)["spec"], "brokers": {**SPEC["brokers"], "config": {
        "log.retention.ms": "7200000", "queued.max.requests": "600"}}}
    for name, cluster in (("grow", CLUSTER), ("nowhere", "absent")):
        apiserver.apply({"apiVersion": naming.API_VERSION, "kind": naming.PLAN_KIND,
                         "metadata": {"name": name, "namespace": NS},
                         "spec": {"clusterRef": {"name": cluster}, "spec": spec}})
    plans = PlanPass(operator_kube(apiserver, (NS,)), reconciler.preview)
    generation = _body(kube)["metadata"]["generation"]
    # When the pass plans each
    assert plans.reconcile(NS, "grow") is None
    assert plans.reconcile(NS, "nowhere") is None
    # Then the plan is in status: the brokers restart in the roll's order, the dynamic change without one
    status = kube.get(naming.PLAN_KIND, "grow", NS)["status"]
    plan = status["plan"]
    assert (plan["verdict"], status["restarts"]) == ("Changes", 3)
    assert sorted(r["pod"] for r in plan["restarts"]) == [naming.pod(CLUSTER, Pool.BROKER, i) for i in (0, 1, 2)]
    assert plan["dynamicConfig"] == ["log.retention.ms=7200000"], plan
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [("Ready", "True", "Planned")]
    assert status["observedGeneration"] == 1
    assert any(e["reason"] == "Planned" and e["involvedObject"]["name"] == "grow" for e in kube.list("Event", NS))
    # And the other says its cluster is not there
    [missing] = kube.get(naming.PLAN_KIND, "nowhere", NS)["status"]["conditions"]
    assert (missing["status"], missing["reason"]) == ("False", "ClusterNotFound")
    # And the cluster is as it was; a second pass of a planned spec reads the plan and writes nothing
    assert _body(kube)["metadata"]["generation"] == generation
    before = kube.get(naming.PLAN_KIND, "grow", NS)["metadata"]["resourceVersion"]
    assert plans.reconcile(NS, "grow") is None
    assert kube.get(naming.PLAN_KIND, "grow", NS)["metadata"]["resourceVersion"] == before


def test_a_template_kubernetes_refuses_is_reported_and_changes_nothing(calm: Outcome, apiserver: LocalApiServer,
                                                                      kube: Kube, reconciler: ClusterReconciler):
    # Given an affinity the schema lets through and the API server refuses (an unknown operator)
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}
    before = kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.BROKER), NS)
    assert before is not None
    patch = {"spec": {"brokers": {"template": {"affinity": affinity}}}}
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(patch))
    try:
        # When a pass runs, Then it does not fail: the status names the object and Kubernetes' reason
        reconciler.reconcile(_body(kube))
        conditions = {c["type"]: c for c in _body(kube)["status"]["conditions"]}
        assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "ApplyRefused")
        assert conditions["Degraded"]["reason"] == "ApplyRefused"
        assert "StatefulSet local-broker" in conditions["Degraded"]["message"]
        assert "Near" in conditions["Degraded"]["message"]
        # And the StatefulSet keeps what it had
        after = kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.BROKER), NS)
        assert after is not None
        assert after["spec"]["template"] == before["spec"]["template"]
    finally:
        undo = {"spec": {"brokers": {"template": {"affinity": None}}}}
        apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(undo))
    reconciler.reconcile(_body(kube))
    assert {c["type"]: c["reason"] for c in _body(kube)["status"]["conditions"]}["Degraded"] != "ApplyRefused"


def test_a_listener_whose_service_kubernetes_refuses_restarts_no_node_into_it(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler):
    # Given a node port another Service of the namespace holds
    apiserver.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "tenant-web", "namespace": NS},
                     "spec": {"type": "NodePort", "selector": {"app": "web"},
                              "ports": [{"port": 80, "nodePort": 31999}]}})
    node_config = kube.get("ConfigMap", naming.config_map(CLUSTER), NS)
    brokers = kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.BROKER), NS)
    assert node_config is not None
    assert brokers is not None
    # When a nodeport listener asks for it to bootstrap from
    listeners = [*_body(kube)["spec"]["listeners"],
                 {"name": "ext", "port": 9096, "type": "nodeport", "external": {"bootstrapNodePort": 31999}}]
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge",
                      "-p", json.dumps({"spec": {"listeners": listeners}}))
    try:
        reconciler.reconcile(_body(kube))
        # Then the status names the refused Service and what was therefore not sent
        conditions = {c["type"]: c for c in _body(kube)["status"]["conditions"]}
        assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "ApplyRefused")
        message = conditions["Ready"]["message"]
        assert f"Service {naming.external_service(CLUSTER, 'ext', None)}" in message
        assert "31999" in message
        assert ("not sent, so that no node restarts into part of the change: "
                f"StatefulSet {naming.statefulset(CLUSTER, Pool.BROKER)}") in message
        assert any(e["reason"] == "RestartsHeld" and naming.statefulset(CLUSTER, Pool.BROKER) in e["message"]
                   for e in kube.list("Event", NS))
        # And the nodes' config and StatefulSets are as they were: no broker would advertise a listener no
        # Service reaches, not even one restarted for another reason
        assert kube.get("ConfigMap", naming.config_map(CLUSTER), NS)["data"] == node_config["data"]
        after = kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.BROKER), NS)
        assert after is not None
        assert after["spec"]["template"] == brokers["spec"]["template"]
    finally:
        apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge",
                          "-p", json.dumps({"spec": {"listeners": listeners[:-1]}}))
        apiserver.kubectl("delete", "service", "tenant-web", "-n", NS)
    # And once the listener is taken back, the next pass is as before
    reconciler.reconcile(_body(kube))
    assert {c["type"]: c["reason"] for c in _body(kube)["status"]["conditions"]}["Ready"] != "ApplyRefused"


def test_a_pass_that_changes_a_template_looks_again_soon_for_the_roll(calm: Outcome, apiserver: LocalApiServer,
                                                                      kube: Kube, reconciler: ClusterReconciler):
    # Given a calm cluster, When its brokers' pod template changes and a pass sends the StatefulSet
    annotated = {"spec": {"brokers": {"template": {"annotations": {"example.com/team": "payments"}}}}}
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(annotated))
    try:
        sent = reconciler.reconcile(_body(kube))
        # Then that pass follows: what it observed of the pods predates the new revision the StatefulSet
        # controller makes, which no watch reports, so the next pass comes at once (not at the idle interval, nor
        # the busy one) and starts the roll
        assert sent.pace is Pace.FOLLOWING, sent
        sts = kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.BROKER), NS)
        assert sts is not None
        assert sts["spec"]["template"]["metadata"]["annotations"]["example.com/team"] == "payments"
        # And a pass with nothing more to send (no StatefulSet controller here to make a revision) is calm
        assert reconciler.reconcile(_body(kube)).pace is Pace.CALM
    finally:
        undo = {"spec": {"brokers": {"template": {"annotations": None}}}}
        apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(undo))
    assert reconciler.reconcile(_body(kube)).pace is not Pace.CALM
    assert reconciler.reconcile(_body(kube)).pace is Pace.CALM


def test_a_template_admission_refuses_restarts_no_node_and_says_why(calm: Outcome, apiserver: LocalApiServer,
                                                                     kube: Kube, reconciler: ClusterReconciler):
    # Given a template with a priority class that does not exist (the StatefulSet takes it, no pod could)
    sts = naming.statefulset(CLUSTER, Pool.BROKER)
    patch = {"spec": {"brokers": {"template": {"priorityClassName": "no-such-class"}}}}
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(patch))
    reconciler.reconcile(_body(kube))
    # (what the StatefulSet controller would record: a new revision the running pods do not have)
    apiserver.kubectl("patch", "statefulset", sts, "-n", NS, "--subresource=status", "--type=merge",
                      "-p", json.dumps({"status": {"replicas": 3, "updateRevision": f"{sts}-new"}}))
    pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.list("Pod", NS)}
    try:
        # When a pass reaches the roll, Then it tries a preflight pod first, which admission refuses
        reconciler.reconcile(_body(kube))
        conditions = {c["type"]: c for c in _body(kube)["status"]["conditions"]}
        assert conditions["Degraded"]["reason"] == "ApplyRefused"
        assert "no-such-class" in conditions["Degraded"]["message"]
        assert naming.preflight_pod(f"{sts}-new") in conditions["Degraded"]["message"]
        # And no node restarted
        assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.list("Pod", NS)} == pods_before
    finally:
        undo = {"spec": {"brokers": {"template": {"priorityClassName": None}}}}
        apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(undo))
        apiserver.kubectl("patch", "statefulset", sts, "-n", NS, "--subresource=status", "--type=merge",
                          "-p", json.dumps({"status": {"updateRevision": None}}))
    reconciler.reconcile(_body(kube))


def test_a_setting_from_a_missing_secret_changes_nothing_and_a_changed_secret_rolls_the_brokers(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler):
    def template() -> dict[str, Any]:
        sts = kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.BROKER), NS)
        assert sts is not None
        return dict(sts["spec"]["template"])

    def secret(value: str) -> None:
        apiserver.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tokens", "namespace": NS},
                         "stringData": {"key": value}})

    before = template()
    refs = {"delegation.token.secret.key": {"name": "tokens", "key": "key"}}
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge",
                      "-p", json.dumps({"spec": {"brokers": {"configFromSecrets": refs}}}))
    try:
        # Given a setting from a Secret that does not exist, When a pass runs, Then it says so and changes nothing
        assert reconciler.reconcile(_body(kube)).result is PassResult.INVALID
        conditions = {c["type"]: c for c in _body(kube)["status"]["conditions"]}
        assert conditions["Degraded"]["reason"] == "ConfigSecretMissing"
        assert "key key of Secret tokens" in conditions["Degraded"]["message"]
        assert template() == before
        # When the Secret appears, Then the brokers' template mounts it and carries a digest of it
        secret("first-secret-value")
        reconciler.reconcile(_body(kube))
        first = template()
        assert first["metadata"]["annotations"][naming.CONFIG_SECRETS_ANNOTATION]
        assert any(v.get("secret", {}).get("secretName") == "tokens" for v in first["spec"]["volumes"])
        # And when the Secret's value changes, the digest does (the brokers roll), and no value is in sight
        secret("second-secret-value")
        reconciler.reconcile(_body(kube))
        second = template()
        assert (second["metadata"]["annotations"][naming.CONFIG_SECRETS_ANNOTATION]
                != first["metadata"]["annotations"][naming.CONFIG_SECRETS_ANNOTATION])
        shown = json.dumps([second, kube.get("ConfigMap", naming.config_map(CLUSTER), NS), _body(kube)])
        assert "secret-value" not in shown
    finally:
        undo = {"spec": {"brokers": {"configFromSecrets": None}}}
        apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(undo))
    reconciler.reconcile(_body(kube))
    assert "tokens" not in json.dumps(template()["spec"]["volumes"])


def test_a_ca_the_user_brings_is_checked_then_moved_to_with_both_trusted(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler):
    def tls(secret_name: str | None) -> None:
        apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p",
                          json.dumps({"spec": {"tls": {"clusterCa": {"secretName": secret_name}}}}))

    def data(name: str) -> dict[str, str]:
        return decoded(kube.get("Secret", name, NS))

    own = data(naming.cluster_ca(CLUSTER))[naming.CA_CERT_KEY]
    # Given a spec naming a CA Secret that does not exist, When a pass runs, Then it says so and changes nothing
    tls("absent-ca")
    assert reconciler.reconcile(_body(kube)).result is PassResult.INVALID
    degraded = {c["type"]: c for c in _body(kube)["status"]["conditions"]}["Degraded"]
    assert (degraded["reason"], "Secret absent-ca" in degraded["message"]) == ("CaUnusable", True)
    assert data(naming.cluster_ca(CLUSTER))[naming.CA_CERT_KEY] == own
    # When the user's CA is there (a kubernetes.io/tls Secret, as cert-manager writes it)
    mine = signing.new_ca("my own CA", datetime.datetime.now(datetime.UTC), datetime.timedelta(days=90))
    apiserver.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                     "metadata": {"name": "my-ca", "namespace": NS},
                     "stringData": {"tls.crt": mine.cert, "tls.key": mine.key}})
    tls("my-ca")
    reconciler.reconcile(_body(kube))
    # Then the cluster moves to it as in a renewal: both trusted, the one before cross-signing it
    ca = data(naming.cluster_ca(CLUSTER))
    assert (ca[naming.CA_CERT_KEY], ca[naming.PREVIOUS_CA_CERT_KEY]) == (mine.cert, own)
    assert certs.split_bundle(data(naming.cluster_ca_cert(CLUSTER))[naming.CA_CERT_KEY]) == (mine.cert, own)
    assert certs.signed_by(ca[naming.CROSS_CA_CERT_KEY], own)
    assert any(e["reason"] == "CaProvided" for e in kube.list("Event", NS))
    # And a clients CA of another Secret holding the same CA is refused, the clients CA left as it was
    clients_before = data(naming.clients_ca(CLUSTER))
    apiserver.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                     "metadata": {"name": "my-ca-again", "namespace": NS},
                     "stringData": {"tls.crt": mine.cert, "tls.key": mine.key}})
    clients_ca = {"spec": {"tls": {"clientsCa": {"secretName": "my-ca-again"}}}}
    apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(clients_ca))
    try:
        assert reconciler.reconcile(_body(kube)).result is PassResult.INVALID
        degraded = {c["type"]: c for c in _body(kube)["status"]["conditions"]}["Degraded"]
        assert degraded["reason"] == "CaUnusable"
        assert "Secret my-ca-again (tls.clientsCa) holds the cluster CA's key" in degraded["message"]
        assert data(naming.clients_ca(CLUSTER)) == clients_before
    finally:
        undo = {"spec": {"tls": {"clientsCa": {"secretName": None}}}}
        apiserver.kubectl("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(undo))


def _bound_claim(apiserver: LocalApiServer, cluster: str, ordinal: int, storage_class: str) -> str:
    """What the StatefulSet controller and a provisioner would make of one node's data claim."""
    name = naming.claim(cluster, Pool.BROKER, ordinal)
    apiserver.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": name, "namespace": NS, "labels": naming.labels(cluster, Pool.BROKER)},
                     "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                              "volumeName": f"pv-{name}", "resources": {"requests": {"storage": "1Gi"}}}})
    apiserver.kubectl("patch", "pvc", name, "-n", NS, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}))
    return name


@pytest.mark.parametrize(("cluster", "expandable"), [("grows", True), ("fixed", False)])
def test_a_larger_storage_size_is_asked_of_each_claim_where_its_class_allows_it(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler, cluster: str,
        expandable: bool):
    # Given a cluster whose broker volumes are bound at 1Gi on a class that can (or cannot) grow
    storage_class = f"{cluster}-class"
    apiserver.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": storage_class},
                     "provisioner": "example.com/none", "allowVolumeExpansion": expandable})
    storage = {"size": "1Gi", "storageClassName": storage_class}
    apiserver.apply({"apiVersion": naming.API_VERSION, "kind": naming.CLUSTER_KIND,
                     "metadata": {"name": cluster, "namespace": NS},
                     "spec": {**SPEC, "brokers": {**SPEC["brokers"], "storage": storage}}})
    body = kube.get(naming.CLUSTER_KIND, cluster, NS)
    assert body is not None
    reconciler.reconcile(body)  # its identity and StatefulSets first: claims with no identity are an earlier cluster's
    claims = [_bound_claim(apiserver, cluster, i, storage_class) for i in range(3)]
    # When its storage.size grows to 2Gi and a pass runs with the operator's rights
    apiserver.kubectl("patch", "kafkacluster", cluster, "-n", NS, "--type=merge",
                      "-p", json.dumps({"spec": {"brokers": {"storage": {"size": "2Gi"}}}}))
    for _ in range(2):  # the second pass observes what the first asked for
        body = kube.get(naming.CLUSTER_KIND, cluster, NS)
        assert body is not None
        reconciler.reconcile(body)
    # Then each claim asks for 2Gi (or none does, and the status says why), the StatefulSet's claim template
    # keeps 1Gi (Kubernetes refuses any change of it), and the status lists each volume
    asked = {c: kube.get("PersistentVolumeClaim", c, NS)["spec"]["resources"]["requests"]["storage"]  # type: ignore[index]
             for c in claims}
    assert set(asked.values()) == {"2Gi" if expandable else "1Gi"}
    sts = kube.get("StatefulSet", naming.statefulset(cluster, Pool.BROKER), NS)
    assert sts is not None
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    status = kube.get(naming.CLUSTER_KIND, cluster, NS)["status"]  # type: ignore[index]
    assert [v["claim"] for v in status["volumes"]] == claims
    assert {v["capacity"] for v in status["volumes"]} == {"1Gi"}
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    events = {e["reason"]: e["message"] for e in kube.list("Event", NS)
              if e["involvedObject"]["name"] == cluster}
    if expandable:
        assert {v["state"] for v in status["volumes"]} == {"Expanding"}
        assert "VolumeExpanding" in events
    else:
        assert (ready["status"], ready["reason"]) == ("False", "VolumeResizeRefused")
        assert ready["message"] == (f"spec.brokers.storage.size asks for 2Gi, but StorageClass {storage_class} of "
                                    f"{claims[0]} does not allow volume expansion (allowVolumeExpansion is not true)")
        assert events["VolumeResizeRefused"] == ready["message"]
    apiserver.kubectl("delete", "kafkacluster", cluster, "-n", NS, "--wait=false")
    apiserver.kubectl("patch", "kafkacluster", cluster, "-n", NS, "--type=json",
                      "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]', check=False)


def _node(apiserver: LocalApiServer, name: str, *addresses: tuple[str, str]) -> None:
    """A Kubernetes node as its kubelet registers it: with its addresses in its status."""
    apiserver.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                     "status": {"addresses": [{"type": kind, "address": a} for kind, a in addresses]}})


def test_tls_external_listeners_put_the_nodes_and_load_balancers_addresses_in_broker_certificates(
        calm: Outcome, apiserver: LocalApiServer, kube: Kube, reconciler: ClusterReconciler):
    # Given two Kubernetes nodes and a cluster with a TLS nodeport and a TLS loadbalancer listener
    cluster = "outside"
    _node(apiserver, "worker-a", ("InternalIP", "10.9.0.1"), ("ExternalIP", "203.0.113.1"), ("Hostname", "worker-a"))
    _node(apiserver, "worker-b", ("InternalIP", "10.9.0.2"))
    listeners = [{"name": "plain", "port": 9092}, {"name": "np", "port": 9094, "type": "nodeport", "tls": True},
                 {"name": "lb", "port": 9095, "type": "loadbalancer", "tls": True,
                  "external": {"brokers": [{"broker": 1, "advertisedHost": "kafka-1.example.com"}]}}]
    apiserver.apply({"apiVersion": naming.API_VERSION, "kind": naming.CLUSTER_KIND,
                     "metadata": {"name": cluster, "namespace": NS}, "spec": {**SPEC, "listeners": listeners}})

    def names() -> dict[str, set[str]]:
        data = decoded(kube.get("Secret", naming.node_certificates(cluster), NS))
        return {f"{pool.value}-{n}": set(certs.facts(data[naming.node_certificate_keys(pool, n)[0]]).alt_names)
                for pool in Pool for n in range(3)}

    def generation() -> str:
        secret = kube.get("Secret", naming.node_certificates(cluster), NS)
        assert secret is not None
        return str(secret["metadata"]["annotations"][naming.CERTIFICATE_GENERATION_ANNOTATION])

    def reconcile() -> None:
        body = kube.get(naming.CLUSTER_KIND, cluster, NS)
        assert body is not None
        reconciler.reconcile(body)

    # When its first pass runs with the operator's rights
    reconcile()
    # Then every broker's certificate names every node's address (not its host name), no controller's does
    first = names()
    for n in range(3):
        assert {"10.9.0.1", "203.0.113.1", "10.9.0.2"} <= first[f"broker-{n}"]
        assert "worker-a" not in first[f"broker-{n}"]
        assert not {"10.9.0.1", "10.9.0.2"} & first[f"controller-{n}"]
    assert "kafka-1.example.com" in first["broker-1"]
    # and the Secret lists them beside each broker's certificate, for its entrypoint to check its node against
    secret = decoded(kube.get("Secret", naming.node_certificates(cluster), NS))
    assert set(secret[naming.node_names_key(Pool.BROKER, 0)].splitlines()) == first["broker-0"]
    assert naming.node_names_key(Pool.CONTROLLER, 0) not in secret
    before = generation()
    # When the load balancers give their Services addresses and a node joins
    for which, address in (("0", "172.30.0.10"), ("1", "172.30.0.11"), ("bootstrap", "172.30.0.9")):
        given = {"status": {"loadBalancer": {"ingress": [{"ip": address}]}}}
        apiserver.kubectl("patch", "service", f"{cluster}-lb-{which}", "-n", NS, "--subresource=status",
                          "--type=merge", "-p", json.dumps(given))
    _node(apiserver, "worker-c", ("InternalIP", "10.9.0.3"))
    reconcile()
    # Then each broker's certificate names its own and the bootstrap's load balancer and the new node, issued
    # again without a new generation (no roll: each broker takes it when it next starts)
    after = names()
    assert {"172.30.0.10", "172.30.0.9", "10.9.0.3"} <= after["broker-0"]
    assert "172.30.0.11" not in after["broker-0"]
    assert {"172.30.0.11", "172.30.0.9", "kafka-1.example.com"} <= after["broker-1"]
    assert "172.30.0.10" not in after["broker-2"]
    assert generation() == before
    reasons = {e["reason"] for e in kube.list("Event", NS) if e["involvedObject"]["name"] == cluster}
    assert "CertificateAddressesChanged" in reasons
    apiserver.kubectl("delete", "kafkacluster", cluster, "-n", NS, "--wait=false")
    apiserver.kubectl("delete", "nodes", "worker-a", "worker-b", "worker-c")


def test_a_deleted_cluster_stops_its_brokers_before_its_controllers(calm: Outcome, apiserver: LocalApiServer,
                                                                     kube: Kube, reconciler: ClusterReconciler):
    """Last in this module: the cluster goes. No garbage collector runs here: the test deletes pods itself."""
    # Given a cluster the operator holds
    assert naming.CLUSTER_FINALIZER in _body(kube)["metadata"]["finalizers"]
    # When it is deleted, Then the first step stops the brokers and keeps the controllers
    apiserver.kubectl("delete", "kafkacluster", CLUSTER, "-n", NS, "--wait=false")
    assert reconciler.teardown(_body(kube)) is True
    assert kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.BROKER), NS) is None
    assert kube.get("StatefulSet", naming.statefulset(CLUSTER, Pool.CONTROLLER), NS) is not None
    progressing = {c["type"]: c for c in _body(kube)["status"]["conditions"]}["Progressing"]
    assert (progressing["status"], progressing["reason"]) == ("True", "BrokersStopping")
    # And while broker pods are still there, the cluster stays held, naming them
    assert reconciler.teardown(_body(kube)) is True
    assert "local-broker-0" in {c["type"]: c for c in _body(kube)["status"]["conditions"]}["Progressing"]["message"]
    # When the broker pods are gone, Then the cluster is let go (the collector takes the controllers)
    apiserver.kubectl("delete", "pods", "-n", NS, "-l", f"{naming.ROLE_LABEL}={Pool.BROKER.value}")
    assert reconciler.teardown(_body(kube)) is False
    assert kube.get(naming.CLUSTER_KIND, CLUSTER, NS) is None
    reasons = [e["reason"] for e in kube.list("Event", NS)]
    assert {"BrokersStopping", "ControllersStopping"} <= set(reasons)
