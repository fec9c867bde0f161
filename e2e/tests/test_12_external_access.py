"""Clients outside Kubernetes: a nodeport and a loadbalancer listener, both TLS, reached from this machine (the
test process, outside the pod network: the cluster's DNS names do not resolve here) before and after a rolling
restart. Through the nodeport one each broker advertises the node its pod runs on and its own node port;
through the loadbalancer one, the address MetalLB gave its own Service (layer 2 on the nodes' network). The
clients trust the cluster CA and check that each broker's certificate names the address they dialed."""

from __future__ import annotations

import calendar
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_10_operator_core import make_topic, pod_uids, restart_events, wait_rolled
from test_15_tls import secret_text

from krafty_testkit.k8s_kafka import NAMESPACE, KafkaClusterHandle, cluster_spec
from krafty_testkit.kube import KubeCluster
from krafty_testkit.traffic import client_config, consume_all, produce_sequences, verify

EXTERNAL = {"name": "outside", "port": 9094, "type": "nodeport", "tls": True}
BALANCED = {"name": "balanced", "port": 9095, "type": "loadbalancer", "tls": True}


@pytest.fixture(scope="module")
def reachable(operator: KubeCluster) -> Iterator[KafkaClusterHandle]:
    """A controller and 3 brokers with an internal listener, a nodeport one and a loadbalancer one; gone after
    the module."""
    handle = KafkaClusterHandle(operator, "reachable")
    handle.apply(cluster_spec("dedicated", controllers=1,
                              listeners=[{"name": "plain", "port": 9092}, EXTERNAL, BALANCED]))
    handle.wait_ready(600)  # under pytest's 900 s: a timeout here says what the cluster's conditions were
    yield handle
    handle.delete()


@pytest.fixture(scope="module")
def trusting(reachable: KafkaClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """librdkafka settings of a client here that trusts the cluster CA only and checks that the certificate
    names the address it dialed (https: hostname verification)."""
    ca = tmp_path_factory.mktemp("reachable") / "ca.crt"
    ca.write_text(secret_text(reachable.kube, "reachable-cluster-ca-cert", "ca.crt"))
    return {"security.protocol": "SSL", "ssl.ca.location": str(ca), "ssl.endpoint.identification.algorithm": "https"}


def handshake(address: str, ca_file: str, name: str | None = None) -> list[str]:
    """A TLS handshake with the broker at `address` that checks its certificate for `name` (the dialed host by
    default); the certificate's IP addresses."""
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=ca_file)
    with (socket.create_connection((host, int(port)), timeout=10) as raw,
          context.wrap_socket(raw, server_hostname=name or host) as tls):
        return [value for kind, value in tls.getpeercert()["subjectAltName"] if kind == "IP Address"]


def external_bootstrap(handle: KafkaClusterHandle, listener: dict[str, object]) -> str:
    entry = next(e for e in handle.status()["listeners"] if e["name"] == listener["name"])
    assert entry["type"] == listener["type"]
    return str(entry["bootstrapServers"])


def service(handle: KafkaClusterHandle, listener: dict[str, object], which: str) -> dict[str, Any]:
    return dict(handle.kube.kubectl_json("get", "service", f"{handle.name}-{listener['name']}-{which}", "-n",
                                         NAMESPACE))


def expected_addresses(handle: KafkaClusterHandle, listener: dict[str, object]) -> set[str]:
    """Each broker's address: its node (its pod's hostIP) and its own Service's node port, or its own Service's
    load-balancer address and the listener's port."""
    out = set()
    for pod in handle.pods("broker"):
        own = service(handle, listener, pod["metadata"]["name"].rsplit("-", 1)[1])
        if listener["type"] == "nodeport":
            out.add(f"{pod['status']['hostIP']}:{own['spec']['ports'][0]['nodePort']}")
        else:
            out.add(f"{own['status']['loadBalancer']['ingress'][0]['ip']}:{listener['port']}")
    return out


def advertised(bootstrap: str, trusting: dict[str, str]) -> set[str]:
    """The brokers' addresses as Kafka itself tells a client that bootstrapped from here."""
    from confluent_kafka.admin import AdminClient

    brokers = AdminClient(client_config(bootstrap, **trusting)).list_topics(timeout=30).brokers.values()
    return {f"{b.host}:{b.port}" for b in brokers}


def round_trip(bootstrap: str, topic: str, trusting: dict[str, str]) -> tuple[int, int, int]:
    """(acknowledged, lost, duplicated) for 2,000 acks=all records produced and read back from this machine."""
    report = produce_sequences(bootstrap, topic, 2000, **trusting)
    checked = verify(report.acked, consume_all(bootstrap, topic, **trusting))
    return len(report.acked), len(checked.lost), len(checked.duplicated)


def certificates_name_what_was_dialed(addresses: set[str], trusting: dict[str, str]) -> None:
    """Each broker's certificate verifies for the address it advertises, and not for a name it does not carry."""
    for address in addresses:
        assert address.rsplit(":", 1)[0] in handshake(address, trusting["ssl.ca.location"])
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        handshake(next(iter(addresses)), trusting["ssl.ca.location"], "elsewhere.example.com")


def serve_clients_outside(reachable: KafkaClusterHandle, trusting: dict[str, str]) -> None:
    """Clients here reach every broker through both listeners, write and read back."""
    # Given this machine is outside the pod network (the in-cluster bootstrap name does not resolve here)
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo(f"reachable-kafka-bootstrap.{NAMESPACE}.svc.cluster.local", 9092)
    make_topic(reachable.kube, "from-outside", "reachable", partitions=6, replicas=3,
               config={"min.insync.replicas": 2})
    # When a client here bootstraps from what status.listeners says, through the node ports
    bootstrap = external_bootstrap(reachable, EXTERNAL)
    assert set(bootstrap.split(",")) == expected_addresses(reachable, EXTERNAL)
    # Then Kafka sends it to each broker's node and node port, and it writes and reads everything back
    assert advertised(bootstrap, trusting) == expected_addresses(reachable, EXTERNAL)
    certificates_name_what_was_dialed(expected_addresses(reachable, EXTERNAL), trusting)
    assert round_trip(bootstrap, "from-outside", trusting) == (2000, 0, 0)
    # And through the load balancers: the bootstrap Service's address, then each broker's own
    balanced = external_bootstrap(reachable, BALANCED)
    lb = service(reachable, BALANCED, "bootstrap")["status"]["loadBalancer"]["ingress"][0]["ip"]
    assert balanced == f"{lb}:{BALANCED['port']}"
    assert advertised(balanced, trusting) == expected_addresses(reachable, BALANCED)
    certificates_name_what_was_dialed({balanced, *expected_addresses(reachable, BALANCED)}, trusting)
    assert round_trip(balanced, "from-outside", trusting) == (2000, 0, 0)


def test_tls_nodeport_and_loadbalancer_listeners_serve_clients_outside(reachable: KafkaClusterHandle,
                                                                       trusting: dict[str, str]):
    # Given a new cluster whose brokers started once their addresses were known: none restarted to open a listener
    created = calendar.timegm(time.strptime(reachable.get()["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
    assert restart_events(reachable, created) == []
    serve_clients_outside(reachable, trusting)


@pytest.mark.full  # a roll of three brokers and a fourth one, about four minutes: CI rolls in test_25 and test_15
def test_tls_nodeport_and_loadbalancer_listeners_serve_clients_outside_through_a_roll_and_a_scale_up(
        reachable: KafkaClusterHandle, trusting: dict[str, str]):
    serve_clients_outside(reachable, trusting)
    # When every broker restarts (a static config change rolls them)
    before = pod_uids(reachable)
    reachable.patch_spec({"brokers": {"config": {"queued.max.requests": 600}}})
    wait_rolled(reachable, before, {pod for pod in before if "-broker-" in pod})
    reachable.wait_ready(600)
    time.sleep(5)
    # Then the addresses each broker advertises are still its node's and its load balancer's, and clients here
    # keep working through both
    for listener in (EXTERNAL, BALANCED):
        after = external_bootstrap(reachable, listener)
        assert advertised(after, trusting) == expected_addresses(reachable, listener)
        certificates_name_what_was_dialed(expected_addresses(reachable, listener), trusting)
        assert round_trip(after, "from-outside", trusting) == (2000, 0, 0)
    # When a fourth broker joins (its own Services; its certificate names its load balancer's address)
    scaled = time.time()
    reachable.patch_spec({"brokers": {"replicas": 4}})
    reachable.wait_ready(600)
    assert restart_events(reachable, scaled) == []  # it started once its addresses were known: no restart
    make_topic(reachable.kube, "after-scale-up", "reachable", partitions=8, replicas=3,
               config={"min.insync.replicas": 2})
    # Then clients here are sent to all four through both listeners, and write and read through each
    for listener in (EXTERNAL, BALANCED):
        after = external_bootstrap(reachable, listener)
        assert len(expected_addresses(reachable, listener)) == 4
        assert advertised(after, trusting) == expected_addresses(reachable, listener)
        certificates_name_what_was_dialed(expected_addresses(reachable, listener), trusting)
        assert round_trip(after, "after-scale-up", trusting) == (2000, 0, 0)
