"""Metrics on real pods, seen through a real Prometheus (Debian's package, in a pod):
values move with the cluster, alerts fire for a real condition with no operator running, every dashboard
panel has data. (Debian builds Prometheus without Kubernetes service discovery: its targets are named by
DNS; each operator replica through a headless Service, as a ServiceMonitor would scrape each one.)"""

from __future__ import annotations

import hashlib
import json
import re
import time
import urllib.parse
from typing import Any

import pytest
from reaching import opens

from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    OPERATOR_NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    leader_metrics_text,
    repo_path,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import Image, KubeCluster
from krafty_testkit.kubectl_krafty import kubectl_krafty
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import WaitTimeout, wait_for

OPERATOR_PODS = "krafty-operator-pods"  # a headless Service: one address per operator replica
PROMETHEUS_IMAGE = Image("krafty/prometheus:e2e", repo_path("e2e", "images", "prometheus", "Dockerfile"),
                         repo_path())


class Prometheus:
    def __init__(self, kube: KubeCluster) -> None:
        self.kube = kube

    def query(self, expr: str) -> list[dict[str, Any]]:
        path = (f"/api/v1/namespaces/{NAMESPACE}/services/prometheus:9090/proxy/api/v1/query?"
                + urllib.parse.urlencode({"query": expr}))
        answer = json.loads(self.kube.kubectl("get", "--raw", path))
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None


# The Spark drivers of test_52_spark_operator.py, through the UI Service the Spark operator makes for each
SPARK_DRIVERS = [f"pageviews-{job}-ui-svc.{NAMESPACE}.svc.cluster.local:4040" for job in ("stream", "retention")]


def prometheus_config() -> str:
    """Static targets by stable DNS name: the operator's metrics Service, every Kafka pod of prod, and the Spark
    drivers (those absent are targets down)."""
    kafka = [{"targets": [f"prod-{pool}-{i}.prod-{pool}s.{NAMESPACE}.svc.cluster.local:9404"],
              "labels": {"namespace": NAMESPACE, "cluster": "prod", "pod": f"prod-{pool}-{i}"}}
             for pool in ("broker", "controller") for i in range(3)]
    config = {
        "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
        "rule_files": ["/etc/prometheus/rules/*.yaml"],
        "scrape_configs": [
            {"job_name": "krafty-operator", "honor_labels": True,
             "dns_sd_configs": [{"names": [f"{OPERATOR_PODS}.{OPERATOR_NAMESPACE}.svc.cluster.local"], "type": "A",
                                 "port": 8080, "refresh_interval": "5s"}]},
            {"job_name": "kafka", "static_configs": kafka},
            {"job_name": "spark-drivers", "metrics_path": "/metrics/prometheus",
             "static_configs": [{"targets": SPARK_DRIVERS, "labels": {"namespace": NAMESPACE}}]},
        ],
    }
    return json.dumps(config, indent=1)


def prometheus_objects() -> list[dict[str, Any]]:
    # (app.kubernetes.io/name: what the operator's NetworkPolicy lets scrape it by default)
    labels = {"app": "prometheus", "app.kubernetes.io/name": "prometheus"}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "prometheus", "namespace": NAMESPACE},
         "data": {"prometheus.yml": prometheus_config()}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "prometheus", "namespace": NAMESPACE, "labels": labels,
                      "annotations": {"krafty-e2e/digest": prometheus_digest()}},
         "spec": {"containers": [{"name": "prometheus", "image": PROMETHEUS_IMAGE.name,
                                  "imagePullPolicy": "IfNotPresent", "ports": [{"containerPort": 9090}],
                                  "resources": {"requests": {"cpu": "50m", "memory": "256Mi"}},
                                  "readinessProbe": {"httpGet": {"path": "/-/ready", "port": 9090}},
                                  "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus/krafty"}]}],
                  "volumes": [{"name": "config", "configMap": {"name": "prometheus"}}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "prometheus", "namespace": NAMESPACE},
         "spec": {"selector": labels, "ports": [{"port": 9090, "targetPort": 9090}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": OPERATOR_PODS, "namespace": OPERATOR_NAMESPACE},
         "spec": {"clusterIP": "None", "selector": {"app.kubernetes.io/name": "krafty-operator"},
                  "ports": [{"name": "metrics", "port": 8080, "targetPort": 8080}]}},
    ]


def prometheus_digest() -> str:
    """What the running Prometheus must have been started with: its configuration and the chart's alert rules
    (baked into its image)."""
    rules = repo_path("charts", "krafty-operator", "files", "prometheus-rules.yaml").read_bytes()
    return hashlib.sha256(prometheus_config().encode() + rules).hexdigest()[:16]


def start_prometheus(operator: KubeCluster) -> Prometheus:
    """The Prometheus pod (the same one whichever module starts it first), once it is ready; one started with
    another configuration or other rules (a cluster kept from an earlier run) is replaced."""
    operator.load_images([PROMETHEUS_IMAGE])
    pods = operator.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", "app=prometheus")["items"]
    if any(p["metadata"].get("annotations", {}).get("krafty-e2e/digest") != prometheus_digest() for p in pods):
        operator.kubectl("delete", "pod", "prometheus", "-n", NAMESPACE, "--wait=true", timeout=120)
    operator.apply(prometheus_objects())
    operator.kubectl("wait", "--for=condition=Ready", "pod/prometheus", "-n", NAMESPACE, "--timeout=180s",
                     timeout=200)
    return Prometheus(operator)


@pytest.fixture(scope="module")
def prometheus(operator: KubeCluster, prod: KafkaClusterHandle) -> Prometheus:
    prom = start_prometheus(operator)
    wait_for(lambda: prom.query('up{pod=~"prod-broker-.*"} == 1'), lambda r: len(r) == 3, 120,
             "Prometheus scraping the three brokers")
    return prom


def test_prometheus_scrapes_the_operator_and_the_brokers(prometheus: Prometheus):
    assert wait_for(lambda: prometheus.value('krafty_cluster_brokers_ready{cluster="prod"}'), lambda v: v == 3, 120,
                    "the operator's broker count") == 3
    states = prometheus.query('kafka_server_broker_state{cluster="prod"}')
    assert {r["metric"]["pod"] for r in states} == {"prod-broker-0", "prod-broker-1", "prod-broker-2"}
    assert all(r["value"][1] == "3" for r in states)  # RUNNING
    assert prometheus.value('sum(kafka_controller_activecontrollercount{cluster="prod"})') == 1
    # Each broker says how many log directories it took offline (none): the disk alert has its series
    # (a dedicated controller keeps only the metadata log, outside Kafka's LogManager)
    offline_dirs = prometheus.query('kafka_log_offline_log_directories{cluster="prod"}')
    assert sorted(r["metric"]["pod"] for r in offline_dirs) == ["prod-broker-0", "prod-broker-1", "prod-broker-2"]
    assert {r["value"][1] for r in offline_dirs} == {"0"}
    # Both operator replicas are scraped; exactly one leads
    leaders = wait_for(lambda: prometheus.query("krafty_operator_leader"), lambda r: len(r) == 2, 60,
                       "both operator replicas scraped")
    assert sorted(r["value"][1] for r in leaders) == ["0", "1"]


def test_only_prometheus_scrapes_the_operator_and_plans_go_through_the_api_server(
        prometheus: Prometheus, prod: KafkaClusterHandle, client: ClientPod):
    # Given both operator replicas, whose metrics name every watched namespace's clusters, topics and groups
    pods = prod.kube.kubectl_json("get", "pods", "-n", OPERATOR_NAMESPACE, "-l",
                                  "app.kubernetes.io/name=krafty-operator")["items"]
    addresses = [p["status"]["podIP"] for p in pods if p["status"].get("phase") == "Running"]
    assert len(addresses) == 2, pods
    # Then an ordinary pod opens none of their ports: metrics (the chart's NetworkPolicy), health
    ports = (8080, 8081)
    wait_for(lambda: {(address, port): opens(client, address, port) for address in addresses for port in ports},
             lambda seen: not any(seen.values()), 60, "every operator port closed to the client pod")
    # While Prometheus, which the policy lets in, scrapes both
    up = wait_for(lambda: prometheus.query('up{job="krafty-operator"} == 1'), lambda r: len(r) == 2, 60,
                  "both operator replicas up in Prometheus")
    assert {r["metric"]["instance"].split(":")[0] for r in up} == set(addresses)
    # And kubectl krafty reads the leader's metrics through port-forward, and plans through a KafkaClusterPlan
    screen = kubectl_krafty(prod.kube, "status", prod.name, "-n", prod.namespace)
    assert "consumer lag unknown" not in screen, screen
    preview = json.loads(kubectl_krafty(prod.kube, "plan", prod.name, "-n", prod.namespace, "-f", "-", "-o", "json",
                                        stdin=json.dumps({"spec": prod.get()["spec"]})))
    assert preview["verdict"] == "NoChange"


def test_under_replicated_partitions_rise_with_a_stopped_broker_and_return_to_zero(
        prometheus: Prometheus, prod: KafkaClusterHandle, operator: KubeCluster):
    began = time.monotonic()
    operator.apply([topic_resource("metrics-urp", "prod", partitions=6, replicas=3)])
    wait_topic_ready(operator, "metrics-urp")
    expr = 'krafty_cluster_under_replicated_partitions{cluster="prod"}'
    wait_for(lambda: prometheus.value(expr), lambda v: v == 0, 180, "no under-replicated partitions first")
    settled = time.monotonic() - began
    pod = operator.kubectl_json("get", "pod", "prod-broker-1", "-n", NAMESPACE)
    old_ip, node = pod["status"]["podIP"], pod["spec"]["nodeName"]

    def urp_or_why() -> float | str:
        value = prometheus.value(expr)
        reachable = prometheus.value('krafty_cluster_kafka_reachable{cluster="prod"}')
        return value if value is not None else f"no series (kafka reachable: {reachable}); {prod.summary()}"

    # The broker kept away until seen: its volume is on its node, so with the node cordoned its new pod waits
    # (Pending). Deleted alone, it can be back in sync (a restart takes about 11 s) before a pass and a scrape
    # (5 s each) have seen it behind.
    operator.kubectl("cordon", node)
    try:
        deleted, since = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        operator.kubectl("delete", "pod", "prod-broker-1", "-n", NAMESPACE, "--wait=false")
        wait_for(urp_or_why, lambda v: isinstance(v, float) and v > 0, 60, "under-replicated partitions")
        rose = time.monotonic() - deleted
    finally:
        operator.kubectl("uncordon", node)
    wait_for(lambda: prometheus.value(expr), lambda v: v == 0, 300, "back to zero once the broker is back")
    back = time.monotonic() - deleted
    new_ip = operator.kubectl_json("get", "pod", "prod-broker-1", "-n", NAMESPACE)["status"]["podIP"]
    # No node waited on the broker's old address once its leaders were back on it at its new one (the JVM kept a
    # name's address 30 s: the others' fetchers waited out a 10 s connection timeout, twice, while acks=all writes to
    # its partitions waited for them)
    assert prod.unanswered_connections(since) == []
    # The brokers' own gauge (JMX exporter) saw it too
    brokers = 'max_over_time(sum(kafka_server_replicamanager_underreplicatedpartitions{cluster="prod"})[5m:5s])'
    assert (prometheus.value(brokers) or 0) > 0
    ready = prod.wait_ready(300)
    report_table("prod-broker-1 deleted: krafty_cluster_under_replicated_partitions as Prometheus saw it",
                 ["topic Ready and 0 first (s)", "pod IP before", "pod IP after", "above 0 after (s)",
                  "back to 0 after (s)", "then cluster Ready (s)"],
                 [[f"{settled:.1f}", old_ip, new_ip, f"{rose:.1f}", f"{back:.1f}", f"{ready:.1f}"]])


@pytest.mark.full  # about 90 s: CI checks the operator's lag against kafka-consumer-groups.sh in test_18
def test_lag_grows_while_the_consumer_is_paused_and_drains_after(prometheus: Prometheus, prod: KafkaClusterHandle,
                                                                 client: ClientPod, operator: KubeCluster):
    operator.apply([topic_resource("metrics-lag", "prod", partitions=3, replicas=3)])
    wait_topic_ready(operator, "metrics-lag")
    lag = 'krafty_consumergroup_lag_sum{cluster="prod", group="lag-test", topic="metrics-lag"}'
    # (records keyed apart, so that every partition has some: a group commits only the partitions it read, and
    # the lag of one it never committed is no one's, Kafka's tool's included)
    assert client.cli("produce-lines", prod.bootstrap, "metrics-lag", "--key-field", "key",
                      stdin=keyed_lines(1000))["acked"] == 1000
    assert client.cli("consume", prod.bootstrap, "metrics-lag", "--group", "lag-test")["consumed"] == 1000
    wait_for(lambda: prometheus.value(lag), lambda v: v == 0, 180, "lag 0 after consuming")
    # While the consumer is paused, 2000 more records arrive: the lag shows them, partition by partition
    produced_from = time.time()
    assert client.cli("produce-lines", prod.bootstrap, "metrics-lag", "--key-field", "key",
                      stdin=keyed_lines(2000))["acked"] == 2000
    produced_to = time.time()
    try:
        wait_for(lambda: operator_lag(prometheus, "lag-test", "metrics-lag"), lambda v: sum(v.values()) == 2000,
                 180, "lag 2000 while paused")
    except WaitTimeout as timeout:
        raise AssertionError(f"{timeout}; kafka-consumer-groups.sh: {tool_lag(prod, 'lag-test')}") from None
    # And the lag in seconds is the age of the first record it has not read, growing with the wall clock, while the
    # time left before the topic's retention (the cluster's default, which another test may have set) may delete it
    # falls as fast
    retention = effective_retention(prod, "metrics-lag")
    ages = [lag_in_seconds(prometheus, "lag-test", "metrics-lag", produced_from, produced_to)]
    time.sleep(30)
    ages.append(lag_in_seconds(prometheus, "lag-test", "metrics-lag", produced_from, produced_to))
    grown = ages[1][0] - ages[0][0]
    fallen = ages[0][1] - ages[1][1]
    print(f"\nlag in seconds {ages[0][0]:.1f} -> {ages[1][0]:.1f}, retention left {ages[0][1]:.0f} -> "
          f"{ages[1][1]:.0f} s, {ages[1][2] - ages[0][2]:.0f} s apart")
    assert 15 <= grown <= 45, ages
    assert 15 <= fallen <= 45, ages
    assert retention - 600 < ages[1][1] < retention, (retention, ages)
    # When it resumes, the lag drains
    assert client.cli("consume", prod.bootstrap, "metrics-lag", "--group", "lag-test")["consumed"] == 2000
    wait_for(lambda: prometheus.value(lag), lambda v: v == 0, 180, "lag drained")
    seconds = 'max(krafty_consumergroup_lag_seconds{cluster="prod", group="lag-test", topic="metrics-lag"})'
    wait_for(lambda: prometheus.value(seconds), lambda v: v == 0, 60, "lag in seconds back to 0")


def keyed_lines(count: int) -> str:
    return "\n".join(json.dumps({"key": f"k{i}"}) for i in range(count))


def behind(prometheus: Prometheus, cluster: str, group: str, topic: str) -> tuple[float, float, float]:
    """(lag in seconds, retention left, when Prometheus sampled them) of a group on a topic, its worst partition."""
    selector = f'{{cluster="{cluster}", group="{group}", topic="{topic}"}}'
    [age] = prometheus.query(f"max(krafty_consumergroup_lag_seconds{selector})")
    [left] = prometheus.query(f"min(krafty_consumergroup_retention_seconds_left{selector})")
    return float(age["value"][1]), float(left["value"][1]), float(age["value"][0])


def lag_in_seconds(prometheus: Prometheus, group: str, topic: str, produced_from: float,
                   produced_to: float) -> tuple[float, float, float]:
    """behind(), where the age must be the wall clock since the records were produced, as read at most a lag
    interval and a scrape (10 + 5 s) before the sample."""
    value, left, sampled = behind(prometheus, "prod", group, topic)
    assert sampled - produced_to - 16 <= value <= sampled - produced_from + 1, (value, sampled, produced_from)
    return value, left, sampled


def effective_retention(prod: KafkaClusterHandle, topic: str) -> float:
    """The topic's retention.ms in seconds, its own or the default it inherits, as kafka-configs.sh shows it."""
    out = prod.kafka_tool("kafka-configs.sh", "--entity-type", "topics", "--entity-name", topic, "--describe", "--all")
    [found] = re.findall(r"^\s*retention\.ms=(\d+)", out, re.M)
    return int(found) / 1000


def tool_lag(prod: KafkaClusterHandle, group: str) -> dict[int, int]:
    """Lag per partition as Kafka's own kafka-consumer-groups.sh --describe shows it."""
    out = prod.kafka_tool("kafka-consumer-groups.sh", "--describe", "--group", group)
    rows = re.findall(rf"^{group}\s+\S+\s+(\d+)\s+\d+\s+\d+\s+(\d+)", out, re.M)
    return {int(partition): int(lag) for partition, lag in rows}


def operator_lag(prometheus: Prometheus, group: str, topic: str) -> dict[int, int]:
    found = prometheus.query(f'krafty_consumergroup_lag{{cluster="prod", group="{group}", topic="{topic}"}}')
    return {int(r["metric"]["partition"]): int(float(r["value"][1])) for r in found}


def compare_lag(prometheus: Prometheus, prod: KafkaClusterHandle, group: str, topic: str, when: str,
                rows: list[list[object]]) -> None:
    """Within two lag collections (10 s each) and a scrape (5 s), the operator's lag per partition is Kafka's."""
    truth = tool_lag(prod, group)
    began = time.monotonic()
    seen = wait_for(lambda: operator_lag(prometheus, group, topic), lambda v: v == truth, 25,
                    f"the operator's lag of {group} equal to kafka-consumer-groups.sh's {truth}")
    waited = time.monotonic() - began
    rows += [[when, partition, truth[partition], seen[partition], f"{waited:.1f}"] for partition in sorted(truth)]


@pytest.mark.full  # about two minutes: CI checks the operator's lag against kafka-consumer-groups.sh in test_18
def test_lag_per_partition_matches_kafkas_own_tool_after_scaling_and_after_a_roll(
        prometheus: Prometheus, prod: KafkaClusterHandle, client: ClientPod, operator: KubeCluster):
    # Given a group with a known lag on each partition (this file runs after the roll and scaling tests)
    operator.apply([topic_resource("metrics-lag-roll", "prod", partitions=3, replicas=3)])
    wait_topic_ready(operator, "metrics-lag-roll")
    client.cli("produce", prod.bootstrap, "metrics-lag-roll", "--count", "600", "--acked", "/tmp/acked-lr1.json")
    assert client.cli("consume", prod.bootstrap, "metrics-lag-roll", "--group", "lag-roll")["consumed"] == 600
    client.cli("produce", prod.bootstrap, "metrics-lag-roll", "--count", "900", "--acked", "/tmp/acked-lr2.json")
    rows: list[list[object]] = []
    compare_lag(prometheus, prod, "lag-roll", "metrics-lag-roll", "after scaling 3 -> 5 -> 3", rows)
    # When every broker restarts (a rolling restart asked for with the restart annotation)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in prod.pods()}
    for pod in before:
        operator.kubectl("annotate", "pod", pod, "-n", NAMESPACE, "kafka.krafty.io/restart=true", "--overwrite")
    wait_for(lambda: {p["metadata"]["name"]: p["metadata"]["uid"] for p in prod.pods()},
             lambda now: all(now.get(pod) not in (None, uid) for pod, uid in before.items()), 900,
             "every broker restarted")
    prod.wait_ready(600)
    # And more records arrive right after it
    client.cli("produce", prod.bootstrap, "metrics-lag-roll", "--count", "300", "--acked", "/tmp/acked-lr3.json")
    # Then the operator's lag is Kafka's again within two collection intervals
    compare_lag(prometheus, prod, "lag-roll", "metrics-lag-roll", "right after a rolling restart", rows)
    report_table("Consumer lag of group lag-roll: kafka-consumer-groups.sh against the operator's metric",
                 ["when", "partition", "kafka-consumer-groups.sh", "krafty_consumergroup_lag", "seen after (s)"],
                 rows)
    unknown = prometheus.value('max(krafty_consumergroup_lag_unknown_partitions{cluster="prod", group="lag-roll"})')
    assert unknown == 0


def firing(prometheus: Prometheus, alert: str) -> list[dict[str, Any]]:
    return prometheus.query(f'ALERTS{{alertname="{alert}", alertstate="firing"}}')


@pytest.mark.full  # about 100 s: CI sees an alert fire in test_27 and the brokers' own gauges in the test above
def test_with_the_operator_gone_a_stopped_broker_still_raises_alerts(prometheus: Prometheus,
                                                                    prod: KafkaClusterHandle, operator: KubeCluster):
    # Given a partition stored on broker 2 alone, and one that needs all three brokers in sync
    prod.kafka_tool("kafka-topics.sh", "--create", "--topic", "alert-offline", "--replica-assignment", "2")
    prod.kafka_tool("kafka-topics.sh", "--create", "--topic", "alert-min-isr", "--partitions", "1",
                    "--replication-factor", "3", "--config", "min.insync.replicas=3")
    deployment = ["deployment", "krafty", "-n", OPERATOR_NAMESPACE]
    try:
        # When the operator stops entirely, and then broker 2 (nothing brings it back: no operator runs)
        operator.kubectl("scale", *deployment, "--replicas=0")
        operator.kubectl("wait", "--for=delete", "pod", "-n", OPERATOR_NAMESPACE, "-l",
                         "app.kubernetes.io/name=krafty-operator", "--timeout=120s", timeout=150)
        stopped = time.monotonic()
        operator.kubectl("scale", "statefulset", "prod-broker", "-n", NAMESPACE, "--replicas=2")
        # Then the alerts computed from the brokers' own metrics fire, and the operator-absent one too
        seen = {}
        for alert in ("KraftyOperatorAbsent", "KafkaOfflinePartitions", "KafkaUnderMinIsrPartitions",
                      "KafkaNodeMetricsDown"):
            [found] = wait_for(lambda a=alert: firing(prometheus, a), bool, 300, f"{alert} firing")
            seen[alert] = time.monotonic() - stopped
            labels = found["metric"]
            assert labels["severity"] == ("warning" if alert == "KafkaNodeMetricsDown" else "critical")
            if alert != "KraftyOperatorAbsent":
                assert (labels["namespace"], labels["cluster"]) == (NAMESPACE, "prod")
            if alert == "KafkaNodeMetricsDown":
                assert labels["pod"] == "prod-broker-2"
        report_table("With no operator running, broker 2 stopped: alerts firing in Prometheus",
                     ["alert", "firing after (s)", "its `for`"],
                     [[alert, f"{after:.0f}", "1m"] for alert, after in seen.items()])
    finally:
        # And once the operator is back, it brings broker 2 back
        operator.kubectl("scale", *deployment, "--replicas=2")
        wait_for(lambda: operator.kubectl_json("get", "statefulset", "prod-broker", "-n", NAMESPACE),
                 lambda sts: sts["spec"]["replicas"] == 3, 300, "the operator restoring three brokers")
        prod.wait_ready(600)
        for topic in ("alert-offline", "alert-min-isr"):
            prod.kafka_tool("kafka-topics.sh", "--delete", "--topic", topic)
    wait_for(lambda: firing(prometheus, "KraftyOperatorAbsent"), lambda found: not found, 120,
             "the operator-absent alert resolved")


def leader_metrics(kube: KubeCluster) -> dict[str, float]:
    """The leading operator's own /metrics, sample by sample (name{labels} -> value)."""
    text = leader_metrics_text(kube)
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


@pytest.mark.full  # about three minutes: 1,000 groups made, read for a minute, deleted
def test_a_thousand_consumer_groups_cost_the_operator_a_bounded_amount(prod: KafkaClusterHandle, client: ClientPod,
                                                                      operator: KubeCluster):
    # Given 1,000 consumer groups with committed offsets on a topic of 3 partitions (none of them running)
    prod.wait_ready(600)  # no roll under way: every broker answers the group listing
    operator.apply([topic_resource("many-groups", "prod", partitions=3, replicas=3)])
    wait_topic_ready(operator, "many-groups")
    client.cli("produce", prod.bootstrap, "many-groups", "--count", "300", "--acked", "/tmp/acked-many.json")
    before = leader_metrics(operator)
    made = time.monotonic()
    assert client.cli("groups", prod.bootstrap, "many-groups", "--count", "1000", "--prefix", "bulk-")["groups"] == 1000
    made = time.monotonic() - made
    try:
        # Then the operator reads the chart's maximum (200 by name), counts the others, and its lag passes
        # and memory stay within bounds
        over = f'krafty_consumergroup_lag_groups{{cluster="prod",namespace="{NAMESPACE}",state="over_limit"}}'
        read_groups = over.replace("over_limit", "read")
        wait_for(lambda: leader_metrics(operator), lambda m: m.get(read_groups, 0) + m.get(over, 0) >= 900, 120,
                 "the groups counted, read or left out")
        start = leader_metrics(operator)
        time.sleep(60)
        end = leader_metrics(operator)
        lag = 'krafty_reconcile_duration_seconds_{}{{kind="lag"}}'
        passes = end[lag.format("count")] - start[lag.format("count")]
        mean = (end[lag.format("sum")] - start[lag.format("sum")]) / max(passes, 1)
        read = end[read_groups]
        rss = end["process_resident_memory_bytes"] / 2**20
        report_table("1,000 consumer groups on prod (chart: lag.maxGroups 200, memory limit 512 MiB)",
                     ["groups made in (s)", "groups read", "left out", "lag passes in 60 s", "mean pass (s)",
                      "RSS before (MiB)", "RSS after (MiB)", "open files after"],
                     [[f"{made:.0f}", f"{read:.0f}", f"{end[over]:.0f}", f"{passes:.0f}", f"{mean:.2f}",
                       f"{before['process_resident_memory_bytes'] / 2**20:.0f}", f"{rss:.0f}",
                       f"{end['process_open_fds']:.0f}"]])
        assert read == 200
        assert end[over] >= 700
        assert passes >= 1
        assert rss < 512
    finally:
        client.cli("groups", prod.bootstrap, "many-groups", "--count", "1000", "--prefix", "bulk-", "--delete")


def test_every_dashboard_panel_returns_data(prometheus: Prometheus):
    dashboard = json.loads(repo_path("charts", "krafty-operator", "files", "dashboards", "krafty.json").read_text())
    empty = []
    # (the Spark panels need a running Spark job: test_52_spark_operator.py asks them of one)
    for panel in (p for p in dashboard["panels"] if not p["title"].startswith("Spark")):
        for target in panel["targets"]:
            expr = target["expr"].replace("$namespace", NAMESPACE).replace("$cluster", "prod")
            if not prometheus.query(expr):
                empty.append(f"{panel['title']}: {expr}")
    assert not empty, "panels without data:\n" + "\n".join(empty)
