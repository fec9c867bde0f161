#!/usr/bin/env bash
# Runs a Kafka main class on the distribution's classpath:
#   kafka-run-class.sh <main class> [args...]
# Honours the environment variables Kafka's own launcher reads:
# KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_OPTS, KAFKA_LOG4J_OPTS,
# JAVA_HOME.
set -euo pipefail
home="${KAFKA_HOME:-$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)}"
[[ $# -ge 1 ]] || { echo "usage: $(basename "$0") <main class> [args...]" >&2; exit 2; }
main="$1"; shift

java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
heap="${KAFKA_HEAP_OPTS:--Xmx256M}"
perf="${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
log4j="${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$home/config/tools-log4j2.yaml}"
# The classes of a node and the tools, loaded ready-made (kafka-class-archive.sh); a JVM that cannot use the
# archive starts without it.
share=""
[[ -f "$home/kafka.jsa" ]] && share="-XX:SharedArchiveFile=$home/kafka.jsa"

# shellcheck disable=SC2086  # the *_OPTS variables are word lists by design
exec "$java" $heap $perf $share $log4j ${KAFKA_OPTS:-} -cp "$home/libs/*" "$main" "$@"
