"""Shared helpers for the operator's tests."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from krafty.clients.kube import Kube
from krafty.model import KafkaClusterSpec
from krafty.model.context import ClusterContext, Voter
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.tools import helm

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "krafty-operator"
OPERATOR_ACCOUNT = "system:serviceaccount:krafty-system:krafty"
CRDS = REPO / "crds"
EXAMPLES = CRDS / "examples"
# The broker image of each Kafka version, as the operator's settings take them.
TEST_IMAGES = {"4.2.2": "krafty/kafka:test-4.2.2", "4.3.1": "krafty/kafka:test"}


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name).read_text())


def context(spec: dict[str, Any] | KafkaClusterSpec, name: str = "demo", namespace: str = "kafka") -> ClusterContext:
    parsed = spec if isinstance(spec, KafkaClusterSpec) else KafkaClusterSpec.model_validate(spec)
    voters = tuple(Voter(node_id, f"dir{node_id:019d}"[:22]) for node_id in _voter_ids(parsed))
    return ClusterContext(name=name, namespace=namespace, uid="uid-1234", spec=parsed,
                          cluster_id="clusterid0000000000000", initial_voters=voters, image="krafty/kafka:test")


def _voter_ids(spec: KafkaClusterSpec) -> list[int]:
    offset = 1000 if spec.controllers.mode == "dedicated" else 0
    return [offset + i for i in range(spec.controllers.replicas)]


@pytest.fixture
def combined_ctx() -> ClusterContext:
    return context(example("kafkacluster-combined.yaml")["spec"], name="small")


@pytest.fixture
def dedicated_ctx() -> ClusterContext:
    return context(example("kafkacluster-dedicated.yaml")["spec"], name="prod")


def admin_kube(apiserver: LocalApiServer, namespace: str) -> Kube:
    """A Kube client with the API server's full rights, after our CRDs are established and `namespace` exists."""
    apiserver.kubectl("apply", "--server-side", "-f", str(CRDS))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", namespace, check=False)
    return Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))


def uninstall_hook_kube(apiserver: LocalApiServer, namespace: str) -> Kube:
    """A Kube client with the rights the chart gives its uninstall hook when released in `namespace` (its own
    account, Role and RoleBinding, as `helm uninstall` makes them first), and no more."""
    rendered = subprocess.run([str(helm()), "template", "krafty", str(CHART), "-n", namespace, "--kube-version",
                               "1.34.0", "--set", "kafkaClusters[0].name=demo",
                               "--set", "kafkaClusters[0].spec.brokers.replicas=3"],
                              capture_output=True, text=True, check=True, timeout=120).stdout
    for doc in yaml.safe_load_all(rendered):
        if doc and doc["kind"] in ("Role", "RoleBinding") and doc["metadata"]["name"] == "krafty-uninstall":
            apiserver.apply(doc)
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    client.set_default_header("Impersonate-User", f"system:serviceaccount:{namespace}:krafty-uninstall")
    return Kube(client)


def operator_kube(apiserver: LocalApiServer, namespaces: Sequence[str], rack_awareness: bool = False) -> Kube:
    """A Kube client with the rights the chart gives the operator watching `namespaces`, and no more: the
    chart's RBAC applied to the API server, and requests made as the operator's ServiceAccount."""
    rendered = subprocess.run([str(helm()), "template", "krafty", str(CHART), "-n", "krafty-system",
                               "--kube-version", "1.34.0", "--set", f"watchNamespaces={{{','.join(namespaces)}}}",
                               "--set", f"rackAwareness.enabled={str(rack_awareness).lower()}"],
                              capture_output=True, text=True, check=True, timeout=120).stdout
    apiserver.kubectl("create", "namespace", "krafty-system", check=False)
    for doc in yaml.safe_load_all(rendered):
        if doc and doc["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
            apiserver.apply(doc)
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    client.set_default_header("Impersonate-User", OPERATOR_ACCOUNT)  # the chart binds its rights to this account
    return Kube(client)
