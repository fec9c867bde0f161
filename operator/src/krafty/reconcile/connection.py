"""Where the topic, user, lag and disk passes reach a cluster, and with what credentials: as its cluster pass
last reached it (that pass issues the operator's certificate, so it knows first when it changes), or, for a
cluster no cluster pass has reached since the operator started, read from the cluster's ConfigMap and Secret."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from krafty import naming
from krafty.clients.connection import Connection, TlsIdentity
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kube import Kube
from krafty.render.secrets import decoded

# (namespace, cluster) -> how to connect; raises KafkaUnavailable while the cluster cannot be reached yet
Locate = Callable[[str, str], Connection]


class Reached:
    """Each cluster's connection as its cluster pass last used it; `unknown` locates the others."""

    def __init__(self, unknown: Locate) -> None:
        self._unknown = unknown
        self._by_cluster: dict[tuple[str, str], Connection] = {}
        self._lock = threading.Lock()

    def reached(self, namespace: str, cluster: str, connection: Connection | None) -> None:
        """The cluster pass reached the cluster this way (None: the cluster is gone, forget it)."""
        with self._lock:
            if connection is None:
                self._by_cluster.pop((namespace, cluster), None)
            else:
                self._by_cluster[(namespace, cluster)] = connection

    def locate(self, namespace: str, cluster: str) -> Connection:
        with self._lock:
            found = self._by_cluster.get((namespace, cluster))
        return found if found is not None else self._unknown(namespace, cluster)


def in_cluster(kube: Kube, domain: str) -> Locate:
    def locate(namespace: str, cluster: str) -> Connection:
        config = _node_config(kube, namespace, cluster)
        servers = naming.operator_bootstrap(cluster, namespace, domain)
        if config.get(naming.INTERNAL_TLS_KEY) != "true":
            return Connection(servers)
        own = decoded(kube.get("Secret", naming.operator_certificate(cluster), namespace))
        if not {naming.CA_CERT_KEY, naming.TLS_CERT_KEY, naming.TLS_KEY_KEY} <= own.keys():
            raise KafkaUnavailable(f"the operator's certificate for {namespace}/{cluster} is not issued yet")
        return Connection(servers, TlsIdentity(own[naming.CA_CERT_KEY], own[naming.TLS_CERT_KEY],
                                               own[naming.TLS_KEY_KEY]))
    return locate


def _node_config(kube: Kube, namespace: str, cluster: str) -> dict[str, str]:
    """The cluster's node ConfigMap data (it says whether the nodes speak TLS)."""
    body = kube.get("ConfigMap", naming.config_map(cluster), namespace)
    if body is None:
        raise KafkaUnavailable(f"{namespace}/{cluster} has no configuration yet")
    return dict(body.get("data") or {})


def fixed(servers: str | Mapping[str, str]) -> Locate:
    """Outside Kubernetes (development, tests, benchmarks): plaintext addresses, the same for every cluster or
    each cluster's own ("namespace/cluster" -> "host:port,...")."""
    if isinstance(servers, str):
        return lambda _namespace, _cluster: Connection(servers)
    table = dict(servers)

    def locate(namespace: str, cluster: str) -> Connection:
        found = table.get(f"{namespace}/{cluster}")
        if found is None:
            raise KafkaUnavailable(f"no address is given for {namespace}/{cluster} (KRAFTY_KAFKA_BOOTSTRAP names "
                                   f"{', '.join(sorted(table))})")
        return Connection(found)
    return locate
