"""Reading Kafka pods: each node's phase, and what differs between a pod and its template (and nothing else)."""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from typing import Any

import pytest
import yaml

from krafty import naming
from krafty.decide import roll
from krafty.facts.observed import ChangeKind, NodeState, PendingChange, PodPhase, ServedListener
from krafty.facts.pods import authorizes, host_down, pending_changes, phase, served_listeners, trouble
from krafty.model.cluster import ClientAuthentication, SecurityProtocol
from krafty.naming import Pool
from krafty.render.workloads import statefulset

from ...conftest import CRDS, context, example

NOW = datetime.datetime(2026, 11, 23, 12, 0, tzinfo=datetime.UTC)
ADMITTED = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}]


def pod(config: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    annotations = {naming.STATIC_CONFIG_ANNOTATION: json.dumps(config)} if config is not None else {}
    return {"metadata": {"annotations": annotations}, "spec": {"containers": [{"image": "krafty/kafka:1"}], **spec}}


def running_pod(age_seconds: int, *, running: bool, ready: bool, deleting: bool = False,
                waiting: str = "ContainerCreating") -> dict[str, Any]:
    created = (NOW - datetime.timedelta(seconds=age_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    state = {"running": {}} if running else {"waiting": {"reason": waiting}}
    meta: dict[str, Any] = {"name": "c-broker-0", "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta, "status": {
        "phase": "Running" if running else "Pending", "containerStatuses": [{"state": state}],
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


@pytest.mark.parametrize(("pod_", "expected"), [
    (None, PodPhase.MISSING),
    (running_pod(5, running=True, ready=True, deleting=True), PodPhase.TERMINATING),
    (running_pod(5, running=False, ready=False), PodPhase.STARTING),
    (running_pod(5, running=False, ready=False, waiting="CrashLoopBackOff"), PodPhase.DOWN),
    (running_pod(5, running=False, ready=False, waiting="ImagePullBackOff"), PodPhase.DOWN),
    (running_pod(1000, running=False, ready=False), PodPhase.DOWN),
    (running_pod(5, running=True, ready=False), PodPhase.WARMING_UP),
    (running_pod(1000, running=True, ready=False), PodPhase.NOT_READY),
    (running_pod(1000, running=True, ready=True), PodPhase.READY),
])
def test_the_phase_of_a_pod(pod_: dict[str, Any] | None, expected: PodPhase):
    # Given a start timeout of 900 s, then each pod is in its phase
    assert phase(pod_, NOW, 900) is expected


def _node(ready: str, message: str | None = None) -> dict[str, Any]:
    condition = {"type": "Ready", "status": ready, **({"message": message} if message else {})}
    return {"metadata": {"name": "w2"}, "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                                                   condition]}}


@pytest.mark.parametrize(("node", "expected"), [
    (_node("True"), None),
    (_node("Unknown", "Kubelet stopped posting node status."),
     "Kubernetes node w2 is not Ready (Kubelet stopped posting node status.)"),
    (_node("False"), "Kubernetes node w2 is not Ready (no status posted)"),
    (None, "Kubernetes node w2 is gone"),
])
def test_why_a_kubernetes_node_cannot_run_pods(node: dict[str, Any] | None, expected: str | None):
    assert host_down(node, "w2") == expected


def test_tolerations_the_api_server_adds_are_not_a_difference():
    template = pod(terminationGracePeriodSeconds=150)
    assert pending_changes(pod(terminationGracePeriodSeconds=120, tolerations=ADMITTED), template) == (
        PendingChange(ChangeKind.POD, "terminationGracePeriodSeconds", "120", "150"),)
    assert pending_changes(pod(tolerations=ADMITTED), pod()) == ()


def test_a_toleration_the_user_adds_is_named():
    dedicated = {"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}
    [change] = pending_changes(pod(tolerations=ADMITTED), pod(tolerations=[dedicated]))
    assert change.describe() == f"pod tolerations None -> {[dedicated]}"


def test_config_image_and_container_changes_are_typed():
    # Given a pod that runs an older image, other restart-only config and other resources
    running = pod({"num.io.threads": "8", "log.segment.bytes": "1000"})
    running["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    template = pod({"num.io.threads": "16"}, )
    template["spec"]["containers"][0]["image"] = "krafty/kafka:2"
    # Then each difference is one typed change
    assert pending_changes(running, template) == (
        PendingChange(ChangeKind.CONFIG, "log.segment.bytes", "1000", None),
        PendingChange(ChangeKind.CONFIG, "num.io.threads", "8", "16"),
        PendingChange(ChangeKind.IMAGE, "image", "krafty/kafka:1", "krafty/kafka:2"),
        PendingChange(ChangeKind.CONTAINER, "resources", None, None),
    )


def test_the_crd_lists_every_phase_a_node_can_be_in():
    crd = yaml.safe_load((CRDS / "kafkaclusters.kafka.krafty.io.yaml").read_text())
    nodes = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["nodes"]
    assert nodes["items"]["properties"]["phase"]["enum"] == [p.value for p in PodPhase]


def test_why_a_pod_does_not_start_is_named():
    crashed = {"metadata": {}, "status": {"phase": "Running", "containerStatuses": [{
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}}
    assert trouble(crashed) == "CrashLoopBackOff (last exit code 1, Error)"
    unschedulable = {"metadata": {}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available: 1 Insufficient memory."}]}}
    assert trouble(unschedulable) == "Unschedulable: 0/1 nodes are available: 1 Insufficient memory."
    pulling = {"metadata": {}, "status": {"containerStatuses": [{"state": {"waiting": {
        "reason": "ErrImagePull", "message": "krafty/kafka:9.9: not found"}}}]}}
    assert trouble(pulling) == "ErrImagePull: krafty/kafka:9.9: not found"
    assert trouble(running_pod(5, running=False, ready=False)) is None  # ContainerCreating passes by itself


def test_certificate_and_secret_changes_are_typed_and_need_no_preflight():
    # Given a pod that runs older certificates (and an older Secret value) than its template
    running, template = pod(), pod()
    running["metadata"]["annotations"] |= {naming.CERTIFICATES_ANNOTATION: "aaaa/1",
                                           naming.CONFIG_SECRETS_ANNOTATION: "d1"}
    template["metadata"]["annotations"] |= {naming.CERTIFICATES_ANNOTATION: "bbbb,aaaa/1",
                                            naming.CONFIG_SECRETS_ANNOTATION: "d2"}
    changes = pending_changes(running, template)
    # Then each is one typed change, and neither is a new pod template to try first
    assert changes == (PendingChange(ChangeKind.CERTIFICATES, naming.CERTIFICATES_ANNOTATION, "aaaa/1", "bbbb,aaaa/1"),
                       PendingChange(ChangeKind.SECRETS, naming.CONFIG_SECRETS_ANNOTATION, "d1", "d2"))
    node = NodeState(node_id=0, pool=Pool.BROKER, pod="c-broker-0", roles=("broker",), phase=PodPhase.READY,
                     revision_current=False, registered=True, pending=changes)
    assert not node.template_pending
    # And a restart for certificates alone says so
    only_certificates = replace(node, pending=changes[:1])
    assert roll.restart_reason(only_certificates) == (
        roll.RestartReason.CERTIFICATES_CHANGED,
        "c-broker-0: certificates (trusted CAs/generation) aaaa/1 -> bbbb,aaaa/1")


def test_a_renewed_clients_ca_restarts_the_brokers_that_trust_it_as_a_certificate_change():
    # Given a broker that trusts an older clients CA bundle than its template
    running, template = pod(), pod()
    running["metadata"]["annotations"][naming.CLIENTS_CA_ANNOTATION] = "6938e4c88dd56798"
    template["metadata"]["annotations"][naming.CLIENTS_CA_ANNOTATION] = "6142e7aa6230c0db"
    changes = pending_changes(running, template)
    # Then it is a pending change, a certificate restart that needs no preflight
    assert changes == (PendingChange(ChangeKind.CLIENTS_CA, naming.CLIENTS_CA_ANNOTATION, "6938e4c88dd56798",
                                     "6142e7aa6230c0db"),)
    node = NodeState(node_id=0, pool=Pool.BROKER, pod="c-broker-0", roles=("broker",), phase=PodPhase.READY,
                     revision_current=False, registered=True, pending=changes)
    assert not node.template_pending
    assert roll.restart_reason(node) == (
        roll.RestartReason.CERTIFICATES_CHANGED,
        "c-broker-0: trusted clients CA certificates 6938e4c88dd56798 -> 6142e7aa6230c0db")


def test_a_pod_serves_the_client_listeners_its_static_config_was_started_with():
    spec = example("kafkacluster-combined.yaml")["spec"] | {
        "listeners": [{"name": "tls", "port": 9094, "tls": True}, {"name": "plain", "port": 9092},
                      {"name": "mtls", "port": 9095, "tls": True, "authentication": "tls"},
                      {"name": "scram", "port": 9096, "authentication": "scram-sha-512"}]}
    template = statefulset(context(spec), Pool.BROKER)["spec"]["template"]
    assert served_listeners({"metadata": template["metadata"]}) == {
        ServedListener("PLAIN", 9092, SecurityProtocol.PLAINTEXT, ClientAuthentication.NONE),
        ServedListener("TLS", 9094, SecurityProtocol.SSL, ClientAuthentication.NONE),
        ServedListener("MTLS", 9095, SecurityProtocol.SSL, ClientAuthentication.TLS),
        ServedListener("SCRAM", 9096, SecurityProtocol.SASL_PLAINTEXT, ClientAuthentication.SCRAM_SHA_512)}
    assert served_listeners(pod()) == frozenset()  # (a pod of an older operator: nothing known)


@pytest.mark.parametrize(("authorization", "expected"), [(True, True), (False, False)])
def test_a_pod_says_whether_it_was_started_with_the_authorizer(authorization, expected):
    spec = example("kafkacluster-combined.yaml")["spec"] | {
        "listeners": [{"name": "mtls", "port": 9095, "tls": True, "authentication": "tls"}],
        "authorization": {"enabled": authorization}}
    template = statefulset(context(spec), Pool.BROKER)["spec"]["template"]
    assert authorizes({"metadata": template["metadata"]}) is expected
    assert not authorizes(pod())  # (a pod of an older operator: nothing known)
