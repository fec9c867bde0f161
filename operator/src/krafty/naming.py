"""Every name, label, annotation, port and path the operator uses, in one place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

GROUP = "kafka.krafty.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTER_KIND = "KafkaCluster"
CLUSTER_PLURAL = "kafkaclusters"
TOPIC_KIND = "Topic"
TOPIC_PLURAL = "topics"
USER_KIND = "KafkaUser"
USER_PLURAL = "kafkausers"
PLAN_KIND = "KafkaClusterPlan"
PLAN_PLURAL = "kafkaclusterplans"
FIELD_MANAGER = "krafty-operator"
# The Lease in each watched namespace that names the operator install acting there (krafty.runtime.leadership)
NAMESPACE_CLAIM = "krafty-operator-claim"

# Annotations users set
PAUSED_ANNOTATION = f"{GROUP}/paused"
# A new value asks for a new cluster CA (renewed through its three steps, see krafty.decide.certificates)
RENEW_CA_ANNOTATION = f"{GROUP}/renew-cluster-ca"
# A new value asks for a new clients CA: every user certificate is issued again by it, then the previous one
# is no longer trusted (the old certificates stop working)
RENEW_CLIENTS_CA_ANNOTATION = f"{GROUP}/renew-clients-ca"
# On a KafkaUser: a new value asks for a new credential (a new key and certificate, or a new generated password)
RENEW_CREDENTIAL_ANNOTATION = f"{GROUP}/renew-credential"
CONFIRM_DELETION_ANNOTATION = f"{GROUP}/confirm-deletion"
# On a Topic or KafkaUser: "force" takes over what Kafka already holds for it, and makes it match the spec
ADOPT_ANNOTATION = f"{GROUP}/adopt"
# On a KafkaUser's Secret: a digest of the SCRAM password last put into Kafka
APPLIED_PASSWORD_ANNOTATION = f"{GROUP}/applied-password"
# Annotations and labels the operator sets
CONFIG_HASH_ANNOTATION = f"{GROUP}/config-hash"
STATIC_CONFIG_ANNOTATION = f"{GROUP}/static-config"  # what a restart would change, for readable reasons
CLUSTER_LABEL = f"{GROUP}/cluster"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"  # on every object the operator makes
MANAGED_BY = "krafty"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
# On the pod template: the trust bundle and node certificates the pods run with (a change rolls them)
CERTIFICATES_ANNOTATION = f"{GROUP}/certificates"
# On the pod template: a digest of the clients CA bundle the brokers trust on listeners with authentication tls
# (a renewal rolls them)
CLIENTS_CA_ANNOTATION = f"{GROUP}/clients-ca"
# On the pod template: a digest of the Secrets spec.brokers.configFromSecrets names (a change rolls the brokers)
CONFIG_SECRETS_ANNOTATION = f"{GROUP}/config-secrets"
# On the node certificates' Secret: bumped when certificates nodes already run with are issued again
CERTIFICATE_GENERATION_ANNOTATION = f"{GROUP}/certificate-generation"
# On a CA's Secret: the value of its renewal annotation already acted on (on a user's Secret: of
# RENEW_CREDENTIAL_ANNOTATION)
RENEWED_FOR_ANNOTATION = f"{GROUP}/renewed-for"
# On the clients CA's Secret: the short fingerprint of the clients CA every broker trusts, once they all do
# (the user pass signs with it from then on)
TRUSTED_BY_BROKERS_ANNOTATION = f"{GROUP}/trusted-by-brokers"
ROLE_LABEL = f"{GROUP}/pool"
# A preflight pod (a StatefulSet's new template tried before any node restarts into it): its pool and revision
PREFLIGHT_LABEL = f"{GROUP}/preflight-of"
PREFLIGHT_REVISION_LABEL = f"{GROUP}/revision"
# Held on every Topic by the topic pass so that its deletion can remove (or keep) the Kafka topic first
TOPIC_FINALIZER = f"{GROUP}/topic-deletion"
# kopf's own finalizer, which no handler of ours needs (kopf only watches): named apart from the ones our passes
# hold, which kopf would otherwise remove as "required by no handler"
KOPF_FINALIZER = f"{GROUP}/kopf"
# Held on every KafkaUser so that its deletion removes its ACLs, quotas and credential from Kafka first
USER_FINALIZER = f"{GROUP}/user-cleanup"
# Held on every KafkaCluster so that its deletion stops the brokers before the controllers
CLUSTER_FINALIZER = f"{GROUP}/ordered-teardown"

# Broker config keys the operator sets itself (the CRD's CEL rule on brokers.config lists the same).
OWNED_BROKER_KEYS = ("node.id", "broker.id", "process.roles", "listeners", "advertised.listeners",
                     "listener.security.protocol.map", "inter.broker.listener.name", "controller.listener.names",
                     "log.dirs", "log.dir", "metadata.log.dir", "broker.rack", "cluster.id", "ssl.key.password",
                     "ssl.client.auth", "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found")
OWNED_BROKER_PREFIXES = ("controller.quorum.", "config.providers", "ssl.keystore.", "ssl.truststore.", "listener.name.")
# Broker settings that change how a connection becomes a principal on every listener, the nodes' and the
# operator's own included: with authorization on, they would stop being super users (and could not roll the
# setting back out). Refused in spec.brokers.config and configFromSecrets.
IDENTITY_BROKER_KEYS = ("principal.builder.class", "ssl.principal.mapping.rules",
                        "sasl.kerberos.principal.to.local.rules", "ssl.engine.factory.class",
                        "sasl.server.callback.handler.class")



# Well-known node labels: the node's zone and its own name (the topology keys of a pool's default spread)
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"

def paused(resource: Mapping[str, Any] | None) -> bool:
    """Whether a KafkaCluster carries the pause annotation: the operator changes nothing of it, its topics or users."""
    return ((resource or {}).get("metadata", {}).get("annotations") or {}).get(PAUSED_ANNOTATION) == "true"


def owned_broker_key(key: str) -> bool:
    """A server.properties key only the operator sets."""
    return key in OWNED_BROKER_KEYS or key.startswith(OWNED_BROKER_PREFIXES)


# Replication throttles: set by the operator while it moves replicas, removed after.
# The dynamic-config and topic reconcilers leave these keys alone.
THROTTLE_RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
# With the throttles, the one topic config the cluster pass reads (each partition's safety in a roll)
MIN_ISR_KEY = "min.insync.replicas"

# The canary's topic (spec.canary): one partition led by each broker, written and read by the operator
CANARY_TOPIC = "__krafty_canary"

# Ports: the client listeners come from the spec; these are fixed.
REPLICATION_PORT = 9091
CONTROLLER_PORT = 9093
METRICS_PORT = 9404
REPLICATION_LISTENER = "REPLICATION"
CONTROLLER_LISTENER = "CONTROLLER"
# Client listener names the nodes' own listeners have (the CRD's rule on a listener's name lists the same), and the
# name whose external Services would be the cluster's own (external_service(cluster, "kafka", None) is the
# bootstrap Service's name)
RESERVED_LISTENER_NAMES = (REPLICATION_LISTENER.lower(), CONTROLLER_LISTENER.lower())
NOT_EXTERNAL_LISTENER_NAME = "kafka"

# Node ids: brokers (and combined nodes) use their ordinal, dedicated controllers this offset plus theirs.
CONTROLLER_ID_OFFSET = 1000

# Paths inside Kafka pods (broker-image/entrypoint.sh reads the same ones).
DATA_DIR = "/var/lib/kafka/data"
LOG_DIR = f"{DATA_DIR}/kafka-logs"
CONFIG_DIR = "/etc/kafka/krafty"
KAFKA_HOME = "/opt/kafka"
TLS_DIR = "/etc/kafka/tls"
NODE_CERTS_DIR = f"{TLS_DIR}/node"  # every node's certificate and key (the node certificates' Secret)
TRUST_DIR = f"{TLS_DIR}/trust"  # the cluster CA bundle
CLIENTS_TRUST_DIR = f"{TLS_DIR}/clients-trust"  # the clients CA bundle (listeners with authentication tls)
CONFIG_SECRETS_DIR = "/etc/kafka/secrets"  # <secret>/<key>: the Secrets spec.brokers.configFromSecrets names
CLUSTER_ID_KEY = "cluster.id"
# Whether the nodes speak mutual TLS to each other: chosen when the cluster is created, never changed after.
INTERNAL_TLS_KEY = "internal-tls"
# The feature levels a new cluster is formatted with (spec.features: `kafka-storage format --feature`)
FORMAT_FEATURES_KEY = "format-features"
# Who a listener or the metrics port naming no peers admitted when the cluster was created (model.UnnamedPeers)
UNNAMED_PEERS_KEY = "unnamed-peers"
# Whether the nodes find their quorum from a fixed voter list (static, kraft.version 0) or from the metadata log
# (dynamic, KIP-853): what kraft.version was last read (model.context.QuorumKind)
KRAFT_QUORUM_KEY = "kraft-quorum"
CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
# During a CA renewal, the CA before (it signs until every node trusts the new one)
PREVIOUS_CA_CERT_KEY = "previous-ca.crt"
PREVIOUS_CA_KEY_KEY = "previous-ca.key"
CROSS_CA_CERT_KEY = "cross-signed-ca.crt"  # the CA cross-signed by the one before it
TLS_CERT_KEY = "tls.crt"
TLS_KEY_KEY = "tls.key"
PASSWORD_KEY = "password"  # a SCRAM user's password, in its Secret
SASL_JAAS_KEY = "sasl.jaas.config"  # the same as the JAAS line Java clients take
USERNAME_KEY = "username"  # a SCRAM user's name, in its Secret (what librdkafka clients take as sasl.username)
# The operator's own client certificate, and the common name every node's certificate carries
OPERATOR_COMMON_NAME = "krafty-operator"
INITIAL_CONTROLLERS_KEY = "initial-controllers"


class Pool(StrEnum):
    """The two kinds of StatefulSet: brokers (possibly also voting) and dedicated controllers."""

    BROKER = "broker"
    CONTROLLER = "controller"


def statefulset(cluster: str, pool: Pool) -> str:
    return f"{cluster}-{pool.value}"


def headless_service(cluster: str, pool: Pool) -> str:
    return f"{cluster}-{pool.value}s"


def bootstrap_service(cluster: str) -> str:
    return f"{cluster}-kafka-bootstrap"


def bootstrap_address(cluster: str, namespace: str, domain: str, port: int) -> str:
    """Where clients inside Kubernetes find a cluster: its bootstrap Service and first listener's port."""
    return f"{bootstrap_service(cluster)}.{namespace}.svc.{domain}:{port}"


def external_service(cluster: str, listener: str, ordinal: int | None) -> str:
    """A nodeport or loadbalancer listener's Service of one broker (None: the one to bootstrap from)."""
    return f"{cluster}-{listener}-{'bootstrap' if ordinal is None else ordinal}"


# In a node's server.properties: replaced by the address of the Kubernetes node its pod runs on (the pod's
# status.hostIP, through the downward API) when the pod starts: what a nodeport listener advertises.
NODE_ADDRESS_PLACEHOLDER = "${KRAFTY_NODE_ADDRESS}"
NODE_ADDRESS_ENV = "KRAFTY_NODE_ADDRESS"
# Set on brokers whose certificate must name their node's address (a TLS nodeport listener): the entrypoint
# waits until the mounted certificate does
CERTIFICATE_NAMES_NODE_ENV = "KRAFTY_CERTIFICATE_NAMES_NODE"
EXTERNAL_LISTENER_LABEL = f"{GROUP}/listener"  # on a listener's external Services


def metrics_service(cluster: str) -> str:
    return f"{cluster}-kafka-metrics"


def config_map(cluster: str) -> str:
    """Per-node server.properties, the cluster id and the initial voters."""
    return f"{cluster}-kafka-config"


def connection_config_map(cluster: str) -> str:
    """Where applications (Spark jobs) read the bootstrap address."""
    return f"{cluster}-kafka-connection"


def cluster_ca(cluster: str) -> str:
    """The cluster CA's certificate and private key (the operator signs node certificates with it)."""
    return f"{cluster}-cluster-ca"


def cluster_ca_cert(cluster: str) -> str:
    """The certificates clients trust (ca.crt): the cluster CA, and during a renewal the one before it."""
    return f"{cluster}-cluster-ca-cert"


def clients_ca(cluster: str) -> str:
    """The clients CA's certificate and private key (client certificates of users are signed with it)."""
    return f"{cluster}-clients-ca"


def clients_ca_cert(cluster: str) -> str:
    """The clients CA certificates (ca.crt) the brokers trust on listeners with authentication tls."""
    return f"{cluster}-clients-ca-cert"


def node_certificates(cluster: str) -> str:
    """Every node's certificate and key, as <pool>-<ordinal>.crt and .key."""
    return f"{cluster}-kafka-certs"


def operator_certificate(cluster: str) -> str:
    """The operator's client certificate for this cluster (tls.crt, tls.key)."""
    return f"{cluster}-operator-cert"


def node_common_name(cluster: str) -> str:
    """The subject every node of a cluster presents (one principal for all of them)."""
    return f"{cluster}-kafka"


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# The principals of the cluster CA's certificates on the nodes' own listeners (Kafka's DEFAULT mapping)
OPERATOR_PRINCIPAL = f"User:CN={OPERATOR_COMMON_NAME}"


def node_principal(cluster: str) -> str:
    return f"User:CN={node_common_name(cluster)}"


def user_secret(user: str) -> str:
    """The Secret with a KafkaUser's credential: named after the user."""
    return user


def user_principal(user: str) -> str:
    """A KafkaUser's principal: a client certificate's common name, or a SCRAM user name."""
    return f"User:{user}"


def node_certificate_keys(pool: Pool, ordinal: int) -> tuple[str, str]:
    """The keys of one node's certificate and private key in the node certificates' Secret."""
    stem = f"{pool.value}-{ordinal}"
    return f"{stem}.crt", f"{stem}.key"


def node_names_key(pool: Pool, ordinal: int) -> str:
    """The key, in the node certificates' Secret, of the names and addresses one node's certificate carries for
    clients outside Kubernetes, one a line (broker-image/bin/entrypoint.sh reads it)."""
    return f"{pool.value}-{ordinal}.names"


def service_account(cluster: str) -> str:
    return f"{cluster}-kafka"


DATA_VOLUME = "data"  # the StatefulSets' volumeClaimTemplates name


def claim(cluster: str, pool: Pool, ordinal: int) -> str:
    """The PersistentVolumeClaim of one node's data (the StatefulSet names it)."""
    return f"{DATA_VOLUME}-{pod(cluster, pool, ordinal)}"


def claim_node(cluster: str, name: str) -> tuple[Pool, int] | None:
    """The pool and ordinal of a node's data claim, or None for any other claim."""
    for pool in Pool:
        prefix = f"{DATA_VOLUME}-{statefulset(cluster, pool)}-"
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return pool, int(name[len(prefix):])
    return None


def data_claims(cluster: str, claims: Iterable[str]) -> tuple[str, ...]:
    """The data claims of this cluster's nodes among `claims`, sorted."""
    return tuple(sorted(c for c in claims if claim_node(cluster, c) is not None))


def preflight_pod(revision: str) -> str:
    """A StatefulSet revision's preflight pod (a revision is named <statefulset>-<hash>)."""
    return f"{revision}-preflight"


def network_policy(cluster: str) -> str:
    return f"{cluster}-kafka"


def pod_disruption_budget(cluster: str, pool: Pool) -> str:
    return f"{cluster}-{pool.value}"


def pod(cluster: str, pool: Pool, ordinal: int) -> str:
    return f"{statefulset(cluster, pool)}-{ordinal}"


def node_id(pool: Pool, ordinal: int) -> int:
    return ordinal + (CONTROLLER_ID_OFFSET if pool is Pool.CONTROLLER else 0)


def pool_and_ordinal(node: int) -> tuple[Pool, int]:
    if node >= CONTROLLER_ID_OFFSET:
        return Pool.CONTROLLER, node - CONTROLLER_ID_OFFSET
    return Pool.BROKER, node


def service_names(service: str, namespace: str, domain: str) -> tuple[str, ...]:
    """Every DNS name a client may use for a Service, short to fully qualified."""
    return service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.{domain}"


def node_dns_names(cluster: str, namespace: str, pool: Pool, ordinal: int, domain: str) -> tuple[str, ...]:
    """The names a node's certificate carries: its own, its pool's headless Service and, for brokers, the
    bootstrap Service's."""
    own, headless = pod(cluster, pool, ordinal), headless_service(cluster, pool)
    names = [pod_host(cluster, namespace, pool, ordinal, domain), f"{own}.{headless}.{namespace}.svc",
             f"{own}.{headless}.{namespace}", *service_names(headless, namespace, domain)]
    if pool is Pool.BROKER:
        names += service_names(bootstrap_service(cluster), namespace, domain)
    return tuple(names)


def operator_bootstrap(cluster: str, namespace: str, domain: str) -> str:
    """Where the operator's own clients reach the brokers: their replication listener, through the headless
    Service (the user's listeners may change or demand credentials; this one is the cluster's own)."""
    return f"{headless_service(cluster, Pool.BROKER)}.{namespace}.svc.{domain}:{REPLICATION_PORT}"


def pod_host(cluster: str, namespace: str, pool: Pool, ordinal: int, domain: str) -> str:
    """The stable DNS name of a Kafka pod behind its headless Service."""
    return f"{pod(cluster, pool, ordinal)}.{headless_service(cluster, pool)}.{namespace}.svc.{domain}"


def node_config_key(pool: Pool, ordinal: int) -> str:
    """The ConfigMap key of one node's server.properties."""
    return f"{pool.value}-{ordinal}.properties"


def kafka_topic_name(resource_name: str, override: str | None) -> str:
    """A Topic's Kafka name: spec.topicName when set (names Kubernetes cannot hold), else metadata.name."""
    return override or resource_name


def selector_labels(cluster: str, pool: Pool | None = None) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": "kafka", "app.kubernetes.io/instance": cluster, CLUSTER_LABEL: cluster}
    if pool is not None:
        labels[ROLE_LABEL] = pool.value
    return labels


def labels(cluster: str, pool: Pool | None = None) -> dict[str, str]:
    out = {**selector_labels(cluster, pool),
           MANAGED_BY_LABEL: MANAGED_BY, "app.kubernetes.io/part-of": "krafty"}
    if pool is not None:
        out["app.kubernetes.io/component"] = pool.value
    return out
