"""The Helm chart and the images on real pods: install (with a KafkaCluster from values) to Ready,
helm test, an upgrade that rolls the operator (and makes it watch a namespace another install operates,
which it leaves alone), an uninstall that removes what the docs say and nothing else; images run as
non-root and carry exactly the pinned Kafka."""

from __future__ import annotations

import json
from typing import Any

import yaml

from krafty_testkit.k8s_kafka import CHART, NAMESPACE, OPERATOR_NAMESPACE, SMALL_NODE, KafkaClusterHandle, repo_path
from krafty_testkit.kafka_dist import kafka_home, pinned_versions
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for

RELEASE = "krafty-helm"
HELM_NS = "helm-e2e"


def example_spec() -> dict[str, Any]:
    spec = yaml.safe_load(repo_path("crds", "examples", "kafkacluster-combined.yaml").read_text())["spec"]
    spec["brokers"].update(SMALL_NODE)
    return dict(spec)


def helm(kube: KubeCluster, *args: str) -> str:
    return kube.run_helm(*args, timeout=900)


def operator_pods(kube: KubeCluster) -> list[dict[str, Any]]:
    """The release's running operator replicas (two by default: a leader and a standby)."""
    pods = kube.kubectl_json("get", "pods", "-n", HELM_NS, "-l", "app.kubernetes.io/name=krafty-operator")["items"]
    return [p for p in pods if p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")]


def test_helm_install_test_upgrade_uninstall(operator: KubeCluster, prod: KafkaClusterHandle,
                                             small: KafkaClusterHandle):
    small.delete()  # its CPU goes to this release's cluster
    clusters = json.dumps([{"name": "demo", "spec": example_spec()}])
    base = ["--namespace", HELM_NS, "--set", "image.repository=krafty/operator", "--set", "image.tag=e2e",
            "--set", f"watchNamespaces={{{HELM_NS}}}", "--set-json", f"kafkaClusters={clusters}"]
    # Install: the operator comes up and the KafkaCluster from values reaches Ready
    helm(operator, "install", RELEASE, str(CHART), "--create-namespace", "--wait", *base)
    demo = KafkaClusterHandle(operator, "demo", HELM_NS)
    demo.wait_ready(600)
    # helm test passes
    assert "Phase:          Succeeded" in helm(operator, "test", RELEASE, "--namespace", HELM_NS)
    # Upgrade with a changed value: both replicas are replaced one at a time, the cluster stays Ready;
    # the release now also watches the namespace the other install operates
    before = {p["metadata"]["uid"] for p in operator_pods(operator)}
    assert len(before) == 2
    helm(operator, "upgrade", RELEASE, str(CHART), "--wait", *base, "--set", "logLevel=DEBUG",
         "--set", f"watchNamespaces={{{HELM_NS},{NAMESPACE}}}")
    after = wait_for(lambda: operator_pods(operator),
                     lambda pods: len(pods) == 2 and not {p["metadata"]["uid"] for p in pods} & before, 300,
                     "two new operator pods")
    assert all("--verbose" in p["spec"]["containers"][0]["args"] for p in after)
    demo.wait_ready(300)
    # It leaves that namespace to the install that holds it, and says so on the cluster there
    claimed = wait_for(lambda: prod.events("NamespaceClaimed"), bool, 120, "the second install standing aside")
    assert claimed[0]["message"] == (f"namespace {NAMESPACE} is operated by install {OPERATOR_NAMESPACE}/krafty "
                                     f"(its claim, Lease krafty-operator-claim, is renewed); this install "
                                     f"({HELM_NS}/{RELEASE}) leaves it alone")
    claim = operator.kubectl_json("get", "lease", "krafty-operator-claim", "-n", NAMESPACE)
    assert claim["spec"]["holderIdentity"] == f"{OPERATOR_NAMESPACE}/krafty"
    assert prod.condition("Ready")["status"] == "True"
    # Uninstall removes the operator, its RBAC and Services, and the resources made from values...
    helm(operator, "uninstall", RELEASE, "--namespace", HELM_NS, "--wait")
    left = operator.kubectl("get", "deployments,services,serviceaccounts,roles,rolebindings", "-n", HELM_NS,
                            "-l", "app.kubernetes.io/instance=" + RELEASE, "-o", "name")
    assert left.strip() == ""
    cluster_rbac = operator.kubectl("get", "clusterroles,clusterrolebindings", "-o", "name")
    assert RELEASE not in cluster_rbac
    wait_for(lambda: operator.kubectl("get", "kafkaclusters", "-n", HELM_NS, "-o", "name"), lambda out: not out.strip(),
             300, "the KafkaCluster from values removed")
    # ...and nothing else: CRDs, the data volumes, the other release and its clusters stay
    crds = operator.kubectl("get", "crd", "-o", "name")
    assert "kafkaclusters.kafka.krafty.io" in crds
    assert "topics.kafka.krafty.io" in crds
    claims = operator.kubectl("get", "pvc", "-n", HELM_NS, "-o", "name").split()
    assert len(claims) == 3
    other = operator.kubectl_json("get", "deployment", "krafty", "-n", OPERATOR_NAMESPACE)
    assert other["status"]["readyReplicas"] == 2
    assert prod.condition("Ready")["status"] == "True"
    operator.kubectl("delete", "namespace", HELM_NS, "--wait=false")


def test_images_run_as_non_root_and_carry_the_pinned_kafka(prod: KafkaClusterHandle, operator: KubeCluster):
    assert operator.kubectl("exec", "-n", NAMESPACE, "prod-broker-0", "--", "id", "-u").strip() == "1001"
    assert operator.kubectl("exec", "-n", OPERATOR_NAMESPACE, "deploy/krafty", "--", "id", "-u").strip() == "1001"
    pin = pinned_versions()["KAFKA_VERSION"]
    assert operator.kubectl("exec", "-n", NAMESPACE, "prod-broker-0", "--", "cat", "/opt/kafka/VERSION").strip() == pin
    assert prod.kafka_tool("kafka-topics.sh", "--version").strip().startswith(pin)
    # Exactly the artifacts the tests run: the same jars as the resolved distribution
    in_image = set(operator.kubectl("exec", "-n", NAMESPACE, "prod-broker-0", "--", "ls", "/opt/kafka/libs").split())
    assert in_image == {p.name for p in (kafka_home() / "libs").glob("*.jar")}
