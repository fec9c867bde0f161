"""server.properties rendering and the restart hash."""

from __future__ import annotations

from dataclasses import replace

from krafty.kafka_configs import catalog
from krafty.model.context import ClusterContext
from krafty.naming import Pool
from krafty.render.kafka_config import dynamic_broker_config, node_properties, restart_hash
from krafty.render.workloads import statefulset

from ..conftest import context, example


def spec_with(**changes):
    spec = example("kafkacluster-dedicated.yaml")["spec"]
    for path, value in changes.items():
        target = spec
        *parents, leaf = path.split("__")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return spec


def test_combined_voter_is_broker_and_controller(combined_ctx: ClusterContext):
    props = node_properties(combined_ctx, Pool.BROKER, 1)
    assert props["node.id"] == "1"
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAIN://:9092,REPLICATION://:9091,CONTROLLER://:9093"
    host = "small-broker-1.small-brokers.kafka.svc.cluster.local"
    assert props["advertised.listeners"] == f"PLAIN://{host}:9092,REPLICATION://{host}:9091,CONTROLLER://{host}:9093"
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert props["controller.quorum.bootstrap.servers"] == ",".join(
        f"small-broker-{i}.small-brokers.kafka.svc.cluster.local:9093" for i in range(3))
    assert props["log.dirs"] == "/var/lib/kafka/data/kafka-logs"


def test_combined_non_voter_is_only_a_broker():
    ctx = context({"brokers": {"replicas": 5}, "controllers": {"mode": "combined", "replicas": 3}})
    props = node_properties(ctx, Pool.BROKER, 4)
    assert props["process.roles"] == "broker"
    assert "CONTROLLER://" not in props["listeners"]
    assert props["controller.quorum.bootstrap.servers"].count(":9093") == 3


def test_dedicated_controller_has_no_broker_settings(dedicated_ctx: ClusterContext):
    props = node_properties(dedicated_ctx, Pool.CONTROLLER, 2)
    assert props["node.id"] == "1002"
    assert props["process.roles"] == "controller"
    assert props["listeners"] == "CONTROLLER://:9093"
    assert "controller.quorum.auto.join.enable" not in props  # the operator adds voters itself
    assert "inter.broker.listener.name" not in props
    assert "num.io.threads" not in props  # broker overrides are for brokers


def test_broker_gets_defaults_and_overrides(dedicated_ctx: ClusterContext):
    props = node_properties(dedicated_ctx, Pool.BROKER, 0)
    assert props["process.roles"] == "broker"
    assert props["default.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"
    assert props["num.partitions"] == "6"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["log.retention.ms"] == "259200000"
    assert props["auto.leader.rebalance.enable"] == "false"  # leaderBalance.mode Operator


def test_kafka_leader_balance_mode_configures_kafka():
    ctx = context(spec_with(leaderBalance__mode="Kafka", leaderBalance__checkIntervalSeconds=20))
    props = node_properties(ctx, Pool.BROKER, 0)
    assert props["auto.leader.rebalance.enable"] == "true"
    assert props["leader.imbalance.check.interval.seconds"] == "20"


def test_dynamic_config_lists_only_runtime_keys(dedicated_ctx: ClusterContext):
    dynamic = dynamic_broker_config(dedicated_ctx)
    assert dynamic["log.retention.ms"] == "259200000"
    assert dynamic["num.io.threads"] == "8"
    assert "node.id" not in dynamic
    assert "auto.create.topics.enable" not in dynamic  # read-only in Kafka


def test_restart_hash_ignores_scaling_and_runtime_changes(dedicated_ctx: ClusterContext):
    base = restart_hash(dedicated_ctx, Pool.BROKER)
    assert restart_hash(context(spec_with(brokers__replicas=5)), Pool.BROKER) == base
    assert restart_hash(context(spec_with(brokers__config={"log.retention.ms": 1000, "num.io.threads": 8,
                                                            "compression.type": "producer"})), Pool.BROKER) == base
    # Growing the dedicated quorum changes only the discovery list: no broker restart.
    assert restart_hash(context(spec_with(controllers__replicas=5)), Pool.BROKER) == base


def test_restart_hash_changes_with_static_config(dedicated_ctx: ClusterContext):
    base = restart_hash(dedicated_ctx, Pool.BROKER)
    changed = spec_with(brokers__config={"log.retention.ms": 259200000, "num.io.threads": 8,
                                         "compression.type": "producer", "socket.send.buffer.bytes": 1048576})
    assert restart_hash(context(changed), Pool.BROKER) != base
    assert restart_hash(context(changed), Pool.CONTROLLER) == restart_hash(dedicated_ctx, Pool.CONTROLLER)


def test_every_rendered_key_is_a_kafka_config(dedicated_ctx: ClusterContext, combined_ctx: ClusterContext):
    # The catalog comes from the pinned Kafka: a key it does not know would be ignored (or refused) by Kafka.
    # Two shapes of key are Kafka's by construction: listener.name.<listener>.<key> (a key for one listener)
    # and config.providers.<provider>.class (the class of a provider config.providers names).
    brokers = catalog().broker
    for ctx in (dedicated_ctx, combined_ctx, context(spec_with(leaderBalance__mode="Kafka"))):
        for pool in ctx.pools():
            props = node_properties(ctx, pool, 0)
            listeners = {item.split("://")[0].lower() for item in props["listeners"].split(",")}
            providers = set(props.get("config.providers", "").split(","))
            unknown = {key for key in props if key not in brokers
                       and not (key.startswith("listener.name.") and key.split(".")[2] in listeners
                                and ".".join(key.split(".")[3:]) in brokers)
                       and not (key.startswith("config.providers.") and key.split(".")[2] in providers
                                and key.endswith(".class"))}
            assert not unknown, f"{pool}: {unknown}"


def test_a_setting_from_a_secret_names_its_file_and_the_brokers_mount_the_secret():
    # Given a broker setting taken from a Secret
    ctx = replace(context(spec_with(brokers__configFromSecrets={"sasl.jaas.config": {"name": "jaas", "key": "cfg"}})),
                  config_secrets="digest-1")
    # Then server.properties names the mounted file, never the value, and Kafka reads it at start only
    props = node_properties(ctx, Pool.BROKER, 0)
    assert props["sasl.jaas.config"] == "${dir:/etc/kafka/secrets/jaas:cfg}"
    assert "sasl.jaas.config" not in dynamic_broker_config(ctx)
    # And the brokers' pods mount that Secret, and carry the digest of what it held (a change rolls them)
    pod = statefulset(ctx, Pool.BROKER)["spec"]["template"]
    assert {"name": "config-secret-0", "secret": {"secretName": "jaas", "defaultMode": 0o440}} in pod["spec"]["volumes"]
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "config-secret-0", "mountPath": "/etc/kafka/secrets/jaas", "readOnly": True} in mounts
    assert pod["metadata"]["annotations"]["kafka.krafty.io/config-secrets"] == "digest-1"
