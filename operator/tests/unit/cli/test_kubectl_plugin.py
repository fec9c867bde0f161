"""kubectl krafty's command line: flags before or after the command, as with kubectl; the leader found from its
metrics; the operator's ports found where `kubectl port-forward` put them."""

from __future__ import annotations

import pathlib

import pytest

from krafty.cli import kubectl
from krafty.cli.forward import ForwardError, forwarded, forwarding
from krafty.cli.kubectl import OPERATOR_NAMESPACE, OPERATOR_SELECTOR, group_lag, leads, parse_args


@pytest.mark.parametrize("argv", [
    ["plan", "prod", "-n", "kafka", "-f", "new.yaml", "-o", "json"],
    ["-n", "kafka", "plan", "prod", "-f", "new.yaml", "-o", "json"],
    ["--namespace", "kafka", "plan", "-o", "json", "prod", "--filename", "new.yaml"],
])
def test_the_namespace_goes_before_or_after_the_command(argv: list[str]):
    args = parse_args(argv)
    assert (args.command, args.cluster, args.namespace, args.filename, args.output) == (
        "plan", "prod", "kafka", "new.yaml", "json")
    assert args.operator_selector == OPERATOR_SELECTOR


def test_without_a_namespace_the_contexts_is_used_and_each_verb_takes_its_object():
    assert parse_args(["status", "prod"]).namespace is None
    assert parse_args(["restart", "prod-broker-1", "-n", "k"]).pod == "prod-broker-1"
    assert not parse_args(["restart", "prod-broker-1"]).force
    assert parse_args(["restart", "--force", "prod-broker-1"]).force
    assert parse_args(["pause", "prod", "--operator-selector", "app=x"]).operator_selector == "app=x"
    assert parse_args(["status", "prod"]).operator_namespace == OPERATOR_NAMESPACE
    assert parse_args(["--operator-namespace", "ops", "status", "prod"]).operator_namespace == "ops"
    with pytest.raises(SystemExit):
        parse_args(["plan", "prod"])  # -f is required


METRICS = """# TYPE krafty_operator_leader gauge
krafty_operator_leader 1.0
# TYPE krafty_cluster_ready gauge
krafty_cluster_ready{namespace="kafka",cluster="prod"} 1.0
# TYPE krafty_consumergroup_info gauge
krafty_consumergroup_info{namespace="kafka",cluster="prod",group="g",type="consumer"} 1.0
# TYPE krafty_consumergroup_lag_sum gauge
krafty_consumergroup_lag_sum{namespace="kafka",cluster="prod",group="g",topic="t"} 120.0
krafty_consumergroup_lag_sum{namespace="kafka",cluster="other",group="g",topic="t"} 5.0
# TYPE krafty_consumergroup_lag_seconds gauge
krafty_consumergroup_lag_seconds{namespace="kafka",cluster="prod",group="g",topic="t",partition="0"} 3.0
krafty_consumergroup_lag_seconds{namespace="kafka",cluster="prod",group="g",topic="t",partition="1"} 9.0
# TYPE krafty_consumergroup_retention_seconds_left gauge
krafty_consumergroup_retention_seconds_left{namespace="kafka",cluster="prod",group="g",topic="t",partition="0"} 500.0
krafty_consumergroup_retention_seconds_left{namespace="kafka",cluster="prod",group="g",topic="t",partition="1"} +Inf
"""


def test_the_leading_replica_is_found_and_each_groups_lag_is_summed_up_from_its_metrics():
    assert leads(METRICS, "kafka", "prod")
    assert not leads(METRICS, "kafka", "nope")
    assert not leads(METRICS.replace("krafty_operator_leader 1.0", "krafty_operator_leader 0.0"), "kafka", "prod")
    [lag] = group_lag(METRICS, "kafka", "prod")
    assert (lag.group, lag.topic, lag.records, lag.seconds, lag.retention_left, lag.type) == (
        "g", "t", 120.0, 9.0, 500.0, "consumer")


def test_the_local_ports_are_read_from_what_kubectl_port_forward_announces():
    assert forwarding("Forwarding from 127.0.0.1:43567 -> 8082\n") == (8082, 43567)
    assert forwarding("Handling connection for 43567") is None
    assert forwarding("Forwarding from [::1]:43567 -> 8082") is None  # (asked for the IPv4 loopback only)


def test_without_kubectl_on_path_the_plugin_says_so(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ForwardError, match="kubectl is not on PATH"), forwarded("krafty", "krafty-operator-0", [8082]):
        pass


def test_a_file_of_several_documents_gives_the_cluster_named_and_says_which_it_holds(tmp_path: pathlib.Path):
    # Given a file as one applies it: a cluster beside its topic, and a file of two clusters
    one = tmp_path / "quick.yaml"
    one.write_text("kind: KafkaCluster\nmetadata: {name: quick}\nspec: {brokers: {replicas: 3}}\n---\n"
                   "kind: Topic\nmetadata: {name: views}\nspec: {partitions: 3}\n")
    two = tmp_path / "two.yaml"
    two.write_text("kind: KafkaCluster\nmetadata: {name: a}\nspec: {}\n---\nkind: KafkaCluster\n"
                   "metadata: {name: b}\nspec: {}\n")
    # Then the cluster named is planned, and a name the file does not hold is refused naming those it holds
    assert kubectl.spec_of(kubectl.document(str(one), "quick")) == {"brokers": {"replicas": 3}}
    assert kubectl.document(str(two), "b")["metadata"] == {"name": "b"}
    with pytest.raises(kubectl.PluginError, match=r"no single KafkaCluster named quick .*: a, b"):
        kubectl.document(str(two), "quick")
    # And a file of one document is that document, a bare spec included
    spec = tmp_path / "spec.yaml"
    spec.write_text("brokers: {replicas: 5}\n")
    assert kubectl.spec_of(kubectl.document(str(spec), "quick")) == {"brokers": {"replicas": 5}}
