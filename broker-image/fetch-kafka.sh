#!/usr/bin/env bash
# Resolves a pinned Kafka distribution (kafka.env: KAFKA_VERSION, or the version
# given, which must be one of KAFKA_VERSIONS) from Maven Central with Maven's own
# configuration, into $KRAFTY_CACHE/kafka/<version>:
#   libs/   the broker, the tools and their runtime dependencies
#   agent/  the Prometheus JMX exporter java agent
#   bin/    kafka-*.sh launchers (the names users know)
#   config/ log4j2 configuration
#   kafka.jsa  the class-data sharing archive of this JVM (kafka-class-archive.sh)
# Prints the distribution directory. Idempotent: Maven runs only when the pin
# or the pom changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../scripts/lib.sh"
source "$here/kafka.env"
if [[ $# -gt 0 ]]; then
  [[ " $KAFKA_VERSIONS " == *" $1 "* ]] || die "Kafka $1 is not pinned (kafka.env KAFKA_VERSIONS: $KAFKA_VERSIONS)"
  KAFKA_VERSION="$1"
fi

dist="$KRAFTY_CACHE/kafka/$KAFKA_VERSION"
mkdir -p "$dist"
exec 9> "$dist/.lock"
flock 9  # one caller resolves and trains at a time
key="$(files_hash "$here/kafka-dist/pom.xml")-$KAFKA_VERSION-$SCALA_BINARY_VERSION-$LOG4J_VERSION-$JMX_EXPORTER_VERSION"
if [[ "$(cat "$dist/.resolved" 2>/dev/null)" != "$key" ]]; then
  log "resolving Apache Kafka $KAFKA_VERSION and JMX exporter $JMX_EXPORTER_VERSION from Maven Central"
  rm -rf "$dist/libs" "$dist/agent"
  mvn -B -q -Dstyle.color=never -f "$here/kafka-dist/pom.xml" package \
    -Dkafka.version="$KAFKA_VERSION" -Dscala.binary.version="$SCALA_BINARY_VERSION" \
    -Dlog4j.version="$LOG4J_VERSION" -Djmx.exporter.version="$JMX_EXPORTER_VERSION" \
    -Ddist.dir="$dist" >&2
  rm -rf "$here/kafka-dist/target"
  echo "$key" > "$dist/.resolved"
fi
mkdir -p "$dist/bin" "$dist/config"
cp "$here"/bin/* "$dist/bin/"
cp "$here"/config/* "$dist/config/"
"$dist/bin/kafka-cli.sh" --link "$dist/bin"
java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
archived="$key-$(files_hash "$here/bin/kafka-class-archive.sh")-$("$java" -version 2>&1 | sha256sum | cut -c1-16)"
if [[ ! -f "$dist/kafka.jsa" || "$(cat "$dist/.archived" 2>/dev/null)" != "$archived" ]]; then
  log "training the class-data sharing archive of Kafka $KAFKA_VERSION for $("$java" -version 2>&1 | head -1) (about 30 s)"
  "$dist/bin/kafka-class-archive.sh" >&2
  echo "$archived" > "$dist/.archived"
fi
echo "$dist"
