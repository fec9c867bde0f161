#!/usr/bin/env bash
# One launcher for every Kafka command-line tool, chosen by the name it is
# called by (kafka-topics.sh, kafka-storage.sh, ...), as in Kafka's own bin/.
#   kafka-cli.sh --link DIR   creates those names as symlinks in DIR
#   kafka-cli.sh --list       prints "name main-class" for every tool
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")" && pwd)"

tools() {
  cat <<'TABLE'
kafka-server-start.sh kafka.Kafka
kafka-storage.sh kafka.tools.StorageTool
kafka-topics.sh org.apache.kafka.tools.TopicCommand
kafka-configs.sh kafka.admin.ConfigCommand
kafka-consumer-groups.sh org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
kafka-leader-election.sh org.apache.kafka.tools.LeaderElectionCommand
kafka-reassign-partitions.sh org.apache.kafka.tools.reassign.ReassignPartitionsCommand
kafka-metadata-quorum.sh org.apache.kafka.tools.MetadataQuorumCommand
kafka-producer-perf-test.sh org.apache.kafka.tools.ProducerPerformance
kafka-consumer-perf-test.sh org.apache.kafka.tools.ConsumerPerformance
kafka-console-producer.sh org.apache.kafka.tools.ConsoleProducer
kafka-console-consumer.sh org.apache.kafka.tools.consumer.ConsoleConsumer
kafka-get-offsets.sh org.apache.kafka.tools.GetOffsetShell
kafka-cluster.sh org.apache.kafka.tools.ClusterTool
kafka-features.sh org.apache.kafka.tools.FeatureCommand
kafka-log-dirs.sh org.apache.kafka.tools.LogDirsCommand
kafka-delete-records.sh org.apache.kafka.tools.DeleteRecordsCommand
kafka-broker-api-versions.sh org.apache.kafka.tools.BrokerApiVersionsCommand
kafka-acls.sh org.apache.kafka.tools.AclCommand
kafka-transactions.sh org.apache.kafka.tools.TransactionsCommand
kafka-groups.sh org.apache.kafka.tools.GroupsCommand
kafka-share-groups.sh org.apache.kafka.tools.consumer.group.ShareGroupCommand
kafka-console-share-consumer.sh org.apache.kafka.tools.consumer.ConsoleShareConsumer
kafka-streams-groups.sh org.apache.kafka.tools.streams.StreamsGroupCommand
TABLE
}

case "${1:-}" in
  --list) tools; exit 0 ;;
  --link)
    dir="${2:?usage: kafka-cli.sh --link DIR}"
    while read -r name _; do ln -sfn kafka-cli.sh "$dir/$name"; done < <(tools)
    exit 0 ;;
esac

name="$(basename "$0")"
main="$(tools | awk -v n="$name" '$1 == n { print $2 }')"
[[ -n "$main" ]] || { echo "kafka-cli.sh: unknown tool '$name' (see kafka-cli.sh --list)" >&2; exit 2; }
if [[ "$name" == kafka-server-start.sh ]]; then
  home="$(cd "$here/.." && pwd)"
  export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}"
  export KAFKA_LOG4J_OPTS="${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$home/config/log4j2.yaml}"
fi
exec "$here/kafka-run-class.sh" "$main" "$@"
