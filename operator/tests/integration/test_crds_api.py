"""The CRDs in a real kube-apiserver: examples accepted, bad input refused naming the field,
defaults identical to the models', rendered manifests accepted by a server-side dry run."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
import yaml

from krafty.model import KafkaClusterSpec, TopicSpec
from krafty.model.plan import KafkaClusterPlanSpec
from krafty.model.user import KafkaUserSpec
from krafty.model.validation import validate_cluster
from krafty.render.cluster import children
from krafty_testkit.apiserver import LocalApiServer

from ..conftest import CRDS, EXAMPLES, REPO, context, example

NAMESPACE = "crd-tests"
MODELS = {"KafkaCluster": KafkaClusterSpec, "Topic": TopicSpec, "KafkaUser": KafkaUserSpec,
          "KafkaClusterPlan": KafkaClusterPlanSpec}


@pytest.fixture(scope="module")
def api(apiserver: LocalApiServer) -> LocalApiServer:
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", NAMESPACE, check=False)
    return apiserver


def create(api: LocalApiServer, doc: dict[str, Any], dry_run: bool = True) -> tuple[int, str, dict[str, Any] | None]:
    args = ["create", "-n", NAMESPACE, "-o", "json", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    proc = api.kubectl(*args, check=False, input=json.dumps(doc))
    return proc.returncode, proc.stderr, json.loads(proc.stdout) if proc.returncode == 0 else None


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_is_accepted_with_the_models_defaults(api: LocalApiServer, path):
    # Given an example, When the API server creates it (dry run), Then it is accepted
    raw = yaml.safe_load(path.read_text())
    code, error, created = create(api, raw)
    assert code == 0, error
    assert created is not None
    # And the spec the server defaulted means exactly what the model makes of the raw example
    model = MODELS[raw["kind"]]
    assert model.model_validate(created["spec"]) == model.model_validate(raw["spec"])


def cluster(**spec_changes: Any) -> dict[str, Any]:
    doc = example("kafkacluster-dedicated.yaml")
    doc["metadata"]["name"] = "bad"
    doc["spec"].update(spec_changes)
    return doc


def topic(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "Topic", "metadata": {"name": "bad-topic"},
            "spec": {"clusterRef": {"name": "prod"}, **spec}}


def user(name: str = "bad-user", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaUser", "metadata": {"name": name},
            "spec": {"clusterRef": {"name": "prod"}, "authentication": {"type": "tls"}, **spec}}


def _acl(resource: dict[str, Any], *operations: str, **rule: Any) -> dict[str, Any]:
    return {"authorization": {"acls": [{"resource": resource, "operations": list(operations), **rule}]}}


def _brokers(**changes: Any) -> dict[str, Any]:
    return example("kafkacluster-dedicated.yaml")["spec"]["brokers"] | changes


BAD_INPUTS = {
    "brokers.replicas zero": (cluster(brokers=_brokers(replicas=0)), "spec.brokers.replicas"),
    "brokers missing": (cluster(brokers=None), "spec.brokers"),
    "unknown version": (cluster(version="3.9.0"), "spec.version"),
    "even dedicated voters": (cluster(controllers={"mode": "dedicated", "replicas": 4}), "spec.controllers.replicas"),
    "unknown quorum mode": (cluster(controllers={"mode": "zookeeper"}), "spec.controllers.mode"),
    "combined quorum larger than brokers": (
        cluster(brokers=_brokers(replicas=1), controllers={"mode": "combined", "replicas": 3},
                topicDefaults={"replicationFactor": 1, "minInsyncReplicas": 1}), "spec.brokers.replicas"),
    "operator-owned override": (cluster(brokers=_brokers(config={"node.id": 7})), "spec.brokers.config"),
    "quorum override": (cluster(brokers=_brokers(config={"controller.quorum.voters": "x"})), "spec.brokers.config"),
    "malformed memory quantity": (cluster(brokers=_brokers(resources={"limits": {"memory": "2 GB"}})),
                                  "spec.brokers.resources.limits.memory"),
    "a storage size of a hundred digits": (cluster(brokers=_brokers(storage={"size": "9" * 100})),
                                           "spec.brokers.storage.size"),
    "malformed heap": (cluster(brokers=_brokers(jvm={"heap": "lots"})), "spec.brokers.jvm.heap"),
    "min ISR above RF": (cluster(topicDefaults={"replicationFactor": 2, "minInsyncReplicas": 3}),
                         "spec.topicDefaults"),
    "RF above brokers": (cluster(topicDefaults={"replicationFactor": 5, "minInsyncReplicas": 2}),
                         "spec.topicDefaults.replicationFactor"),
    "reserved listener port": (cluster(listeners=[{"name": "plain", "port": 9093}]), "spec.listeners"),
    "duplicate listener ports": (cluster(listeners=[{"name": "a", "port": 9092}, {"name": "b", "port": 9092}]),
                                 "spec.listeners"),
    "renewal outside validity": (cluster(tls={"clusterCa": {"validityDays": 30, "renewalDays": 30}}),
                                 "spec.tls.clusterCa"),
    "TLS that is not a boolean": (cluster(listeners=[{"name": "tls", "port": 9094, "tls": "yes"}]),
                                  "spec.listeners[0].tls"),
    "client certificates without TLS": (cluster(listeners=[{"name": "mtls", "port": 9094, "authentication": "tls"}]),
                                        "spec.listeners[0]"),
    "an unknown authentication": (cluster(listeners=[{"name": "a", "port": 9094, "authentication": "scram-sha-256"}]),
                                  "spec.listeners[0].authentication"),
    "a listener named like the nodes' own": (cluster(listeners=[{"name": "replication", "port": 9094}]),
                                             "spec.listeners[0]"),
    "an external listener named kafka": (cluster(listeners=[{"name": "kafka", "port": 9094, "type": "nodeport"}]),
                                         "spec.listeners[0]"),
    "grace period too short": (cluster(restarts={"gracePeriodSeconds": 5}), "spec.restarts.gracePeriodSeconds"),
    "a setting in config and from a Secret": (cluster(brokers={
        "replicas": 3, "config": {"sasl.jaas.config": "x"},
        "configFromSecrets": {"sasl.jaas.config": {"name": "jaas", "key": "config"}}}),
        "spec.brokers.configFromSecrets"),
    "a Secret name Kubernetes refuses": (cluster(brokers={
        "replicas": 3, "configFromSecrets": {"sasl.jaas.config": {"name": "Jaas_Secret", "key": "config"}}}),
        "spec.brokers.configFromSecrets.sasl.jaas.config.name"),
    "a peer with both ipBlock and podSelector": (cluster(listeners=[{"name": "plain", "port": 9092,
        "networkPolicyPeers": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]),
        "spec.listeners[0].networkPolicyPeers[0]"),
    "an empty peer": (cluster(listeners=[{"name": "plain", "port": 9092, "networkPolicyPeers": [{}]}]),
                      "spec.listeners[0].networkPolicyPeers[0]"),
    "an ipBlock that is no CIDR": (cluster(metrics={"networkPolicyPeers": [{"ipBlock": {"cidr": "10.0.0.300/8"}}]}),
                                   "spec.metrics.networkPolicyPeers[0].ipBlock"),
    "an ipBlock except outside its CIDR": (cluster(metrics={"networkPolicyPeers": [
        {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]}}]}),
        "spec.metrics.networkPolicyPeers[0].ipBlock"),
    "a selector In without values": (cluster(metrics={"networkPolicyPeers": [{"podSelector": {"matchExpressions": [
        {"key": "app", "operator": "In"}]}}]}), "spec.metrics.networkPolicyPeers[0].podSelector.matchExpressions[0]"),
    "a label value Kubernetes refuses": (cluster(metrics={"networkPolicyPeers": [
        {"podSelector": {"matchLabels": {"app": "not a label"}}}]}),
        "spec.metrics.networkPolicyPeers[0].podSelector.matchLabels.app"),
    "networkPolicies that is no object": (cluster(networkPolicies=False), "spec.networkPolicies"),
    "unknown field": (cluster(brokres={"replicas": 3}), "brokres"),
    "topic without cluster": ({**topic(), "spec": {"partitions": 3}}, "spec.clusterRef"),
    "topic zero partitions": (topic(partitions=0), "spec.partitions"),
    "topic bad name": (topic(topicName="bad name!"), "spec.topicName"),
    "topic reserved name": (topic(topicName="__consumer_offsets"), "spec.topicName"),
    "topic min ISR above replicas": (topic(replicas=2, config={"min.insync.replicas": 3}), "spec.config"),
    "topic bad cleanup policy": (topic(config={"cleanup.policy": "forever"}), "spec.config"),
    "topic unknown deletion policy": (topic(deletionPolicy="Archive"), "spec.deletionPolicy"),
    "authorization without TLS between the nodes": (cluster(authorization={"enabled": True}, tls={"internal": False}),
                                                    "spec.authorization.enabled"),
    "a canary gate without the canary": (cluster(restarts={"canaryGate": {"produceP99Milliseconds": 500}}),
                                         "spec.restarts.canaryGate"),
    "a canary gate without a threshold": (cluster(canary={"enabled": True}, restarts={"canaryGate": {}}),
                                          "spec.restarts.canaryGate"),
    "a canary gate of 0 ms": (cluster(canary={"enabled": True},
                                      restarts={"canaryGate": {"endToEndP99Milliseconds": 0}}),
                              "spec.restarts.canaryGate.endToEndP99Milliseconds"),
    "a canary writing every 0 ms": (cluster(canary={"enabled": True, "intervalMilliseconds": 0}),
                                    "spec.canary.intervalMilliseconds"),
    "a super user Kubernetes could not name": (cluster(authorization={"enabled": True, "superUsers": ["CN=admin"]}),
                                               "spec.authorization.superUsers[0]"),
    "authorizer set through config": (cluster(brokers=_brokers(config={"authorizer.class.name": "x"})),
                                      "spec.brokers.config"),
    "user without authentication": ({**user(), "spec": {"clusterRef": {"name": "prod"}}}, "spec.authentication"),
    "user with an unknown authentication": (user(authentication={"type": "plain"}), "spec.authentication.type"),
    "user certificate with a password": (user(authentication={"type": "tls", "password": {"secretKeyRef": {
        "name": "pw", "key": "password"}}}), "spec.authentication.password"),
    "user name too long for a certificate": (user(name="u" * 65), "metadata.name"),
    "ACL with an unknown operation": (user(**_acl({"type": "topic", "name": "a"}, "Erase")),
                                      "spec.authorization.acls[0].operations[0]"),
    "ACL with an unknown resource type": (user(**_acl({"type": "queue", "name": "a"}, "Read")),
                                          "spec.authorization.acls[0].resource.type"),
    "ACL with an operation its resource lacks": (user(**_acl({"type": "group", "name": "g"}, "Write")),
                                                 "spec.authorization.acls[0].operations"),
    "ACL on a topic without a name": (user(**_acl({"type": "topic"}, "Read")),
                                      "spec.authorization.acls[0].resource.name"),
    "ACL on the cluster with a prefix": (user(**_acl({"type": "cluster", "patternType": "prefix"}, "Alter")),
                                         "spec.authorization.acls[0].resource"),
    "ACL that neither allows nor denies": (user(**_acl({"type": "topic", "name": "a"}, "Read", type="maybe")),
                                           "spec.authorization.acls[0].type"),
    "ACL for a host name": (user(**_acl({"type": "topic", "name": "a"}, "Read", host="client.example.com")),
                            "spec.authorization.acls[0].host"),
    "quota below 1 KiB/s": (user(quotas={"producerByteRate": 100}), "spec.quotas.producerByteRate"),
    "quota of a percentage that is not a number": (user(quotas={"requestPercentage": "half"}),
                                                   "spec.quotas.requestPercentage"),
    "newline injected in a broker config value": (
        cluster(brokers=_brokers(config={"log.retention.ms": "1\nnode.id=7"})), "spec.brokers.config"),
    "control character in a broker config key": (cluster(brokers=_brokers(config={"num.io\tthreads": 8})),
                                                  "spec.brokers.config"),
    "newline injected in a topic config value": (topic(config={"retention.ms": "1\nmin.insync.replicas=1"}),
                                                 "spec.config"),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=list(BAD_INPUTS))
def test_bad_input_is_refused_naming_the_field(api: LocalApiServer, case: str):
    doc, field = BAD_INPUTS[case]
    code, error, _ = create(api, doc)
    assert code != 0, f"{case} was accepted"
    assert field in error, f"{case}: the error does not name {field}: {error}"


def _update(api: LocalApiServer, doc: dict[str, Any]) -> tuple[int, str]:
    proc = api.kubectl("replace", "-n", NAMESPACE, "-f", "-", check=False, input=json.dumps(doc))
    return proc.returncode, proc.stderr


TRANSITIONS = {
    "partitions decrease": (topic(partitions=6), lambda d: d["spec"].update(partitions=3),
                            "partitions cannot decrease"),
    "cluster reference change": (topic(partitions=1), lambda d: d["spec"].update(clusterRef={"name": "other"}),
                                 "clusterRef is immutable"),
    "topic name change": (topic(topicName="Orders_V1"), lambda d: d["spec"].update(topicName="Orders_V2"),
                          "topicName is immutable"),
    "user moved to another cluster": (user("moving"), lambda d: d["spec"].update(clusterRef={"name": "other"}),
                                      "clusterRef is immutable"),
    "quorum mode change": (cluster(), lambda d: d["spec"].update(controllers={"mode": "combined", "replicas": 3}),
                           "controllers.mode is immutable"),
    "storage shrink": (cluster(), lambda d: d["spec"]["brokers"]["storage"].update(size="512Mi"),
                       "size cannot shrink"),
    "storage shrink to a plain number of bytes": (
        cluster(), lambda d: d["spec"]["brokers"]["storage"].update(size=2**29), "size cannot shrink"),
    "storage class change": (cluster(), lambda d: d["spec"]["brokers"]["storage"].update(storageClassName="fast"),
                             "storageClassName cannot change after creation"),
    "internal TLS switched off": (cluster(tls={"internal": True}), lambda d: d["spec"]["tls"].update(internal=False),
                                  "tls.internal is chosen when the cluster is created and cannot change"),
}


@pytest.mark.parametrize("case", TRANSITIONS, ids=list(TRANSITIONS))
def test_changes_that_would_lose_data_are_refused(api: LocalApiServer, case: str):
    # Given a stored resource
    original, change, message = TRANSITIONS[case]
    doc = copy.deepcopy(original)
    doc["metadata"]["name"] = f"transition-{abs(hash(case)) % 10**8}"
    code, error, created = create(api, doc, dry_run=False)
    assert code == 0, error
    assert created is not None
    try:
        # When it is changed in a way that would lose data, Then the API server refuses, saying why
        change(created)
        code, error = _update(api, created)
        assert code != 0, f"{case} was accepted"
        assert message in error
    finally:
        api.kubectl("delete", "-n", NAMESPACE, created["kind"].lower(), doc["metadata"]["name"], "--wait=false")


def test_growing_partitions_is_accepted(api: LocalApiServer):
    doc = topic(partitions=3)
    doc["metadata"]["name"] = "grows"
    code, error, created = create(api, doc, dry_run=False)
    assert code == 0, error
    assert created is not None
    created["spec"]["partitions"] = 12
    assert _update(api, created) == (0, "")


@pytest.mark.parametrize("size", ["3Gi", "2.5Gi", 2**32, "2Gi"])
def test_growing_or_keeping_storage_is_accepted(api: LocalApiServer, size: str | int):
    doc = cluster()
    doc["metadata"]["name"] = f"grows-{str(size).replace('.', '-').lower()}"
    code, error, created = create(api, doc, dry_run=False)
    assert code == 0, error
    assert created is not None
    try:
        created["spec"]["brokers"]["storage"]["size"] = size
        assert _update(api, created) == (0, "")
    finally:
        api.kubectl("delete", "-n", NAMESPACE, "kafkacluster", doc["metadata"]["name"], "--wait=false")


@pytest.mark.parametrize("example_name", ["kafkacluster-combined.yaml", "kafkacluster-dedicated.yaml"])
def test_rendered_manifests_pass_a_server_side_dry_run(api: LocalApiServer, example_name: str):
    ctx = context(example(example_name)["spec"], name="render", namespace=NAMESPACE)
    for child in children(ctx):
        if child.desired is None:
            continue
        proc = api.apply(child.desired, "--dry-run=server", check=False)
        assert proc.returncode == 0, f"{child.kind} {child.name}: {proc.stderr}"


def test_kubectl_explain_teaches_the_api(api: LocalApiServer):
    from krafty_testkit.waiting import wait_for

    explained = wait_for(lambda: api.kubectl("explain", "kafkacluster.spec.controllers.mode", check=False),
                         lambda p: p.returncode == 0, 30, "kubectl explain").stdout
    assert "combined" in explained
    assert "dedicated" in explained
    explained = api.kubectl("explain", "kafkauser.spec.authorization.acls.resource.patternType").stdout
    assert "every name that starts with it" in explained


# Strimzi's short names (Kafka, KafkaTopic, KafkaUser, KafkaConnect, KafkaConnector, KafkaMirrorMaker2,
# KafkaBridge, KafkaRebalance, KafkaNodePool) and the names kubectl resolves before a category
STRIMZI = {"k", "kt", "ku", "kc", "kctr", "kmm2", "kb", "kr", "knp", "kafka", "kafkas"}


def test_short_names_live_beside_strimzi_and_kubectl_get_krafty_lists_every_kind(api: LocalApiServer):
    # Given our CRDs and an object of each kind
    for doc in (example("kafkacluster-combined.yaml"), example("topic-minimal.yaml"), example("kafkauser-scram.yaml"),
                example("kafkaclusterplan.yaml")):
        assert create(api, doc, dry_run=False)[0] == 0
    names = {n for path in CRDS.glob("*.yaml") for n in yaml.safe_load(path.read_text())["spec"]["names"].get(
        "shortNames", [])}
    # Then none of our short names is one of Strimzi's, and the short names and the category work
    assert names == {"kkc", "kkt", "kku", "kkp"}
    assert not names & STRIMZI
    listed = api.kubectl("get", "krafty", "-n", NAMESPACE, "-o", "name").stdout.split()
    assert {name.split("/")[0] for name in listed} == {"kafkacluster.kafka.krafty.io", "topic.kafka.krafty.io",
                                                     "kafkauser.kafka.krafty.io", "kafkaclusterplan.kafka.krafty.io"}
    assert api.kubectl("get", "kkt", "-n", NAMESPACE, "-o", "name").stdout.strip()


DOCUMENTED = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# A fragment of a spec in the guide is shown inside this cluster (the README's own)
DOCUMENTED_BASE = {"brokers": {"replicas": 3, "storage": {"size": "10Gi"}},
                   "controllers": {"mode": "dedicated", "replicas": 3, "storage": {"size": "1Gi"}}}


def documented_examples() -> list[tuple[str, dict[str, Any]]]:
    """Every YAML block of the README and docs/, each document with where it is (file:line), and the quick start's
    file (its krafty resources)."""
    quick = REPO / "docs" / "quickstart.yaml"
    found = [(f"{quick.name}#{i}", doc) for i, doc in enumerate(yaml.safe_load_all(quick.read_text()))
             if doc and doc["kind"] in MODELS]
    for path in DOCUMENTED:
        text = path.read_text()
        for block in re.finditer(r"```yaml\n(.*?)```", text, re.S):
            line = text.count("\n", 0, block.start()) + 1
            for i, doc in enumerate(d for d in yaml.safe_load_all(block.group(1)) if d):
                found.append((f"{path.name}:{line}" + (f"#{i}" if i else ""), doc))
    return found


def _merged(base: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in fragment.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def as_resource(doc: dict[str, Any]) -> dict[str, Any]:
    """A whole resource as it is (named so that no object another test made is in its way), or a spec fragment
    (`spec:` or one of its keys) inside the base cluster."""
    if "kind" in doc:
        return {**doc, "metadata": {**doc["metadata"], "name": "documented"}}
    fragment = doc.get("spec", doc)
    return {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": "documented"},
            "spec": _merged(DOCUMENTED_BASE, fragment)}


@pytest.mark.parametrize(("where", "doc"), documented_examples(), ids=[w for w, _ in documented_examples()])
def test_every_yaml_example_of_the_docs_is_accepted_by_the_api_server_and_the_operator(
        api: LocalApiServer, where: str, doc: dict[str, Any]):
    resource = as_resource(doc)
    # When the API server creates it (dry run), Then it is accepted
    code, error, created = create(api, resource)
    assert code == 0, f"{where}: {error}"
    assert created is not None
    # And the operator takes what was stored: a cluster passes its validation
    spec = MODELS[resource["kind"]].model_validate(created["spec"])
    if isinstance(spec, KafkaClusterSpec):
        assert validate_cluster(spec) == [], where
