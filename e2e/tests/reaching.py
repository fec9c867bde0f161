"""How the end-to-end tests reach a cluster: its client listeners, the ones status publishes to applications,
kcat in the client pod, and plain TCP reachability from the client pod (for NetworkPolicies, the clusters' and
the operator's)."""

from __future__ import annotations

from typing import Any

import pytest

from krafty_testkit.k8s_kafka import ClientPod, KafkaClusterHandle
from krafty_testkit.kube import KubeError

TLS_PORT = 9094
PLAIN_LISTENER: dict[str, Any] = {"name": "plain", "port": 9092}
TLS_LISTENER: dict[str, Any] = {"name": "tls", "port": TLS_PORT, "tls": True}
# prod's listeners that authenticate clients (test_17_authentication.py), beside its plaintext one (first)
MTLS_LISTENER: dict[str, Any] = {"name": "mtls", "port": 9095, "tls": True, "authentication": "tls"}
SCRAM_LISTENER: dict[str, Any] = {"name": "scram", "port": 9096, "tls": True, "authentication": "scram-sha-512"}

_PROBE = """import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("open")
except OSError as error:
    print("closed", error)
"""


def tls_address(handle: KafkaClusterHandle) -> str:
    return handle.bootstrap_at(TLS_PORT)


def published(handle: KafkaClusterHandle) -> list[str]:
    """The listeners status says applications are sent to."""
    return [entry["name"] for entry in handle.status().get("listeners", [])]


def opens(client: ClientPod, host: str, port: int) -> bool:
    """Whether a TCP connection from the client pod to the host's port opens (three seconds at most)."""
    out = client.kube.kubectl("exec", "-n", client.namespace, client.name, "--", "python3", "-c", _PROBE, host,
                              str(port), timeout=30)
    return out.strip().startswith("open")


def reachable(client: ClientPod, handle: KafkaClusterHandle, port: int) -> bool:
    """Whether a TCP connection from the client pod to broker 0's port opens."""
    return opens(client, f"{handle.name}-broker-0.{handle.name}-brokers.{handle.namespace}.svc.cluster.local", port)


def kcat(client: ClientPod, *args: str, stdin: str | None = None, timeout: float = 90) -> str:
    interactive = ["-i"] if stdin is not None else []
    return client.kube.kubectl("exec", *interactive, "-n", client.namespace, client.name, "--", "kcat", *args,
                               stdin=stdin, timeout=timeout)


def kcat_fails(client: ClientPod, *args: str) -> str:
    """kcat's error output for a connection that must fail (a metadata request, ten seconds at most)."""
    with pytest.raises(KubeError) as failed:
        kcat(client, "-L", "-m", "10", *args)
    return str(failed.value)
