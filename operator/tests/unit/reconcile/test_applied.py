"""Which children a cluster pass sends: those changed since it last sent them, and all of them every resync."""

from __future__ import annotations

from krafty.reconcile.applied import Applied
from krafty.render.cluster import Child

SERVICE = Child("Service", "c-brokers", {"spec": {"ports": [{"port": 9092}]}})
CLUSTER = ("ns", "c", "uid-1")


def test_a_child_is_sent_once_then_again_when_it_changes():
    now = [0.0]
    applied = Applied(resync=120, clock=lambda: now[0])
    assert applied.due(*CLUSTER, SERVICE)
    applied.done(*CLUSTER, SERVICE)
    now[0] = 119.0
    assert not applied.due(*CLUSTER, Child("Service", "c-brokers", {"spec": {"ports": [{"port": 9092}]}}))
    assert applied.due(*CLUSTER, Child("Service", "c-brokers", {"spec": {"ports": [{"port": 9093}]}}))
    assert applied.due(*CLUSTER, Child("Service", "c-other", SERVICE.desired))  # another child


def test_every_child_is_sent_again_once_the_resync_interval_has_passed():
    now = [0.0]
    applied = Applied(resync=120, clock=lambda: now[0])
    applied.done(*CLUSTER, SERVICE)
    now[0] = 120.0
    assert applied.due(*CLUSTER, SERVICE)


def test_a_deletion_is_remembered_like_an_apply():
    applied = Applied(resync=120, clock=lambda: 0.0)
    gone = Child("Service", "c-external-0", None)
    assert applied.due(*CLUSTER, gone)
    applied.done(*CLUSTER, gone)
    assert not applied.due(*CLUSTER, gone)
    assert applied.due(*CLUSTER, Child("Service", "c-external-0", {"spec": {}}))  # wanted again


def test_a_refusal_a_cluster_made_again_and_a_forgotten_cluster_send_it_again():
    applied = Applied(resync=120, clock=lambda: 0.0)
    applied.done(*CLUSTER, SERVICE)
    applied.failed(*CLUSTER, SERVICE)
    assert applied.due(*CLUSTER, SERVICE)
    applied.done(*CLUSTER, SERVICE)
    assert applied.due("ns", "c", "uid-2", SERVICE)  # deleted and created again under the same name
    applied.done("ns", "c", "uid-2", SERVICE)
    applied.forget("ns", "c")
    assert applied.due("ns", "c", "uid-2", SERVICE)
    assert applied.due("other", "c", "uid-2", SERVICE)  # a namesake in another namespace
