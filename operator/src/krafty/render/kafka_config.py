"""server.properties of each node, and which of it Kafka can change at runtime."""

from __future__ import annotations

import hashlib

from krafty import naming
from krafty.model import LeaderBalanceMode
from krafty.model.cluster import SCRAM_MECHANISM, ClientAuthentication, SecurityProtocol
from krafty.model.context import ClusterContext, QuorumKind
from krafty.model.kafka_configs import catalog
from krafty.naming import Pool

# Keys that identify a node rather than configure it: equal in shape on every node,
# so they are left out of the restart hash (scaling must not roll the others).
_NODE_IDENTITY = ("node.id", "advertised.listeners", "ssl.keystore.certificate.chain", "ssl.keystore.key")
# Only a discovery list: existing entries stay valid when voters are added, so a
# change to it does not need a restart (restarted nodes get the new list).
_DISCOVERY_ONLY = ("controller.quorum.bootstrap.servers",)


def _protocol(tls: bool) -> str:
    return SecurityProtocol.of(tls, sasl=False).value


# The principal of a client certificate is its common name (User:alice), as for a SCRAM user of that name
_COMMON_NAME_PRINCIPAL = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _client_authentication(ctx: ClusterContext) -> dict[str, str]:
    """Per client listener: a certificate of the clients CA (authentication tls), or SCRAM-SHA-512."""
    out: dict[str, str] = {}
    for listener in ctx.listeners_by_port:
        prefix = f"listener.name.{listener.name}."
        if listener.authentication is ClientAuthentication.TLS:
            out |= {f"{prefix}ssl.client.auth": "required",
                    f"{prefix}ssl.truststore.certificates":
                        f"${{dir:{naming.CLIENTS_TRUST_DIR}:{naming.CA_CERT_KEY}}}",
                    f"{prefix}ssl.principal.mapping.rules": _COMMON_NAME_PRINCIPAL}
        elif listener.authentication is ClientAuthentication.SCRAM_SHA_512:
            out |= {f"{prefix}sasl.enabled.mechanisms": SCRAM_MECHANISM,
                    f"{prefix}{SCRAM_MECHANISM.lower()}.sasl.jaas.config": _SCRAM_LOGIN}
    return out


def _listeners(ctx: ClusterContext, pool: Pool, ordinal: int) -> dict[str, str]:
    roles = ctx.roles(pool, ordinal)
    host = ctx.host(pool, ordinal)
    internal = _protocol(ctx.internal_tls)
    bind, advertised, protocols = [], [], []
    if "broker" in roles:
        for listener in ctx.listeners_by_port:
            address = f"{host}:{listener.port}"
            if listener.outside is not None:
                endpoint = ctx.external_endpoints.get((listener.name, ordinal))
                if endpoint is None:
                    continue  # its external address is not known yet (krafty.decide.external)
                address = f"{endpoint.host}:{endpoint.port}"
            bind.append(f"{listener.kafka_name}://:{listener.port}")
            advertised.append(f"{listener.kafka_name}://{address}")
            protocols.append(f"{listener.kafka_name}:{listener.protocol}")
        bind.append(f"{naming.REPLICATION_LISTENER}://:{naming.REPLICATION_PORT}")
        advertised.append(f"{naming.REPLICATION_LISTENER}://{host}:{naming.REPLICATION_PORT}")
        protocols.append(f"{naming.REPLICATION_LISTENER}:{internal}")
    if "controller" in roles:
        bind.append(f"{naming.CONTROLLER_LISTENER}://:{naming.CONTROLLER_PORT}")
        advertised.append(f"{naming.CONTROLLER_LISTENER}://{host}:{naming.CONTROLLER_PORT}")
    protocols.append(f"{naming.CONTROLLER_LISTENER}:{internal}")
    out = {
        "listeners": ",".join(bind),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(protocols),
        "controller.listener.names": naming.CONTROLLER_LISTENER,
    }
    if "broker" in roles:
        out["inter.broker.listener.name"] = naming.REPLICATION_LISTENER
    return out


def _tls(ctx: ClusterContext, pool: Pool, ordinal: int) -> dict[str, str]:
    """The node's certificate, key and trusted CAs, read by Kafka from the mounted Secrets through the
    directory config provider: server.properties (a ConfigMap) only names the files, it never holds a key."""
    cert, key = naming.node_certificate_keys(pool, ordinal)
    out = {
        "config.providers": "dir",
        "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": f"${{dir:{naming.NODE_CERTS_DIR}:{cert}}}",
        "ssl.keystore.key": f"${{dir:{naming.NODE_CERTS_DIR}:{key}}}",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": f"${{dir:{naming.TRUST_DIR}:{naming.CA_CERT_KEY}}}",
    }
    if ctx.internal_tls:  # the nodes and the operator prove who they are to each other
        roles = ctx.roles(pool, ordinal)
        names = [naming.REPLICATION_LISTENER] * ("broker" in roles) + [naming.CONTROLLER_LISTENER] * (
            "controller" in roles)
        out.update({f"listener.name.{name.lower()}.ssl.client.auth": "required" for name in names})
    return out


def _authorization(ctx: ClusterContext) -> dict[str, str]:
    """StandardAuthorizer on every node. The nodes (replication and controller listeners) and the operator are
    super users by the subject of their cluster CA certificates (User:CN=...); a user's principal never
    has that shape, since a client certificate's principal is its bare common name."""
    authorization = ctx.spec.authorization
    if not authorization.enabled:
        return {}
    supers = [naming.node_principal(ctx.name), naming.OPERATOR_PRINCIPAL,
              *(naming.user_principal(user) for user in authorization.super_users)]
    return {"authorizer.class.name": naming.STANDARD_AUTHORIZER, "super.users": ";".join(supers),
            "allow.everyone.if.no.acl.found": "false"}


def _replication_defaults(ctx: ClusterContext) -> dict[str, str]:
    defaults = ctx.spec.topic_defaults
    rf, min_isr = defaults.replication_factor, defaults.min_insync_replicas
    return {
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(min_isr),
        "num.partitions": str(defaults.partitions),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min_isr),
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(min_isr),
    }


def _leader_balance(ctx: ClusterContext) -> dict[str, str]:
    balance = ctx.spec.leader_balance
    if balance.mode is LeaderBalanceMode.KAFKA:
        # Kafka 4's controller elects preferred leaders for any imbalance; it has no threshold setting.
        return {"auto.leader.rebalance.enable": "true",
                "leader.imbalance.check.interval.seconds": str(balance.check_interval_seconds)}
    # Operator mode: the operator elects preferred leaders itself, right after each restart.
    return {"auto.leader.rebalance.enable": "false"}


def node_properties(ctx: ClusterContext, pool: Pool, ordinal: int) -> dict[str, str]:
    """The full server.properties of one node, operator keys first, user overrides after."""
    roles = ctx.roles(pool, ordinal)
    props = {
        "node.id": str(naming.node_id(pool, ordinal)),
        "process.roles": ",".join(roles),
        **({"controller.quorum.voters": ctx.static_voters()} if ctx.quorum is QuorumKind.STATIC else
           {"controller.quorum.bootstrap.servers": ctx.controller_bootstrap_servers()}),
        **_listeners(ctx, pool, ordinal),
        **_tls(ctx, pool, ordinal),
        **_authorization(ctx),
        "log.dirs": naming.LOG_DIR,
    }
    # KIP-853: a controller started on an empty disk runs as an observer until the operator makes it a voter
    # (auto-join stays off: a controller being removed would join again before it stops).
    if "broker" in roles:
        props.update({
            "controlled.shutdown.enable": "true",
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "3000",
            **_client_authentication(ctx),
            **_replication_defaults(ctx),
            **_leader_balance(ctx),
            **ctx.spec.brokers.config,
            **{key: f"${{dir:{naming.CONFIG_SECRETS_DIR}/{ref.name}:{ref.key}}}"
               for key, ref in sorted(ctx.spec.brokers.config_from_secrets.items())},
        })
    return props


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
_KEY_ESCAPES = {**_ESCAPES, "=": "\\=", ":": "\\:", " ": "\\ ", "#": "\\#", "!": "\\!"}


def _escape(text: str, table: dict[str, str]) -> str:
    """java.util.Properties escaping. Kafka reads server.properties with Properties.load (ISO-8859-1):
    escaped, a newline or a trailing backslash in a value can never start or swallow another key."""
    out = []
    for index, char in enumerate(text):
        if char in table:
            out.append(table[char])
        elif char == " " and index == 0:  # a leading space would be skipped
            out.append("\\ ")
        elif " " <= char <= "~":
            out.append(char)
        else:  # anything else as UTF-16 code units
            raw = char.encode("utf-16-be")
            out.append("".join(f"\\u{int.from_bytes(raw[i:i + 2], 'big'):04x}" for i in range(0, len(raw), 2)))
    return "".join(out)


def render_properties(props: dict[str, str]) -> str:
    return "".join(f"{_escape(key, _KEY_ESCAPES)}={_escape(value, _ESCAPES)}\n" for key, value in props.items())


def dynamic_keys(props: dict[str, str], version: str) -> set[str]:
    """Keys a Kafka version applies cluster-wide at runtime (no restart needed)."""
    brokers = catalog(version).broker
    return {key for key in props if key in brokers and brokers[key].dynamic_cluster_wide
            and not naming.owned_broker_key(key) and not props[key].startswith("${")}  # files are read at start


def dynamic_broker_config(ctx: ClusterContext) -> dict[str, str]:
    """The cluster-wide dynamic settings the operator keeps applied through the Admin API."""
    if not ctx.spec.brokers.replicas:
        return {}
    props = node_properties(ctx, Pool.BROKER, ctx.spec.brokers.replicas - 1)
    return {key: props[key] for key in sorted(dynamic_keys(props, ctx.spec.version))}


def _static(props: dict[str, str], version: str) -> dict[str, str]:
    ignored = set(_NODE_IDENTITY) | set(_DISCOVERY_ONLY) | dynamic_keys(props, version)
    return {k: v for k, v in props.items() if k not in ignored}


def static_config(ctx: ClusterContext, pool: Pool) -> dict[str, str]:
    """The restart-only settings of the pool's first node, secrets replaced by a digest."""
    brokers = catalog(ctx.spec.version).broker
    out = {}
    for key, value in sorted(_static(node_properties(ctx, pool, 0), ctx.spec.version).items()):
        secret = key in brokers and brokers[key].type == "PASSWORD"
        out[key] = "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:12] if secret else value
    return out


def restart_hash(ctx: ClusterContext, pool: Pool) -> str:
    """A hash of everything in the pool's server.properties that needs a restart to change.

    Node identity, the quorum discovery list and runtime-changeable keys are left
    out: scaling and dynamic changes must not roll the cluster.
    """
    shapes = {ctx.roles(pool, ordinal): ordinal for ordinal in range(ctx.replicas(pool))}
    digest = hashlib.sha256()
    for roles, ordinal in sorted(shapes.items()):
        static = _static(node_properties(ctx, pool, ordinal), ctx.spec.version)
        digest.update(repr((roles, sorted(static.items()))).encode())
    return digest.hexdigest()[:16]
