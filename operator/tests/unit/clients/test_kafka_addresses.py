"""Where the passes reach each cluster's brokers: as its cluster pass last did, or from Kubernetes; outside
Kubernetes, at the addresses KRAFTY_KAFKA_BOOTSTRAP gives."""

from __future__ import annotations

import pytest

from krafty.clients.connection import Connection, TlsIdentity
from krafty.clients.errors import KafkaUnavailable
from krafty.reconcile.connection import Reached, fixed
from krafty.runtime.settings import OperatorSettings


def test_one_address_serves_every_cluster():
    locate = fixed("127.0.0.1:9092")
    assert locate("a", "orders").servers == locate("b", "payments").servers == "127.0.0.1:9092"


def test_each_cluster_has_its_own_address_and_one_not_named_is_unavailable_with_the_names_given():
    locate = fixed({"a/orders": "127.0.0.1:9092", "b/orders": "127.0.0.1:9192,127.0.0.1:9193"})
    assert locate("a", "orders").servers == "127.0.0.1:9092"
    assert locate("b", "orders").servers == "127.0.0.1:9192,127.0.0.1:9193"
    with pytest.raises(KafkaUnavailable, match=r"no address is given for a/payments .*names a/orders, b/orders"):
        locate("a", "payments")


def _bootstrap(value: str | None) -> object:
    return OperatorSettings.from_environment({} if value is None else {"KRAFTY_KAFKA_BOOTSTRAP": value}).kafka_bootstrap


def test_the_variable_is_read_as_one_address_or_as_a_json_object():
    assert _bootstrap(None) is None
    assert _bootstrap("127.0.0.1:9092,127.0.0.1:9093") == "127.0.0.1:9092,127.0.0.1:9093"
    assert _bootstrap(' {"a/orders": "127.0.0.1:9092"}') == {"a/orders": "127.0.0.1:9092"}


@pytest.mark.parametrize(("value", "message"), [
    ('{"a/orders": "127.0.0.1:9092",}', "is not a JSON object"),
    ('{"orders": "127.0.0.1:9092"}', 'maps each "namespace/cluster"'),
    ('{"a/orders": ""}', 'maps each "namespace/cluster"'),
    ('{"a/orders": ["127.0.0.1:9092"]}', 'maps each "namespace/cluster"'),
])
def test_a_malformed_table_stops_the_operator_with_what_is_wrong(value, message):
    with pytest.raises(SystemExit, match=message):
        _bootstrap(value)


def test_a_cluster_its_cluster_pass_reached_is_located_so_without_reading_and_forgotten_once_gone():
    asked = []

    def from_kubernetes(namespace: str, cluster: str) -> Connection:
        asked.append(f"{namespace}/{cluster}")
        return Connection("read:9093")

    reached = Reached(from_kubernetes)
    assert reached.locate("a", "orders").servers == "read:9093"
    used = Connection("orders-kafka-operator.a:9093", TlsIdentity("ca", "renewed cert", "key"))
    reached.reached("a", "orders", used)
    assert reached.locate("a", "orders") is used
    assert reached.locate("b", "orders").servers == "read:9093"  # (another namespace's namesake)
    reached.reached("a", "orders", None)
    assert reached.locate("a", "orders").servers == "read:9093"
    assert asked == ["a/orders", "b/orders", "a/orders"]
