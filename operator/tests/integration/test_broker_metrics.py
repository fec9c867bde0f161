"""The broker image's JMX exporter rules (broker-image/config/jmx-exporter.yaml) on a real node, the agent attached
as in a pod: the series the alerts, the dashboard and the readiness probe read are served, and the exporter keeps
each rule's match instead of matching every attribute again on each scrape (the readiness probe scrapes every 5 s)."""

from __future__ import annotations

import re

from krafty_testkit.local_kafka import Layout, LocalKafkaCluster

REQUESTS = ("Produce", "FetchConsumer", "FetchFollower", "Metadata", "OffsetCommit")


def scrape(cluster: LocalKafkaCluster, node_id: int) -> dict[str, float]:
    text = cluster.exporter_text(node_id)
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def test_the_exporter_serves_the_series_krafty_reads_and_caches_its_rule_matches(local_kafka) -> None:
    cluster: LocalKafkaCluster = local_kafka(Layout.combined(1), jmx_exporter=True)
    cluster.tool("kafka-topics.sh", "--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic", "scraped",
                 "--partitions", "3", "--replication-factor", "1")
    cluster.tool("kafka-producer-perf-test.sh", "--topic", "scraped", "--num-records", "1000", "--record-size", "100",
                 "--throughput", "-1", "--producer-props", f"bootstrap.servers={cluster.bootstrap_servers}", "acks=all")
    (node_id,) = cluster.nodes
    scrape(cluster, node_id)
    series = scrape(cluster, node_id)

    assert series["kafka_server_broker_state"] == 3  # RUNNING: what the readiness probe waits for
    assert "kafka_server_replica_fetcher_max_lag" in series
    for name in ("kafka_controller_activecontrollercount", "kafka_controller_offlinepartitionscount",
                 "kafka_server_replicamanager_underreplicatedpartitions",
                 "kafka_server_replicamanager_underminisrpartitioncount", "kafka_log_offline_log_directories"):
        assert name in series, name  # the alerts' series
    assert series['kafka_server_brokertopicmetrics_messagesin_total{topic="scraped"}'] >= 1000
    latencies = {m.group(1) for key in series
                 if (m := re.match(r'kafka_network_request_total_time_ms\{quantile="0.99",request="(\w+)"', key))}
    assert latencies == set(REQUESTS)
    # Each MBean's rule match is kept from the first scrape on: none is matched against the rules again.
    assert series["jmx_scrape_cached_beans"] > 0
    assert series["jmx_scrape_error"] == 0
