"""The topic pass's view of what the watch delivered (krafty.runtime.watched)."""

from __future__ import annotations

from typing import Any

from krafty.runtime.watched import ServingBrokers, Watched


def body(namespace: str, name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": version,
                         "managedFields": [{"manager": "kubectl"}]}, "spec": {"partitions": 1}}


def test_the_latest_body_of_each_object_is_kept_without_its_managed_fields():
    watched = Watched()
    watched.saw(body("a", "orders", "1"))
    watched.saw(body("a", "orders", "2"))
    watched.saw(body("a", "payments", "3"))
    watched.saw(body("b", "orders", "4"))
    kept = sorted(watched.in_namespace("a"), key=lambda b: b["metadata"]["name"])
    assert [(b["metadata"]["name"], b["metadata"]["resourceVersion"]) for b in kept] == [("orders", "2"),
                                                                                          ("payments", "3")]
    assert all("managedFields" not in b["metadata"] and b["spec"] == {"partitions": 1} for b in kept)
    assert watched.in_namespace("c") == []


def test_a_deleted_object_leaves_the_view_and_its_namesake_elsewhere_stays():
    watched = Watched()
    watched.saw(body("a", "orders", "1"))
    watched.saw(body("b", "orders", "2"))
    assert watched.get("a", "orders")["metadata"]["resourceVersion"] == "1"  # type: ignore[index]
    watched.gone("a", "orders")
    watched.gone("a", "never-seen")
    assert watched.in_namespace("a") == []
    assert watched.get("a", "orders") is None
    assert watched.get("b", "orders")["metadata"]["resourceVersion"] == "2"  # type: ignore[index]
    assert [b["metadata"]["namespace"] for b in watched.in_namespace("b")] == ["b"]


def cluster(namespace: str, name: str, ready: int | None) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name},
            "status": {} if ready is None else {"readyBrokers": ready}}


def test_a_change_in_the_brokers_serving_is_told_once_per_cluster():
    serving = ServingBrokers()
    # A new cluster: no status yet, then none serving (the first count is nothing to compare with)
    assert not serving.changed(cluster("a", "prod", None), False)
    assert not serving.changed(cluster("a", "prod", 0), False)
    # Brokers start serving one by one: each is told once; another cluster's count is its own
    assert serving.changed(cluster("a", "prod", 1), False)
    assert not serving.changed(cluster("a", "prod", 1), False)
    assert not serving.changed(cluster("b", "prod", 3), False)
    assert serving.changed(cluster("a", "prod", 3), False)
    assert serving.changed(cluster("a", "prod", 2), False)
    # Deleted, then made again under the same name: counted afresh
    assert not serving.changed(cluster("a", "prod", 2), True)
    assert not serving.changed(cluster("a", "prod", 0), False)
