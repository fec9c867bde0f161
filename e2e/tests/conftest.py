"""Session fixtures for krafty's end-to-end tests: images in the cluster, the operator
installed with Helm, an in-cluster client pod, and the two Kafka clusters most tests share
(a dedicated 3 controllers + 3 brokers "prod" and a combined 3-node "small")."""

from __future__ import annotations

import pytest
from kafka_e2e import (
    IMAGES,
    NAMESPACE,
    ClientPod,
    KafkaClusterHandle,
    cluster_spec,
    install_operator,
)

from krafty_testkit.kube import KubeCluster


@pytest.fixture(scope="session")
def images(kube_cluster: KubeCluster, cluster_timings: list[tuple[str, float]]) -> KubeCluster:
    import time

    began = time.monotonic()
    kube_cluster.load_images(IMAGES)
    cluster_timings.append(("build and load the operator, broker and client images", time.monotonic() - began))
    return kube_cluster


@pytest.fixture(scope="session")
def operator(images: KubeCluster) -> KubeCluster:
    """The operator installed with Helm, watching a namespace emptied of earlier runs' clusters."""
    install_operator(images)
    # (the operator runs while the namespace goes: it releases the Topics' finalizers)
    images.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", timeout=600)
    namespace = images.kubectl("create", "namespace", NAMESPACE, "--dry-run=client", "-o", "yaml")
    images.kubectl("apply", "-f", "-", stdin=namespace)
    return images


@pytest.fixture(scope="session")
def client(operator: KubeCluster) -> ClientPod:
    pod = ClientPod(operator)
    pod.create()
    return pod


@pytest.fixture(scope="session")
def prod(operator: KubeCluster, cluster_timings: list[tuple[str, float]]) -> KafkaClusterHandle:
    handle = KafkaClusterHandle(operator, "prod")
    handle.apply(cluster_spec("dedicated"))
    cluster_timings.append(("KafkaCluster prod (3 controllers + 3 brokers): apply to Ready", handle.wait_ready(900)))
    return handle


@pytest.fixture(scope="session")
def small(operator: KubeCluster, cluster_timings: list[tuple[str, float]]) -> KafkaClusterHandle:
    handle = KafkaClusterHandle(operator, "small")
    handle.apply(cluster_spec("combined"))
    cluster_timings.append(("KafkaCluster small (3 combined nodes): apply to Ready", handle.wait_ready(900)))
    return handle
