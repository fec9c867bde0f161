"""Deleting a KafkaCluster on real pods, last in the suite (it deletes prod): the brokers stop through
controlled shutdown while the controllers still run, then the controllers; the whole cluster is gone in
well under its grace period, and a Topic deleted with it is let go at once."""

from __future__ import annotations

import time

from krafty_testkit.k8s_kafka import NAMESPACE, KafkaClusterHandle, topic_resource, wait_topic_ready
from krafty_testkit.kube import KubeCluster


def test_a_deleted_cluster_stops_brokers_then_controllers_and_is_gone_in_a_minute(prod: KafkaClusterHandle,
                                                                                   operator: KubeCluster):
    operator.apply([topic_resource("goes-with-prod", "prod", partitions=3, replicas=3)])
    wait_topic_ready(operator, "goes-with-prod")
    selector = "kafka.krafty.io/cluster=prod,kafka.krafty.io/pool"  # Kafka pods (not preflight pods)
    terminating: dict[str, float] = {}  # pod -> seconds after the delete when first seen terminating
    gone: dict[str, float] = {}
    pods = set(operator.kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "name").split())
    # When the KafkaCluster is deleted, with a Topic of it
    started = time.monotonic()
    operator.kubectl("delete", "kafkacluster", "prod", "-n", NAMESPACE, "--wait=false")
    operator.kubectl("delete", "topic", "goes-with-prod", "-n", NAMESPACE, "--wait=true", timeout=60)
    topic_gone = time.monotonic() - started
    while time.monotonic() - started < 600:
        now = time.monotonic() - started
        items = operator.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", selector)["items"]
        present = {f"pod/{p['metadata']['name']}": p for p in items}
        for name, body in present.items():
            if body["metadata"].get("deletionTimestamp"):
                terminating.setdefault(name, now)
        for name in pods - present.keys():
            gone.setdefault(name, now)
        cluster_left = operator.kubectl("get", "kafkacluster", "prod", "-n", NAMESPACE, "--ignore-not-found",
                                        "-o", "name").strip()
        if not present and not cluster_left:
            break
        time.sleep(0.5)
    total = time.monotonic() - started
    print(f"\nKafkaCluster prod (3 controllers + 3 brokers, grace period 120 s) deleted: {total:.1f} s "
          f"until every pod and the resource were gone; its Topic let go after {topic_gone:.1f} s")
    for name in sorted(pods, key=lambda p: gone.get(p, 1e9)):
        print(f"  {name:34} terminating at {terminating.get(name, float('nan')):5.1f} s, "
              f"gone at {gone.get(name, float('nan')):5.1f} s")
    # Then everything is gone in under a minute
    assert total < 60, total
    assert gone.keys() == pods
    # And no controller began to stop before the last broker was gone
    brokers = [p for p in pods if "-broker-" in p]
    controllers = [p for p in pods if "-controller-" in p]
    assert min(terminating[c] for c in controllers) >= max(gone[b] for b in brokers) - 1
    reasons = {e["reason"] for e in prod.events()}
    assert {"BrokersStopping", "ControllersStopping"} <= reasons
    assert topic_gone < 30
