#!/usr/bin/env bash
# Starts one Kafka node of a krafty cluster (the broker image's entrypoint).
#
# The operator's ConfigMap, mounted at /etc/kafka/krafty, holds every node's
# server.properties (<pool>-<ordinal>.properties), the cluster id and, until
# the quorum has formed, the first voters. This script picks this pod's file,
# adds broker.rack when rack awareness is on, puts its node's address where a
# nodeport listener advertises it, formats the storage on first
# start, and execs Kafka, so SIGTERM reaches the JVM directly and Kafka shuts
# down in a controlled way (leadership moved away, logs closed cleanly).
set -euo pipefail

config_dir="${KRAFTY_CONFIG_DIR:-/etc/kafka/krafty}"
kafka_home="${KAFKA_HOME:-/opt/kafka}"
: "${POD_NAME:?POD_NAME must be set (downward API)}" "${KRAFTY_POOL:?KRAFTY_POOL must be broker or controller}"
ordinal="${POD_NAME##*-}"
node_id=$(( ${KRAFTY_NODE_ID_OFFSET:-0} + ordinal ))
source_props="$config_dir/${KRAFTY_POOL}-${ordinal}.properties"
props=/tmp/server.properties

log() { echo "[entrypoint] $*" >&2; }

for _ in $(seq 60); do [[ -f "$source_props" ]] && break; sleep 1; done
[[ -f "$source_props" ]] || { log "no configuration for $POD_NAME in $config_dir"; exit 1; }
cp "$source_props" "$props"

if [[ -n "${KRAFTY_RACK_TOPOLOGY_KEY:-}" ]]; then
  token="$(cat /var/run/secrets/kubernetes.io/serviceaccount/token)"
  node_json="$(curl -sf --cacert /var/run/secrets/kubernetes.io/serviceaccount/ca.crt \
    -H "Authorization: Bearer $token" "https://kubernetes.default.svc/api/v1/nodes/${NODE_NAME:?}")" \
    || { log "cannot read node $NODE_NAME for its rack label"; exit 1; }
  # Label values hold only [A-Za-z0-9._-]: a plain match is exact.
  rack="$(grep -o "\"${KRAFTY_RACK_TOPOLOGY_KEY}\": *\"[A-Za-z0-9._-]*\"" <<<"$node_json" | head -1 | sed 's/.*"\([^"]*\)"$/\1/')"
  [[ -n "$rack" ]] || { log "node $NODE_NAME has no label $KRAFTY_RACK_TOPOLOGY_KEY"; exit 1; }
  echo "broker.rack=$rack" >> "$props"
  log "broker.rack=$rack (from node $NODE_NAME)"
fi

if grep -q '${KRAFTY_NODE_ADDRESS}' "$props"; then
  # A nodeport listener advertises the address of the Kubernetes node this pod runs on.
  : "${KRAFTY_NODE_ADDRESS:?KRAFTY_NODE_ADDRESS must be set (downward API status.hostIP) for a nodeport listener}"
  address="$KRAFTY_NODE_ADDRESS"
  [[ "$address" == *:* ]] && address="[$address]"  # IPv6
  sed -i "s/\${KRAFTY_NODE_ADDRESS}/$address/g" "$props"
  log "nodeport listeners advertise node address $address"
fi

if [[ "${KRAFTY_CERTIFICATE_NAMES_NODE:-}" == true ]]; then
  # A TLS nodeport listener: clients outside check this node's address against the certificate. On a node that
  # joined since the operator's last pass it is not in it yet; the next pass issues one that names it and the
  # kubelet brings the mounted Secret up to date (a minute or two). After five minutes start anyway, saying so.
  names="${KRAFTY_NODE_CERTS_DIR:-/etc/kafka/tls/node}/${KRAFTY_POOL}-${ordinal}.names"
  for i in $(seq "${KRAFTY_CERTIFICATE_WAIT_SECONDS:-300}"); do
    grep -qxF "$KRAFTY_NODE_ADDRESS" "$names" 2>/dev/null && break
    (( i == 1 )) && log "waiting for a certificate that names node address $KRAFTY_NODE_ADDRESS (in $names)"
    sleep 1
  done
  if grep -qxF "$KRAFTY_NODE_ADDRESS" "$names" 2>/dev/null; then
    log "the certificate names node address $KRAFTY_NODE_ADDRESS"
  else
    log "WARNING: the certificate does not name node address $KRAFTY_NODE_ADDRESS: TLS clients outside that check" \
        "host names will refuse this broker until it restarts"
  fi
fi

log_dir="$(sed -n 's/^log\.dirs=//p' "$props")"
if [[ ! -f "$log_dir/meta.properties" ]]; then
  cluster_id="$(cat "$config_dir/cluster.id")"
  initial="$(cat "$config_dir/initial-controllers" 2>/dev/null || true)"
  if grep -q '^process\.roles=.*controller' "$props" && [[ ",$initial" == *",$node_id@"* ]]; then
    # One of the first voters, before the quorum formed: bootstrap it.
    mode=(--initial-controllers "$initial")
  else
    # A broker, or a controller joining a formed quorum (it joins by itself: controller.quorum.auto.join.enable).
    mode=(--no-initial-controllers)
  fi
  # The feature levels spec.features gives a new cluster (name=level ...); the others are the release's defaults
  for feature in $(cat "$config_dir/format-features" 2>/dev/null || true); do
    mode+=(--feature "$feature")
  done
  log "formatting $log_dir for cluster $cluster_id as node $node_id (${mode[*]})"
  # "--cluster-id=": an id may start with "-", which would otherwise read as an option.
  KAFKA_HEAP_OPTS="-Xmx256m" "$kafka_home/bin/kafka-storage.sh" format --cluster-id="$cluster_id" \
    --config "$props" "${mode[@]}"
fi

# The JMX exporter serves Prometheus on 9404; without metrics it still runs, on
# loopback only, because the readiness probe reads it.
bind=127.0.0.1
[[ "${KRAFTY_METRICS:-true}" == true ]] && bind=0.0.0.0
agent="-javaagent:$kafka_home/agent/jmx_prometheus_javaagent.jar=$bind:9404:$kafka_home/config/jmx-exporter.yaml"
# Peers' names looked up again after a second, not 30 (a restarted peer has a new address): node.java.security.
dns="-Djava.security.properties=$kafka_home/config/node.java.security"
export KAFKA_OPTS="$agent $dns ${KAFKA_OPTS:-}"
export KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=$kafka_home/config/log4j2.yaml"
log "starting node $node_id ($(sed -n 's/^process\.roles=//p' "$props"))"
exec "$kafka_home/bin/kafka-server-start.sh" "$props"
