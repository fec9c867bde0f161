"""Where clients outside Kubernetes reach the brokers of a nodeport or loadbalancer listener.

A broker advertises, for such a listener, its own address: the spec's advertisedHost and advertisedPort
when given; else for a nodeport listener the address of the Kubernetes node its pod runs on (filled in when
the pod starts) and its Service's node port (the spec's, or the one Kubernetes gave); for a loadbalancer
listener its Service's load-balancer address and the listener's port. A broker whose address is not known
yet (its Service has no node port or load balancer yet) does not open the listener until it is: a client
is never sent to an address that leads nowhere. Opening it later takes a restart, so new brokers (a new
cluster's, or those a scale-up adds) are started only once their addresses are known, or ADDRESS_WAIT_SECONDS
after their Services were made (a load balancer that never gives one, with no controller installed, does not
keep a cluster from starting or growing).

With tls: true, a broker's certificate names what clients outside verify it by (`certificate_names`): for a
nodeport listener the address of every Kubernetes node (its pod may start on any of them and advertises that
one), for a loadbalancer listener its own and the bootstrap Service's load-balancer addresses, and any
advertisedHost. When those change (a node joins, a load balancer gives a new address) the certificates are
issued again without a restart: a broker takes its new one when it next starts, and one that starts on a node its
mounted certificate does not name yet waits for the one that does (broker-image/bin/entrypoint.sh).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence

from krafty import naming
from krafty.facts.observed import ExternalServiceState, NodeState
from krafty.model.cluster import Listener, ListenerType
from krafty.model.context import Endpoint

ADDRESS_WAIT_SECONDS = 60


def endpoints(cluster: str, listeners: Iterable[Listener], brokers: int,
              services: Mapping[str, ExternalServiceState]) -> dict[tuple[str, int], Endpoint]:
    """(listener, broker ordinal) -> its advertised address, for every broker whose address is known."""
    out = {}
    for listener in listeners:
        outside = listener.outside
        if outside is None:
            continue
        for ordinal in range(brokers):
            chosen = outside.of(ordinal)
            seen = services.get(naming.external_service(cluster, listener.name, ordinal))
            if listener.type is ListenerType.NODEPORT:
                host: str | None = chosen.advertised_host or naming.NODE_ADDRESS_PLACEHOLDER
                port = chosen.advertised_port or chosen.node_port or (seen.node_port if seen else None)
            else:
                host = chosen.advertised_host or (seen.address if seen else None)
                port = chosen.advertised_port or listener.port
            if host and port:
                out[(listener.name, ordinal)] = Endpoint(host, port)
    return out


def _missing(cluster: str, listeners: Iterable[Listener], ordinals: Iterable[int],
             known: Mapping[tuple[str, int], Endpoint]) -> list[str]:
    """The Services of the brokers (of those ordinals) whose external address is not known yet."""
    return [naming.external_service(cluster, listener.name, ordinal) for listener in listeners
            if listener.outside is not None for ordinal in ordinals if (listener.name, ordinal) not in known]


def holding_new_brokers(cluster: str, listeners: Iterable[Listener], new: range,
                        known: Mapping[tuple[str, int], Endpoint], services: Mapping[str, ExternalServiceState],
                        now: datetime.datetime | None) -> str | None:
    """Why the `new` brokers (ordinals the brokers' StatefulSet does not have yet) are not started: an external
    address of one is not known, and its Service is not there yet or younger than ADDRESS_WAIT_SECONDS.
    None: start them."""
    if now is None:
        return None
    young = [name for name in _missing(cluster, listeners, new, known)
             if (seen := services.get(name)) is None or seen.created is None
             or (now - seen.created).total_seconds() < ADDRESS_WAIT_SECONDS]
    if not young:
        return None
    which = "the brokers are" if new.start == 0 else f"brokers {list(new)} are"
    return (f"{which} made once the external addresses of {', '.join(young)} are known (at most "
            f"{ADDRESS_WAIT_SECONDS} s after their Services were), so that they start with every listener open and "
            "need no restart to open it")


def waiting(cluster: str, listeners: Iterable[Listener], brokers: int,
            known: Mapping[tuple[str, int], Endpoint]) -> str | None:
    """Which external addresses are not known yet, or None."""
    missing = _missing(cluster, listeners, range(brokers), known)
    if not missing:
        return None
    return (f"waiting for the external address of {', '.join(missing)} (a node port or a load balancer from "
            "Kubernetes); those brokers open the listener once it is there")


def bootstrap(cluster: str, listener: Listener, known: Mapping[tuple[str, int], Endpoint],
              brokers: Sequence[NodeState], services: Mapping[str, ExternalServiceState]) -> str | None:
    """How a client outside Kubernetes starts: the load balancer of the bootstrap Service, or for a nodeport
    listener every broker's own address (its node and node port); None while unknown."""
    if listener.type is ListenerType.LOADBALANCER:
        seen = services.get(naming.external_service(cluster, listener.name, None))
        return f"{seen.address}:{listener.port}" if seen and seen.address else None
    addresses = []
    for node in brokers:
        found = known.get((listener.name, node.node_id))
        host = found.host if found and found.host != naming.NODE_ADDRESS_PLACEHOLDER else node.host_address
        if found and host:
            addresses.append(f"{host}:{found.port}")
    return ",".join(addresses) or None


def certificate_names(cluster: str, listeners: Iterable[Listener], ordinal: int,
                      services: Mapping[str, ExternalServiceState], node_addresses: Iterable[str]) -> tuple[str, ...]:
    """The addresses and host names broker `ordinal`'s certificate names for its TLS nodeport and loadbalancer
    listeners, sorted: clients outside Kubernetes check the address they connect to against them."""
    names: set[str] = set()
    for listener in listeners:
        outside = listener.outside
        if outside is None or not listener.tls:
            continue
        if advertised := outside.of(ordinal).advertised_host:
            names.add(advertised)
        if listener.type is ListenerType.NODEPORT:
            names.update(node_addresses)
            continue
        for which in (ordinal, None):
            seen = services.get(naming.external_service(cluster, listener.name, which))
            if seen is not None and seen.address:
                names.add(seen.address)
    return tuple(sorted(names))


def needs_node_addresses(listeners: Iterable[Listener]) -> bool:
    """Whether the brokers' certificates name the Kubernetes nodes' addresses (a TLS nodeport listener)."""
    return any(listener.tls and listener.type is ListenerType.NODEPORT for listener in listeners)
