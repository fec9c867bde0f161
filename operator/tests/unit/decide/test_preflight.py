"""The preflight gate: a new pod template is tried in a pod of its own before any node restarts into it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from krafty import naming
from krafty.decide import roll
from krafty.decide.preflight import FAILED_REASON, gate
from krafty.facts import pods
from krafty.facts.observed import ChangeKind, NodeState, PendingChange, PodPhase, Preflight, PreflightOutcome
from krafty.naming import Pool
from krafty.planning.actions import DeletePreflights, RestartNode, StartPreflight
from krafty.planning.cluster import Facts, plan
from krafty.render.cluster import children
from krafty.render.preflight import COMMAND, preflight_pod

from ..planning.test_plan import BROKERS, CONTROLLERS, ctx, node, observe

REVISION = "prod-broker-5d8f7c"
IMAGE = PendingChange(ChangeKind.IMAGE, "image", "krafty/kafka:1", "krafty/kafka:2")
CONFIG = PendingChange(ChangeKind.CONFIG, "num.io.threads", "8", "16")


def outdated(node_id: int, *changes: PendingChange, phase: PodPhase = PodPhase.READY) -> NodeState:
    return replace(node(node_id, phase), revision_current=False, pending=changes, requests={"cpu": "100m",
                                                                                             "memory": "1Gi"})


def restart(n: NodeState) -> roll.Restart:
    return roll.Restart(n, roll.RestartReason.POD_TEMPLATE_CHANGED, "image changed")


def tried(outcome: PreflightOutcome, revision: str = REVISION, message: str = "") -> Preflight:
    return Preflight(naming.preflight_pod(revision), Pool.BROKER, revision, outcome, message)


def test_a_new_template_waits_for_a_preflight_pod_before_any_restart():
    broker = outdated(0, IMAGE)
    gated = gate(restart(broker), (broker,), {Pool.BROKER: REVISION}, ())
    assert gated.start is Pool.BROKER
    assert isinstance(gated.step, roll.Wait)


def test_a_running_preflight_holds_the_roll_and_a_passed_one_lets_it_go():
    broker = outdated(0, IMAGE)
    running = gate(restart(broker), (broker,), {Pool.BROKER: REVISION}, (tried(PreflightOutcome.RUNNING),))
    assert (isinstance(running.step, roll.Wait), running.start) == (True, None)
    passed = gate(restart(broker), (broker,), {Pool.BROKER: REVISION}, (tried(PreflightOutcome.PASSED),))
    assert passed.step == restart(broker)


def test_a_failed_preflight_blocks_the_roll_quoting_the_failure():
    broker = outdated(0, IMAGE)
    failed = tried(PreflightOutcome.FAILED, message="exit code 1: Unrecognized VM option 'NoSuchOption'")
    gated = gate(restart(broker), (broker,), {Pool.BROKER: REVISION}, (failed,))
    assert isinstance(gated.step, roll.Blocked)
    assert gated.step.reason == FAILED_REASON
    assert "Unrecognized VM option 'NoSuchOption'" in gated.step.message


def test_config_only_restarts_and_nodes_not_running_need_no_preflight():
    config_only = outdated(0, CONFIG)
    assert gate(restart(config_only), (config_only,), {Pool.BROKER: REVISION}, ()).step == restart(config_only)
    down = outdated(1, IMAGE, phase=PodPhase.DOWN)
    assert gate(restart(down), (down,), {Pool.BROKER: REVISION}, ()).start is None


def test_preflights_of_an_older_revision_or_of_a_finished_roll_are_deleted():
    broker = outdated(0, IMAGE)
    old = tried(PreflightOutcome.FAILED, revision="prod-broker-0ld")
    assert gate(restart(broker), (broker,), {Pool.BROKER: REVISION}, (old,)).stale == (old.name,)
    # The spec changed back: no node waits for a new template, the failed preflight goes
    calm = node(0)
    assert gate(roll.Done(), (calm,), {Pool.BROKER: REVISION}, (tried(PreflightOutcome.FAILED),)).stale == (
        naming.preflight_pod(REVISION),)


def test_the_plan_starts_the_preflight_and_restarts_nothing():
    c = ctx()
    nodes = [node(i) for i in CONTROLLERS] + [outdated(b, IMAGE) for b in BROKERS]
    template = next(ch.desired for ch in children(c) if ch.kind == "StatefulSet"
                    and ch.name == naming.statefulset("prod", Pool.BROKER))["spec"]["template"]
    obs = observe(c, nodes, revisions={Pool.BROKER: REVISION}, templates={Pool.BROKER: template})
    result = plan(c, obs, Facts(BROKERS))
    [start] = [a for a in result.actions if isinstance(a, StartPreflight)]
    assert start.pod["metadata"]["name"] == naming.preflight_pod(REVISION)
    assert not [a for a in result.actions if isinstance(a, RestartNode | DeletePreflights)]
    failed = replace(obs, preflights=(tried(PreflightOutcome.FAILED, message="ErrImagePull: not found"),))
    blocked = plan(c, failed, Facts(BROKERS))
    degraded = next(x for x in blocked.conditions if x.type == "Degraded")
    assert (degraded.status, degraded.reason) == (True, FAILED_REASON)
    assert "ErrImagePull: not found" in degraded.message
    assert not [a for a in blocked.actions if isinstance(a, RestartNode)]


def test_the_preflight_pod_runs_the_nodes_jvm_and_asks_only_for_what_is_new():
    c = ctx()
    template = next(ch.desired for ch in children(c) if ch.kind == "StatefulSet"
                    and ch.name == naming.statefulset("prod", Pool.BROKER))["spec"]["template"]
    template["spec"]["affinity"] = {"podAntiAffinity": {"x": 1}, "nodeAffinity": {"y": 2}}
    container = template["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    pod = preflight_pod(c, Pool.BROKER, REVISION, template, {"cpu": "500m", "memory": "1Gi"})
    ran = pod["spec"]["containers"][0]
    assert ran["command"] == COMMAND
    assert ran["image"] == container["image"]
    assert {e["name"]: e.get("value") for e in ran["env"]}["KAFKA_HEAP_OPTS"] == next(
        e["value"] for e in container["env"] if e["name"] == "KAFKA_HEAP_OPTS")
    assert ran["resources"] == {"limits": {"memory": "2Gi"}, "requests": {"cpu": "0m", "memory": str(2**30)}}
    assert pod["spec"]["affinity"] == {"nodeAffinity": {"y": 2}}
    assert pod["spec"]["restartPolicy"] == "Never"
    assert "readinessProbe" not in ran
    # Not a Kafka pod: no StatefulSet, Service or budget selects it
    assert set(naming.selector_labels("prod", Pool.BROKER).items()) - set(pod["metadata"]["labels"].items())
    assert pods.preflight(pod) == Preflight(pod["metadata"]["name"], Pool.BROKER, REVISION,
                                            PreflightOutcome.RUNNING, "starting")


def _pod(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "labels": {naming.PREFLIGHT_LABEL: "broker",
                                                 naming.PREFLIGHT_REVISION_LABEL: REVISION}}, "status": status}


@pytest.mark.parametrize(("status", "outcome", "quoted"), [
    ({"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": {"exitCode": 0, "message": "4.3.1\n"}}}]},
     PreflightOutcome.PASSED, "4.3.1"),
    ({"phase": "Failed", "containerStatuses": [{"state": {"terminated": {
        "exitCode": 1,
        "message": "Unrecognized VM option 'Nope'\nError: Could not create the Java Virtual Machine."}}}]},
     PreflightOutcome.FAILED, "exit code 1: Unrecognized VM option 'Nope' Error: Could not create"),
    ({"phase": "Pending", "containerStatuses": [{"state": {"waiting": {
        "reason": "ErrImagePull", "message": "image krafty/nope:1 not found"}}}]},
     PreflightOutcome.FAILED, "ErrImagePull: image krafty/nope:1 not found"),
    ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "0/1 nodes are available: 1 node(s) didn't match selector"}]},
     PreflightOutcome.FAILED, "Unschedulable: 0/1 nodes are available"),
    ({"phase": "Failed", "reason": "DeadlineExceeded", "message": "Pod was active on the node longer than allowed"},
     PreflightOutcome.FAILED, "Pod was active on the node longer than allowed"),
    ({"phase": "Pending"}, PreflightOutcome.RUNNING, "starting"),
])
def test_what_a_preflight_pod_showed(status: dict[str, Any], outcome: PreflightOutcome, quoted: str):
    found = pods.preflight(_pod(status))
    assert found is not None
    assert found.outcome is outcome
    assert quoted in found.message


def test_a_kafka_pod_is_no_preflight():
    kafka_pod = {"metadata": {"name": "prod-broker-0", "labels": naming.labels("prod", Pool.BROKER)}}
    assert pods.preflight(kafka_pod) is None
