"""The operator's settings: every KRAFTY_* variable the chart (or a developer) sets, read in one place.

`OperatorSettings.from_environment()` reads them once at start and stops the operator, naming the variable,
when one cannot be used; the rest of the process takes the frozen result.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from krafty.decide.lag import GroupSelection
from krafty.model.context import OperatorPeer
from krafty.model.network import NetworkPolicyPeer
from krafty.model.versions import SUPPORTED_KAFKA_VERSIONS
from krafty.runtime.leadership import LeaseSettings

DEFAULT_LEASE_SECONDS = 15
DEFAULT_MAX_GROUPS = 200
KafkaAddresses = str | dict[str, str]  # one cluster's "host:port,..." or, per "namespace/cluster", each one's


@dataclass(frozen=True)
class OperatorSettings:
    watch_namespaces: tuple[str, ...] = ()  # KRAFTY_WATCH_NAMESPACES; empty: every namespace
    broker_images: Mapping[str, str] | None = None  # by Kafka version (KRAFTY_BROKER_REPOSITORY, _IMAGES)
    cluster_domain: str = "cluster.local"  # KRAFTY_CLUSTER_DOMAIN
    rack_binding: str | None = None  # KRAFTY_RACK_BINDING: the chart's ClusterRoleBinding for rack awareness
    operator: OperatorPeer | None = None  # KRAFTY_OPERATOR_NAMESPACE and _POD_SELECTOR: the operator's pods
    monitoring_peers: tuple[NetworkPolicyPeer, ...] = ()  # KRAFTY_MONITORING_PEERS: the install's Prometheus
    lease: LeaseSettings | None = None  # KRAFTY_LEADER_LEASE, _POD_NAME, _LEASE_DURATION_SECONDS
    # KRAFTY_LAG_INCLUDE_GROUPS, _EXCLUDE_GROUPS, _MAX_GROUPS
    lag_groups: GroupSelection = field(default_factory=GroupSelection)
    # Outside Kubernetes pod DNS names do not resolve: where the passes reach Kafka instead
    kafka_bootstrap: KafkaAddresses | None = None  # KRAFTY_KAFKA_BOOTSTRAP
    kafka_controllers: str | None = None  # KRAFTY_KAFKA_CONTROLLERS (with one cluster's bootstrap only)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> OperatorSettings:
        env = os.environ if environ is None else environ
        bootstrap = _kafka_addresses(env.get("KRAFTY_KAFKA_BOOTSTRAP") or None)
        controllers = env.get("KRAFTY_KAFKA_CONTROLLERS") or None
        if controllers and not isinstance(bootstrap, str):
            raise SystemExit("KRAFTY_KAFKA_CONTROLLERS needs KRAFTY_KAFKA_BOOTSTRAP: one cluster's brokers")
        return cls(watch_namespaces=tuple(n for n in env.get("KRAFTY_WATCH_NAMESPACES", "").split(",") if n),
                   broker_images=_broker_images(env), cluster_domain=env.get("KRAFTY_CLUSTER_DOMAIN", "cluster.local"),
                   rack_binding=env.get("KRAFTY_RACK_BINDING") or None, operator=_operator_peer(env),
                   lease=_lease(env), lag_groups=_group_selection(env), kafka_bootstrap=bootstrap,
                   kafka_controllers=controllers, monitoring_peers=_monitoring_peers(env))


def _integer(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name) or str(default)
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"{name} is not a whole number: {value!r}") from None


def _operator_peer(env: Mapping[str, str]) -> OperatorPeer | None:
    """The chart tells the operator its namespace and pod labels (the cluster's NetworkPolicy names them)."""
    namespace, selector = env.get("KRAFTY_OPERATOR_NAMESPACE"), env.get("KRAFTY_OPERATOR_POD_SELECTOR")
    return OperatorPeer.parse(namespace, selector) if namespace and selector else None


def _monitoring_peers(env: Mapping[str, str]) -> tuple[NetworkPolicyPeer, ...]:
    """The chart's networkPolicy.metricsFrom (a JSON list of NetworkPolicy peers): who scrapes the install's
    metrics, let in to a cluster's metrics port when it names no peers (unnamedPeers Namespace)."""
    try:
        return tuple(NetworkPolicyPeer.model_validate(peer) for peer in json.loads(
            env.get("KRAFTY_MONITORING_PEERS") or "[]"))
    except (json.JSONDecodeError, TypeError, ValidationError) as error:
        raise SystemExit(f"KRAFTY_MONITORING_PEERS is not a JSON list of NetworkPolicy peers: {error}") from error


def _lease(env: Mapping[str, str]) -> LeaseSettings | None:
    """The chart names the Lease and the pod; without them (one process run by hand) there is no election."""
    name, pod = env.get("KRAFTY_LEADER_LEASE"), env.get("KRAFTY_POD_NAME")
    namespace = env.get("KRAFTY_OPERATOR_NAMESPACE")
    if not (name and namespace and pod):
        return None
    # The pod's name and this process's own mark: a container restarted in the same pod is a new candidate,
    # not the holder of its predecessor's Lease (that one waits out its duration like any dead leader's)
    identity = f"{pod}_{uuid.uuid4().hex[:8]}"
    duration = _integer(env, "KRAFTY_LEASE_DURATION_SECONDS", DEFAULT_LEASE_SECONDS)
    return LeaseSettings(namespace, name, identity, duration_seconds=duration, renew_deadline=duration * 2 / 3,
                         retry_period=max(1.0, duration / 7.5))


def _group_selection(env: Mapping[str, str]) -> GroupSelection:
    """The chart's lag.includeGroups / excludeGroups (JSON lists of regular expressions) and lag.maxGroups;
    a pattern that does not compile stops the operator at start, naming it."""
    patterns = {}
    for key in ("include", "exclude"):
        name = f"KRAFTY_LAG_{key.upper()}_GROUPS"
        try:
            patterns[key] = tuple(json.loads(env.get(name) or "[]"))
        except json.JSONDecodeError as error:
            raise SystemExit(f"{name} is not a JSON list: {error}") from error
    for pattern in (*patterns["include"], *patterns["exclude"]):
        try:
            re.compile(pattern)
        except (re.error, TypeError) as error:
            raise SystemExit(f"lag group pattern {pattern!r} is not a regular expression: {error}") from error
    return GroupSelection(patterns["include"], patterns["exclude"],
                          _integer(env, "KRAFTY_LAG_MAX_GROUPS", DEFAULT_MAX_GROUPS))


def _broker_images(env: Mapping[str, str]) -> dict[str, str]:
    """The broker image of each Kafka version the operator runs: the chart's brokerImage.repository tagged with
    the version, unless brokerImage.overrides names another (KRAFTY_BROKER_IMAGES, JSON)."""
    try:
        overrides = json.loads(env.get("KRAFTY_BROKER_IMAGES") or "{}")
    except json.JSONDecodeError as error:
        raise SystemExit(f"KRAFTY_BROKER_IMAGES is not a JSON object: {error}") from error
    unknown = sorted(set(overrides) - set(SUPPORTED_KAFKA_VERSIONS))
    if unknown:
        raise SystemExit(f"brokerImage.overrides names Kafka {', '.join(unknown)}, which this operator does not run "
                         f"({', '.join(SUPPORTED_KAFKA_VERSIONS)})")
    repository = env.get("KRAFTY_BROKER_REPOSITORY", "krafty/kafka")
    return {version: overrides.get(version, f"{repository}:{version}") for version in SUPPORTED_KAFKA_VERSIONS}


def _kafka_addresses(value: str | None) -> KafkaAddresses | None:
    """KRAFTY_KAFKA_BOOTSTRAP, for an operator outside the cluster: the addresses of every cluster's brokers
    ("host:port,...") or of each cluster's (a JSON object: {"namespace/cluster": "host:port,..."})."""
    if value is None or not value.lstrip().startswith("{"):
        return value
    try:
        table = json.loads(value)
    except json.JSONDecodeError as error:
        raise SystemExit(f"KRAFTY_KAFKA_BOOTSTRAP is not a JSON object: {error}") from error
    if not all(key.count("/") == 1 and isinstance(servers, str) and servers for key, servers in table.items()):
        raise SystemExit('KRAFTY_KAFKA_BOOTSTRAP maps each "namespace/cluster" to "host:port,..."')
    return dict(table)
