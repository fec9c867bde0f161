"""The two Kafka clusters most end-to-end tests share: a dedicated 3 controllers + 3 brokers
"prod" and a combined, rack-aware 3-node "small" with a TLS listener; both speak mutual TLS between their
nodes (images, operator and client pod: e2e/conftest.py)."""

from __future__ import annotations

import pytest

from krafty_testkit.k8s_kafka import KafkaClusterHandle, cluster_spec
from krafty_testkit.kube import KubeCluster


@pytest.fixture(scope="session")
def prod(operator: KubeCluster, cluster_timings: list[tuple[str, float]]) -> KafkaClusterHandle:
    handle = KafkaClusterHandle(operator, "prod")
    # Defaults of RF 2 leave room to show a scale-down the operator must refuse (topics with RF 3).
    handle.apply(cluster_spec("dedicated", topicDefaults={"replicationFactor": 2, "minInsyncReplicas": 1}))
    cluster_timings.append(("KafkaCluster prod (3 controllers + 3 brokers): apply to Ready", handle.wait_ready(900)))
    return handle


@pytest.fixture(scope="session")
def small(operator: KubeCluster, cluster_timings: list[tuple[str, float]]) -> KafkaClusterHandle:
    handle = KafkaClusterHandle(operator, "small")
    # Rack-aware by node name, a label every node has: each broker reads its rack from its node.
    # A second client listener speaks TLS (e2e/tests/test_15_tls.py).
    handle.apply(cluster_spec("combined", rack={"topologyKey": "kubernetes.io/hostname"},
                              listeners=[{"name": "plain", "port": 9092}, {"name": "tls", "port": 9094, "tls": True}]))
    cluster_timings.append(("KafkaCluster small (3 combined nodes): apply to Ready", handle.wait_ready(900)))
    return handle
