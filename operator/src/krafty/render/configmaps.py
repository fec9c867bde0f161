"""The per-node configuration ConfigMap and the connection ConfigMap for applications."""

from __future__ import annotations

from typing import Any

from krafty import naming
from krafty.model.cluster import SCRAM_MECHANISM, ClientAuthentication, Listener
from krafty.model.context import ClusterContext
from krafty.render.kafka_config import node_properties, render_properties


def node_config_map(ctx: ClusterContext) -> dict[str, Any]:
    """server.properties of every node, the cluster id, what was chosen at its creation (whether the nodes speak
    TLS to each other, who a listener naming no peers admits) and, until the quorum has formed, the initial voters
    that `kafka-storage format` needs (empty after)."""
    data = {naming.CLUSTER_ID_KEY: ctx.cluster_id, naming.INITIAL_CONTROLLERS_KEY: ctx.initial_controllers_arg(),
            naming.INTERNAL_TLS_KEY: "true" if ctx.internal_tls else "false",
            naming.UNNAMED_PEERS_KEY: ctx.created_unnamed_peers.value, naming.KRAFT_QUORUM_KEY: ctx.quorum.value,
            # (read only when a node formats its storage: a running cluster's levels are changed by UpdateFeatures)
            naming.FORMAT_FEATURES_KEY: " ".join(f"{n}={v}" for n, v in sorted(ctx.spec.features.items()))}
    for pool in ctx.pools():
        for ordinal in range(ctx.replicas(pool)):
            data[naming.node_config_key(pool, ordinal)] = render_properties(node_properties(ctx, pool, ordinal))
    metadata = ctx.metadata(naming.config_map(ctx.name))
    storage = ctx.spec.brokers.storage
    if storage is not None and not storage.delete_claim:
        # Kept with the volumes: a cluster re-created with the same name must find its cluster id,
        # or its brokers would refuse the data on their disks.
        metadata.pop("ownerReferences")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def client_settings(listener: Listener, bootstrap: str) -> dict[str, str]:
    """The Kafka client properties that reach one listener (its bootstrap address, protocol and SASL
    mechanism): in the connection ConfigMap, and in each KafkaUser's Secret for the listener it uses."""
    settings = {"bootstrap.servers": bootstrap, "security.protocol": listener.protocol.value}
    if listener.authentication is ClientAuthentication.SCRAM_SHA_512:
        settings["sasl.mechanism"] = SCRAM_MECHANISM
    return settings


def connection_config_map(ctx: ClusterContext) -> dict[str, Any]:
    """What a client needs to connect (Spark jobs mount it): the first published listener's bootstrap address,
    protocol and SASL mechanism and, for TLS, the Secret and key of the CA certificates to trust (PEM)."""
    first = ctx.published_listeners[0]
    data = client_settings(first, ctx.bootstrap_servers())
    if first.tls:
        data |= {"ssl.truststore.type": "PEM", "ssl.truststore.secret": naming.cluster_ca_cert(ctx.name),
                 "ssl.truststore.secret.key": naming.CA_CERT_KEY}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": ctx.metadata(naming.connection_config_map(ctx.name)),
            "data": data}
