"""The operator's API client against a real kube-apiserver: the connections it keeps, and what it raises for a kind
the API server does not serve."""

from __future__ import annotations

import threading

import kubernetes
import pytest

from krafty import naming
from krafty.clients.kube import CONNECTIONS, KindNotServed, Kube, load_config
from krafty.reconcile.writer import WRITERS
from krafty.runtime.handlers import WORKERS
from krafty_testkit.apiserver import running_apiserver

from ..conftest import CRDS


def opened(kube: Kube) -> int:
    pools = kube.api_client.rest_client.pool_manager.pools
    return sum(pools[key].num_connections for key in pools.keys())  # noqa: SIM118 (urllib3 refuses iter())


def test_as_many_calls_at_once_as_the_operator_makes_each_keep_their_connection(apiserver, monkeypatch):
    # Given the client made as the operator makes it (load_config, then Kube), and a connection for each thread
    # that may call at once
    assert CONNECTIONS >= WORKERS + WRITERS + 2  # the passes, the status writers, the leader election, the plan API
    # (the kubeconfig the client reads when KUBECONFIG is unset: the variable is read when kubernetes is imported)
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(apiserver.kubeconfig))
    load_config()
    kube = Kube()

    def calls_at_once() -> None:
        """CONNECTIONS calls at once, each held open by the API server for a second (a watch that times out)."""
        barrier = threading.Barrier(CONNECTIONS)

        configuration = kube.api_client.configuration
        token = configuration.auth_settings()["BearerToken"]["value"]
        url = f"{configuration.host}/api/v1/namespaces?watch=true&timeoutSeconds=1"

        answered: list[int] = []  # (each thread's answer, checked here: an assert in a thread only warns)

        def call() -> None:
            barrier.wait()
            answer = kube.api_client.rest_client.pool_manager.request("GET", url, headers={"Authorization": token})
            answered.append(answer.status)

        threads = [threading.Thread(target=call) for _ in range(CONNECTIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert answered == [200] * CONNECTIONS

    # When that many calls are made at once, twice
    calls_at_once()
    first = opened(kube)
    calls_at_once()
    # Then the second time opened no connection: each one went back to the pool (a pool smaller than the callers
    # drops the connections beyond it, and their next calls open new TLS connections)
    assert first == CONNECTIONS
    assert opened(kube) == first


def test_each_kind_of_write_gives_its_connection_back(apiserver):
    # Given one client and a ConfigMap to write to
    kube = Kube(kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig)))
    apiserver.kubectl("create", "namespace", "writes", check=False)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "written", "namespace": "writes"},
            "data": {"a": "1"}}
    created = kube.create(body)
    # When every kind of write the operator makes goes one after the other (their answers are not decoded)
    assert created["data"] == {"a": "1"}
    replaced = kube.replace({**created, "data": {"a": "2"}})
    assert replaced["data"] == {"a": "2"}
    assert kube.add_finalizer("ConfigMap", replaced, "example.com/kept")
    kube.merge_patch("ConfigMap", "written", "writes", {"data": {"b": "3"}})
    kube.event(created, "ConfigMap", "Written", "written again")
    kube.event(created, "ConfigMap", "Written", "written again")  # (counted: a read and a patch)
    assert kube.delete("ConfigMap", "written", "writes")
    # Then they all took effect, and went through one connection: each answer was read whole, so its connection
    # went back to the pool (an unread one keeps it, and the next call opens another)
    found = kube.get("ConfigMap", "written", "writes")
    assert found is not None
    assert (found["data"], found["metadata"]["finalizers"]) == ({"a": "2", "b": "3"}, ["example.com/kept"])
    events = kube.list("Event", "writes")
    assert [(e["reason"], e["count"]) for e in events] == [("Written", 2)]
    assert kube.remove_finalizer("ConfigMap", found, "example.com/kept")
    assert kube.get("ConfigMap", "written", "writes") is None
    assert opened(kube) == 1


def test_a_kind_the_api_server_does_not_serve_is_named_and_asked_for_again(tmp_path):
    # Given an API server without krafty's CRDs
    with running_apiserver(tmp_path) as bare:
        kube = Kube(kubernetes.config.new_client_from_config(config_file=str(bare.kubeconfig)))
        # When a KafkaCluster is read, Then the error names the kind and its CRD (it was the client's
        # ResourceNotFoundError, which no caller expects), and again (nothing of it remembered)
        for _ in range(2):
            with pytest.raises(KindNotServed, match=r"serves no KafkaCluster of kafka\.krafty\.io/v1alpha1"):
                kube.get(naming.CLUSTER_KIND, "prod", "default")
        # And once the CRDs are installed, the same client reads it
        bare.kubectl("apply", "--server-side", "-f", str(CRDS))
        bare.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        assert kube.get(naming.CLUSTER_KIND, "prod", "default") is None
