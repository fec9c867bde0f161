"""The typed models parse the same documents as the CRDs, with the same fields and defaults."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from krafty import naming
from krafty.model import KafkaClusterSpec, TopicSpec, parse_quantity
from krafty.model.plan import KafkaClusterPlanSpec
from krafty.model.user import KafkaUserSpec
from krafty.model.versions import SUPPORTED_KAFKA_VERSIONS

from ...conftest import CRDS, EXAMPLES, example

MODELS = {"KafkaCluster": KafkaClusterSpec, "Topic": TopicSpec, "KafkaUser": KafkaUserSpec,
          "KafkaClusterPlan": KafkaClusterPlanSpec}


def crd_spec_schema(kind: str) -> dict[str, Any]:
    for path in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    raise AssertionError(f"no CRD for {kind}")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as `X | None` or `tuple[X, ...]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in getattr(annotation, "__args__", ()):
        found = _model_of(argument)
        if found is not None:
            return found
    return None


def _differences(schema: dict[str, Any], model: type[BaseModel], path: str) -> list[str]:
    properties = schema.get("properties", {})
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    out = [f"{path}.{name}: in the CRD, not in {model.__name__}" for name in properties if name not in fields]
    out += [f"{path}.{name}: in {model.__name__}, not in the CRD" for name in fields if name not in properties]
    for name, prop in properties.items():
        info = fields.get(name)
        nested = prop.get("items", prop) if prop.get("type") == "array" else prop
        sub = _model_of(info.annotation) if info else None
        if info and "properties" in nested and sub is not None:
            out += _differences(nested, sub, f"{path}.{name}")
        if info and "default" in prop and info.is_required():
            out.append(f"{path}.{name}: the CRD has a default, the model requires it")
    return out


@pytest.mark.parametrize("kind", MODELS)
def test_models_have_exactly_the_crd_fields(kind: str):
    assert _differences(crd_spec_schema(kind), MODELS[kind], "spec") == []


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_parses(path):
    doc = yaml.safe_load(path.read_text())
    MODELS[doc["kind"]].model_validate(doc["spec"])


def test_crd_defaults_match_the_model():
    spec = KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}})
    schema = crd_spec_schema("KafkaCluster")["properties"]
    assert schema["version"]["default"] == spec.version
    assert schema["version"]["enum"] == list(SUPPORTED_KAFKA_VERSIONS)
    controllers = spec.controllers
    assert schema["controllers"]["default"] == {"mode": controllers.mode.value, "replicas": controllers.replicas}
    assert schema["topicDefaults"]["default"] == spec.topic_defaults.model_dump(by_alias=True)
    assert schema["listeners"]["default"] == [{"name": "plain", "port": 9092}]
    assert schema["restarts"]["properties"]["gracePeriodSeconds"]["default"] == spec.restarts.grace_period_seconds


def test_config_values_accept_integers_and_strings_only():
    spec = KafkaClusterSpec.model_validate(example("kafkacluster-dedicated.yaml")["spec"])
    assert spec.brokers.config["num.io.threads"] == "8"
    with pytest.raises(ValidationError, match="strings or integers"):
        KafkaClusterSpec.model_validate({"brokers": {"replicas": 3, "config": {"a.b": True}}})


def test_unknown_fields_are_refused():
    with pytest.raises(ValidationError, match="replica"):
        KafkaClusterSpec.model_validate({"brokers": {"replicas": 3, "replica": 3}})


@pytest.mark.parametrize(("spec", "message"), [
    ({"brokers": {"replicas": 1}, "controllers": {"mode": "combined", "replicas": 3}}, "at least controllers.replicas"),
    ({"brokers": {"replicas": 3}, "topicDefaults": {"replicationFactor": 2, "minInsyncReplicas": 3}},
     "minInsyncReplicas cannot exceed"),
    ({"brokers": {"replicas": 3}, "listeners": [{"name": "a", "port": 9093}]}, "reserved"),
    ({"brokers": {"replicas": 3}, "controllers": {"mode": "combined", "storage": {"size": "1Gi"}}},
     "dedicated controllers only"),
    ({"brokers": {"replicas": 3}, "controllers": {"mode": "dedicated", "replicas": 4}}, "literal_error"),
    ({"brokers": {"replicas": 3}, "listeners": [{"name": "a", "port": 9092, "authentication": "tls"}]},
     "listener a: authentication tls needs tls: true"),
    ({"brokers": {"replicas": 3}, "listeners": [{"name": "a", "port": 9092, "authentication": "scram-sha-256"}]},
     "'none', 'tls' or 'scram-sha-512'"),
])
def test_model_holds_the_crd_invariants(spec, message):
    with pytest.raises(ValidationError, match=message):
        KafkaClusterSpec.model_validate(spec)


@pytest.mark.parametrize(("text", "value"), [("512Mi", 512 * 2**20), ("1Gi", 2**30), ("500m", 0.5), ("2", 2),
                                             ("1e3", 1000), ("1.5G", 1.5e9), (3, 3), ("1Ei", 2**60),
                                             ("7Ei", 7 * 2**60), ("1E", 10**18), ("-2Ki", -2048)])
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("12 GB", "'12 GB' is not a Kubernetes quantity"),
    # past what Kubernetes holds (an int64): refused as InvalidSpec naming the field, never an overflow
    ("8Ei", "'8Ei' is out of the range Kubernetes holds"), ("1e999999999", "'1e999999999' is out of the range"),
    ("9223372036854775808", "out of the range Kubernetes holds"),
    ("1" * 10_000, r"'1111111111.*\.\.\. \(10,002 characters\) is not a Kubernetes quantity"),
])
def test_bad_quantity_is_named(text, message):
    with pytest.raises(ValueError, match=message):
        parse_quantity(text)


def test_a_storage_size_past_kubernetes_is_invalid_spec_naming_the_field():
    with pytest.raises(ValidationError, match=r"brokers\.storage\.size\n.*'1e40' is out of the range"):
        KafkaClusterSpec.model_validate({"brokers": {"replicas": 3, "storage": {"size": "1e40"}}})


def _undescribed(schema: dict[str, Any], path: str) -> list[str]:
    out = []
    for name, field in (schema.get("properties") or {}).items():
        out += [f"{path}.{name}"] * ("description" not in field)
        out += _undescribed(field.get("items") or field, f"{path}.{name}")
    return out


@pytest.mark.parametrize("kind", ["KafkaUser"])
def test_every_field_explains_itself(kind: str):
    # (kubectl explain prints these descriptions)
    assert _undescribed(crd_spec_schema(kind), "spec") == []


@pytest.mark.parametrize(("listener", "message"), [
    ({"name": "replication", "port": 9094}, "replication and controller are the nodes' own listeners"),
    ({"name": "controller", "port": 9094, "type": "nodeport"}, "replication and controller are the nodes' own"),
    ({"name": "kafka", "port": 9094, "type": "loadbalancer"},
     "a nodeport or loadbalancer listener named kafka would make <cluster>-kafka-bootstrap"),
])
def test_a_listener_named_like_the_clusters_own_is_refused(listener, message):
    with pytest.raises(ValidationError, match=message):
        KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}, "listeners": [listener]})
    assert KafkaClusterSpec.model_validate({"brokers": {"replicas": 3}, "listeners": [
        {"name": "kafka", "port": 9094}]}).listeners[0].name == "kafka"  # (internal: it makes no Service)


def test_the_crd_reserves_the_same_listener_names():
    crd = yaml.safe_load((CRDS / "kafkaclusters.kafka.krafty.io.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = [r["rule"] for r in spec["properties"]["listeners"]["items"]["x-kubernetes-validations"]]
    assert f"!(self.name in {list(naming.RESERVED_LISTENER_NAMES)})" in rules
    assert f"self.name != '{naming.NOT_EXTERNAL_LISTENER_NAME}' || !has(self.type) || self.type == 'internal'" in rules
