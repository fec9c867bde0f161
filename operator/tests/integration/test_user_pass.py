"""The user pass against a real broker and a real API server: what it says when Kafka stops answering between
its reads and its changes."""

from __future__ import annotations

import base64
import datetime
import json
import signal
from collections import Counter
from typing import Any

import pytest

from krafty import naming
from krafty.clients.connection import Connection
from krafty.clients.kafka_users import UserAdmin
from krafty.clients.kraft_transport import wire_name
from krafty.clients.kube import Kube
from krafty.pki import signing
from krafty.reconcile.connection import fixed
from krafty.reconcile.users import UserReconciler
from krafty.telemetry import metrics
from krafty_testkit.apiserver import LocalApiServer
from krafty_testkit.kafka_proxy import KafkaProxy
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster
from krafty_testkit.waiting import wait_for

from ..conftest import admin_kube, operator_kube

NS = "userpass"
CLUSTER = "local"


def _secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}}


@pytest.fixture(scope="module")
def kube(apiserver: LocalApiServer) -> Kube:
    """A KafkaCluster with a SCRAM listener, and the CAs its PKI pass would have made."""
    kube = admin_kube(apiserver, NS)
    apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": "KafkaCluster",
                     "metadata": {"name": CLUSTER, "namespace": NS},
                     "spec": {"brokers": {"replicas": 3}, "listeners": [
                         {"name": "scram", "port": 9095, "tls": True, "authentication": "scram-sha-512"}]}})
    now, year = datetime.datetime.now(datetime.UTC), datetime.timedelta(days=365)
    clients, cluster = signing.new_ca("clients", now, year), signing.new_ca("cluster", now, year)
    apiserver.apply(_secret(naming.clients_ca(CLUSTER), {naming.CA_CERT_KEY: clients.cert,
                                                         naming.CA_KEY_KEY: clients.key}))
    apiserver.apply(_secret(naming.cluster_ca_cert(CLUSTER), {naming.CA_CERT_KEY: cluster.cert}))
    return kube


class FreezingAfterReads(UserAdmin):
    """The user pass's real client; once it has read what Kafka holds, the broker is frozen (SIGSTOP: its
    connections stay open and nothing answers), as Kafka stopping between a pass's reads and its changes."""

    def __init__(self, connection: Connection, kafka: LocalKafkaCluster) -> None:
        super().__init__(connection, timeout=2.0)
        self.kafka = kafka
        self.freeze = True

    def quotas(self) -> dict[str, dict[str, float]]:  # (the last read of a pass)
        held = super().quotas()
        if self.freeze:
            self.freeze = False
            self.kafka.nodes[0].process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        return held


def ready(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get(naming.USER_KIND, name, NS) or {}
    return next((c for c in (body.get("status") or {}).get("conditions", []) if c["type"] == "Ready"), {})


def events(apiserver: LocalApiServer, name: str) -> list[str]:
    out = apiserver.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}",
                            "-o", "json").stdout
    return [f"{e['reason']}: {e['message']}" for e in json.loads(out)["items"]]


def test_a_credential_kafka_never_answers_for_says_it_cannot_be_asked_and_a_later_pass_sets_it(
        apiserver, kube, local_kafka):
    kafka = local_kafka(Layout.combined(1))
    admin = FreezingAfterReads(Connection(kafka.bootstrap_servers), kafka)
    reconciler = UserReconciler(operator_kube(apiserver, (NS,)), fixed(kafka.bootstrap_servers), lambda _: admin)
    apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": naming.USER_KIND,
                     "metadata": {"name": "alice", "namespace": NS},
                     "spec": {"clusterRef": {"name": CLUSTER}, "authentication": {"type": "scram-sha-512"}}})
    try:
        # Given a SCRAM user whose pass read Kafka, and then Kafka stopped answering
        # When the pass sets the user's credential
        reconciler.reconcile(NS, CLUSTER)
        # Then the user says Kafka cannot be asked, not that Kafka refused its credential (as it said before:
        # CredentialRefused, "Kafka refused the SCRAM credential: ... Timed out")
        assert (ready(kube, "alice").get("status"), ready(kube, "alice").get("reason")) == (
            "False", "KafkaUnreachable"), ready(kube, "alice")
        assert not [e for e in events(apiserver, "alice") if e.startswith("CredentialRefused")]
    finally:
        kafka.nodes[0].process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    # And once Kafka answers again, a later pass sets it with the password its Secret kept
    wait_for(lambda: (reconciler.reconcile(NS, CLUSTER), ready(kube, "alice"))[1],
             lambda condition: condition.get("status") == "True", 60, "alice Ready", interval=1)
    assert "alice" in UserAdmin(Connection(kafka.bootstrap_servers)).scram_users()
    assert [e for e in events(apiserver, "alice") if e.startswith("CredentialSet")]


def _kube_requests() -> Counter[tuple[str, str]]:
    """The operator's requests to the API server so far, by verb and kind."""
    return Counter({(s.labels["verb"], s.labels["kind"]): int(s.value) for metric in metrics.KUBE_REQUESTS.collect()
                    for s in metric.samples if s.name.endswith("_total")})


def test_a_calm_pass_counted_call_by_call(apiserver, kube, local_kafka):
    # Given a SCRAM user Ready with a quota, and the pass reaching Kafka through a proxy that counts each request
    kafka = local_kafka(Layout.combined(1))
    proxy = KafkaProxy(kafka.brokers[0].broker_port)
    try:
        admin = UserAdmin(Connection(proxy.address))
        reconciler = UserReconciler(operator_kube(apiserver, (NS,)), fixed(proxy.address), lambda _: admin)
        apiserver.apply({"apiVersion": "kafka.krafty.io/v1alpha1", "kind": naming.USER_KIND,
                         "metadata": {"name": "calm", "namespace": NS},
                         "spec": {"clusterRef": {"name": CLUSTER}, "authentication": {"type": "scram-sha-512"},
                                  "quotas": {"producerByteRate": 1048576}}})
        wait_for(lambda: (reconciler.reconcile(NS, CLUSTER), ready(kube, "calm"))[1],
                 lambda condition: condition.get("status") == "True", 60, "calm Ready", interval=1)
        reconciler.reconcile(NS, CLUSTER)
        # When it passes again, nothing changed
        asked, requests = proxy.requests(), _kube_requests()
        reconciler.reconcile(NS, CLUSTER)
        kafka_calls = Counter({wire_name(key): n for key, n in (proxy.requests() - asked).items()})
        kube_calls = _kube_requests() - requests
        # Then it asks Kafka what it holds, one request each (no ACLs: the cluster has no authorizer), and the API
        # server for the KafkaUsers, their cluster, its two CA Secrets and each user's Secret; it writes nothing
        assert kafka_calls == Counter({"DescribeUserScramCredentials": 1, "DescribeClientQuotas": 1})
        users = len(kube.list(naming.USER_KIND, NS))  # (this one, and those the module's other tests left)
        assert kube_calls == Counter({("list", naming.USER_KIND): 1, ("get", naming.CLUSTER_KIND): 1,
                                      ("get", "Secret"): 2 + users}), kube_calls
    finally:
        proxy.close()
        apiserver.kubectl("delete", naming.USER_KIND.lower(), "calm", "-n", NS, "--wait=false")
