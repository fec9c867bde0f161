"""What `kubectl krafty status` and `plan` print, from a status the cluster pass wrote and a real preview."""

from __future__ import annotations

from typing import Any

from krafty import naming
from krafty.cli import view
from krafty.planning import preview
from krafty.planning.cluster import Facts, plan

from ..planning.test_plan import BROKERS, ctx, node, observe, partitions
from ..planning.test_preview import edited, live, running_pods, templates


def body_during_a_roll(**annotations: str) -> dict[str, Any]:
    # Two controllers restarted already; 1001 (the active one) and the brokers still to go
    c = ctx()
    nodes = [node(1000), node(1001, outdated=True), node(1002)] + [node(i, outdated=True) for i in BROKERS]
    decided = plan(c, observe(c, nodes), Facts(BROKERS))
    conditions = [x.as_dict("2026-11-26T12:00:00Z", 1) for x in decided.conditions]
    return {"metadata": {"name": "prod", "namespace": "kafka", "annotations": annotations},
            "status": {**decided.status, "conditions": conditions}}


def test_status_shows_roll_progress_as_n_of_m_with_the_node_next_and_the_rest():
    screen = view.status_screen(body_during_a_roll())
    assert "Roll:       2/6 nodes on the current configuration; restarting prod-controller-1; then prod-broker-0, " \
           "prod-broker-1, prod-broker-2" in screen
    assert "Quorum:     leader 1001 (epoch 7), voters 1000, 1001, 1002, largest follower lag 0" in screen
    assert "Partitions: 6 total, 0 under-replicated, 0 under min ISR, 0 offline" in screen
    assert "Listener:   plain (internal, PLAINTEXT) prod-kafka-bootstrap.kafka.svc.cluster.local:9092" in screen
    progressing = next(line for line in screen.splitlines() if line.startswith("Progressing"))
    assert "RollingRestart" in progressing
    assert "next prod-controller-1, then 3 more" in progressing
    node_rows = [line.split() for line in screen.splitlines() if line.startswith("prod-")]
    assert [row[0] for row in node_rows] == [f"prod-controller-{i}" for i in range(3)] + [
        f"prod-broker-{i}" for i in range(3)]
    assert "PAUSED" not in screen


def test_status_says_when_the_cluster_is_paused_and_lists_each_groups_lag():
    lag = [view.GroupLag("pageviews", "views", 1200, 95.0, 3 * 3600.0, "classic"),
           view.GroupLag("audit", "views", None, None, float("inf"), "share")]
    screen = view.status_screen(body_during_a_roll(**{naming.PAUSED_ANNOTATION: "true"}), lag)
    assert "PAUSED: the operator changes nothing until `kubectl krafty resume`" in screen
    rows = {line.split()[0]: line.split()[1:] for line in screen.splitlines() if line.startswith(("pageviews",
                                                                                                  "audit"))}
    assert rows == {"pageviews": ["classic", "views", "1200", "1.6m", "3.0h"],
                    "audit": ["share", "views", "-", "-", "never"]}


def test_status_shows_the_canarys_figures_and_its_gate():
    body = body_during_a_roll()
    body["status"]["canary"] = {"windowSeconds": 30, "written": 450, "failed": 0, "produceP99Milliseconds": 1234,
                                "endToEndP99Milliseconds": None, "gate": "Holding", "message": "..."}
    assert ("Canary:     write p99 1,234 ms, end-to-end p99 - over 30 s (450 written, 0 failed); gate Holding"
            in view.status_screen(body))
    assert "Canary:" not in view.status_screen(body_during_a_roll())


def test_no_roll_is_said_as_none():
    c = ctx()
    decided = plan(c, observe(c), Facts(BROKERS))
    assert view.roll_progress(decided.status) is None
    screen = view.status_screen({"metadata": {"name": "prod", "namespace": "kafka"},
                                        "status": decided.status})
    assert "Roll:       none" in screen


def test_the_plan_screen_lists_restarts_in_order_with_what_would_hold_them():
    now = ctx()
    proposed = edited(now, **{"queued.max.requests": "600"})
    obs = preview.proposed_nodes(live(now, partitions=partitions(min_isr=3)), templates(proposed), running_pods(now))
    screen = view.plan_screen("kafka/prod", preview.preview(proposed, obs, Facts(BROKERS)).as_json())
    lines = screen.splitlines()
    assert lines[0] == "Plan for kafka/prod: these changes"
    assert lines[1] == "  3 restarts, one at a time, in this order:"
    assert [line.split()[:4] for line in lines[3:6]] == [
        ["1", "prod-broker-0", "0", "ConfigChanged"], ["2", "prod-broker-1", "1", "ConfigChanged"],
        ["3", "prod-broker-2", "2", "ConfigChanged"]]
    assert all("would drop below min.insync.replicas=3" in line for line in lines[3:6])
    assert lines[-1].startswith("  first: prod-broker-0 waits")
    refused = view.plan_screen("kafka/prod", preview.refused("no: because").as_json())
    assert refused.splitlines() == ["Plan for kafka/prod: REFUSED, nothing would change", "  refused: no: because",
                                    "  first: nothing: the spec is refused"]
