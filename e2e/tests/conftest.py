"""The two Kafka clusters most end-to-end tests share, each spread over the three workers' zones: a dedicated
3 controllers + 3 brokers "prod" (the default spread; a plaintext listener first, and two that authenticate
clients: test_17_authentication.py) and a combined 3-node "small" rack-aware by zone, created with a plaintext
listener only and moved to TLS on the way (test_15_tls.py adds a TLS listener, test_55_tls_switch.py moves
clients and drops plaintext); both speak mutual TLS between their nodes (images, operator and client pod:
e2e/conftest.py), and the Spark image and RBAC the Spark tests share."""

from __future__ import annotations

import pytest
from reaching import MTLS_LISTENER, PLAIN_LISTENER, SCRAM_LISTENER, TLS_LISTENER, published

from krafty_testkit.k8s_kafka import NAMESPACE, SPARK_IMAGE, KafkaClusterHandle, cluster_spec, repo_path
from krafty_testkit.kube import KubeCluster
from krafty_testkit.waiting import wait_for


@pytest.fixture(scope="session")
def prod(operator: KubeCluster, cluster_timings: list[tuple[str, float]]) -> KafkaClusterHandle:
    handle = KafkaClusterHandle(operator, "prod")
    # Defaults of RF 2 leave room to show a scale-down the operator must refuse (topics with RF 3).
    handle.apply(cluster_spec("dedicated", topicDefaults={"replicationFactor": 2, "minInsyncReplicas": 1},
                              listeners=[PLAIN_LISTENER, MTLS_LISTENER, SCRAM_LISTENER]))
    cluster_timings.append(("KafkaCluster prod (3 controllers + 3 brokers): apply to Ready", handle.wait_ready(900)))
    return handle


@pytest.fixture(scope="session")
def small(operator: KubeCluster, cluster_timings: list[tuple[str, float]]) -> KafkaClusterHandle:
    handle = KafkaClusterHandle(operator, "small")
    # Rack-aware by zone: each broker reads its rack from its node, one broker in each zone.
    handle.apply(cluster_spec("combined", rack={"topologyKey": "topology.kubernetes.io/zone"},
                              listeners=[{"name": "plain", "port": 9092}]))
    cluster_timings.append(("KafkaCluster small (3 combined nodes): apply to Ready", handle.wait_ready(900)))
    return handle


@pytest.fixture(scope="session")
def small_tls(small: KafkaClusterHandle) -> KafkaClusterHandle:
    """small once its TLS listener is published (test_15_tls.py adds it under load; here when that did not run)."""
    if not [lst for lst in small.get()["spec"]["listeners"] if lst["name"] == "tls"]:
        small.patch_spec({"listeners": [PLAIN_LISTENER, TLS_LISTENER]})
    wait_for(lambda: published(small), lambda names: "tls" in names, 900, "the TLS listener published", interval=5)
    return small


@pytest.fixture(scope="session")
def spark_ready(operator: KubeCluster) -> KubeCluster:
    """The Spark image in the cluster, and the job's ServiceAccount, RBAC and data volume in the namespace."""
    operator.load_images([SPARK_IMAGE])
    for manifest in ("rbac.yaml", "pvc.yaml"):
        operator.kubectl("apply", "-n", NAMESPACE, "-f", str(repo_path("spark", "k8s", manifest)))
    return operator
