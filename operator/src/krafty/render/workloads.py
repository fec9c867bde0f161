"""StatefulSets of the broker and controller pools."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from krafty import naming
from krafty.decide import external
from krafty.model import NodePool, parse_quantity
from krafty.model.cluster import ClientAuthentication, ListenerType
from krafty.model.context import ClusterContext
from krafty.naming import Pool
from krafty.render.kafka_config import restart_hash, static_config

RUN_AS = 1001
DEFAULT_HEAP_MIB = 1024


def heap_mib(spec: NodePool) -> int:
    """-Xmx in MiB: the spec's heap, else half the memory limit (or request), else 1 GiB."""
    if spec.jvm.heap:
        return max(64, int(parse_quantity(spec.jvm.heap) / Decimal(2**20)))
    memory = spec.resources.limits.get("memory") or spec.resources.requests.get("memory")
    if memory:
        return max(64, int(parse_quantity(memory) / Decimal(2**21)))
    return DEFAULT_HEAP_MIB


def _ports(ctx: ClusterContext, pool: Pool) -> list[dict[str, Any]]:
    ports: list[dict[str, Any]] = []
    if pool is Pool.BROKER:
        ports += [{"name": lst.name, "containerPort": lst.port} for lst in ctx.listeners_by_port]
        ports.append({"name": "replication", "containerPort": naming.REPLICATION_PORT})
    if pool is Pool.CONTROLLER or not ctx.dedicated:
        ports.append({"name": "controller", "containerPort": naming.CONTROLLER_PORT})
    if ctx.spec.metrics.enabled:
        ports.append({"name": "metrics", "containerPort": naming.METRICS_PORT})
    return ports


def _env(ctx: ClusterContext, pool: Pool, spec: NodePool) -> list[dict[str, Any]]:
    heap = heap_mib(spec)
    env: list[dict[str, Any]] = [
        {"name": "KRAFTY_POOL", "value": pool.value},
        {"name": "KRAFTY_NODE_ID_OFFSET", "value": str(naming.node_id(pool, 0))},
        {"name": "KRAFTY_METRICS", "value": "true" if ctx.spec.metrics.enabled else "false"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "KAFKA_HEAP_OPTS", "value": f"-Xms{heap}m -Xmx{heap}m"},
    ]
    if spec.jvm.options:
        env.append({"name": "KAFKA_OPTS", "value": " ".join(spec.jvm.options)})
    if ctx.spec.rack is not None and pool is Pool.BROKER:
        env.append({"name": "KRAFTY_RACK_TOPOLOGY_KEY", "value": ctx.spec.rack.topology_key})
    if pool is Pool.BROKER and any(listener.type is ListenerType.NODEPORT for listener in ctx.spec.listeners):
        # What a nodeport listener advertises: the address of the node the pod runs on
        env.append({"name": naming.NODE_ADDRESS_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}})
    if pool is Pool.BROKER and external.needs_node_addresses(ctx.spec.listeners):
        env.append({"name": naming.CERTIFICATE_NAMES_NODE_ENV, "value": "true"})
    return env


def _probes(ctx: ClusterContext, pool: Pool) -> dict[str, Any]:
    port = naming.REPLICATION_PORT if pool is Pool.BROKER else naming.CONTROLLER_PORT
    return {
        # Ready means: running and caught up (broker-image/bin/krafty-ready.sh), so the
        # PodDisruptionBudget never lets a drain stop a second node while one catches up.
        "readinessProbe": {"exec": {"command": [f"{naming.KAFKA_HOME}/bin/krafty-ready.sh"]},
                           "periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 3},
        # Log recovery after an unclean stop can take long: give start-up an hour. Looked at each second (a TCP
        # connection from the kubelet): a node restarting in a roll is Ready as soon as its port opens, not up to
        # a period later (the kubelet runs the readiness probe as soon as start-up succeeds).
        "startupProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 3600},
        "livenessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 15, "timeoutSeconds": 5,
                          "failureThreshold": 8},
    }


def _container(ctx: ClusterContext, pool: Pool, spec: NodePool) -> dict[str, Any]:
    resources = {k: v for k, v in (("requests", dict(spec.resources.requests)),
                                   ("limits", dict(spec.resources.limits))) if v}
    return {
        "name": "kafka",
        "image": ctx.image,
        "imagePullPolicy": "IfNotPresent",
        "env": _env(ctx, pool, spec),
        "ports": _ports(ctx, pool),
        "resources": resources,
        "volumeMounts": [
            {"name": naming.DATA_VOLUME, "mountPath": naming.DATA_DIR},
            {"name": "config", "mountPath": naming.CONFIG_DIR, "readOnly": True},
            {"name": "node-certs", "mountPath": naming.NODE_CERTS_DIR, "readOnly": True},
            {"name": "trust", "mountPath": naming.TRUST_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            *([{"name": "clients-trust", "mountPath": naming.CLIENTS_TRUST_DIR, "readOnly": True}]
              if _trusts_clients_ca(ctx, pool) else []),
            *({"name": volume, "mountPath": f"{naming.CONFIG_SECRETS_DIR}/{secret}", "readOnly": True}
              for volume, secret in _config_secrets(ctx, pool)),
        ],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        **_probes(ctx, pool),
    }


def _trusts_clients_ca(ctx: ClusterContext, pool: Pool) -> bool:
    """Brokers with a listener that takes client certificates (authentication tls) trust the clients CA."""
    return pool is Pool.BROKER and any(listener.authentication is ClientAuthentication.TLS
                                       for listener in ctx.spec.listeners)


def _config_secrets(ctx: ClusterContext, pool: Pool) -> list[tuple[str, str]]:
    """(volume, Secret) of each Secret the brokers' configFromSecrets names."""
    if pool is not Pool.BROKER:
        return []
    names = sorted({ref.name for ref in ctx.spec.brokers.config_from_secrets.values()})
    return [(f"config-secret-{index}", name) for index, name in enumerate(names)]


def _pod_annotations(ctx: ClusterContext, pool: Pool, spec: NodePool) -> dict[str, str]:
    annotations = dict(spec.template.annotations)
    if ctx.spec.metrics.enabled:
        annotations.update({"prometheus.io/scrape": "true", "prometheus.io/port": str(naming.METRICS_PORT),
                            "prometheus.io/path": "/metrics"})
    annotations[naming.CONFIG_HASH_ANNOTATION] = restart_hash(ctx, pool)
    annotations[naming.CERTIFICATES_ANNOTATION] = ctx.certificates
    if _config_secrets(ctx, pool):
        annotations[naming.CONFIG_SECRETS_ANNOTATION] = ctx.config_secrets
    if _trusts_clients_ca(ctx, pool):
        annotations[naming.CLIENTS_CA_ANNOTATION] = ctx.clients_ca
    annotations[naming.STATIC_CONFIG_ANNOTATION] = json.dumps(static_config(ctx, pool), separators=(",", ":"))
    return annotations


def _pod_spec(ctx: ClusterContext, pool: Pool, spec: NodePool) -> dict[str, Any]:
    template = spec.template
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": naming.config_map(ctx.name)}},
        # Readable by the Kafka user's group only (fsGroup)
        {"name": "node-certs", "secret": {"secretName": naming.node_certificates(ctx.name), "defaultMode": 0o440}},
        {"name": "trust", "secret": {"secretName": naming.cluster_ca_cert(ctx.name), "defaultMode": 0o440}},
        {"name": "tmp", "emptyDir": {}},
        *([{"name": "clients-trust", "secret": {"secretName": naming.clients_ca_cert(ctx.name), "defaultMode": 0o440}}]
          if _trusts_clients_ca(ctx, pool) else []),
        *({"name": volume, "secret": {"secretName": secret, "defaultMode": 0o440}}
          for volume, secret in _config_secrets(ctx, pool)),
    ]
    if spec.storage is None:
        volumes.append({"name": naming.DATA_VOLUME, "emptyDir": {}})
    pod: dict[str, Any] = {
        "serviceAccountName": naming.service_account(ctx.name),
        "automountServiceAccountToken": ctx.spec.rack is not None,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": ctx.spec.restarts.grace_period_seconds,
        # OnRootMismatch: the kubelet walks a volume to change its group only when its root is not ours yet,
        # not on every start (minutes for a large log directory)
        "securityContext": {"runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS,
                            "fsGroupChangePolicy": "OnRootMismatch", "runAsNonRoot": True,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_container(ctx, pool, spec)],
        "volumes": volumes,
    }
    optional = {"nodeSelector": template.node_selector, "affinity": template.affinity,
                "tolerations": list(template.tolerations),
                "topologySpreadConstraints": topology_spread(ctx, pool, spec),
                "priorityClassName": template.priority_class_name}
    pod.update({key: value for key, value in optional.items() if value})
    return pod


def topology_spread(ctx: ClusterContext, pool: Pool, spec: NodePool) -> list[dict[str, Any]]:
    """The template's own constraints, or by default a pool's pods spread one per zone and one per machine, so
    that losing a zone or a node takes at most one replica of a partition whose replicas are on different
    brokers. One per zone is required of a rack-aware cluster (on its rack's key: every node has that label,
    and replicas follow the racks) and preferred otherwise (a node without a zone label must still take a pod);
    one per machine is preferred (more brokers than nodes must still run)."""
    if spec.template.topology_spread_constraints:
        return list(spec.template.topology_spread_constraints)
    selector = {"matchLabels": naming.selector_labels(ctx.name, pool)}
    zone_key = ctx.spec.rack.topology_key if ctx.spec.rack else naming.ZONE_LABEL
    spread = [{"maxSkew": 1, "topologyKey": zone_key, "labelSelector": selector,
               "whenUnsatisfiable": "DoNotSchedule" if ctx.spec.rack else "ScheduleAnyway"}]
    if zone_key != naming.HOSTNAME_LABEL:
        spread.append({"maxSkew": 1, "topologyKey": naming.HOSTNAME_LABEL, "labelSelector": selector,
                       "whenUnsatisfiable": "ScheduleAnyway"})
    return spread


def statefulset(ctx: ClusterContext, pool: Pool) -> dict[str, Any]:
    spec = ctx.pool_spec(pool)
    # In combined mode the controller settings live on the brokers.
    storage = spec.storage
    selector = naming.selector_labels(ctx.name, pool)
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": ctx.metadata(naming.statefulset(ctx.name, pool), pool),
        "spec": {
            "replicas": ctx.replicas(pool),
            "serviceName": naming.headless_service(ctx.name, pool),
            # All nodes start together (a quorum needs a majority to form); the operator,
            # not the StatefulSet controller, decides when each pod restarts.
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": {**spec.template.labels, **naming.labels(ctx.name, pool)},
                             "annotations": _pod_annotations(ctx, pool, spec)},
                "spec": _pod_spec(ctx, pool, spec),
            },
        },
    }
    if storage is not None:
        size = ctx.claim_sizes.get(pool, storage.size)
        claim: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
        if storage.storage_class_name:
            claim["storageClassName"] = storage.storage_class_name
        body["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": naming.DATA_VOLUME,
                                                              "labels": naming.labels(ctx.name, pool)},
                                                 "spec": claim}]
        body["spec"]["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": "Delete" if storage.delete_claim else "Retain",
            # Whatever shrinks the StatefulSet (kubectl scale, a GitOps tool) keeps the data: the operator deletes
            # a removed node's volume itself, once the node is emptied and gone from the metadata.
            "whenScaled": "Retain",
        }
    return body
