"""The chart's uninstall hook (krafty.cli.uninstall) against a real API server: it deletes the release's
KafkaClusters and Topics, waits while an operator tears them down, and never leaves them stranded."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from krafty import naming
from krafty.cli import uninstall
from krafty.clients.kube import Kube
from krafty_testkit.apiserver import LocalApiServer

from ..conftest import admin_kube, uninstall_hook_kube

NS = "uninstall"
RELEASE = {"app.kubernetes.io/instance": "rel"}


@pytest.fixture(scope="module")
def kube(apiserver: LocalApiServer) -> Kube:
    return admin_kube(apiserver, NS)


@pytest.fixture(scope="module")
def hook(apiserver: LocalApiServer, kube: Kube) -> Kube:
    """The uninstall hook's own rights, as the chart grants them (it runs as no other account)."""
    return uninstall_hook_kube(apiserver, NS)


def held(apiserver: LocalApiServer, kind: str, name: str, labels: dict[str, str], spec: dict[str, Any]) -> None:
    """An object as the operator leaves it: with the operator's finalizer."""
    apiserver.apply({"apiVersion": naming.API_VERSION, "kind": kind, "metadata": {
        "name": name, "namespace": NS, "labels": labels, "finalizers": [uninstall.FINALIZERS[kind]]}, "spec": spec})


def test_what_the_operator_tears_down_in_time_is_waited_for(apiserver: LocalApiServer, kube: Kube, hook: Kube):
    held(apiserver, naming.CLUSTER_KIND, "in-time", RELEASE, {"brokers": {"replicas": 3}})

    def operator_lets_go() -> None:  # as the operator does once the brokers are gone
        time.sleep(2)
        body = kube.get(naming.CLUSTER_KIND, "in-time", NS)
        assert body is not None
        assert body["metadata"].get("deletionTimestamp")
        kube.remove_finalizer(naming.CLUSTER_KIND, body, naming.CLUSTER_FINALIZER)

    operator = threading.Thread(target=operator_lets_go)
    operator.start()
    assert uninstall.run(hook, NS, RELEASE, timeout=60, interval=0.5) == 0
    operator.join()
    assert kube.get(naming.CLUSTER_KIND, "in-time", NS) is None


def test_nothing_is_stranded_without_an_operator_and_other_releases_are_untouched(apiserver: LocalApiServer,
                                                                                 kube: Kube, hook: Kube):
    held(apiserver, naming.CLUSTER_KIND, "mine", RELEASE, {"brokers": {"replicas": 3}})
    held(apiserver, naming.TOPIC_KIND, "my-topic", RELEASE, {"clusterRef": {"name": "mine"}})
    held(apiserver, naming.CLUSTER_KIND, "theirs", {"app.kubernetes.io/instance": "other"},
         {"brokers": {"replicas": 3}})
    # No operator runs: after the timeout the hook removes the operator's finalizers itself
    assert uninstall.run(hook, NS, RELEASE, timeout=2, interval=0.5) == 2
    assert kube.get(naming.CLUSTER_KIND, "mine", NS) is None
    assert kube.get(naming.TOPIC_KIND, "my-topic", NS) is None
    theirs = kube.get(naming.CLUSTER_KIND, "theirs", NS)
    assert theirs is not None
    assert not theirs["metadata"].get("deletionTimestamp")
