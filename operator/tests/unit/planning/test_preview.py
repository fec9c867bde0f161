"""The plan preview (`kubectl krafty plan`): the cluster pass's own plan of a proposed spec over what runs.

Pods and templates here are rendered by the operator's own code from the example spec, then changed as a
user's edit would change them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from krafty import naming
from krafty.decide.roll import RestartReason
from krafty.facts.observed import FeatureLevel
from krafty.model.context import ClusterContext
from krafty.naming import Pool
from krafty.planning import preview
from krafty.planning.cluster import Facts, NotAdmitted, admit
from krafty.render.cluster import children
from krafty.render.kafka_config import dynamic_broker_config

from .test_plan import BROKERS, CONTROLLERS, ctx, node, observe, partitions


def templates(c: ClusterContext) -> dict[Pool, dict[str, Any]]:
    by_name = {naming.statefulset(c.name, pool): pool for pool in c.pools()}
    return {by_name[child.name]: child.desired["spec"]["template"] for child in children(c)
            if child.kind == "StatefulSet" and child.desired is not None}


def running_pods(c: ClusterContext) -> dict[str, dict[str, Any]]:
    """Every node's pod, as its StatefulSet's current template made it."""
    made = templates(c)
    return {naming.pod(c.name, pool, ordinal): {"metadata": made[pool]["metadata"], "spec": made[pool]["spec"]}
            for pool in c.pools() for ordinal in range(c.replicas(pool))}


def edited(c: ClusterContext, **config: str) -> ClusterContext:
    brokers = c.spec.brokers.model_copy(update={"config": {**c.spec.brokers.config, **config}})
    return replace(c, spec=c.spec.model_copy(update={"brokers": brokers}))


def live(c: ClusterContext, **overrides: Any) -> Any:
    return observe(c, templates=templates(c), **overrides)


def test_a_static_config_change_restarts_every_node_in_the_rolls_order_with_its_reason():
    # Given a calm cluster, and a spec that changes a config only a restart applies
    now = ctx()
    proposed = edited(now, **{"queued.max.requests": "600"})
    obs = preview.proposed_nodes(live(now), templates(proposed), running_pods(now))
    # When it is previewed
    result = preview.preview(proposed, obs, Facts(BROKERS))
    # Then every broker restarts, in order (the dedicated controllers do not read brokers.config)
    assert result.verdict is preview.Verdict.CHANGES
    assert [r.node_id for r in result.restarts] == [0, 1, 2]
    assert {r.reason for r in result.restarts} == {RestartReason.CONFIG_CHANGED}
    assert all("queued.max.requests=600" in r.why for r in result.restarts)
    assert all(r.held_by is None for r in result.restarts)
    assert (result.refused, result.dynamic_config, result.preflight) == ((), (), ())
    assert result.first_step == "restart prod-broker-0"


def test_a_new_image_restarts_controllers_first_the_active_one_last_after_a_preflight():
    now = ctx()
    proposed = replace(now, image="krafty/kafka:next")
    obs = preview.proposed_nodes(live(now), templates(proposed), running_pods(now))
    result = preview.preview(proposed, obs, Facts(BROKERS))
    assert [r.node_id for r in result.restarts] == [1000, 1002, 1001, 0, 1, 2]
    assert {r.reason for r in result.restarts} == {RestartReason.POD_TEMPLATE_CHANGED}
    assert "krafty/kafka:next" in result.restarts[0].why
    assert result.preflight == (Pool.BROKER, Pool.CONTROLLER)
    assert "preflight" in result.first_step


def test_a_pool_whose_template_does_not_change_keeps_its_nodes_and_a_pod_already_on_the_new_template_stays():
    now = ctx()
    proposed = edited(now, **{"queued.max.requests": "600"})
    pods = running_pods(now)
    # Given broker 1 already runs what the proposed spec renders (a change made by hand, say)
    pods["prod-broker-1"] = {"metadata": templates(proposed)[Pool.BROKER]["metadata"],
                             "spec": templates(proposed)[Pool.BROKER]["spec"]}
    # And only the brokers' template changes
    changed = {Pool.BROKER: templates(proposed)[Pool.BROKER], Pool.CONTROLLER: templates(now)[Pool.CONTROLLER]}
    obs = preview.proposed_nodes(live(now), changed, pods)
    assert [n.node_id for n in obs.nodes if n.needs_restart] == [0, 2]
    assert obs.revisions[Pool.BROKER] == preview.PROPOSED_REVISION
    # And nothing changes at all when no template does
    assert preview.proposed_nodes(live(now), templates(now), pods) == live(now)


def test_a_dynamic_config_change_applies_without_any_restart():
    now = ctx()
    proposed = edited(now, **{"log.retention.ms": "3600000"})
    obs = preview.proposed_nodes(live(now, cluster_defaults=dynamic_broker_config(now)), templates(proposed),
                                 running_pods(now))
    result = preview.preview(proposed, obs, Facts(BROKERS))
    assert result.verdict is preview.Verdict.CHANGES
    assert result.dynamic_config == ("log.retention.ms=3600000",)
    assert result.restarts == ()
    assert result.first_step == "apply the StatefulSets, Services and configs; no node restarts"


def test_a_restart_a_partition_would_hold_says_so_and_the_first_step_is_what_waits():
    now = ctx()
    proposed = edited(now, **{"queued.max.requests": "600"})
    only_brokers = {Pool.BROKER: templates(proposed)[Pool.BROKER], Pool.CONTROLLER: templates(now)[Pool.CONTROLLER]}
    obs = preview.proposed_nodes(live(now, partitions=partitions(min_isr=3)), only_brokers, running_pods(now))
    result = preview.preview(proposed, obs, Facts(BROKERS))
    assert [r.pod for r in result.restarts] == ["prod-broker-0", "prod-broker-1", "prod-broker-2"]
    assert all("would drop below min.insync.replicas=3" in (r.held_by or "") for r in result.restarts)
    assert "waits" in result.first_step
    assert result.verdict is preview.Verdict.CHANGES


def test_a_scale_down_that_cannot_be_made_safely_is_refused_and_changes_nothing():
    # Given 5 brokers with an RF-3 topic on all of them, and a spec asking for 2
    five = [node(i) for i in (*CONTROLLERS, 0, 1, 2, 3, 4)]
    now = ctx(brokers=5)
    defaults = now.spec.topic_defaults.model_copy(update={"replication_factor": 2, "min_insync_replicas": 1})
    brokers = now.spec.brokers.model_copy(update={"replicas": 2})
    proposed = replace(now, spec=now.spec.model_copy(update={"brokers": brokers, "topic_defaults": defaults}))
    obs = observe(proposed, five, partitions=partitions((0, 1, 2, 3, 4)), templates=templates(now))
    result = preview.preview(proposed, obs, Facts((0, 1, 2, 3, 4)))
    assert result.verdict is preview.Verdict.REFUSED
    assert result.scaling is None
    assert result.restarts == ()
    assert "replication factor" in result.refused[0]


def test_an_invalid_spec_is_refused_and_a_paused_cluster_would_change_nothing():
    body: dict[str, Any] = {"metadata": {"name": "prod", "namespace": "kafka", "uid": "u"},
                            "spec": {"brokers": {"replicas": 0}}}
    refused = admit(body)
    assert isinstance(refused, NotAdmitted)
    shown = preview.not_admitted(refused)
    assert shown.verdict is preview.Verdict.REFUSED
    assert "brokers.replicas" in shown.refused[0]
    body["metadata"]["annotations"] = {naming.PAUSED_ANNOTATION: "true"}
    paused = admit(body)
    assert isinstance(paused, NotAdmitted)
    assert preview.not_admitted(paused).verdict is preview.Verdict.NOTHING


def test_the_json_names_every_part():
    now = ctx()
    proposed = edited(now, **{"queued.max.requests": "600"})
    result = preview.preview(proposed, preview.proposed_nodes(live(now), templates(proposed), running_pods(now)),
                             Facts(BROKERS))
    shown = result.as_json()
    assert shown["verdict"] == "Changes"
    assert shown["restarts"][0] == {"pod": "prod-broker-0", "nodeId": 0, "reason": "ConfigChanged",
                                    "why": result.restarts[0].why, "heldBy": None, "step": 1}
    assert set(shown) == {"verdict", "refused", "restarts", "dynamicConfig", "scaling", "volumes", "preflight",
                          "firstStep", "features"}


def _levels(**finalized: int) -> tuple[FeatureLevel, ...]:
    return tuple(FeatureLevel(name, level, (0, 2)) for name, level in finalized.items())


def test_feature_levels_in_a_plan_say_whether_they_can_be_undone_and_what_cannot_be_lowered_is_refused():
    # Given a cluster on a static quorum (kraft.version 0) with share groups off
    now = ctx()
    obs = live(now, features=_levels(**{"kraft.version": 0, "share.version": 0, "metadata.version": 30}))
    # When a spec raises both, Then the plan names both and which is a point of no return, restarting nothing
    raised = replace(now, spec=now.spec.model_copy(update={"features": {"kraft.version": 1, "share.version": 1}}))
    result = preview.preview(raised, preview.proposed_nodes(obs, templates(raised), running_pods(now)),
                             Facts(BROKERS))
    assert (result.verdict, result.restarts) == (preview.Verdict.CHANGES, ())
    assert result.features == ("kraft.version raised from 0 to 1 (a point of no return: Kafka cannot lower it "
                               "again)", "share.version raised from 0 to 1 (it can be lowered again)")
    # And a spec lowering kraft.version on a dynamic quorum is refused, before anything would happen
    dynamic = live(now, features=_levels(**{"kraft.version": 1, "metadata.version": 30}))
    lowered = replace(now, spec=now.spec.model_copy(update={"features": {"kraft.version": 0}}))
    result = preview.preview(lowered, preview.proposed_nodes(dynamic, templates(lowered), running_pods(now)),
                             Facts(BROKERS))
    assert result.verdict is preview.Verdict.REFUSED
    assert result.refused == ("spec.features.kraft.version 0 is below the cluster's kraft.version 1, which Kafka "
                              "cannot lower. Nothing changes",)
