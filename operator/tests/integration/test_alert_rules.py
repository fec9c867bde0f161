"""Every shipped alert, unit-tested with promtool: it stays quiet while its `for` window runs and for a healthy
neighbour, then fires with the labels and the words a person on call reads."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

RULES = Path(__file__).resolve().parents[3] / "charts" / "krafty-operator" / "files" / "prometheus-rules.yaml"
C = 'namespace="ns", cluster="c"'  # the cluster in trouble
D = 'namespace="ns", cluster="d"'  # a healthy neighbour that must stay quiet


@dataclass(frozen=True)
class Case:
    series: dict[str, str]  # promtool input series -> values
    quiet_at: str  # still within `for` (or not yet true): no alert
    fires_at: str
    labels: dict[str, str]  # the alert's labels, severity aside
    value: str = ""  # what {{ $value }} shows
    interval: str = "10s"
    extra: dict[str, str] = field(default_factory=dict)


CASES = {
    "KafkaOfflinePartitions": Case(
        {f'kafka_controller_offlinepartitionscount{{{C}, pod="c-controller-0"}}': "2x20",
         f'kafka_controller_offlinepartitionscount{{{C}, pod="c-controller-1"}}': "0x20",
         f'kafka_controller_offlinepartitionscount{{{D}, pod="d-controller-0"}}': "0x20"},
        "50s", "2m", {"namespace": "ns", "cluster": "c"}, "2"),
    "KafkaUnderMinIsrPartitions": Case(
        {f'kafka_server_replicamanager_underminisrpartitioncount{{{C}, pod="c-broker-0"}}': "1x20",
         f'kafka_server_replicamanager_underminisrpartitioncount{{{C}, pod="c-broker-1"}}': "2x20",
         f'kafka_server_replicamanager_underminisrpartitioncount{{{D}, pod="d-broker-0"}}': "0x20"},
        "50s", "2m", {"namespace": "ns", "cluster": "c"}, "3"),
    "KafkaUnderReplicatedPartitions": Case(
        {f'kafka_server_replicamanager_underreplicatedpartitions{{{C}, pod="c-broker-0"}}': "4x40",
         f'kafka_server_replicamanager_underreplicatedpartitions{{{D}, pod="d-broker-0"}}': "0x40"},
        "4m", "6m", {"namespace": "ns", "cluster": "c"}, "4"),
    "KafkaNoActiveController": Case(
        {f'kafka_controller_activecontrollercount{{{C}, pod="c-controller-0"}}': "0x20",
         f'kafka_controller_activecontrollercount{{{C}, pod="c-controller-1"}}': "0x20",
         f'kafka_controller_activecontrollercount{{{D}, pod="d-controller-0"}}': "1x20",
         f'kafka_controller_activecontrollercount{{{D}, pod="d-controller-1"}}': "0x20"},
        "50s", "2m", {"namespace": "ns", "cluster": "c"}, "0"),
    "KafkaOfflineLogDirectories": Case(
        {f'kafka_log_offline_log_directories{{{C}, pod="c-broker-1"}}': "1x20",
         f'kafka_log_offline_log_directories{{{C}, pod="c-broker-0"}}': "0x20"},
        "50s", "2m", {"namespace": "ns", "cluster": "c", "pod": "c-broker-1"}, "1"),
    "KafkaNodeMetricsDown": Case(
        {f'up{{job="kafka", {C}, pod="c-broker-2"}}': "0x20",
         f'up{{job="kafka", {C}, pod="c-broker-0"}}': "1x20",
         'up{job="krafty-operator", instance="op:8080"}': "0x20"},  # not a Kafka node: another alert's business
        "50s", "2m", {"namespace": "ns", "cluster": "c", "pod": "c-broker-2"}, "0"),
    "KraftyOperatorAbsent": Case(
        {'krafty_operator_leader{pod="krafty-a"}': "1 1 1 0x20",  # the leader went; a standby remains
         'krafty_operator_leader{pod="krafty-b"}': "0x23"},
        "1m", "2m", {}, "1"),
    "KraftyClusterNotReconciled": Case(
        {f'krafty_cluster_last_pass_result{{{C}, result="invalid"}}': "1x80",
         f'krafty_cluster_last_pass_result{{{D}, result="reconciled"}}': "1x80"},
        "9m", "11m", {"namespace": "ns", "cluster": "c", "result": "invalid"}, "1"),
    "KraftyClusterPassesStale": Case(
        {f"krafty_cluster_last_pass_timestamp_seconds{{{C}}}": "0x50",  # passes stopped at time 0
         f"krafty_cluster_last_pass_timestamp_seconds{{{D}}}": "0+10x50"},  # one every 10 s
        "5m", "7m", {"namespace": "ns", "cluster": "c"}, "420"),
    "KraftyClusterPaused": Case(
        {f'krafty_cluster_last_pass_result{{{C}, result="paused"}}': "1x26",
         f'krafty_cluster_last_pass_result{{{D}, result="reconciled"}}': "1x26"},
        "23h", "25h", {"namespace": "ns", "cluster": "c"}, "1", interval="1h"),
    "KafkaUnreachableFromOperator": Case(
        {f"krafty_cluster_kafka_reachable{{{C}}}": "0x40", f"krafty_cluster_kafka_reachable{{{D}}}": "1x40"},
        "4m", "6m", {"namespace": "ns", "cluster": "c"}, "0"),
    "KafkaConsumerLagNearRetention": Case(
        {f'krafty_consumergroup_retention_headroom_ratio{{{C}, group="g", topic="t"}}': "0.05x40",
         f'krafty_consumergroup_lag_sum{{{C}, group="g", topic="t"}}': "500x40",
         f'krafty_consumergroup_retention_headroom_ratio{{{C}, group="caught-up", topic="t"}}': "0.05x40",
         f'krafty_consumergroup_lag_sum{{{C}, group="caught-up", topic="t"}}': "0x40"},  # nothing left to lose
        "4m", "6m", {"namespace": "ns", "cluster": "c", "group": "g", "topic": "t"}, "0.05"),
    "KafkaConsumerLagUnknown": Case(
        {f'krafty_consumergroup_lag_unknown_partitions{{{C}, group="a", topic="t"}}': "0 1x18",
         f'krafty_consumergroup_lag_unknown_partitions{{{C}, group="b", topic="t"}}': "0 1 1 1 0x15"},  # a blip
        "50s", "2m", {"namespace": "ns", "cluster": "c", "group": "a", "topic": "t"}, "1"),
    "KafkaConsumerDataLossForecast": Case(
        # group a is at risk on topic t from the second minute; group b is safe
        {f'krafty_consumergroup_retention_risk{{{C}, group="a", topic="t", risk="Safe"}}': "1x5 _x15",
         f'krafty_consumergroup_retention_risk{{{C}, group="a", topic="t", risk="AtRisk"}}': "_x5 1x15",
         f'krafty_consumergroup_retention_risk{{{C}, group="b", topic="t", risk="Safe"}}': "1x20"},
        "100s", "3m", {"namespace": "ns", "cluster": "c", "group": "a", "topic": "t", "risk": "AtRisk"}, "1"),
    "KafkaBrokerDiskFilling": Case(
        {f'krafty_broker_log_dir_total_bytes{{{C}, broker="1", log_dir="/var/lib/kafka/data"}}': "1024x20",
         f'krafty_broker_log_dir_usable_bytes{{{C}, broker="1", log_dir="/var/lib/kafka/data"}}': "64x20",
         f'krafty_broker_log_dir_total_bytes{{{C}, broker="0", log_dir="/var/lib/kafka/data"}}': "1024x20",
         f'krafty_broker_log_dir_usable_bytes{{{C}, broker="0", log_dir="/var/lib/kafka/data"}}': "512x20"},
        "50s", "2m", {"namespace": "ns", "cluster": "c", "broker": "1", "log_dir": "/var/lib/kafka/data"}, "93.75"),
    "KafkaCanaryWritesFailing": Case(
        {f"krafty_canary_failed_writes_total{{{C}}}": "0+1x60",  # a failed write every 10 s
         f"krafty_canary_failed_writes_total{{{D}}}": "0+0x60"},
        "30s", "3m", {"namespace": "ns", "cluster": "c"}),
    "KraftyReconcileErrors": Case(
        {'krafty_reconcile_errors_total{kind="cluster"}': "0+1x60",  # a failure every 10 s
         'krafty_reconcile_errors_total{kind="topics"}': "0+0x60"},
        "20s", "3m", {"kind": "cluster"}),
}


def shipped_rules() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}


def _render(text: str, labels: dict[str, str], value: str) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        return value if name == "$value" else labels[name.removeprefix("$labels.")]
    return re.sub(r"\{\{ (\S+) \}\}", one, text)


def promtool_test(alert: str, case: Case, rule: dict[str, Any]) -> dict[str, Any]:
    labels = {**case.labels, **rule["labels"]}
    annotations = {key: _render(text, labels, case.value) for key, text in rule["annotations"].items()}
    return {
        "interval": case.interval,
        "input_series": [{"series": series, "values": values} for series, values in case.series.items()],
        "alert_rule_test": [
            {"eval_time": case.quiet_at, "alertname": alert, "exp_alerts": []},
            {"eval_time": case.fires_at, "alertname": alert,
             "exp_alerts": [{"exp_labels": labels, "exp_annotations": annotations}]},
        ],
    }


def test_every_shipped_alert_has_a_case():
    assert sorted(shipped_rules()) == sorted(CASES)


@pytest.mark.parametrize("alert", sorted(CASES))
def test_the_alert_waits_out_its_window_then_fires_for_the_cluster_in_trouble_only(alert: str, tmp_path: Path):
    # Given the shipped rules and series where one cluster (or group, node, kind) is in trouble
    rule = shipped_rules()[alert]
    tests = tmp_path / "tests.yaml"
    tests.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": CASES[alert].interval,
                                 "tests": [promtool_test(alert, CASES[alert], rule)]}))
    # Then promtool finds it quiet at first and firing, with these labels and words, later
    proc = subprocess.run(["promtool", "test", "rules", str(tests)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout

