#!/usr/bin/env bash
# Builds the class-data sharing archive of this distribution (kafka.jsa, beside libs/), which kafka-run-class.sh
# hands to every JVM it starts: the classes a node and the tools load, parsed, verified and laid out once, so that a
# node starts (a restart in a roll, a new pod) and a tool runs in less time and memory.
#
# It trains on a throwaway combined node on 127.0.0.1 (the JMX exporter attached, as in a pod): records the classes
# that the node, the storage tool and the usual tools run against it load, then dumps them with the JVM that will
# read the archive. Run by the broker image's build and by fetch-kafka.sh; a JVM whose version or options do not
# match the archive ignores it and starts as it would without.
#   kafka-class-archive.sh   (the node listens on three free ports from 29192 up)
set -euo pipefail
home="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
bin="$home/bin"
work="$(mktemp -d)"
node=""
cleanup() { [[ -n "$node" ]] && kill -9 "$node" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

serving() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=29192
while serving "$port" || serving $((port + 1)) || serving $((port + 2)); do
  port=$((port + 3))
  ((port < 29992)) || { echo "kafka-class-archive.sh: no three free ports from 29192 up" >&2; exit 1; }
done
bootstrap="127.0.0.1:$port"

# Each JVM writes the classes it loads to a list of its own.
class_list() { echo "-XX:DumpLoadedClassList=$(mktemp "$work/XXXXXX.classes")"; }
recorded() { KAFKA_OPTS="$(class_list)" "$@"; }

rm -f "$home/kafka.jsa"  # trained without the archive it replaces
cat > "$work/node.properties" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1))
controller.quorum.bootstrap.servers=127.0.0.1:$((port + 1))
log.dirs=$work/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPERTIES
export KAFKA_HEAP_OPTS="-Xmx256m" KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=$home/config/tools-log4j2.yaml"
recorded "$bin/kafka-storage.sh" format --cluster-id=krafty-class-archive --config "$work/node.properties" \
  --standalone > /dev/null
agent="$(ls "$home"/agent/jmx_prometheus_javaagent*.jar | head -1)"
(KAFKA_OPTS="-javaagent:$agent=127.0.0.1:$((port + 2)):$home/config/jmx-exporter.yaml $(class_list)" \
  exec "$bin/kafka-server-start.sh" "$work/node.properties" > "$work/node.log" 2>&1) &
node=$!  # the node's JVM itself: the launchers exec it
for _ in $(seq 600); do serving "$port" || ! kill -0 "$node" 2>/dev/null && break; sleep 0.2; done
serving "$port" || { tail -20 "$work/node.log" >&2; echo "kafka-class-archive.sh: the node did not start" >&2; exit 1; }
curl -sf "http://127.0.0.1:$((port + 2))/metrics" > /dev/null  # what the readiness probe reads

topic=(--bootstrap-server "$bootstrap" --topic trained)
recorded "$bin/kafka-topics.sh" "${topic[@]}" --create --partitions 2 --replication-factor 1 > /dev/null
recorded "$bin/kafka-topics.sh" "${topic[@]}" --describe > /dev/null
recorded "$bin/kafka-configs.sh" --bootstrap-server "$bootstrap" --entity-type topics --entity-name trained \
  --alter --add-config retention.ms=3600000 > /dev/null
recorded "$bin/kafka-console-producer.sh" "${topic[@]}" < <(seq 100) > /dev/null
recorded "$bin/kafka-console-consumer.sh" "${topic[@]}" --group trained --from-beginning --max-messages 100 \
  > /dev/null 2>&1
recorded "$bin/kafka-consumer-groups.sh" --bootstrap-server "$bootstrap" --describe --group trained > /dev/null 2>&1
recorded "$bin/kafka-producer-perf-test.sh" --topic trained --num-records 10000 --record-size 100 --throughput -1 \
  --producer-props bootstrap.servers="$bootstrap" acks=all > /dev/null
recorded "$bin/kafka-metadata-quorum.sh" --bootstrap-server "$bootstrap" describe --status > /dev/null
kill -TERM "$node"
wait "$node" || true  # a node stopped by SIGTERM exits 143
node=""

# Every class once, in the order first loaded; the JVM that reads the archive dumps it.
runs=("$work"/*.classes)
cat "${runs[@]}" | awk '!seen[$0]++' > "$work/all.classes"
java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
"$java" -Xshare:dump -XX:SharedClassListFile="$work/all.classes" -XX:SharedArchiveFile="$work/kafka.jsa" \
  -cp "$home/libs/*" > "$work/dump.log" 2>&1 || { tail -20 "$work/dump.log" >&2; exit 1; }
mv "$work/kafka.jsa" "$home/kafka.jsa"
echo "kafka-class-archive.sh: $(grep -vc '^[#@]' "$work/all.classes") classes from ${#runs[@]} runs in $home/kafka.jsa" >&2
