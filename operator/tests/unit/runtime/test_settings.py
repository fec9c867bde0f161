"""The operator's settings: every KRAFTY_* variable read in one place, and a value that cannot be used stopping
the operator at start with the variable's name."""

from __future__ import annotations

import pytest

from krafty.model.context import OperatorPeer
from krafty.runtime.settings import OperatorSettings


def test_nothing_set_gives_the_defaults_of_one_process_run_by_hand():
    # Given no variable, When the settings are read, Then there is no election, no peer and every namespace
    settings = OperatorSettings.from_environment({})
    assert settings.watch_namespaces == ()
    assert settings.lease is None
    assert settings.operator is None
    assert settings.cluster_domain == "cluster.local"
    assert settings.broker_images == {"4.2.2": "krafty/kafka:4.2.2", "4.3.1": "krafty/kafka:4.3.1"}
    assert settings.lag_groups.limit == 200


def test_the_charts_variables_are_read_into_one_frozen_value():
    settings = OperatorSettings.from_environment({
        "KRAFTY_WATCH_NAMESPACES": "a,b", "KRAFTY_OPERATOR_NAMESPACE": "ops",
        "KRAFTY_OPERATOR_POD_SELECTOR": "app=krafty", "KRAFTY_LEADER_LEASE": "krafty-leader",
        "KRAFTY_POD_NAME": "krafty-0", "KRAFTY_LEASE_DURATION_SECONDS": "30",
        "KRAFTY_LAG_INCLUDE_GROUPS": '["spark-.*"]', "KRAFTY_LAG_MAX_GROUPS": "50",
        "KRAFTY_BROKER_REPOSITORY": "registry.local/kafka", "KRAFTY_BROKER_IMAGES": '{"4.3.1": "mine:1"}',
        "KRAFTY_RACK_BINDING": "krafty-rack",
        "KRAFTY_MONITORING_PEERS": '[{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "prom"}}}]'})
    assert settings.watch_namespaces == ("a", "b")
    assert settings.operator == OperatorPeer("ops", {"app": "krafty"})
    assert settings.lease is not None
    assert settings.lease.namespace == "ops"
    assert settings.lease.identity.startswith("krafty-0_")
    assert settings.lease.duration_seconds == 30
    assert settings.lease.renew_deadline == 20
    assert settings.lag_groups.include == ("spark-.*",)
    assert settings.lag_groups.limit == 50
    assert settings.broker_images == {"4.2.2": "registry.local/kafka:4.2.2", "4.3.1": "mine:1"}
    assert settings.rack_binding == "krafty-rack"
    assert [p.as_kubernetes() for p in settings.monitoring_peers] == [
        {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "prom"}}}]
    with pytest.raises(AttributeError):
        settings.rack_binding = "other"  # type: ignore[misc]


@pytest.mark.parametrize(("environ", "message"), [
    ({"KRAFTY_LAG_MAX_GROUPS": "eighty"}, "KRAFTY_LAG_MAX_GROUPS is not a whole number"),
    ({"KRAFTY_MONITORING_PEERS": '[{"podSelectr": {}}]'}, "KRAFTY_MONITORING_PEERS is not a JSON list of"),
    ({"KRAFTY_MONITORING_PEERS": "prometheus"}, "KRAFTY_MONITORING_PEERS is not a JSON list of"),
    ({"KRAFTY_LEASE_DURATION_SECONDS": "15s", "KRAFTY_LEADER_LEASE": "l", "KRAFTY_OPERATOR_NAMESPACE": "o",
      "KRAFTY_POD_NAME": "p"}, "KRAFTY_LEASE_DURATION_SECONDS is not a whole number"),
    ({"KRAFTY_LAG_EXCLUDE_GROUPS": '["("]'}, "is not a regular expression"),
    ({"KRAFTY_LAG_INCLUDE_GROUPS": "spark-.*"}, "KRAFTY_LAG_INCLUDE_GROUPS is not a JSON list"),
    ({"KRAFTY_BROKER_IMAGES": '{"3.9.0": "old"}'}, "names Kafka 3.9.0, which this operator does not run"),
    ({"KRAFTY_BROKER_IMAGES": "mine:1"}, "KRAFTY_BROKER_IMAGES is not a JSON object"),
    ({"KRAFTY_KAFKA_CONTROLLERS": "127.0.0.1:9093"}, "KRAFTY_KAFKA_CONTROLLERS needs KRAFTY_KAFKA_BOOTSTRAP"),
])
def test_a_value_that_cannot_be_used_stops_the_operator_naming_it(environ, message):
    with pytest.raises(SystemExit, match=message):
        OperatorSettings.from_environment(environ)
