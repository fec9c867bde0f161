"""TLS on real pods. The "small" cluster's nodes and the operator speak mutual TLS to each other (the default for a
new cluster). small starts with a plaintext listener only; the first test adds a second client listener, tls on
9094, under load: the first step of moving a running cluster to TLS (test_55_tls_switch.py takes the others).
It speaks TLS with a certificate of the operator's cluster CA. Clients are kcat (librdkafka) in the client pod
and Kafka's console tools with a client.properties."""

from __future__ import annotations

import base64
import time

import pytest
from reaching import PLAIN_LISTENER, TLS_LISTENER, TLS_PORT, kcat, kcat_fails, published, tls_address

from krafty.pki import certs
from krafty_testkit.k8s_kafka import (
    NAMESPACE,
    OPERATOR_NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    assert_written,
    topic_resource,
    wait_topic_ready,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for

CA_FILE = "/tmp/cluster-ca.crt"
KEY_MARKERS = ("PRIVATE KEY", "ca.key")
# Kafka's tools in a broker pod, trusting the cluster CA, with no certificate of their own
TRUST_ONLY = "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/etc/kafka/tls/trust/ca.crt\n"
BROKER_EXEC = ("exec", "-i", "-n", NAMESPACE, "small-broker-0", "-c", "kafka", "--")


def secret_text(kube: KubeCluster, name: str, key: str) -> str:
    data = kube.kubectl_json("get", "secret", name, "-n", NAMESPACE)["data"]
    return base64.b64decode(data[key]).decode()


def test_a_tls_listener_added_under_load_is_published_once_every_broker_serves_it(
        small: KafkaClusterHandle, client: ClientPod, operator: KubeCluster):
    operator.apply([topic_resource("switch-plain", "small", partitions=3, replicas=3,
                                   config={"min.insync.replicas": "2"})])
    wait_topic_ready(operator, "switch-plain")
    assert published(small) == ["plain"]
    before = [p["metadata"]["uid"] for p in small.pods("broker")]
    samples: list[tuple[bool, list[str], str]] = []  # (a roll under way, published, the ConfigMap's protocol)

    def sample() -> list[str]:
        status = small.status()
        names = [entry["name"] for entry in status.get("listeners", [])]
        samples.append((status.get("roll") is not None, names, small.connection()["security.protocol"]))
        return names

    # Given an acks=all producer on the plaintext listener
    with client.steady_producer(small.bootstrap, "switch-plain", rate=50) as produced:
        time.sleep(5)
        # When the spec adds a TLS listener
        small.patch_spec({"listeners": [PLAIN_LISTENER, TLS_LISTENER]})
        # Then the brokers roll to open it, and it is published only after the roll
        wait_for(sample, lambda names: names == ["plain", "tls"], 900, "the TLS listener published", interval=2)
        small.wait_ready(900)
        time.sleep(5)
    verified = client.verify(small.bootstrap, "switch-plain")
    print(f"\nTLS listener added under load: producer {produced}; verified {verified}; "
          f"{sum(1 for rolling, _, _ in samples if rolling)} of {len(samples)} samples during the roll")
    assert not set(before) & {p["metadata"]["uid"] for p in small.pods("broker")}  # every broker restarted
    assert any(rolling for rolling, _, _ in samples)
    assert all(names == ["plain"] for rolling, names, _ in samples if rolling)
    assert {protocol for _, _, protocol in samples} == {"PLAINTEXT"}  # plaintext stays first: clients stay
    assert_written(produced)
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    assert any(e["reason"] == "ListenersPublished" for e in small.events())


@pytest.fixture(scope="module")
def trusting_client(small_tls: KafkaClusterHandle, client: ClientPod) -> ClientPod:
    """The client pod, given the cluster CA's certificate from the Secret applications read."""
    ca = secret_text(client.kube, "small-cluster-ca-cert", "ca.crt")
    client.kube.kubectl("exec", "-i", "-n", client.namespace, client.name, "--", "sh", "-c", f"cat > {CA_FILE}",
                        stdin=ca)
    return client


def test_kcat_and_the_console_tools_produce_and_consume_over_tls(small: KafkaClusterHandle,
                                                                 trusting_client: ClientPod, operator: KubeCluster):
    operator.apply([topic_resource("tls-records", "small", partitions=3, replicas=3)])
    wait_topic_ready(operator, "tls-records")
    ssl = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={CA_FILE}"]
    # Given kcat trusting the cluster CA (it checks the brokers' names against their certificates)
    kcat(trusting_client, "-P", "-b", tls_address(small), *ssl, "-t", "tls-records",
         stdin="".join(f"kcat-{i}\n" for i in range(100)))
    # And Kafka's console producer with a client.properties, in a broker pod (where the tools are)
    operator.kubectl(*BROKER_EXEC, "sh", "-c", "cat > /tmp/client.properties", stdin=TRUST_ONLY)
    operator.kubectl(*BROKER_EXEC, "kafka-console-producer.sh", "--bootstrap-server", tls_address(small),
                     "--command-config", "/tmp/client.properties", "--topic", "tls-records",
                     stdin="".join(f"console-{i}\n" for i in range(100)), timeout=120)
    # When both read everything back through the TLS listener
    by_kcat = kcat(trusting_client, "-C", "-b", tls_address(small), *ssl, "-t", "tls-records", "-o", "beginning",
                   "-e", "-q").split()
    by_console = operator.kubectl(*BROKER_EXEC, "kafka-console-consumer.sh", "--bootstrap-server", tls_address(small),
                                  "--command-config", "/tmp/client.properties", "--topic", "tls-records",
                                  "--from-beginning", "--max-messages", "200", "--timeout-ms", "60000",
                                  timeout=120).split()
    # Then each saw the 200 records once
    expected = sorted([f"kcat-{i}" for i in range(100)] + [f"console-{i}" for i in range(100)])
    assert sorted(by_kcat) == expected
    assert sorted(by_console) == expected


def test_plaintext_untrusting_and_certificateless_clients_are_turned_away(small: KafkaClusterHandle,
                                                                         trusting_client: ClientPod):
    # A plaintext client on the TLS port gets no metadata
    assert "Failed to acquire metadata" in kcat_fails(trusting_client, "-b", tls_address(small))
    # A client that trusts only the public CAs refuses the brokers' certificate
    refused = kcat_fails(trusting_client, "-b", tls_address(small), "-X", "security.protocol=ssl",
                         "-X", "ssl.ca.location=/etc/ssl/certs/ca-certificates.crt")
    assert "certificate verify failed" in refused
    # The replication and controller listeners want a client certificate of the cluster CA, not only trust (asked
    # from a broker pod: the NetworkPolicy keeps the client pod off those ports, test_16_network_policies.py)
    small.kube.kubectl(*BROKER_EXEC, "sh", "-c", "cat > /tmp/client.properties", stdin=TRUST_ONLY)
    for port in (9091, 9093):
        address = f"small-broker-1.small-brokers.{NAMESPACE}.svc.cluster.local:{port}"
        said = small.kube.kubectl(*BROKER_EXEC, "sh", "-c", (
            f"timeout 60 kafka-broker-api-versions.sh --bootstrap-server {address} "
            "--command-config /tmp/client.properties >/tmp/refused 2>&1; echo exit=$?; "
            "grep -v '^[[:space:]]*at ' /tmp/refused"), timeout=90)  # (without the Java stack)
        assert "exit=1" in said
        assert "certificate_required" in said, said[-2000:]
    # While the same client on the TLS listener is served
    assert "3 brokers:" in kcat(trusting_client, "-L", "-b", tls_address(small), "-X", "security.protocol=ssl",
                                "-X", f"ssl.ca.location={CA_FILE}", "-t", "tls-records")


@pytest.mark.usefixtures("small_tls")
def test_no_private_key_is_in_the_cluster_its_config_maps_or_the_operators_log(small: KafkaClusterHandle,
                                                                             operator: KubeCluster):
    # The keys exist, in Secrets only
    assert "PRIVATE KEY" in secret_text(operator, "small-kafka-certs", "broker-0.key")
    assert "PRIVATE KEY" in secret_text(operator, "small-cluster-ca", "ca.key")
    places = {
        "KafkaClusters": operator.kubectl("get", "kafkaclusters", "-n", NAMESPACE, "-o", "yaml"),
        "ConfigMaps": operator.kubectl("get", "configmaps", "-n", NAMESPACE, "-o", "yaml"),
        "operator log": operator.kubectl("logs", "-n", OPERATOR_NAMESPACE, "--tail=-1",
                                         "-l", "app.kubernetes.io/name=krafty-operator"),
    }
    leaks = {where: marker for where, text in places.items() for marker in KEY_MARKERS if marker in text}
    assert leaks == {}
    # And server.properties names the key files, never their content
    config = operator.kubectl_json("get", "configmap", "small-kafka-config", "-n", NAMESPACE)["data"]
    assert "ssl.keystore.key=${dir:/etc/kafka/tls/node:broker-0.key}" in config["broker-0.properties"]


def certificate_markers(handle: KafkaClusterHandle) -> list[str]:
    """What each Kafka pod runs with: the CAs it trusts (short fingerprints) and its certificates' generation."""
    return [(p["metadata"].get("annotations") or {}).get("kafka.krafty.io/certificates", "")
            for p in handle.pods("broker")]


@pytest.mark.full  # three rolls, about six minutes: CI keeps the TLS listener added and removed under load
def test_a_requested_ca_renewal_rolls_the_cluster_under_tls_traffic_and_loses_nothing(
        small: KafkaClusterHandle, trusting_client: ClientPod, operator: KubeCluster):
    operator.apply([topic_resource("tls-renewal", "small", partitions=3, replicas=3,
                                   config={"min.insync.replicas": "2"})])
    wait_topic_ready(operator, "tls-renewal")
    before = secret_text(operator, "small-cluster-ca-cert", "ca.crt")
    address = tls_address(small)
    # Given a consumer and an idempotent acks=all producer over TLS, both trusting only the CA before
    # (the producer stops first, then the consumer reads on until it has caught up)
    with (trusting_client.following_consumer(address, "tls-renewal", "tls-renewal-reader", ca=CA_FILE) as followed,
          trusting_client.steady_producer(address, "tls-renewal", rate=50, ca=CA_FILE) as produced):
        time.sleep(5)
        began = time.monotonic()
        # When a new cluster CA is asked for
        operator.kubectl("annotate", "kafkacluster", "small", "-n", NAMESPACE,
                         "kafka.krafty.io/renew-cluster-ca=e2e", "--overwrite")
        # Then the nodes come to trust the new CA alone, in three rolls, and the cluster settles
        after = wait_for(lambda: secret_text(operator, "small-cluster-ca-cert", "ca.crt"),
                         lambda bundle: len(certs.split_bundle(bundle)) == 1 and bundle != before, 1500,
                         "the new cluster CA trusted alone", interval=5)
        new = certs.facts(after).fingerprint[:16]
        wait_for(lambda: certificate_markers(small),
                 lambda markers: len(markers) == 3 and all(m.startswith(f"{new}/") for m in markers), 900,
                 "every pod running with the new CA alone", interval=5)
        small.wait_ready(900)
        renewal = time.monotonic() - began
        time.sleep(5)  # and records written after it
    verified = trusting_client.verify(address, "tls-renewal", ca=CA_FILE)
    uid = small.get()["metadata"]["uid"]
    steps = list(dict.fromkeys(e["reason"] for e in sorted(small.events(), key=lambda e: e["firstTimestamp"])
                               if e["involvedObject"]["uid"] == uid
                               and e["reason"] in ("CaRequested", "CertificateNewCa", "CaRenewed")))
    print(f"\nCA renewal under load: {renewal:.0f} s, steps {steps}; producer {produced}; verified {verified}; "
          f"consumer started before it read {followed['records']} records")
    assert steps == ["CaRequested", "CertificateNewCa", "CaRenewed"]
    assert_written(produced)
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    # The consumer started before the renewal read every record, those written after it included
    assert followed["records"] == produced["acked"]


def listening_ports(kube: KubeCluster, pod: str) -> set[int]:
    """The TCP ports a pod listens on, from /proc/net/tcp and tcp6 (state 0A: LISTEN)."""
    table = kube.kubectl("exec", "-n", NAMESPACE, pod, "-c", "kafka", "--", "cat", "/proc/net/tcp", "/proc/net/tcp6")
    return {int(fields[1].rsplit(":", 1)[1], 16) for fields in (line.split() for line in table.splitlines())
            if len(fields) > 3 and fields[3] == "0A"}


@pytest.mark.usefixtures("small_tls")
def test_a_node_listens_on_its_listeners_and_metrics_only(small: KafkaClusterHandle, operator: KubeCluster):
    # No JMX remote port, no debug port: the client listeners, replication, controller and the metrics exporter
    assert listening_ports(operator, "small-broker-0") == {9092, TLS_PORT, 9091, 9093, 9404}
