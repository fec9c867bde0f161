"""kubectl krafty on real pods: the plugin pip installs with the operator's package, run by kubectl.

`plan` is checked where each change is made: a dynamic config (test_10), a scale-down refused (test_30), a
version change and a downgrade refused (test_25), a static config (test_10, full set): each time the plan
said exactly the restarts, their order and the refusal that then happened. Here: `status` on one screen,
`pause` and `resume`, and `restart` of one node.
"""

from __future__ import annotations

import json
import time

import pytest
from test_10_operator_core import pod_uids, restart_events

from krafty_testkit.k8s_kafka import KafkaClusterHandle
from krafty_testkit.kube import KubeError
from krafty_testkit.kubectl_krafty import kubectl_krafty
from krafty_testkit.waiting import wait_for


def test_status_shows_the_cluster_on_one_screen_and_as_json(prod: KafkaClusterHandle):
    status = prod.status()
    screen = kubectl_krafty(prod.kube, "status", prod.name, "-n", prod.namespace)
    print(f"\n{screen}")
    lines = screen.splitlines()
    assert lines[0].startswith(f"KafkaCluster {prod.namespace}/{prod.name}   Kafka {status['kafkaVersion']}")
    assert next(line for line in lines if line.startswith("Ready")).split()[1] == "True"
    assert "Roll:       none" in lines
    quorum = status["quorum"]
    assert f"Quorum:     leader {quorum['leaderId']} (epoch {quorum['leaderEpoch']})" in screen
    rows = {line.split()[0]: line.split() for line in lines if line.startswith(f"{prod.name}-")}
    assert set(rows) == {n["pod"] for n in status["nodes"]}
    assert all(row[4] == "yes" for row in rows.values())  # READY
    as_json = json.loads(kubectl_krafty(prod.kube, "status", prod.name, "-n", prod.namespace, "-o", "json"))
    assert {n["pod"] for n in as_json["status"]["nodes"]} == set(rows)


def test_status_of_a_cluster_that_does_not_exist_says_so(prod: KafkaClusterHandle):
    with pytest.raises(KubeError, match="no KafkaCluster nope in namespace"):
        kubectl_krafty(prod.kube, "status", "nope", "-n", prod.namespace)


def test_pause_stops_every_change_until_resume(small: KafkaClusterHandle):
    # Given small paused with kubectl krafty
    said = kubectl_krafty(small.kube, "pause", small.name, "-n", small.namespace)
    assert "paused" in said
    try:
        progressing = wait_for(lambda: small.condition("Progressing"), lambda c: c.get("reason") == "Paused", 60,
                               "Progressing Paused")
        assert "changes are paused" in progressing["message"]
        assert "PAUSED" in kubectl_krafty(small.kube, "status", small.name, "-n", small.namespace)
        # And `plan` of any change says nothing would change
        preview = json.loads(kubectl_krafty(small.kube, "plan", small.name, "-n", small.namespace, "-f", "-", "-o",
                                            "json", stdin=json.dumps({"spec": small.get()["spec"]})))
        assert preview["verdict"] == "NoChange"
    finally:
        kubectl_krafty(small.kube, "resume", small.name, "-n", small.namespace)
    wait_for(lambda: small.condition("Progressing"), lambda c: c.get("reason") != "Paused", 60, "resumed")


@pytest.mark.full  # about a minute: one combined node restarted and back in sync
def test_restart_restarts_that_node_once_when_the_roll_allows(small: KafkaClusterHandle):
    before, started = pod_uids(small), time.time()
    pod = f"{small.name}-broker-1"
    kubectl_krafty(small.kube, "restart", pod, "-n", small.namespace)
    wait_for(lambda: pod_uids(small).get(pod), lambda uid: uid not in (None, before[pod]), 300, f"{pod} restarted")
    small.wait_ready(600)
    assert restart_events(small, started) == [(pod, "RestartManualRestart")]
    assert {name: uid for name, uid in pod_uids(small).items() if name != pod} == {
        name: uid for name, uid in before.items() if name != pod}
    with pytest.raises(KubeError, match="is not a Kafka node of a krafty cluster"):
        kubectl_krafty(small.kube, "restart", "kafka-client", "-n", small.namespace)
