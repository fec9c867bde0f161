"""The semantic validator: what Kafka or another resource would refuse, found before anything changes."""

from __future__ import annotations

import re

import pytest
import yaml

from krafty import naming
from krafty.model import KafkaClusterSpec, TopicSpec
from krafty.model.validation import check_config, validate_cluster, validate_topic

from ...conftest import CRDS

CLUSTER = KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}})


def topic(**spec):
    return TopicSpec.model_validate({"clusterRef": {"name": "prod"}, **spec})


@pytest.mark.parametrize(("config", "expected"), [
    ({"retention.ms": "604800000", "cleanup.policy": "compact,delete", "compression.type": "ZSTD"}, []),
    ({"retention.ms": "-1", "min.insync.replicas": "2", "max.message.bytes": "1048588"}, []),
    ({"retention.msec": "1"}, ["spec.config.retention.msec: not a topic configuration of Kafka 4.3.1"]),
    ({"retention.ms": "seven days"}, ["spec.config.retention.ms: 'seven days' is not a number"]),
    ({"retention.ms": "-5"}, ["spec.config.retention.ms: -5 is outside the allowed range [-1,...]"]),
    ({"segment.bytes": "1.5"}, ["spec.config.segment.bytes: '1.5' is not a valid int"]),
    ({"segment.bytes": "99999999999"}, ["spec.config.segment.bytes: '99999999999' is not a valid int"]),
    ({"cleanup.policy": "compact,forever"}, ["spec.config.cleanup.policy: forever is not one of compact, delete"]),
    ({"compression.type": "brotli"},
     ["spec.config.compression.type: brotli is not one of uncompressed, zstd, lz4, snappy, gzip, producer"]),
    ({"unclean.leader.election.enable": "yes"},
     ["spec.config.unclean.leader.election.enable: 'yes' is not true or false"]),
    ({"min.cleanable.dirty.ratio": "1.5"},
     ["spec.config.min.cleanable.dirty.ratio: 1.5 is outside the allowed range [0,...,1]"]),
])
def test_topic_config_values(config, expected):
    assert [str(p) for p in check_config("topic", config, "spec.config")] == expected


@pytest.mark.parametrize(("spec", "expected"), [
    ({"partitions": 6, "replicas": 3, "config": {"min.insync.replicas": "2"}}, []),
    ({}, []),
    ({"replicas": 4}, ["spec.replicas: 4 replicas cannot be placed on 3 brokers"]),
    ({"replicas": 3, "config": {"min.insync.replicas": "3"}},
     ["spec.config.min.insync.replicas: min.insync.replicas (3) equals the replication factor (3): any broker restart "
      "would stop acks=all writes and block rolling restarts; use at most 2"]),
    ({"replicas": 2, "config": {"min.insync.replicas": "3"}},
     ["spec.config.min.insync.replicas: min.insync.replicas (3) exceeds the replication factor (2): no acks=all write "
      "could ever be acknowledged"]),
    ({"replicas": 1}, ["spec.replicas: 1 replicas is below the cluster's min.insync.replicas (2): set config "
                       "min.insync.replicas or raise replicas"]),
    ({"replicas": 1, "config": {"min.insync.replicas": "1"}}, []),
])
def test_topic_against_its_cluster(spec, expected):
    assert [str(p) for p in validate_topic("events", topic(**spec), CLUSTER)] == expected


def test_topic_of_a_missing_cluster():
    problems = validate_topic("events", topic(), None)
    assert [str(p) for p in problems] == ["spec.clusterRef.name: KafkaCluster 'prod' does not exist in this namespace"]


def test_long_resource_name_needs_a_topic_name():
    assert validate_topic("a" * 253, topic(), CLUSTER)[0].field == "spec.topicName"


@pytest.mark.parametrize(("spec", "expected"), [
    ({"brokers": {"replicas": 3, "config": {"num.io.threads": 16, "log.retention.ms": "86400000"}}}, []),
    ({"brokers": {"replicas": 3, "config": {"num.io.thread": 16}}},
     ["spec.brokers.config.num.io.thread: not a broker configuration of Kafka 4.3.1"]),
    ({"brokers": {"replicas": 3, "config": {"num.io.threads": 0}}},
     ["spec.brokers.config.num.io.threads: 0 is outside the allowed range [1,...]"]),
    ({"brokers": {"replicas": 3}, "topicDefaults": {"replicationFactor": 3, "minInsyncReplicas": 3}},
     ["spec.topicDefaults.minInsyncReplicas: min.insync.replicas (3) equals the replication factor (3): any broker "
      "restart would stop acks=all writes and block rolling restarts; use at most 2"]),
    ({"brokers": {"replicas": 3, "jvm": {"heap": "2Gi"}, "resources": {"limits": {"memory": "2Gi"}}}},
     ["spec.brokers.jvm.heap: heap 2Gi leaves no room under the memory limit 2Gi (page cache and off-heap memory "
      "need some): lower it"]),
])
def test_cluster_spec(spec, expected):
    assert [str(p) for p in validate_cluster(KafkaClusterSpec.model_validate(spec))] == expected


def test_replication_throttles_are_the_operators_own():
    # Given throttles set by hand, the operator would remove them after its next replica move: refused
    cluster = KafkaClusterSpec.model_validate(
        {"brokers": {"replicas": 3, "config": {"leader.replication.throttled.rate": "1048576"}}})
    assert [str(p) for p in validate_cluster(cluster)] == [
        "spec.brokers.config.leader.replication.throttled.rate: not a broker configuration of Kafka 4.3.1"]
    problems = validate_topic("t", topic(config={"follower.replication.throttled.replicas": "*"}), CLUSTER)
    assert [p.field for p in problems] == ["spec.config.follower.replication.throttled.replicas"]
    assert "set by the operator while replicas move" in problems[0].message


@pytest.mark.parametrize(("config", "expected"), [
    ({"log.retention.ms": "1\nnode.id=7"},
     ["spec.brokers.config.log.retention.ms: contains a control character (newline, tab, ...): not allowed in "
      "config keys or values", "spec.brokers.config.log.retention.ms: '1\\nnode.id=7' is not a number"]),
    ({"node.id": "7"}, ["spec.brokers.config.node.id: is set by the operator and cannot be overridden"]),
    ({"controller.quorum.voters": "1@x:9093"},
     ["spec.brokers.config.controller.quorum.voters: is set by the operator and cannot be overridden"]),
    ({"security.inter.broker.protocol": "SSL"},
     ["spec.brokers.config.security.inter.broker.protocol: is set by the operator and cannot be overridden"]),
    ({"controlled.shutdown.enable": "false"},
     ["spec.brokers.config.controlled.shutdown.enable: must stay true: rolling restarts move leadership off a "
      "broker through controlled shutdown before it stops"]),
    ({"controlled.shutdown.enable": "true"}, []),
    ({"offsets.topic.replication.factor": "5"},
     ["spec.brokers.config.offsets.topic.replication.factor: 5 exceeds the 3 brokers: Kafka could not create the "
      "topic"]),
    ({"transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "3"},
     ["spec.brokers.config.transaction.state.log.min.isr: 3 exceeds transaction.state.log.replication.factor (2)"]),
])
def test_broker_config_the_operator_relies_on_is_refused(config, expected):
    cluster = KafkaClusterSpec.model_validate({"brokers": {"replicas": 3, "config": config}})
    assert [str(p) for p in validate_cluster(cluster) if "not a broker configuration" not in p.message] == expected


def test_the_crd_and_the_validator_protect_the_same_broker_keys():
    crd = yaml.safe_load((CRDS / "kafkaclusters.kafka.krafty.io.yaml").read_text())
    brokers = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["brokers"]
    [rule] = [r["rule"] for r in brokers["properties"]["config"]["x-kubernetes-validations"] if "node.id" in r["rule"]]
    listed = re.search(r"k in \[(.*?)\]", rule)
    assert listed is not None
    assert tuple(k.strip(" '") for k in listed.group(1).split(",")) == naming.OWNED_BROKER_KEYS
    assert all(f"k.startsWith('{prefix}')" in rule for prefix in naming.OWNED_BROKER_PREFIXES)


def test_control_characters_in_topic_config_are_refused():
    problems = validate_topic("t", topic(config={"retention.ms": "1\rmin.insync.replicas=1"}), CLUSTER)
    assert [p.field for p in problems][:1] == ["spec.config.retention.ms"]


@pytest.mark.parametrize(("brokers", "image", "rack", "expected"), [
    ({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}, None, None,
     ["spec.brokers.resources.requests.cpu: 2 exceeds the limit 1: Kubernetes refuses such a pod"]),
    ({"resources": {"requests": {"cpus": "1"}}}, None, None,
     ["spec.brokers.resources.requests.cpus: not a resource Kubernetes knows: cpu, memory, ephemeral-storage, "
      "hugepages-<size> or an extended resource (domain/name)"]),
    ({"resources": {"limits": {"nvidia.com/gpu": "1", "hugepages-2Mi": "64Mi"}}}, None, None, []),
    ({"template": {"labels": {"team": "data platform"}}}, None, None,
     ["spec.brokers.template.labels.team: 'data platform' is not a valid label value: at most 63 characters of "
      "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"]),
    ({"template": {"nodeSelector": {"disk type": "ssd"}}}, None, None,
     ["spec.brokers.template.nodeSelector.disk type: is not a valid Kubernetes key: [prefix/]name, the name at "
      "most 63 characters of letters, digits, '-', '_' and '.'"]),
    ({"template": {"annotations": {"example.com/note": "any text, even with spaces"}}}, None, None, []),
    ({}, "registry.local:5000/krafty/kafka:4.3.1", None, []),
    ({}, "Krafty/Kafka", None,
     ["spec.image: 'Krafty/Kafka' is not an image reference ([registry[:port]/]repository[:tag][@sha256:digest], "
      "lowercase)"]),
    ({}, "krafty/kafka:", None,
     ["spec.image: 'krafty/kafka:' is not an image reference ([registry[:port]/]repository[:tag][@sha256:digest], "
      "lowercase)"]),
    ({}, None, "topology.kubernetes.io/zone", []),
    ({}, None, "zone!", ["spec.rack.topologyKey: 'zone!' is not a valid label key"]),
])
def test_pod_template_fields_kubernetes_would_refuse_are_refused_first(brokers, image, rack, expected):
    spec = {"brokers": {"replicas": 3, **brokers}}
    if image is not None:
        spec["image"] = image
    if rack is not None:
        spec["rack"] = {"topologyKey": rack}
    assert [str(p) for p in validate_cluster(KafkaClusterSpec.model_validate(spec))] == expected


@pytest.mark.parametrize(("brokers", "expected"), [
    # A password typed into the spec would land in the KafkaCluster and the node ConfigMap
    ({"config": {"sasl.jaas.config": "x required password=secret;"}},
     ["spec.brokers.config.sasl.jaas.config: is a secret (Kafka's PASSWORD type): give it as "
      "spec.brokers.configFromSecrets.sasl.jaas.config, a reference to a key of a Secret"]),
    ({"configFromSecrets": {"sasl.jaas.config": {"name": "jaas", "key": "config"}}}, []),
    ({"configFromSecrets": {"sasl.jaas.confg": {"name": "jaas", "key": "config"}}},
     ["spec.brokers.configFromSecrets.sasl.jaas.confg: not a broker configuration of Kafka 4.3.1"]),
    ({"configFromSecrets": {"ssl.keystore.password": {"name": "tls", "key": "password"}}},
     ["spec.brokers.configFromSecrets.ssl.keystore.password: is set by the operator and cannot be overridden"]),
    ({"config": {"delegation.token.secret.key": "x"},
      "configFromSecrets": {"delegation.token.secret.key": {"name": "tokens", "key": "secret"}}},
     ["spec.brokers.config.delegation.token.secret.key: is a secret (Kafka's PASSWORD type): give it as "
      "spec.brokers.configFromSecrets.delegation.token.secret.key, a reference to a key of a Secret",
      "spec.brokers.configFromSecrets.delegation.token.secret.key: is also in spec.brokers.config: give it once"]),
])
def test_secret_settings_come_from_secrets_only(brokers, expected):
    cluster = KafkaClusterSpec.model_validate({"brokers": {"replicas": 3, **brokers}})
    assert [str(p) for p in validate_cluster(cluster)] == expected


IDENTITY = ("changes how every listener's connections become principals, the nodes' and the operator's own too: "
            "with authorization on they would stop being super users, and the operator could no longer roll the "
            "cluster. A KafkaUser's principal is its name on every client listener")


@pytest.mark.parametrize(("brokers", "expected"), [
    # copied from a client-certificate guide: it maps the nodes' CN=... subjects too, so they stop being super users
    ({"config": {"ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT"}},
     [f"spec.brokers.config.ssl.principal.mapping.rules: {IDENTITY}"]),
    ({"config": {"principal.builder.class": "com.example.Builder"}},
     [f"spec.brokers.config.principal.builder.class: {IDENTITY}"]),
    ({"configFromSecrets": {"sasl.kerberos.principal.to.local.rules": {"name": "k", "key": "rules"}}},
     [f"spec.brokers.configFromSecrets.sasl.kerberos.principal.to.local.rules: {IDENTITY}"]),
    # a config provider would read files or variables with the broker's rights
    ({"config": {"log.retention.ms": "${env:RETENTION}"}},
     ["spec.brokers.config.log.retention.ms: '${env:RETENTION}' is not a number",
      "spec.brokers.config.log.retention.ms: is a config provider reference (${...}): the operator owns "
      "config.providers; give a secret value as spec.brokers.configFromSecrets"]),
    ({"config": {"ssl.cipher.suites": "${file:/etc/passwd:x}"}},
     ["spec.brokers.config.ssl.cipher.suites: is a config provider reference (${...}): the operator owns "
      "config.providers; give a secret value as spec.brokers.configFromSecrets"]),
    # within Kafka's own range, but no record batch fits: every acks=all write would fail
    ({"config": {"message.max.bytes": "0"}},
     ["spec.brokers.config.message.max.bytes: 0 bytes is below 1,024, the least a record batch needs here: no "
      "write could succeed"]),
    ({"config": {"message.max.bytes": "1023", "replica.fetch.max.bytes": "100"}},
     ["spec.brokers.config.message.max.bytes: 1023 bytes is below 1,024, the least a record batch needs here: no "
      "write could succeed",
      "spec.brokers.config.replica.fetch.max.bytes: 100 bytes is below 1,024, the least a record batch needs here: "
      "no write could succeed"]),
    ({"config": {"message.max.bytes": "1024", "replica.fetch.response.max.bytes": "1024"}}, []),
    # Kafka refuses to start below replica.fetch.wait.max.ms (500 ms by default, or as given)
    ({"config": {"replica.lag.time.max.ms": "100"}},
     ["spec.brokers.config.replica.lag.time.max.ms: 100 ms is below replica.fetch.wait.max.ms (500 ms): Kafka "
      "would refuse to start, and every follower would leave the ISR"]),
    ({"config": {"replica.lag.time.max.ms": "1000", "replica.fetch.wait.max.ms": "2000"}},
     ["spec.brokers.config.replica.lag.time.max.ms: 1000 ms is below replica.fetch.wait.max.ms (2000 ms): Kafka "
      "would refuse to start, and every follower would leave the ISR"]),
    ({"config": {"replica.lag.time.max.ms": "500"}}, []),
])
def test_settings_that_would_wedge_or_stop_a_cluster_are_refused(brokers, expected):
    cluster = KafkaClusterSpec.model_validate({"brokers": {"replicas": 3, **brokers}})
    assert [str(p) for p in validate_cluster(cluster)] == expected


def test_a_topic_no_record_fits_is_refused():
    assert [str(p) for p in validate_topic("t", topic(config={"max.message.bytes": "0"}), CLUSTER)] == [
        "spec.config.max.message.bytes: 0 bytes is below 1,024, the least a record batch needs here: no write could "
        "succeed"]
    assert validate_topic("t", topic(config={"max.message.bytes": "1024"}), CLUSTER) == []


@pytest.mark.parametrize(("tls", "expected"), [
    ({"clusterCa": {"secretName": "corp-ca"}, "clientsCa": {"secretName": "corp-ca"}},
     ["spec.tls.clientsCa.secretName: names the cluster CA's Secret 'corp-ca' too: a user's certificate would then "
      "be trusted as a node's, and one named like a node would be a super user; give the clients CA a Secret of "
      "its own"]),
    ({"clusterCa": {"secretName": "corp-ca"}, "clientsCa": {"secretName": "corp-clients-ca"}}, []),
    ({"clusterCa": {"secretName": "corp-ca"}}, []),
    ({}, []),
])
def test_the_clients_ca_is_never_the_cluster_ca(tls, expected):
    cluster = KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}, "tls": tls})
    assert [str(p) for p in validate_cluster(cluster)] == expected
