"""Whole-manifest rendering (golden files) and the properties that matter most."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from krafty.decide.rack_binding import account, membership
from krafty.model.context import ClusterContext
from krafty.naming import Pool
from krafty.render import configmaps
from krafty.render.cluster import children
from krafty.render.workloads import heap_mib, statefulset

from ...conftest import context, example

GOLDEN = Path(__file__).parent / "golden"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (server.properties) as readable literal blocks."""


_Dumper.add_representer(
    str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))


def _render(ctx: ClusterContext) -> str:
    docs = [{"kind": c.kind, "name": c.name, "desired": c.desired} for c in children(ctx)]
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, width=120)


@pytest.mark.parametrize("name", ["combined", "dedicated"])
def test_whole_cluster_matches_golden_file(name: str, request):
    ctx = request.getfixturevalue(f"{name}_ctx")
    rendered = _render(ctx)
    golden = GOLDEN / f"{name}.yaml"
    if os.environ.get("KRAFTY_UPDATE_GOLDEN") == "1":
        golden.write_text(rendered)
    assert rendered == golden.read_text(), f"regenerate with KRAFTY_UPDATE_GOLDEN=1 after checking the diff of {golden}"


def test_combined_cluster_has_no_controller_pool(combined_ctx: ClusterContext):
    by_name = {c.name: c for c in children(combined_ctx)}
    assert by_name["small-controller"].desired is None
    assert by_name["small-controllers"].desired is None
    assert by_name["small-broker"].desired is not None


def test_initial_voters_are_published_until_the_quorum_forms(dedicated_ctx: ClusterContext):
    def initial(ctx: ClusterContext) -> str:
        config = next(c for c in children(ctx) if c.name == "prod-kafka-config")
        assert config.desired is not None
        return str(config.desired["data"]["initial-controllers"])

    assert initial(dedicated_ctx).split(",")[0] == (
        "1000@prod-controller-0.prod-controllers.kafka.svc.cluster.local:9093:dir0000000000000001000")
    assert initial(replace(dedicated_ctx, initial_voters=())) == ""


def test_statefulset_is_rolled_by_the_operator_only(dedicated_ctx: ClusterContext):
    sts = statefulset(dedicated_ctx, Pool.BROKER)
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    pod = sts["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 300
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "KAFKA_HEAP_OPTS", "value": "-Xms512m -Xmx512m"} in container["env"]
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"


def test_delete_claim_deletes_volumes_with_the_cluster():
    spec = example("kafkacluster-combined.yaml")["spec"]
    spec["brokers"]["storage"]["deleteClaim"] = True
    sts = statefulset(context(spec), Pool.BROKER)
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"


def test_metrics_off_removes_port_annotations_and_service():
    spec = example("kafkacluster-combined.yaml")["spec"] | {"metrics": {"enabled": False}}
    ctx = context(spec)
    container = statefulset(ctx, Pool.BROKER)["spec"]["template"]["spec"]["containers"][0]
    assert "metrics" not in [p["name"] for p in container["ports"]]
    assert next(c for c in children(ctx) if c.name == "demo-kafka-metrics").desired is None


def _spread(spec: dict, pool: Pool = Pool.BROKER) -> list[tuple[str, str]]:
    pod = statefulset(context(spec), pool)["spec"]["template"]["spec"]
    for constraint in pod["topologySpreadConstraints"]:
        assert constraint["maxSkew"] == 1
        assert constraint["labelSelector"] == {"matchLabels": statefulset(context(spec), pool)["spec"]["selector"][
            "matchLabels"]}
    return [(c["topologyKey"], c["whenUnsatisfiable"]) for c in pod["topologySpreadConstraints"]]


@pytest.mark.parametrize(("rack", "expected"), [
    # Given no rack: one per zone and one per machine, both preferred (nodes without a zone still take pods)
    (None, [("topology.kubernetes.io/zone", "ScheduleAnyway"), ("kubernetes.io/hostname", "ScheduleAnyway")]),
    # Given racks by zone: one per zone required, one per machine preferred
    ("topology.kubernetes.io/zone", [("topology.kubernetes.io/zone", "DoNotSchedule"),
                                     ("kubernetes.io/hostname", "ScheduleAnyway")]),
    # Given racks by machine: one per machine required, once
    ("kubernetes.io/hostname", [("kubernetes.io/hostname", "DoNotSchedule")]),
])
def test_a_pools_pods_spread_one_per_zone_and_machine_by_default(rack: str | None, expected: list):
    spec = example("kafkacluster-dedicated.yaml")["spec"] | ({"rack": {"topologyKey": rack}} if rack else {})
    # When the broker and controller StatefulSets are rendered
    # Then each pool spreads its own pods as expected
    assert _spread(spec, Pool.BROKER) == expected
    assert _spread(spec, Pool.CONTROLLER) == expected


def test_the_templates_own_spread_replaces_the_default():
    spec = example("kafkacluster-combined.yaml")["spec"]
    own = {"maxSkew": 2, "topologyKey": "example.com/rack", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "x"}}}
    spec["brokers"]["template"] = {"topologySpreadConstraints": [own]}
    pod = statefulset(context(spec), Pool.BROKER)["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"] == [own]


def test_rack_awareness_reads_the_node_label():
    spec = example("kafkacluster-combined.yaml")["spec"] | {"rack": {"topologyKey": "topology.kubernetes.io/zone"}}
    pod = statefulset(context(spec), Pool.BROKER)["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert {"name": "KRAFTY_RACK_TOPOLOGY_KEY", "value": "topology.kubernetes.io/zone"} in pod["containers"][0]["env"]


def test_rack_awareness_adds_the_clusters_account_to_the_one_rack_binding_and_takes_it_out_again():
    member = account("kafka", "demo-kafka")
    other = account("streaming", "logs-kafka")
    # Given the chart's binding with another cluster in it: wanted, the account is added beside it
    assert membership([other], member, wanted=True) == [other, member]
    # Already there: nothing to write; not wanted: only this account leaves
    assert membership([other, member], member, wanted=True) is None
    assert membership([other, member], member, wanted=False) == [other]
    assert membership([other], member, wanted=False) is None
    # And a cluster's rendered children hold no binding of their own (the operator can create none)
    racked = example("kafkacluster-combined.yaml")["spec"] | {"rack": {"topologyKey": "topology.kubernetes.io/zone"}}
    assert not [c for c in children(context(racked)) if c.kind == "ClusterRoleBinding"]


@pytest.mark.parametrize(("pool", "mib"), [
    ({"jvm": {"heap": "768Mi"}}, 768),
    ({"resources": {"limits": {"memory": "2Gi"}}}, 1024),
    ({"resources": {"requests": {"memory": "1Gi"}}}, 512),
    ({}, 1024),
])
def test_heap_defaults_to_half_the_memory(pool, mib):
    spec = context({"brokers": {"replicas": 1, **pool}, "controllers": {"replicas": 1},
                    "topicDefaults": {"replicationFactor": 1, "minInsyncReplicas": 1}}).spec
    assert heap_mib(spec.brokers) == mib


def test_the_connection_config_map_names_the_first_listeners_protocol_and_the_ca_to_trust():
    plain = context(example("kafkacluster-combined.yaml")["spec"], name="small")
    assert configmaps.connection_config_map(plain)["data"] == {
        "bootstrap.servers": "small-kafka-bootstrap.kafka.svc.cluster.local:9092", "security.protocol": "PLAINTEXT"}
    spec = example("kafkacluster-combined.yaml")["spec"]
    spec["listeners"] = [{"name": "tls", "port": 9094, "tls": True}, {"name": "plain", "port": 9092}]
    assert configmaps.connection_config_map(context(spec, name="small"))["data"] == {
        "bootstrap.servers": "small-kafka-bootstrap.kafka.svc.cluster.local:9094", "security.protocol": "SSL",
        "ssl.truststore.type": "PEM", "ssl.truststore.secret": "small-cluster-ca-cert",
        "ssl.truststore.secret.key": "ca.crt"}


def test_the_connection_config_map_of_a_scram_listener_names_the_sasl_mechanism():
    spec = example("kafkacluster-combined.yaml")["spec"]
    spec["listeners"] = [{"name": "scram", "port": 9096, "tls": True, "authentication": "scram-sha-512"},
                         {"name": "plain", "port": 9092}]
    assert configmaps.connection_config_map(context(spec, name="small"))["data"] == {
        "bootstrap.servers": "small-kafka-bootstrap.kafka.svc.cluster.local:9096", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "ssl.truststore.type": "PEM",
        "ssl.truststore.secret": "small-cluster-ca-cert", "ssl.truststore.secret.key": "ca.crt"}
    spec["listeners"] = [{"name": "scram", "port": 9096, "authentication": "scram-sha-512"}]
    assert configmaps.connection_config_map(context(spec, name="small"))["data"] == {
        "bootstrap.servers": "small-kafka-bootstrap.kafka.svc.cluster.local:9096",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"}


def test_putting_another_listener_first_changes_no_pod_service_or_server_properties():
    plain, tls = {"name": "plain", "port": 9092}, {"name": "tls", "port": 9094, "tls": True}
    spec = example("kafkacluster-combined.yaml")["spec"]
    before = {(c.kind, c.name): c.desired for c in children(context(spec | {"listeners": [plain, tls]}))}
    after = {(c.kind, c.name): c.desired for c in children(context(spec | {"listeners": [tls, plain]}))}
    moved = {key for key in before if before[key] != after[key]}
    # only where applications are sent: the connection ConfigMap (once every broker serves the listener)
    assert moved == {("ConfigMap", "demo-kafka-connection")}
