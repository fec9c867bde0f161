"""Kafka version changes on real pods: a cluster made with the older release upgraded under load through the safe
roll (finished by the standby operator after the leading one is SIGKILLed), metadata.version raised after the
healthy time, a downgrade before that (full set), and one after it refused without a restart; then each feature
level the cluster was made without raised one at a time under load, as Kafka's own tool shows it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_10_operator_core import kill_the_leading_operator, make_topic, pod_uids, restart_events, wait_rolled

from krafty_testkit.k8s_kafka import (
    KAFKA_VERSIONS,
    ClientPod,
    KafkaClusterHandle,
    assert_written,
    cluster_spec,
    operator_leader,
)
from krafty_testkit.kube import KubeCluster
from krafty_testkit.kubectl_krafty import kubectl_krafty, plan, planned_restarts
from krafty_testkit.plugin import report_table
from krafty_testkit.waiting import wait_for

OLDER, NEWER = KAFKA_VERSIONS[0], KAFKA_VERSIONS[-1]
LEVELS = {"4.2.2": ("4.2-IV1", 29), "4.3.1": ("4.3-IV0", 30)}
# The features the cluster is made without (spec.features at its creation), raised one at a time after the upgrade
OFF = ("eligible.leader.replicas.version", "group.version", "share.version", "streams.version")


@pytest.fixture(scope="module")
def legacy(operator: KubeCluster) -> Iterator[KafkaClusterHandle]:
    """3 controllers + 3 brokers made with the older release; gone after the module."""
    handle = KafkaClusterHandle(operator, "legacy")
    handle.apply(cluster_spec("dedicated", version=OLDER, upgrade={"finalizeAfterSeconds": 30},
                              features=dict.fromkeys(OFF, 0)))
    handle.wait_ready(900)
    yield handle
    handle.delete()


def image_versions(handle: KafkaClusterHandle) -> dict[str, str]:
    """The Kafka release inside each running pod, read from the pod itself (the image's /opt/kafka/VERSION)."""
    return {p["metadata"]["name"]: handle.kube.kubectl("exec", "-n", handle.namespace, p["metadata"]["name"], "-c",
                                                       "kafka", "--", "cat", "/opt/kafka/VERSION").strip()
            for pool in ("controller", "broker") for p in handle.pods(pool)}


def roll_to(handle: KafkaClusterHandle, client: ClientPod, version: str,
            during: Callable[[KafkaClusterHandle, float], dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    """Changes spec.version under an idempotent acks=all producer and a consumer group (on a topic of their own:
    RF 3, min ISR 2); returns what they saw, the restarts (pod, reason) in order, what `kubectl krafty plan` said
    before, and `kubectl krafty status` during the roll. `during`: done once the change is made, given when the
    roll began (kill_leader_after_first_restart: the standby finishes the roll); what it returns is returned too."""
    topic = f"upgrade-to-{version.replace('.', '-')}-{int(time.time())}"
    make_topic(handle.kube, topic, handle.name, partitions=6, replicas=3, config={"min.insync.replicas": 2})
    before, started = pod_uids(handle), time.time()
    active = handle.status()["quorum"]["leaderId"]
    preview = plan(handle, {"version": version, **spec})
    with (client.following_consumer(handle.bootstrap, topic, f"{topic}-reader") as followed,
          client.steady_producer(handle.bootstrap, topic, rate=100) as produced):
        time.sleep(10)
        handle.patch_spec({"version": version, **spec})
        takeover = during(handle, started) if during is not None else {}
        wait_for(lambda: restart_events(handle, started), bool, 300, "the first restart")
        screen = kubectl_krafty(handle.kube, "status", handle.name, "-n", handle.namespace)
        wait_rolled(handle, before, set(before))
        time.sleep(5)
    verified = client.verify(handle.bootstrap, topic)
    restarts = restart_events(handle, started)
    return {"produced": produced, "followed": followed, "verified": verified, "restarts": restarts,
            "order": [pod for pod, _ in restarts], "active": f"{handle.name}-controller-{active - 1000}",
            "plan": preview, "status screen": screen, **takeover}


def kill_leader_after_first_restart(handle: KafkaClusterHandle, started: float) -> dict[str, Any]:
    wait_for(lambda: restart_events(handle, started), bool, 300, "the first restart")
    leader, killed = kill_the_leading_operator(handle.kube)
    successor = wait_for(lambda: operator_leader(handle.kube), lambda who: who not in (None, leader), 120,
                         "a standby leading")
    took_over = time.time() - killed
    wait_for(lambda: restart_events(handle, killed + 1.5), bool, 600, "the next restart, by the new leader")
    return {"killed": leader, "successor": successor, "took_over": took_over, "next_restart": time.time() - killed}


def assert_safe(seen: dict[str, Any], handle: KafkaClusterHandle) -> None:
    produced, verified = seen["produced"], seen["verified"]
    assert_written(produced)
    assert (verified["lost"], verified["duplicated"], verified["out_of_order_keys"]) == (0, 0, 0)
    assert seen["followed"]["records"] == produced["acked"]
    # controllers first, the active one last of them, then brokers; each node once
    order = seen["order"]
    assert sorted(order) == sorted(pod_uids(handle)), order
    assert order[:3] == [p for p in order if "controller" in p], order
    assert order[2] == seen["active"], order
    # as `kubectl krafty plan` said before the change, and as its status showed during the roll
    assert seen["restarts"] == planned_restarts(seen["plan"])
    assert re.search(r"^Roll: +\d/6 nodes on the current configuration", seen["status screen"], re.M), \
        seen["status screen"]
    print(f"\nkubectl krafty status during the roll:\n{seen['status screen']}")


@pytest.mark.full  # one more roll of six nodes
def test_a_downgrade_before_metadata_version_is_raised_rolls_back_under_load(legacy: KafkaClusterHandle,
                                                                             client: ClientPod):
    # Given the cluster upgraded with metadata.version held at the older release's (the user's choice)
    up = roll_to(legacy, client, NEWER, upgrade={"metadataVersion": OLDER.rsplit(".", 1)[0]})
    assert_safe(up, legacy)
    assert legacy.status()["versions"]["phase"] == "Held"
    # When spec.version goes back to the older release
    down = roll_to(legacy, client, OLDER)
    # Then every node runs it again, nothing was lost, and metadata.version never moved
    assert_safe(down, legacy)
    assert set(image_versions(legacy).values()) == {OLDER}
    versions = legacy.status()["versions"]
    assert (versions["metadataVersion"], versions["phase"]) == (LEVELS[OLDER][0], "Steady")
    legacy.patch_spec({"upgrade": {"metadataVersion": None}})


@pytest.mark.local_faults
def test_an_upgrade_under_load_finalizes_metadata_version_and_a_later_downgrade_is_refused(
        legacy: KafkaClusterHandle, client: ClientPod):
    # Given a cluster of the older release, under an idempotent acks=all producer and a consumer group
    assert set(image_versions(legacy).values()) == {OLDER}
    assert legacy.status()["versions"]["metadataVersion"] == LEVELS[OLDER][0]
    began = time.monotonic()
    # When spec.version moves to the newer release, and the leading operator is killed after the first restart
    seen = roll_to(legacy, client, NEWER, during=kill_leader_after_first_restart)
    rolled = time.monotonic() - began
    # Then the standby finished the roll, which kept every write and the safe order, and every node runs the
    # newer release
    assert_safe(seen, legacy)
    assert set(image_versions(legacy).values()) == {NEWER}
    assert legacy.status()["kafkaVersion"] == NEWER
    # And once it stayed healthy for finalizeAfterSeconds (30 s here), metadata.version was raised
    versions = wait_for(lambda: legacy.status()["versions"], lambda v: v["phase"] == "Steady", 300,
                        "metadata.version raised")
    finalized = time.monotonic() - began
    assert (versions["metadataVersion"], versions["metadataLevel"]) == LEVELS[NEWER]
    assert legacy.events("MetadataVersionFinalized")
    # When spec.version goes back to the older release after that (`kubectl krafty plan` says it is refused)
    pods = pod_uids(legacy)
    preview = plan(legacy, {"version": OLDER})
    assert (preview["verdict"], preview["restarts"]) == ("Refused", [])
    legacy.patch_spec({"version": OLDER})
    refused = wait_for(lambda: legacy.condition("Ready"), lambda c: c.get("reason") == "VersionRefused", 120,
                       "the downgrade refused")
    time.sleep(20)
    # Then it is refused, said why (as planned), and no pod restarted
    assert refused["message"] == preview["refused"][0]
    assert "a downgrade is only possible before that" in refused["message"]
    assert legacy.events("VersionRefused")
    assert pod_uids(legacy) == pods
    assert set(image_versions(legacy).values()) == {NEWER}
    report_table(f"Kafka {OLDER} -> {NEWER} on 3 controllers + 3 brokers under acks=all load (100 records/s)",
                 ["roll (s)", "metadata.version raised after (s)", "acked", "failed", "lost", "duplicated",
                  "consumer read"],
                 [[f"{rolled:.0f}", f"{finalized:.0f}", str(seen["produced"]["acked"]),
                   str(len(seen["produced"]["failed"])), str(seen["verified"]["lost"]),
                   str(seen["verified"]["duplicated"]), str(seen["followed"]["records"])]])
    report_table("The leading operator killed during the upgrade",
                 ["killed", "successor", "Lease taken after (s)", "next restart after (s)"],
                 [[seen["killed"], seen["successor"], f"{seen['took_over']:.1f}", f"{seen['next_restart']:.1f}"]])
    # And going back to the newer release clears it
    legacy.patch_spec({"version": NEWER})
    legacy.wait_ready(300)


def described_features(handle: KafkaClusterHandle) -> dict[str, int]:
    """Each feature's finalized level as kafka-features.sh describes it (0 when not finalized)."""
    out = handle.kafka_tool("kafka-features.sh", "describe")
    found = re.findall(r"Feature: (\S+)\s.*?FinalizedVersionLevel: (\S+)", out)
    assert found, out
    return {name: int(level) for name, level in found if name != "metadata.version"}


def status_features(handle: KafkaClusterHandle) -> dict[str, int]:
    return {f["name"]: f["level"] for f in handle.status().get("features") or [] if f["name"] != "metadata.version"}


@pytest.mark.local_faults  # (after the upgrade above, on the same cluster)
def test_each_feature_the_cluster_was_made_without_is_raised_one_at_a_time_under_load(legacy: KafkaClusterHandle,
                                                                                      client: ClientPod):
    # Given the upgraded cluster, made with four features off, under an idempotent acks=all producer
    assert legacy.get()["spec"]["version"] == NEWER
    before = described_features(legacy)
    assert {name: before.get(name, 0) for name in OFF} == dict.fromkeys(OFF, 0), before
    assert status_features(legacy) == before
    topic = f"features-{int(time.time())}"
    make_topic(legacy.kube, topic, legacy.name, partitions=6, replicas=3, config={"min.insync.replicas": 2})
    pods, steps = pod_uids(legacy), []
    with client.steady_producer(legacy.bootstrap, topic, rate=100) as produced:
        for name in OFF:
            # When spec.features raises one (kubectl krafty plan says it can be lowered again)
            raised = {**dict.fromkeys(OFF, 0), **{n: 1 for n in OFF[:OFF.index(name) + 1]}}
            preview = plan(legacy, {"features": raised})
            assert preview["features"] == [f"{name} raised from 0 to 1 (it can be lowered again)"], preview
            began = time.monotonic()
            legacy.patch_spec({"features": {name: 1}})
            # Then Kafka finalizes it, and status shows each level as kafka-features.sh describes it
            wait_for(lambda n=name: described_features(legacy).get(n), lambda level: level == 1, 120,
                     f"{name} raised")
            took = time.monotonic() - began
            shown = wait_for(lambda: status_features(legacy), lambda s, n=name: s.get(n) == 1, 120,
                             f"{name} in status")
            assert shown == described_features(legacy)
            steps.append([name, f"{took:.1f}"])
    verified = client.verify(legacy.bootstrap, topic)
    # And nothing was lost or written twice, no node restarted, and each raise was told
    assert_written(produced)
    assert (verified["lost"], verified["duplicated"]) == (0, 0)
    assert pod_uids(legacy) == pods
    assert len(legacy.events("FeatureRaised")) >= len(OFF)
    report_table(f"Feature levels raised one at a time on Kafka {NEWER} under acks=all load (100 records/s): "
                 f"{produced['acked']} acknowledged, {verified['lost']} lost, {verified['duplicated']} duplicated",
                 ["feature", "spec patched to Kafka finalized (s)"], steps)
