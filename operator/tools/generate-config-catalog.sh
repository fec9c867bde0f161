#!/usr/bin/env bash
# Writes src/krafty/data/kafka-configs-<version>.json: every broker and topic
# config key of a pinned Kafka (type, default, validator, and for brokers whether
# Kafka can change it at runtime), read from Kafka's own ConfigDefs. The semantic
# validator and the roll decision use it; a test regenerates it and compares.
#   generate-config-catalog.sh VERSION [output]   (default: the committed file)
#   generate-config-catalog.sh --all              (every version of kafka.env's KAFKA_VERSIONS)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ "${1:-}" == "--all" ]]; then
  source "$here/../../broker-image/kafka.env"
  for v in $KAFKA_VERSIONS; do "$0" "$v"; done
  exit 0
fi
version="${1:?usage: generate-config-catalog.sh VERSION [output] | --all}"
kafka_home="$("$here/../../broker-image/fetch-kafka.sh" "$version")"
out="${2:-$here/../src/krafty/data/kafka-configs-$version.json}"
classpath="$(printf '%s:' "$kafka_home"/libs/*.jar)"
jshell --class-path "$classpath" -R-Dlog4j2.configurationFile="$kafka_home/config/tools-log4j2.yaml" \
    "$here/config-catalog.jsh" 2>/dev/null \
  | python3 -c '
import json, sys
version, out = sys.argv[1], sys.argv[2]
catalog = {"kafkaVersion": version, "broker": {}, "topic": {}}
for line in sys.stdin:
    parts = line.rstrip("\n").split("\t")
    if len(parts) != 6:
        continue
    section, name, kind, mode, default, validator = parts
    catalog[section][name] = {"type": kind, "mode": mode, "default": None if default == "<none>" else default,
                              "validator": validator or None}
assert len(catalog["broker"]) > 100 and len(catalog["topic"]) > 20, "catalog looks incomplete"
for section in ("broker", "topic"):
    catalog[section] = dict(sorted(catalog[section].items()))
with open(out, "w") as f:
    json.dump(catalog, f, indent=1, sort_keys=False)
    f.write("\n")
' "$version" "$out"
