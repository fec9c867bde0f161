"""What the plan endpoint takes as the proposed spec (a KafkaCluster, one without its kind, or a bare spec), and
where it listens: the loopback only."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from typing import cast

import pytest

from krafty.clients.kube import Kube
from krafty.runtime import serving
from krafty.runtime.plan_api import PATH, _spec_of, serve

SPEC = {"brokers": {"replicas": 3}}


@pytest.mark.parametrize("document", [
    {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": "prod"}, "spec": SPEC},
    {"spec": SPEC},
    SPEC,
])
def test_the_spec_is_found_in_each_form(document):
    assert _spec_of(document) == SPEC


@pytest.mark.parametrize(("document", "error"), [
    ({"kind": "Topic", "spec": SPEC}, "a Topic is not a KafkaCluster"),
    ({"kind": "KafkaCluster"}, "the KafkaCluster has no spec"),
    ({"spec": "brokers"}, "the KafkaCluster has no spec"),
    (["brokers"], "the body is not a JSON object"),
])
def test_anything_else_is_refused_with_why(document, error):
    with pytest.raises(ValueError, match=error):
        _spec_of(document)


def test_the_path_names_a_namespace_and_a_cluster():
    found = PATH.match("/namespaces/kafka-e2e/kafkaclusters/prod/plan")
    assert found is not None
    assert found.groups() == ("kafka-e2e", "prod")
    assert PATH.match("/namespaces/kafka-e2e/kafkaclusters/prod") is None
    assert PATH.match("/namespaces/Kafka/kafkaclusters/prod/plan") is None


def own_address() -> str:
    """This machine's address on its network (a UDP socket connected sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # (TEST-NET-1: only a route is looked up)
        return str(probe.getsockname()[0])


def test_the_endpoint_answers_on_the_loopback_and_not_on_the_pods_address():
    address = own_address()
    assert not address.startswith("127."), address  # (a machine with no network would prove nothing)
    server = serve(0, cast(Kube, None), lambda body, spec: pytest.fail("nothing is previewed"))
    port = server.server_address[1]
    try:
        # Given the endpoint, a request on the loopback is answered (an unknown path: nothing read)
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/nope", data=b"{}"), timeout=5)
        assert answered.value.code == 404
        # While the same port on the machine's own address is closed
        with socket.socket() as probe:
            probe.settimeout(3)
            assert probe.connect_ex((address, port)) != 0
    finally:
        serving.stop(server)
