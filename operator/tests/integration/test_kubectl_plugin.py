"""kubectl krafty against a real kube-apiserver: it asks only the operator pods of the operator's namespace."""

from __future__ import annotations

import os

import kubernetes
import pytest

from krafty.cli.kubectl import OPERATOR_SELECTOR, Plugin, PluginError
from krafty.clients.kube import Kube

LABELS = dict(part.split("=", 1) for part in OPERATOR_SELECTOR.split(","))


def test_a_pod_that_only_carries_the_operators_labels_elsewhere_is_never_asked(apiserver, monkeypatch):
    # (kubectl on PATH, as a user's is, and its kubeconfig that of this API server)
    monkeypatch.setenv("PATH", f"{apiserver.bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KUBECONFIG", str(apiserver.kubeconfig))
    kube = Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))
    # Given a tenant's pod in its own namespace, labelled as the operator's pods are and running
    apiserver.kubectl("create", "namespace", "impostor", check=False)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "krafty-operator-x", "namespace": "impostor",
                                                           "labels": LABELS},
           "spec": {"containers": [{"name": "operator", "image": "example.com/fake:1",
                                    "ports": [{"name": "metrics", "containerPort": 8080}]}]}}
    kube.apply(pod)
    kube.patch_status("Pod", "krafty-operator-x", "impostor", {"phase": "Running"})
    assert kube.get("Pod", "krafty-operator-x", "impostor")["status"]["phase"] == "Running"
    # When the plugin looks for the operator (no operator in krafty-system), Then it finds none to ask
    with pytest.raises(PluginError, match=r"no running operator pod .* in namespace krafty-system"):
        Plugin(kube)._leaders_metrics("kafka", "prod")
    # And pointed at the tenant's namespace it would ask it (port-forward fails: no kubelet runs it here)
    with pytest.raises(PluginError, match="kubectl port-forward to impostor/krafty-operator-x failed"):
        Plugin(kube, operator_namespace="impostor")._leaders_metrics("kafka", "prod")
