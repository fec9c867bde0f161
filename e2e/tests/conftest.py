"""Session fixtures for krafty's end-to-end tests: images in the cluster, the operator
installed with Helm, an in-cluster client pod, and the two Kafka clusters most tests share
(a dedicated 3 controllers + 3 brokers "prod" and a combined 3-node "small")."""

from __future__ import annotations

import pytest

from krafty_testkit.k8s_kafka import (
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
    """The operator installed with Helm, watching a namespace emptied of earlier runs' clusters.

    The namespace itself stays: the operator's Role lives in it, and without it nobody could
    release the Topics' finalizers.
    """
    namespace = images.kubectl("create", "namespace", NAMESPACE, "--dry-run=client", "-o", "yaml")
    images.kubectl("apply", "-f", "-", stdin=namespace)
    install_operator(images)
    images.kubectl("delete", "topics,kafkaclusters", "--all", "-n", NAMESPACE, "--wait=true", timeout=600)
    images.kubectl("delete", "pods,pvc,configmaps", "-n", NAMESPACE, "-l", "app.kubernetes.io/part-of=krafty",
                   "--wait=true", timeout=600)
    images.kubectl("delete", "pod", "kafka-client", "-n", NAMESPACE, "--ignore-not-found", "--wait=true")
    return images


@pytest.fixture(scope="session")
def client(operator: KubeCluster) -> ClientPod:
    pod = ClientPod(operator)
    pod.create()
    return pod


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
    handle.apply(cluster_spec("combined"))
    cluster_timings.append(("KafkaCluster small (3 combined nodes): apply to Ready", handle.wait_ready(900)))
    return handle
