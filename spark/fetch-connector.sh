#!/usr/bin/env bash
# Resolves Spark's Kafka connector (spark/connector/pom.xml, pinned by
# spark/spark.env) and its dependencies from Maven Central with Maven's own
# configuration, and builds the job's page-view parser (spark/connector/src),
# into $KRAFTY_CACHE/spark/connector-<version>-<hash>/. Prints that directory;
# the job passes its jars as spark.jars, the image copies them into PySpark's
# jars/. Idempotent: Maven runs only when the pin, the pom or the parser
# changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../scripts/lib.sh"
source "$here/spark.env"

key="$(files_hash "$here/spark.env" "$here/connector/pom.xml" $(find "$here/connector/src" -type f | sort))"
dir="$KRAFTY_CACHE/spark/connector-$SPARK_VERSION-$key"
if [[ ! -f "$dir/.complete" ]]; then
  log "resolving spark-sql-kafka-0-10 $SPARK_VERSION from Maven Central and building the parser (first time only)"
  rm -rf "$dir"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # Maven writes target/ next to the pom: build from a copy so the work tree stays clean.
  cp -r "$here/connector/pom.xml" "$here/connector/src" "$work/"
  mvn -B -q -Dstyle.color=never -f "$work/pom.xml" package \
    -Dspark.version="$SPARK_VERSION" -Dscala.binary.version="$SCALA_BINARY_VERSION" \
    -Dspark.token.provider.version="$SPARK_TOKEN_PROVIDER_VERSION" -Djars.dir="$dir" >&2
  touch "$dir/.complete"
fi
echo "$dir"
