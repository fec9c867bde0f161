"""Disks on real pods: a broker volume filled with a real topic raises the disk-filling alert in a real Prometheus,
and raising storage.size grows every broker's volume online (a real CSI driver and the kubelet) under an idempotent
acks=all producer and a consumer group: nothing lost, no restart, and the alert resolves."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from test_10_operator_core import make_topic, pod_uids
from test_40_metrics import Prometheus, firing, start_prometheus

from krafty.naming import DATA_DIR
from krafty_testkit.k8s_kafka import NAMESPACE, ClientPod, KafkaClusterHandle, assert_written, cluster_spec
from krafty_testkit.kube import KubeCluster, KubeError
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import WaitTimeout, wait_for

EXPANDABLE = "expandable"  # the local cluster's StorageClass with allowVolumeExpansion (e2e/localkube)
GI = 2**30


@pytest.fixture(scope="module")
def growing(operator: KubeCluster) -> Iterator[KafkaClusterHandle]:
    """3 combined nodes whose 1Gi volumes are on a class that can grow; gone after the module."""
    found = operator.kubectl_json("get", "storageclasses")["items"]
    assert any(c["metadata"]["name"] == EXPANDABLE and c.get("allowVolumeExpansion") for c in found), (
        f"the cluster has no StorageClass {EXPANDABLE} with allowVolumeExpansion (localkube makes one: csi-loop)")
    handle = KafkaClusterHandle(operator, "growing")
    spec = cluster_spec("combined", listeners=[{"name": "plain", "port": 9092}])
    spec["brokers"]["storage"] = {"size": "1Gi", "storageClassName": EXPANDABLE, "deleteClaim": True}
    handle.apply(spec)
    handle.wait_ready(900)
    yield handle
    handle.delete()


@pytest.fixture(scope="module")
def disks_seen(operator: KubeCluster, growing: KafkaClusterHandle) -> Prometheus:
    """A real Prometheus scraping the operator, once it has the three brokers' volumes."""
    prom = start_prometheus(operator)
    wait_for(lambda: prom.query('krafty_broker_log_dir_total_bytes{cluster="growing"}'), lambda r: len(r) == 3, 180,
             "Prometheus seeing the volumes of the three brokers")
    return prom


def used_percent(prometheus: Prometheus) -> dict[str, float]:
    """Each broker's volume, % used, as Prometheus has it from the operator's disk pass."""
    found = prometheus.query('100 * (1 - krafty_broker_log_dir_usable_bytes{cluster="growing"} '
                             '/ krafty_broker_log_dir_total_bytes{cluster="growing"})')
    return {r["metric"]["broker"]: float(r["value"][1]) for r in found}


def df(handle: KafkaClusterHandle) -> dict[str, tuple[int, int]]:
    """(size, bytes available) of the file system under each broker's data directory, as `df` in the pod says."""
    out = {}
    for pod in handle.pods("broker"):
        name = pod["metadata"]["name"]
        shown = handle.kube.kubectl("exec", "-n", handle.namespace, name, "-c", "kafka", "--", "df", "-B1",
                                    "--output=size,avail", DATA_DIR)
        size, avail = shown.splitlines()[-1].split()
        out[name] = (int(size), int(avail))
    return out


def fullest(handle: KafkaClusterHandle) -> tuple[float, int]:
    """The % used of the fullest broker volume, and its size."""
    return max((100 * (1 - avail / size), size) for size, avail in df(handle).values())


def fill_to(handle: KafkaClusterHandle, client: ClientPod, percent: float) -> float:
    """Writes a real topic (every broker holds a replica) until the fullest volume is within two points under
    `percent`, in steps of four fifths of what is missing: Kafka's index files and the file system take their
    share too (about five points more than the records here), so it is measured again after each step; returns
    the MiB written."""
    make_topic(handle.kube, "ballast", handle.name, partitions=3, replicas=3)
    written = 0.0
    for _ in range(5):
        used, size = fullest(handle)
        if used >= percent - 2:
            break
        step = 0.8 * (percent - 1 - used) / 100 * size / 2**20
        report = client.cli("fill", handle.bootstrap, "ballast", "--mib", f"{step:.0f}", timeout=600)
        assert report["failed"] == 0, report
        written += step
    return written


def test_a_filling_disk_fires_its_alert_and_growing_the_volumes_under_load_loses_nothing_and_restarts_nothing(
        growing: KafkaClusterHandle, disks_seen: Prometheus, client: ClientPod):
    # Given brokers whose 1Gi volumes are filled past 85% by a real topic
    before_df = df(growing)
    assert all(size < GI for size, _ in before_df.values()), before_df
    written = fill_to(growing, client, 90)
    filled, full = time.monotonic(), fullest(growing)[0]
    assert full > 85
    # Then the disk-filling alert fires in Prometheus for each broker of this cluster
    try:
        alerts = wait_for(lambda: [a for a in firing(disks_seen, "KafkaBrokerDiskFilling")
                                   if a["metric"]["cluster"] == "growing"], lambda found: len(found) == 3, 300,
                          "KafkaBrokerDiskFilling firing for the three brokers")
    except WaitTimeout as timeout:  # (once in CI, not since: say what Prometheus had from the operator's disk pass)
        raise AssertionError(f"{timeout}; % used as Prometheus has it: {used_percent(disks_seen)}; df in the pods: "
                             f"{df(growing)}") from None
    alert_after = time.monotonic() - filled
    assert {a["metric"]["severity"] for a in alerts} == {"warning"}
    seen_by_prometheus = max(used_percent(disks_seen).values())
    # When storage.size grows to 2Gi under an idempotent acks=all producer and a consumer group
    topic = "grow-under-load"
    make_topic(growing.kube, topic, growing.name, partitions=6, replicas=3, config={"min.insync.replicas": 2})
    pods = pod_uids(growing)
    with (client.following_consumer(growing.bootstrap, topic, f"{topic}-reader") as followed,
          client.steady_producer(growing.bootstrap, topic, rate=100) as produced):
        time.sleep(10)
        patched = time.monotonic()
        growing.patch_spec({"brokers": {"storage": {"size": "2Gi"}}})
        volumes = wait_for(lambda: growing.status().get("volumes") or [],
                           lambda v: len(v) == 3 and all(e["capacity"] == "2Gi" and e["state"] == "AtSize"
                                                         for e in v), 300, "every volume at 2Gi", interval=2)
        grown_after = time.monotonic() - patched
        growing.wait_ready(300)
        time.sleep(5)
    verified = client.verify(growing.bootstrap, topic)
    # Then every claim and every file system has the new size, no pod restarted, and nothing was lost
    assert {v["requested"] for v in volumes} == {"2Gi"}
    claims = growing.kube.kubectl_json("get", "pvc", "-n", NAMESPACE, "-l", "kafka.krafty.io/cluster=growing")
    assert {c["status"]["capacity"]["storage"] for c in claims["items"]} == {"2Gi"}
    after_df = df(growing)
    assert all(size > 1.8 * GI for size, _ in after_df.values()), after_df
    assert pod_uids(growing) == pods
    assert all(s["restartCount"] == 0 for p in growing.pods("broker") for s in p["status"]["containerStatuses"])
    assert_written(produced)
    assert (verified["lost"], verified["duplicated"], verified["out_of_order_keys"]) == (0, 0, 0)
    assert followed["records"] == produced["acked"]
    assert growing.events("VolumeExpanding")
    # And with room again, the alert resolves
    wait_for(lambda: [a for a in firing(disks_seen, "KafkaBrokerDiskFilling") if a["metric"]["cluster"] == "growing"],
             lambda found: not found, 300, "KafkaBrokerDiskFilling resolved")
    report_table("Broker volumes filled, then grown 1Gi -> 2Gi under load (CSI driver: e2e/localkube/csi-loop)",
                 ["step", "figure"],
                 [["ballast written (MiB)", f"{written:.0f}"],
                  ["fullest volume (% used: df in the pod / Prometheus)", f"{full:.1f} / {seen_by_prometheus:.1f}"],
                  ["alert firing after the ballast (s)", f"{alert_after:.0f}"],
                  ["patch to every volume at 2Gi (s)", f"{grown_after:.0f}"],
                  ["df size before / after (MiB)", f"{min(s for s, _ in before_df.values()) / 2**20:.0f} / "
                                                   f"{min(s for s, _ in after_df.values()) / 2**20:.0f}"],
                  ["records acked / lost / duplicated", f"{produced['acked']} / {verified['lost']} / "
                                                         f"{verified['duplicated']}"],
                  ["pods restarted", "0"]])


def test_a_smaller_size_is_refused_by_the_api_server_naming_the_field(growing: KafkaClusterHandle):
    with pytest.raises(KubeError) as refused:
        growing.patch_spec({"brokers": {"storage": {"size": "512Mi"}}})
    assert "spec.brokers.storage" in str(refused.value)
    assert "size cannot shrink" in str(refused.value)
