"""A hand-written deployment of a KafkaCluster spec, for benchmarks against the operator: the operator's own
rendering (ConfigMap, Services, StatefulSets) and certificates, applied once with kubectl into a namespace the
operator does not watch, so the difference is what the operator adds."""

from __future__ import annotations

import datetime
import json
from typing import Any

from krafty import naming
from krafty.model import KafkaClusterSpec
from krafty.model.context import ClusterContext, Voter
from krafty.pki import signing
from krafty.render.cluster import children
from krafty.render.secrets import secret
from krafty.wire import random_kafka_uuid
from krafty_testkit.k8s_kafka import BROKER_IMAGE
from krafty_testkit.kube import KubeCluster

RAW = "bench-raw"  # the namespace, which the operator does not watch; the cluster is "raw"


def fresh_namespace(kube: KubeCluster) -> None:
    """RAW made anew: one a benchmark before left terminating (deleted without waiting) is waited out first."""
    kube.kubectl("delete", "namespace", RAW, "--ignore-not-found", "--wait=true", timeout=600)
    kube.kubectl("create", "namespace", RAW)


def raw_certificates(ctx: ClusterContext) -> list[dict[str, Any]]:
    """What a hand-written deployment with the same mutual TLS between its nodes needs: a CA and node
    certificates, made once with the same code."""
    now, year = datetime.datetime.now(datetime.UTC), datetime.timedelta(days=365)
    ca = signing.new_ca("raw cluster CA", now, year)
    nodes: dict[str, str] = {}
    for pool in ctx.pools():
        for ordinal in range(ctx.replicas(pool)):
            names = naming.node_dns_names(ctx.name, ctx.namespace, pool, ordinal, ctx.cluster_domain)
            pair = signing.issue(ca, naming.node_common_name(ctx.name), names, now, year)
            cert, key = naming.node_certificate_keys(pool, ordinal)
            nodes |= {cert: pair.cert, key: pair.key}
    return [secret(ctx, naming.node_certificates(ctx.name), nodes),
            secret(ctx, naming.cluster_ca_cert(ctx.name), {naming.CA_CERT_KEY: ca.cert})]


def raw_manifests(spec: dict[str, Any]) -> list[dict[str, Any]]:
    parsed = KafkaClusterSpec.model_validate(spec)
    voters = tuple(Voter(i, random_kafka_uuid()) for i in range(parsed.controllers.replicas))
    ctx = ClusterContext("raw", RAW, "none", parsed, random_kafka_uuid(), voters, BROKER_IMAGE,
                         internal_tls=parsed.tls.internal is not False)  # (a new cluster's choice: the spec's)
    docs = raw_certificates(ctx)
    for body in docs:
        body["metadata"].pop("ownerReferences", None)
    for child in children(ctx):
        if child.desired is not None and child.kind not in ("PodDisruptionBudget",):
            body = json.loads(json.dumps(child.desired))
            body["metadata"].pop("ownerReferences", None)
            docs.append(body)
    return docs
