"""Listeners reached from outside Kubernetes: nodeport and loadbalancer Services, the address each broker
advertises, what waits for Kubernetes, and the spec's refusals."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from krafty import naming
from krafty.decide import external
from krafty.decide.roll import Awaits, Wait
from krafty.facts.observed import ExternalServiceState
from krafty.facts.service_state import external_service
from krafty.model import KafkaClusterSpec
from krafty.model.context import ClusterContext, Endpoint
from krafty.model.validation import validate_cluster
from krafty.naming import Pool
from krafty.planning.actions import ApplyChildren
from krafty.planning.cluster import Facts, Pace, plan
from krafty.render.cluster import children
from krafty.render.kafka_config import node_properties

from ...conftest import context, example
from ..planning.test_plan import BROKERS, observe, statefulset_replicas

NODEPORT = {"name": "outside", "port": 9094, "type": "nodeport",
            "external": {"bootstrapNodePort": 31090, "brokers": [{"broker": 2, "nodePort": 31092},
                                                                  {"broker": 1, "advertisedHost": "kafka-1.example.com",
                                                                   "advertisedPort": 19094}]}}
BALANCED = {"name": "lb", "port": 9095, "type": "loadbalancer",
            "external": {"annotations": {"metallb.universe.tf/address-pool": "kind"}}}


def spec_with(*listeners: dict[str, Any]) -> dict[str, Any]:
    spec = example("kafkacluster-combined.yaml")["spec"]
    spec["listeners"] = [{"name": "plain", "port": 9092}, *listeners]
    return spec


def ctx(*listeners: dict[str, Any]) -> ClusterContext:
    return replace(context(spec_with(*listeners), name="prod"), initial_voters=())


def seen(name: str, node_port: int | None = None, address: str | None = None) -> ExternalServiceState:
    return ExternalServiceState(name, node_port, address)


def test_nodeport_brokers_advertise_their_node_and_node_port_with_the_specs_overrides():
    c = ctx(NODEPORT)
    services = {"prod-outside-0": seen("prod-outside-0", 30500), "prod-outside-2": seen("prod-outside-2", 31092)}
    found = external.endpoints("prod", c.spec.listeners, 3, services)
    assert found == {("outside", 0): Endpoint(naming.NODE_ADDRESS_PLACEHOLDER, 30500),
                     ("outside", 1): Endpoint("kafka-1.example.com", 19094),
                     ("outside", 2): Endpoint(naming.NODE_ADDRESS_PLACEHOLDER, 31092)}
    assert external.waiting("prod", c.spec.listeners, 3, found) is None


def test_a_broker_whose_address_is_unknown_does_not_open_the_listener_and_status_says_what_waits():
    c = ctx(BALANCED)
    services = {"prod-lb-0": seen("prod-lb-0", 30001, "192.0.2.10"), "prod-lb-1": seen("prod-lb-1", 30002)}
    found = external.endpoints("prod", c.spec.listeners, 3, services)
    assert found == {("lb", 0): Endpoint("192.0.2.10", 9095)}
    assert external.waiting("prod", c.spec.listeners, 3, found) == (
        "waiting for the external address of prod-lb-1, prod-lb-2 (a node port or a load balancer from Kubernetes); "
        "those brokers open the listener once it is there")
    with_addresses = replace(c, external_endpoints=found)
    opened = node_properties(with_addresses, Pool.BROKER, 0)
    assert "LB://:9095" in opened["listeners"]
    assert "LB://192.0.2.10:9095" in opened["advertised.listeners"]
    assert "LB:PLAINTEXT" in opened["listener.security.protocol.map"]
    closed = node_properties(with_addresses, Pool.BROKER, 1)
    assert "LB://" not in closed["listeners"]
    assert "LB://" not in closed["advertised.listeners"]


def test_each_broker_and_the_bootstrap_get_a_service_of_the_listeners_type():
    c = ctx(NODEPORT, BALANCED)
    rendered = {child.name: child.desired for child in children(c) if child.kind == "Service"}
    assert {name for name in rendered if name.startswith(("prod-outside", "prod-lb"))} == {
        "prod-outside-bootstrap", "prod-outside-0", "prod-outside-1", "prod-outside-2",
        "prod-lb-bootstrap", "prod-lb-0", "prod-lb-1", "prod-lb-2"}
    broker2 = rendered["prod-outside-2"]
    assert broker2 is not None
    assert broker2["spec"]["type"] == "NodePort"
    assert broker2["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "prod-broker-2"
    assert broker2["spec"]["ports"] == [{"name": "outside", "port": 9094, "targetPort": 9094, "nodePort": 31092}]
    assert "nodePort" not in rendered["prod-outside-0"]["spec"]["ports"][0]  # Kubernetes picks
    assert rendered["prod-outside-bootstrap"]["spec"]["ports"][0]["nodePort"] == 31090
    assert "statefulset.kubernetes.io/pod-name" not in rendered["prod-outside-bootstrap"]["spec"]["selector"]
    balancer = rendered["prod-lb-1"]
    assert balancer["spec"]["type"] == "LoadBalancer"
    assert balancer["metadata"]["annotations"] == {"metallb.universe.tf/address-pool": "kind"}
    assert balancer["metadata"]["labels"][naming.EXTERNAL_LISTENER_LABEL] == "lb"


def test_brokers_learn_their_node_address_only_when_a_nodeport_listener_exists():
    def env(c: ClusterContext) -> list[str]:
        sts = next(child.desired for child in children(c) if child.kind == "StatefulSet" and child.desired)
        return [e["name"] for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]]

    assert naming.NODE_ADDRESS_ENV in env(ctx(NODEPORT))
    assert naming.NODE_ADDRESS_ENV not in env(ctx(BALANCED))
    assert naming.NODE_ADDRESS_ENV not in env(ctx())
    # and wait for a certificate naming that address only when the nodeport listener is TLS
    assert naming.CERTIFICATE_NAMES_NODE_ENV in env(ctx({**NODEPORT, "tls": True}))
    assert naming.CERTIFICATE_NAMES_NODE_ENV not in env(ctx(NODEPORT, {**BALANCED, "tls": True}))


def test_the_pass_opens_the_listener_deletes_services_no_longer_needed_and_publishes_where_to_start():
    c = ctx(NODEPORT)
    services = {name: seen(name, port) for name, port in (("prod-outside-0", 30500), ("prod-outside-1", 30501),
                                                          ("prod-outside-2", 31092), ("prod-outside-3", 30503),
                                                          ("prod-gone-bootstrap", 30600))}
    nodes = [replace(n, host_address=f"10.89.0.{n.node_id + 2}") for n in observe(c).nodes]
    result = plan(c, observe(c, nodes, external_services=services), Facts(BROKERS))
    [apply] = [a for a in result.actions if isinstance(a, ApplyChildren)]
    deleted = sorted(child.name for child in apply.children if child.name in services and child.desired is None)
    assert deleted == ["prod-gone-bootstrap", "prod-outside-3"]
    listener = next(entry for entry in result.status["listeners"] if entry["name"] == "outside")
    assert listener["type"] == "nodeport"
    assert listener["bootstrapServers"] == "10.89.0.2:30500,kafka-1.example.com:19094,10.89.0.4:31092"
    assert [x.reason for x in result.conditions][2] != "WaitingForExternalAddress"


def test_a_load_balancer_without_an_address_keeps_the_cluster_progressing_not_ready():
    c = ctx(BALANCED)
    result = plan(c, observe(c), Facts(BROKERS))
    ready, _, progressing, _ = result.conditions
    assert (ready.status, ready.reason) == (False, "WaitingForExternalAddress")
    assert (progressing.status, progressing.reason) == (True, "WaitingForExternalAddress")
    assert result.pace is not Pace.CALM
    lb = next(entry for entry in result.status["listeners"] if entry["name"] == "lb")
    assert lb["bootstrapServers"] is None


NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)


def made(name: str, seconds_ago: float, address: str | None = None) -> ExternalServiceState:
    return ExternalServiceState(name, 30000, address, NOW - datetime.timedelta(seconds=seconds_ago))


@pytest.mark.parametrize(("services", "held"), [
    ({}, "prod-lb-0, prod-lb-1, prod-lb-2"),  # the first pass: no Service made yet
    ({f"prod-lb-{i}": made(f"prod-lb-{i}", 2) for i in range(3)}, "prod-lb-0, prod-lb-1, prod-lb-2"),
    ({**{f"prod-lb-{i}": made(f"prod-lb-{i}", 2, f"192.0.2.{i}") for i in range(2)},
      "prod-lb-2": made("prod-lb-2", 59)}, "prod-lb-2"),
    # no address a minute after the Services were made (no load-balancer controller): the brokers start without
    ({f"prod-lb-{i}": made(f"prod-lb-{i}", 60) for i in range(3)}, None),
    ({f"prod-lb-{i}": made(f"prod-lb-{i}", 2, f"192.0.2.{i}") for i in range(3)}, None),
])
def test_a_new_clusters_brokers_wait_a_minute_at_most_for_their_external_addresses(services, held):
    c = ctx(BALANCED)
    known = external.endpoints("prod", c.spec.listeners, 3, services)
    why = external.holding_new_brokers("prod", c.spec.listeners, range(3), known, services, NOW)
    if held is None:
        assert why is None
    else:
        assert why is not None
        assert f"addresses of {held} are known" in why


def test_a_new_clusters_brokers_are_made_once_their_addresses_are_known_so_that_no_roll_opens_the_listener():
    c = ctx(BALANCED)
    sts = naming.statefulset("prod", Pool.BROKER)
    first = plan(c, observe(c, [], statefulset_replicas={}, observed_at=NOW), Facts())
    # Then the first pass makes the Services but not the brokers, and looks again within a second
    [apply] = [a for a in first.actions if isinstance(a, ApplyChildren)]
    made_now = {(child.kind, child.name) for child in apply.children if child.desired is not None}
    assert {("Service", "prod-lb-0"), ("Service", "prod-lb-bootstrap")} <= made_now
    assert ("StatefulSet", sts) not in made_now
    assert not [child for child in apply.children if child.kind == "StatefulSet" and child.name == sts]  # (not deleted)
    assert first.step == Wait(first.step.message, Awaits.STATE)
    assert "at most 60 s" in first.step.message
    assert first.pace is Pace.FOLLOWING
    progressing = first.conditions[2]
    assert (progressing.reason, progressing.message) == ("WaitingForExternalAddress", first.step.message)
    # And once the load balancer gave every broker an address, the brokers are made with the listener open
    services = {f"prod-lb-{i}": made(f"prod-lb-{i}", 3, f"192.0.2.{i}") for i in range(3)}
    second = plan(c, observe(c, [], statefulset_replicas={}, observed_at=NOW, external_services=services), Facts())
    [apply] = [a for a in second.actions if isinstance(a, ApplyChildren)]
    [brokers] = [child for child in apply.children if child.kind == "StatefulSet" and child.name == sts]
    assert brokers.desired is not None
    [config] = [child.desired for child in apply.children if child.name == naming.config_map("prod")]
    assert config is not None
    assert "LB://192.0.2.0:9095" in "".join(config["data"].values())
    assert second.pace is Pace.BUSY  # (the pods' events tell the rest)
    # An existing cluster's brokers are never held back (their Services' addresses come and go)
    running = plan(c, observe(c, observed_at=NOW), Facts(BROKERS))
    assert any(child.kind == "StatefulSet" and child.name == sts
               for a in running.actions if isinstance(a, ApplyChildren) for child in a.children)


def test_a_scale_up_starts_its_new_broker_once_its_address_is_known_and_the_running_ones_keep_serving():
    spec = spec_with(BALANCED)
    spec["brokers"]["replicas"] = 4
    c = replace(context(spec, name="prod"), initial_voters=())
    running = {f"prod-lb-{i}": made(f"prod-lb-{i}", 600, f"192.0.2.{i}") for i in range(3)}
    # Given 3 brokers serving through a loadbalancer listener, and a fourth asked for
    first = plan(c, observe(c, observed_at=NOW, external_services=running), Facts(BROKERS))
    # Then its Service is made, the StatefulSet stays at 3 (the running brokers untouched), and the pass looks
    # again within a second
    assert statefulset_replicas(first.actions, Pool.BROKER) == 3
    [apply] = [a for a in first.actions if isinstance(a, ApplyChildren)]
    assert ("Service", "prod-lb-3") in {(child.kind, child.name) for child in apply.children if child.desired}
    assert first.step == Wait(first.step.message, Awaits.STATE)
    assert "brokers [3] are made once the external addresses of prod-lb-3 are known" in first.step.message
    assert first.pace is Pace.FOLLOWING
    assert first.conditions[2].reason == "WaitingForExternalAddress"
    # And once the load balancer gave it an address, it starts with the listener open
    addressed = {**running, "prod-lb-3": made("prod-lb-3", 3, "192.0.2.3")}
    second = plan(c, observe(c, observed_at=NOW, external_services=addressed), Facts(BROKERS))
    assert statefulset_replicas(second.actions, Pool.BROKER) == 4
    [config] = [child.desired for a in second.actions if isinstance(a, ApplyChildren) for child in a.children
                if child.name == naming.config_map("prod")]
    assert config is not None
    assert "LB://192.0.2.3:9095" in "".join(config["data"].values())
    # And a load balancer that gives none within a minute does not keep the cluster from growing
    late = {**running, "prod-lb-3": made("prod-lb-3", 60)}
    third = plan(c, observe(c, observed_at=NOW, external_services=late), Facts(BROKERS))
    assert statefulset_replicas(third.actions, Pool.BROKER) == 4


def test_a_services_node_port_and_load_balancer_address_are_read_from_it():
    service = {"metadata": {"name": "prod-lb-0", "creationTimestamp": "2026-11-28T12:00:00Z"},
               "spec": {"type": "LoadBalancer", "ports": [{"name": "lb", "port": 9095, "nodePort": 30123}]},
               "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}}
    assert external_service(service) == ExternalServiceState("prod-lb-0", 30123, "192.0.2.50", NOW)
    assert external_service({**service, "status": {}}) == ExternalServiceState("prod-lb-0", 30123, None, NOW)
    assert external_service({"metadata": {"name": "x"}, "spec": {"type": "ClusterIP"}}) is None


@pytest.mark.parametrize(("listener", "error"), [
    ({"name": "in", "port": 9094, "external": {}}, "external applies to type nodeport or loadbalancer only"),
    ({"name": "lb", "port": 9094, "type": "loadbalancer", "external": {"bootstrapNodePort": 31000}},
     "node ports apply to type nodeport only"),
    ({"name": "np", "port": 9094, "type": "nodeport", "external": {"brokers": [{"broker": 0}, {"broker": 0}]}},
     "names a broker twice"),
    ({"name": "np", "port": 9094, "type": "nodeport",
      "external": {"bootstrapNodePort": 31000, "brokers": [{"broker": 0, "nodePort": 31000}]}},
     "node ports must be unique"),
    ({"name": "np", "port": 9094, "type": "nodeport", "external": {"brokers": [{"broker": 0,
                                                                               "advertisedHost": "not a host"}]}},
     "advertisedHost"),
    ({"name": "np", "port": 9094, "type": "NodePort"}, "type"),
])
def test_a_listener_that_cannot_work_is_refused_with_why(listener: dict[str, Any], error: str):
    with pytest.raises(ValidationError, match=error):
        KafkaClusterSpec.model_validate(spec_with(listener))


def test_tls_on_external_listeners_is_accepted():
    spec = KafkaClusterSpec.model_validate(spec_with({**NODEPORT, "tls": True}, {**BALANCED, "tls": True}))
    assert validate_cluster(spec) == []


def test_a_brokers_certificate_names_every_node_for_tls_nodeport_and_its_load_balancers_for_tls_loadbalancer():
    c = ctx({**NODEPORT, "tls": True}, {**BALANCED, "tls": True})
    services = {"prod-lb-0": seen("prod-lb-0", address="172.18.0.200"),
                "prod-lb-1": seen("prod-lb-1", address="lb-1.example.com"),
                "prod-lb-bootstrap": seen("prod-lb-bootstrap", address="172.18.0.201")}
    nodes = ("172.18.0.3", "172.18.0.2")
    names = {n: external.certificate_names("prod", c.spec.listeners, n, services, nodes) for n in range(3)}
    assert names[0] == ("172.18.0.2", "172.18.0.200", "172.18.0.201", "172.18.0.3")
    # broker 1's advertisedHost, its load balancer's host name; broker 2's load balancer has no address yet
    assert names[1] == ("172.18.0.2", "172.18.0.201", "172.18.0.3", "kafka-1.example.com", "lb-1.example.com")
    assert names[2] == ("172.18.0.2", "172.18.0.201", "172.18.0.3")
    assert external.needs_node_addresses(c.spec.listeners)


def test_listeners_without_tls_put_nothing_outside_into_certificates():
    c = ctx(NODEPORT, BALANCED)
    services = {"prod-lb-0": seen("prod-lb-0", address="172.18.0.200")}
    assert external.certificate_names("prod", c.spec.listeners, 0, services, ("172.18.0.2",)) == ()
    assert not external.needs_node_addresses(c.spec.listeners)
