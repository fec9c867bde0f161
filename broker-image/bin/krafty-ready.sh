#!/usr/bin/env bash
# Readiness of a Kafka pod, read from the JMX exporter on 127.0.0.1:9404:
#   broker      broker state RUNNING (3) and its replica fetchers caught up, so a
#               drain (PodDisruptionBudget) never stops a second broker while one
#               is still catching up;
#   controller  its Raft client knows the quorum leader.
set -uo pipefail
max_lag="${KRAFTY_READY_MAX_LAG:-1000}"
metrics="$(curl -sf --max-time 4 http://127.0.0.1:9404/metrics)" || exit 1
value() { awk -v n="$1" '$1 == n { print int($2); exit }' <<<"$metrics"; }

if [[ "${KRAFTY_POOL:-broker}" == broker ]]; then
  [[ "$(value kafka_server_broker_state)" == 3 ]] || exit 1
  lag="$(value kafka_server_replica_fetcher_max_lag)"
  (( ${lag:-0} <= max_lag )) || exit 1
else
  leader="$(value kafka_server_raft_current_leader)"
  (( ${leader:--1} >= 0 )) || exit 1
fi
