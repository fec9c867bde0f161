"""What the plan endpoint takes as the proposed spec: a KafkaCluster, one without its kind, or a bare spec."""

from __future__ import annotations

import pytest

from krafty.runtime.plan_api import PATH, _spec_of

SPEC = {"brokers": {"replicas": 3}}


@pytest.mark.parametrize("document", [
    {"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": "prod"}, "spec": SPEC},
    {"spec": SPEC},
    SPEC,
])
def test_the_spec_is_found_in_each_form(document):
    assert _spec_of(document) == SPEC


@pytest.mark.parametrize(("document", "error"), [
    ({"kind": "Topic", "spec": SPEC}, "a Topic is not a KafkaCluster"),
    ({"kind": "KafkaCluster"}, "the KafkaCluster has no spec"),
    ({"spec": "brokers"}, "the KafkaCluster has no spec"),
    (["brokers"], "the body is not a JSON object"),
])
def test_anything_else_is_refused_with_why(document, error):
    with pytest.raises(ValueError, match=error):
        _spec_of(document)


def test_the_path_names_a_namespace_and_a_cluster():
    found = PATH.match("/namespaces/kafka-e2e/kafkaclusters/prod/plan")
    assert found is not None
    assert found.groups() == ("kafka-e2e", "prod")
    assert PATH.match("/namespaces/kafka-e2e/kafkaclusters/prod") is None
    assert PATH.match("/namespaces/Kafka/kafkaclusters/prod/plan") is None
