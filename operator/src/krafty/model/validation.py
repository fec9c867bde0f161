"""Semantic validation: what the API server cannot know.

The CRDs reject malformed input (types, enums, ranges, CEL rules). What needs
knowledge of Kafka or of another resource is checked here, purely, before
anything changes: config keys and values the pinned Kafka would reject,
replication factors the brokers cannot hold, min.insync.replicas settings
that would make acks=all writes (and every rolling restart) impossible.
The operator turns each Problem into a status condition and an Event.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from krafty import naming
from krafty.model import KafkaClusterSpec, TopicSpec, parse_quantity, versions
from krafty.model.cluster import NodePool
from krafty.model.kafka_configs import ConfigKey, catalog
from krafty.model.versions import DEFAULT_KAFKA_VERSION

MAX_TOPIC_NAME = 249
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
_RANGE = re.compile(r"^\[(-?[\d.]+)?,\.\.\.(?:,(-?[\d.]+))?\]( or (-?\d+))?$")
_CHOICES = re.compile(r"^(\(case insensitive\) )?\[([A-Za-z0-9_, ]+)\]$")
_INTEGER_TYPES = {"INT": (-(2**31), 2**31 - 1), "SHORT": (-(2**15), 2**15 - 1), "LONG": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Problem:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _number(key: ConfigKey, value: str) -> Decimal | str:
    """The value as a number of the key's type, or a message saying why it is not one."""
    try:
        number = Decimal(value.strip())
    except ArithmeticError:
        return f"{value!r} is not a number"
    if key.type in _INTEGER_TYPES:
        low, high = _INTEGER_TYPES[key.type]
        if number != number.to_integral_value() or not low <= number <= high:
            return f"{value!r} is not a valid {key.type.lower()}"
    return number


def _check_range(key: ConfigKey, value: str) -> str | None:
    number = _number(key, value)
    if isinstance(number, str):
        return number
    match = _RANGE.match(key.validator or "")
    if not match:
        return None
    low, high, _, alternative = match.groups()
    if alternative is not None and number == Decimal(alternative):
        return None
    if (low is not None and number < Decimal(low)) or (high is not None and number > Decimal(high)):
        return f"{value} is outside the allowed range {key.validator}"
    return None


def _check_choices(key: ConfigKey, value: str) -> str | None:
    match = _CHOICES.match(key.validator or "")
    if not match:
        return None
    insensitive, choices = bool(match.group(1)), [c.strip() for c in match.group(2).split(",")]
    items = [v.strip() for v in value.split(",")] if key.type == "LIST" else [value.strip()]
    allowed = {c.lower() for c in choices} if insensitive or key.type == "STRING" else set(choices)
    wrong = [item for item in items if (item.lower() if insensitive or key.type == "STRING" else item) not in allowed]
    if wrong:
        return f"{', '.join(wrong)} is not one of {', '.join(choices)}"
    return None


def check_value(key: ConfigKey, value: str) -> str | None:
    """Why Kafka would reject this value for this key, or None if it would accept it."""
    if key.type == "BOOLEAN":
        return None if value.strip().lower() in ("true", "false") else f"{value!r} is not true or false"
    if key.type in _INTEGER_TYPES or key.type == "DOUBLE":
        return _check_range(key, value)
    if key.type in ("STRING", "LIST"):
        if key.validator in ("non-empty string", "non-empty list") and not value.strip():
            return "must not be empty"
        return _check_choices(key, value)
    return None


def check_config(section: str, config: Mapping[str, str], field: str,
                 version: str = DEFAULT_KAFKA_VERSION) -> list[Problem]:
    """Unknown keys and invalid values of a broker ("broker") or topic ("topic") config of a Kafka version."""
    cat = catalog(version)
    keys = cat.broker if section == "broker" else cat.topic
    problems = []
    for name, value in sorted(config.items()):
        key = keys.get(name)
        if key is None:
            problems.append(Problem(f"{field}.{name}", f"not a {section} configuration of Kafka {cat.kafka_version}"))
            continue
        reason = check_value(key, value)
        if reason:
            problems.append(Problem(f"{field}.{name}", reason))
    return problems


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Kubernetes names: a label value or a qualified name's last part, and a DNS subdomain as its prefix.
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# An image reference: [registry[:port]/]path[:tag][@sha256:digest]
_IMAGE = re.compile(r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")
_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
# Replication factors of the topics Kafka makes for itself, each with the min.insync.replicas key that
# must stay below it.
_INTERNAL_TOPICS = {"offsets.topic.replication.factor": None,
                    "transaction.state.log.replication.factor": "transaction.state.log.min.isr",
                    "share.coordinator.state.topic.replication.factor": "share.coordinator.state.topic.min.isr",
                    "default.replication.factor": None}


def _qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return bool(_NAME_PART.match(name)) and (not prefix or (len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.match(prefix))))


def _labels(values: Mapping[str, str], field: str, check_values: bool = True) -> list[Problem]:
    """Keys (and values) Kubernetes accepts as labels; annotations only need valid keys."""
    problems = []
    for key, value in sorted(values.items()):
        if not _qualified_name(key):
            problems.append(Problem(f"{field}.{key}", "is not a valid Kubernetes key: [prefix/]name, the name at most "
                                                      "63 characters of letters, digits, '-', '_' and '.'"))
        elif check_values and not _LABEL_VALUE.match(value):
            problems.append(Problem(f"{field}.{key}", f"{value!r} is not a valid label value: at most 63 characters "
                                                      "of letters, digits, '-', '_' and '.', starting and ending "
                                                      "with a letter or digit"))
    return problems


def _resources(pool: NodePool, field: str) -> list[Problem]:
    problems = []
    for section, values in (("requests", pool.resources.requests), ("limits", pool.resources.limits)):
        for name in sorted(values):
            if name not in _STANDARD_RESOURCES and not name.startswith("hugepages-") and "/" not in name:
                problems.append(Problem(f"{field}.resources.{section}.{name}",
                                        "not a resource Kubernetes knows: cpu, memory, ephemeral-storage, "
                                        "hugepages-<size> or an extended resource (domain/name)"))
    for name, request in sorted(pool.resources.requests.items()):
        limit = pool.resources.limits.get(name)
        if limit is not None and parse_quantity(request) > parse_quantity(limit):
            problems.append(Problem(f"{field}.resources.requests.{name}",
                                    f"{request} exceeds the limit {limit}: Kubernetes refuses such a pod"))
    return problems


def _pool(pool: NodePool, field: str) -> list[Problem]:
    template = pool.template
    return (_resources(pool, field) + _heap_problems(field, pool)
            + _labels(template.labels, f"{field}.template.labels")
            + _labels(template.annotations, f"{field}.template.annotations", check_values=False)
            + _labels(template.node_selector, f"{field}.template.nodeSelector"))


def _control_characters(config: Mapping[str, str], field: str) -> list[Problem]:
    """A newline, tab or other control character belongs in no config key or value."""
    return [Problem(f"{field}.{key!r}" if _CONTROL.search(key) else f"{field}.{key}",
                    "contains a control character (newline, tab, ...): not allowed in config keys or values")
            for key, value in sorted(config.items()) if _CONTROL.search(key) or _CONTROL.search(value)]


def _owned_broker_keys(config: Mapping[str, str], field: str) -> list[Problem]:
    """Keys the operator sets, and settings that would break what it relies on."""
    problems = [Problem(f"{field}.{key}", "is set by the operator and cannot be overridden")
                for key in sorted(config) if naming.owned_broker_key(key) or key == "security.inter.broker.protocol"]
    problems += [Problem(f"{field}.{key}", "changes how every listener's connections become principals, the nodes' "
                                           "and the operator's own too: with authorization on they would stop being "
                                           "super users, and the operator could no longer roll the cluster. A "
                                           "KafkaUser's principal is its name on every client listener")
                 for key in sorted(config) if key in naming.IDENTITY_BROKER_KEYS]
    if config.get("controlled.shutdown.enable", "true").strip().lower() == "false":
        problems.append(Problem(f"{field}.controlled.shutdown.enable", "must stay true: rolling restarts move "
                                "leadership off a broker through controlled shutdown before it stops"))
    return problems


def _provider_references(config: Mapping[str, str], field: str) -> list[Problem]:
    """A ${provider:path:key} value would be resolved by a config provider, with the broker's rights: the
    operator owns config.providers."""
    return [Problem(f"{field}.{key}", "is a config provider reference (${...}): the operator owns "
                                      "config.providers; give a secret value as spec.brokers.configFromSecrets")
            for key, value in sorted(config.items()) if "${" in value]


# Below this many bytes no record batch a client or Kafka itself writes fits (a batch's header alone is 61
# bytes; a consumer group's offset commit, a transaction marker and the canary's records need more): every
# write would fail with RECORD_TOO_LARGE, or followers would fetch one batch per request and drop out of the ISR.
MIN_BATCH_BYTES = 1024
_BATCH_SIZE_KEYS = {"broker": ("message.max.bytes", "replica.fetch.max.bytes", "replica.fetch.response.max.bytes"),
                    "topic": ("max.message.bytes",)}


def _batch_sizes(section: str, config: Mapping[str, str], field: str) -> list[Problem]:
    problems = []
    for key in _BATCH_SIZE_KEYS[section]:
        value = config.get(key, "").strip()
        if value.isdigit() and int(value) < MIN_BATCH_BYTES:
            problems.append(Problem(f"{field}.{key}", f"{value} bytes is below {MIN_BATCH_BYTES:,}, the least a "
                                                      "record batch needs here: no write could succeed"))
    return problems


def _isr_lag(config: Mapping[str, str], field: str, version: str) -> list[Problem]:
    """Kafka refuses to start with replica.lag.time.max.ms below replica.fetch.wait.max.ms (each follower's idle
    fetch would take it out of the ISR): a roll would restart every node into a crash."""
    brokers = catalog(version).broker

    def setting(key: str) -> int | None:
        value = config.get(key, brokers[key].default or "").strip()
        return int(value) if value.isdigit() else None

    lag, wait = setting("replica.lag.time.max.ms"), setting("replica.fetch.wait.max.ms")
    if lag is None or wait is None or lag >= wait:
        return []
    return [Problem(f"{field}.replica.lag.time.max.ms", f"{lag} ms is below replica.fetch.wait.max.ms ({wait} ms): "
                                                        "Kafka would refuse to start, and every follower would "
                                                        "leave the ISR")]


def _passwords(config: Mapping[str, str], field: str, version: str) -> list[Problem]:
    """A secret value would land in the KafkaCluster and a ConfigMap: Kafka's PASSWORD settings come from Secrets."""
    brokers = catalog(version).broker
    return [Problem(f"{field}.{key}", f"is a secret (Kafka's PASSWORD type): give it as "
                                      f"spec.brokers.configFromSecrets.{key}, a reference to a key of a Secret")
            for key in sorted(config) if key in brokers and brokers[key].type == "PASSWORD"]


def _secret_config(refs: Mapping[str, object], config: Mapping[str, str], field: str,
                   version: str) -> list[Problem]:
    cat = catalog(version)
    problems = []
    for key in sorted(refs):
        if key not in cat.broker:
            problems.append(Problem(f"{field}.{key}", f"not a broker configuration of Kafka {cat.kafka_version}"))
        elif key in config:
            problems.append(Problem(f"{field}.{key}", "is also in spec.brokers.config: give it once"))
    return problems + _owned_broker_keys(dict.fromkeys(refs, ""), field)


def _internal_topics(config: Mapping[str, str], brokers: int, field: str) -> list[Problem]:
    problems = []
    for rf_key, min_isr_key in _INTERNAL_TOPICS.items():
        rf = config.get(rf_key)
        if rf is None or not rf.strip().lstrip("-").isdigit():
            continue
        if int(rf) > brokers:
            problems.append(Problem(f"{field}.{rf_key}", f"{rf} exceeds the {brokers} brokers: Kafka could not "
                                                         "create the topic"))
        min_isr = config.get(min_isr_key) if min_isr_key else None
        if min_isr is not None and min_isr.strip().isdigit() and int(min_isr) > int(rf):
            problems.append(Problem(f"{field}.{min_isr_key}", f"{min_isr} exceeds {rf_key} ({rf})"))
    return problems


def _operator_owned(config: Mapping[str, str], field: str) -> list[Problem]:
    """Replication throttles belong to the operator's replica moves: it sets and removes them itself (the
    brokers' throttle rates are not broker configurations at all, so check_config refuses those)."""
    return [Problem(f"{field}.{key}", "is set by the operator while replicas move, and removed after "
                                      "(spec.leaderBalance.replicationThrottleBytesPerSecond sets the rate)")
            for key in sorted(config) if key in naming.THROTTLED_REPLICAS_KEYS]


def _min_isr_problem(field: str, min_isr: int, replicas: int) -> Problem | None:
    if min_isr > replicas:
        return Problem(field, f"min.insync.replicas ({min_isr}) exceeds the replication factor ({replicas}): "
                              "no acks=all write could ever be acknowledged")
    if replicas > 1 and min_isr == replicas:
        return Problem(field, f"min.insync.replicas ({min_isr}) equals the replication factor ({replicas}): "
                              "any broker restart would stop acks=all writes and block rolling restarts; "
                              f"use at most {replicas - 1}")
    return None


def _heap_problems(field: str, pool: NodePool) -> list[Problem]:
    limit = pool.resources.limits.get("memory")
    if pool.jvm.heap and limit and parse_quantity(pool.jvm.heap) >= parse_quantity(limit):
        return [Problem(f"{field}.jvm.heap", f"heap {pool.jvm.heap} leaves no room under the memory limit {limit} "
                                             "(page cache and off-heap memory need some): lower it")]
    return []


def _features(spec: KafkaClusterSpec) -> list[Problem]:
    """Each feature a level is given for must be one spec.version knows, at a level it runs."""
    release = versions.release(spec.version)
    known = release.features if release is not None else {}
    problems = []
    for name, level in sorted(spec.features.items()):
        where = f"spec.features.{name}"
        if name == versions.METADATA_VERSION:
            problems.append(Problem(where, "metadata.version follows spec.version; pin it with "
                                           "spec.upgrade.metadataVersion"))
        elif name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(Problem(where, f"Kafka {spec.version} knows no feature {name!r}{hint}; it knows "
                                           f"{', '.join(sorted(known))}"))
        elif not known[name].lowest <= level <= known[name].highest:
            problems.append(Problem(where, f"{level} is outside what Kafka {spec.version} runs of {name} "
                                           f"({known[name].lowest} to {known[name].highest})"))
    return problems


def _metadata_version(spec: KafkaClusterSpec) -> list[Problem]:
    """A pinned metadata.version must be one a release here finalizes, and one spec.version can run."""
    name = spec.upgrade.metadata_version
    if name is None:
        return []
    level = versions.metadata_level(name)
    known = ", ".join(f"{r.line} ({r.metadata_version})" for r in versions.RELEASES)
    if level is None:
        return [Problem("spec.upgrade.metadataVersion", f"{name!r} is not a metadata.version of a Kafka release "
                                                        f"this operator runs: {known}")]
    target = versions.release(spec.version)
    if target is not None and level > target.metadata_level:
        return [Problem("spec.upgrade.metadataVersion", f"{name} is newer than Kafka {spec.version} can run "
                                                        f"(at most {target.metadata_version})")]
    return []


def validate_cluster(spec: KafkaClusterSpec) -> list[Problem]:
    config = spec.brokers.config
    problems = _control_characters(config, "spec.brokers.config")
    problems += check_config("broker", config, "spec.brokers.config", spec.version)
    problems += _owned_broker_keys(config, "spec.brokers.config")
    problems += _passwords(config, "spec.brokers.config", spec.version)
    problems += _provider_references(config, "spec.brokers.config")
    problems += _batch_sizes("broker", config, "spec.brokers.config")
    problems += _isr_lag(config, "spec.brokers.config", spec.version)
    problems += _secret_config(spec.brokers.config_from_secrets, config, "spec.brokers.configFromSecrets",
                               spec.version)
    problems += _metadata_version(spec)
    problems += _features(spec)
    problems += _internal_topics(config, spec.brokers.replicas, "spec.brokers.config")
    defaults = spec.topic_defaults
    min_isr = _min_isr_problem("spec.topicDefaults.minInsyncReplicas", defaults.min_insync_replicas,
                               defaults.replication_factor)
    if min_isr:
        problems.append(min_isr)
    if defaults.replication_factor > spec.brokers.replicas:
        problems.append(Problem("spec.topicDefaults.replicationFactor",
                                f"{defaults.replication_factor} exceeds the {spec.brokers.replicas} brokers"))
    problems += _pool(spec.brokers, "spec.brokers")
    problems += _pool(spec.controllers, "spec.controllers")
    if spec.image is not None and not _IMAGE.match(spec.image):
        problems.append(Problem("spec.image", f"{spec.image!r} is not an image reference "
                                              "([registry[:port]/]repository[:tag][@sha256:digest], lowercase)"))
    cluster_ca, clients_ca = spec.tls.cluster_ca.secret_name, spec.tls.clients_ca.secret_name
    if cluster_ca is not None and cluster_ca == clients_ca:
        problems.append(Problem("spec.tls.clientsCa.secretName", f"names the cluster CA's Secret {cluster_ca!r} too: "
                                "a user's certificate would then be trusted as a node's, and one named like a node "
                                "would be a super user; give the clients CA a Secret of its own"))
    if spec.rack is not None and not _qualified_name(spec.rack.topology_key):
        problems.append(Problem("spec.rack.topologyKey", f"{spec.rack.topology_key!r} is not a valid label key"))
    return problems


def _name_problems(name: str) -> list[Problem]:
    if len(name) > MAX_TOPIC_NAME:
        return [Problem("spec.topicName", f"Kafka topic names are at most {MAX_TOPIC_NAME} characters "
                                          f"({len(name)} given); set spec.topicName to a shorter name")]
    if not _TOPIC_NAME.match(name) or name in (".", ".."):
        return [Problem("spec.topicName", f"{name!r} is not a valid Kafka topic name "
                                          "(letters, digits, '.', '_' and '-' only)")]
    return []


def validate_topic(resource_name: str, spec: TopicSpec, cluster: KafkaClusterSpec | None) -> list[Problem]:
    """Problems of a Topic against the cluster it names (None: that cluster does not exist)."""
    if cluster is None:
        return [Problem("spec.clusterRef.name", f"KafkaCluster {spec.cluster_ref.name!r} does not exist "
                                                "in this namespace")]
    problems = _name_problems(naming.kafka_topic_name(resource_name, spec.topic_name))
    problems += _control_characters(spec.config, "spec.config")
    problems += check_config("topic", spec.config, "spec.config")
    problems += _operator_owned(spec.config, "spec.config")
    problems += _batch_sizes("topic", spec.config, "spec.config")
    replicas = spec.replicas or cluster.topic_defaults.replication_factor
    brokers = cluster.brokers.replicas
    if replicas > brokers:
        problems.append(Problem("spec.replicas", f"{replicas} replicas cannot be placed on {brokers} brokers"))
    min_isr_value = spec.config.get("min.insync.replicas")
    if min_isr_value is not None and not check_value(catalog().topic["min.insync.replicas"], min_isr_value):
        problem = _min_isr_problem("spec.config.min.insync.replicas", int(min_isr_value), replicas)
        if problem:
            problems.append(problem)
    elif cluster.topic_defaults.min_insync_replicas > replicas:
        problems.append(Problem("spec.replicas", f"{replicas} replicas is below the cluster's min.insync.replicas "
                                f"({cluster.topic_defaults.min_insync_replicas}): set config min.insync.replicas "
                                "or raise replicas"))
    return problems
