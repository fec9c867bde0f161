"""Listeners that authenticate clients, on real pods. prod has, beside its plaintext listener, mtls (TLS, a client
certificate of the clients CA required) and scram (TLS, SASL SCRAM-SHA-512). In the client pod, kcat holds a
certificate issued from prod's clients CA (as a KafkaUser's will be) and confluent-kafka a SCRAM credential made
with Kafka's own kafka-configs.sh (test_18 has kcat do SCRAM too, on the client image's current librdkafka); each is
served, and a client without a certificate, with one of another CA (the operator's own, of the cluster CA), with
a wrong password (Kafka's own client) or without SASL is turned away."""

from __future__ import annotations

import base64
import datetime

import pytest
from reaching import MTLS_LISTENER, SCRAM_LISTENER, kcat, kcat_fails

from krafty.pki import signing
from krafty.pki.certs import KeyPair
from krafty_testkit.k8s_kafka import NAMESPACE, ClientPod, KafkaClusterHandle, topic_resource, wait_topic_ready
from krafty_testkit.kube import KubeCluster

FILES = "/tmp/auth"
TOPIC = "authenticated"


def secret_pair(kube: KubeCluster, name: str, cert_key: str, key_key: str) -> KeyPair:
    data = kube.kubectl_json("get", "secret", name, "-n", NAMESPACE)["data"]
    return KeyPair(base64.b64decode(data[cert_key]).decode(), base64.b64decode(data[key_key]).decode())


def put(client: ClientPod, name: str, text: str) -> str:
    path = f"{FILES}/{name}"
    client.kube.kubectl("exec", "-i", "-n", client.namespace, client.name, "--", "sh", "-c",
                        f"mkdir -p {FILES} && cat > {path}", stdin=text)
    return path


def round_trip(client: ClientPod, address: str, settings: list[str], tag: str) -> list[str]:
    """Ten records produced and the topic read back through one listener; returns what was read of this tag."""
    kcat(client, "-P", "-b", address, *settings, "-t", TOPIC, stdin="".join(f"{tag}-{i}\n" for i in range(10)))
    read = kcat(client, "-C", "-b", address, *settings, "-t", TOPIC, "-o", "beginning", "-e", "-q").split()
    return sorted(record for record in read if record.startswith(f"{tag}-"))


@pytest.fixture(scope="module")
def ca_file(prod: KafkaClusterHandle, client: ClientPod, operator: KubeCluster) -> str:
    """prod's cluster CA in the client pod (its path); and the topic the tests write."""
    operator.apply([topic_resource(TOPIC, "prod", partitions=1, replicas=3)])
    wait_topic_ready(operator, TOPIC)
    ca = base64.b64decode(operator.kubectl_json("get", "secret", "prod-cluster-ca-cert", "-n", NAMESPACE)
                          ["data"]["ca.crt"]).decode()
    return put(client, "cluster-ca.crt", ca)


@pytest.fixture(scope="module")
def trusted(ca_file: str) -> list[str]:
    """kcat settings for TLS trusting prod's cluster CA."""
    return ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={ca_file}"]


def test_status_publishes_each_listeners_protocol_and_authentication(prod: KafkaClusterHandle):
    listeners = {entry["name"]: (entry["securityProtocol"], entry["authentication"])
                 for entry in prod.status()["listeners"]}
    assert listeners == {"plain": ("PLAINTEXT", "none"), "mtls": ("SSL", "tls"), "scram": ("SASL_SSL", "scram-sha-512")}
    # Applications reading the connection ConfigMap stay on the first listener
    assert prod.connection()["security.protocol"] == "PLAINTEXT"


def test_a_certificate_of_the_clients_ca_is_served_and_others_are_turned_away(
        prod: KafkaClusterHandle, client: ClientPod, operator: KubeCluster, trusted: list[str]):
    address = prod.bootstrap_at(MTLS_LISTENER["port"])
    # Given a certificate for "alice" signed by prod's clients CA
    clients_ca = secret_pair(operator, "prod-clients-ca", "ca.crt", "ca.key")
    alice = signing.issue(clients_ca, "alice", (), datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1))
    with_alice = [*trusted, "-X", f"ssl.certificate.location={put(client, 'alice.crt', alice.cert)}",
                  "-X", f"ssl.key.location={put(client, 'alice.key', alice.key)}"]
    # Then kcat with it produces and reads back through the mtls listener
    assert round_trip(client, address, with_alice, "mtls") == sorted(f"mtls-{i}" for i in range(10))
    # And without a certificate it is turned away
    assert "Failed to acquire metadata" in kcat_fails(client, "-b", address, *trusted)
    # And so with a certificate of the cluster CA (the operator's own): the listener trusts the clients CA only
    operator_cert = secret_pair(operator, "prod-operator-cert", "tls.crt", "tls.key")
    assert "Failed to acquire metadata" in kcat_fails(
        client, "-b", address, *trusted, "-X", f"ssl.certificate.location={put(client, 'op.crt', operator_cert.cert)}",
        "-X", f"ssl.key.location={put(client, 'op.key', operator_cert.key)}")


def test_a_scram_credential_is_served_and_a_wrong_password_is_turned_away(
        prod: KafkaClusterHandle, client: ClientPod, operator: KubeCluster, ca_file: str, trusted: list[str]):
    address = prod.bootstrap_at(SCRAM_LISTENER["port"])
    # Given a SCRAM-SHA-512 credential for "bob", made with Kafka's own tool
    prod.kafka_tool("kafka-configs.sh", "--alter", "--entity-type", "users", "--entity-name", "bob",
                    "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]")
    # Then a librdkafka client (confluent-kafka) with the password produces, and reads back in a group
    as_bob = ["--ca", ca_file, "--scram", "bob:bob-secret"]
    lines = "".join(f"scram-{i}\n" for i in range(10))
    assert client.cli(*as_bob, "produce-lines", address, TOPIC, stdin=lines) == {"acked": 10, "failed": 0}
    assert client.cli(*as_bob, "consume", address, TOPIC, "--group", "bob-readers")["consumed"] >= 10
    # And Kafka's own client with a wrong password is turned away (asked from a broker pod, where the tools are;
    # the tool's own 5 s request timeout could end it before the refusal on busy nodes, without saying why)
    wrong = ("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.type=PEM\n"
             "request.timeout.ms=30000\nssl.truststore.location=/etc/kafka/tls/trust/ca.crt\n"
             "sasl.jaas.config=org.apache.kafka.common.security."
             'scram.ScramLoginModule required username="bob" password="not-bobs";\n')
    broker = ("exec", "-i", "-n", NAMESPACE, "prod-broker-0", "-c", "kafka", "--")
    operator.kubectl(*broker, "sh", "-c", "cat > /tmp/wrong.properties", stdin=wrong)
    said = operator.kubectl(*broker, "sh", "-c", (
        f"timeout 60 kafka-broker-api-versions.sh --bootstrap-server {address} --command-config /tmp/wrong.properties"
        " >/tmp/refused 2>&1; echo exit=$?; grep -v '^[[:space:]]*at ' /tmp/refused"), timeout=90)
    assert "exit=1" in said
    assert "Authentication failed during authentication due to invalid credentials" in said, said[-2000:]
    # And so is a client speaking TLS without SASL
    assert "Failed to acquire metadata" in kcat_fails(client, "-b", address, *trusted)
