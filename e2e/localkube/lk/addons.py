"""The cluster's add-ons as API objects (pure): cluster DNS, the local-path storage provisioner, and the
loop-file CSI driver with its provisioner and resizer (volumes that grow online).

All run as host processes next to the kubelet rather than as pods, each with its own client certificate
and the RBAC below. Why not pods: the add-ons are then up as soon as the API server is (no image build,
no pod network, no sandbox in the way of the first DNS answer or the first volume), they cannot be
evicted, throttled or restarted by probes on a busy two-core machine, and `localkube up` watches and
restarts them like every other node component. What the workloads see is unchanged: the kube-dns
Service at 10.96.0.10 (its EndpointSlice points at CoreDNS on the node IP), the default StorageClass
whose helper pods run on the node from the locally built base image, and the StorageClass `expandable`.
"""

from __future__ import annotations

import json
from typing import Any

from . import settings as s
from .settings import Settings

Obj = dict[str, Any]

LOCAL_PATH_NAMESPACE = "local-path-storage"
LOCAL_PATH_SERVICE_ACCOUNT = "local-path-provisioner-service-account"
LOCAL_PATH_CONFIGMAP = "local-path-config"
PROVISIONER = "rancher.io/local-path"
STORAGE_CLASS = "standard"
EXPANDABLE_STORAGE_CLASS = "expandable"


def _cluster_role(name: str, rules: list[Obj]) -> Obj:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules}


def _binding(kind: str, name: str, subjects: list[Obj], namespace: str | None = None) -> Obj:
    metadata: Obj = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": subjects}


def _user(name: str) -> Obj:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}


def dns(node_ip: str) -> list[Obj]:
    ports = [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": s.COREDNS_PORT},
             {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": s.COREDNS_PORT}]
    labels = {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}
    return [
        _cluster_role("localkube:coredns", [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
             "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ]),
        _binding("ClusterRole", "localkube:coredns", [_user("localkube:coredns")]),
        # No selector: the EndpointSlice below is ours, the endpoint controllers leave it alone.
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
         "spec": {"clusterIP": s.DNS_SERVICE_IP, "ports": ports}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "kube-dns-localkube", "namespace": "kube-system",
                      "labels": {"kubernetes.io/service-name": "kube-dns",
                                 "endpointslice.kubernetes.io/managed-by": "localkube"}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": [node_ip], "conditions": {"ready": True}, "nodeName": s.NODE_NAME}],
         "ports": [{"name": p["name"], "port": s.COREDNS_PORT, "protocol": p["protocol"]} for p in ports]},
    ]


SETUP_SCRIPT = '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n'
TEARDOWN_SCRIPT = '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n'


def _helper_pod_yaml() -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  priorityClassName: system-node-critical
  tolerations:
    - key: node.kubernetes.io/disk-pressure
      operator: Exists
      effect: NoSchedule
  containers:
    - name: helper-pod
      image: {s.BASE_IMAGE}
      imagePullPolicy: Never
"""


def _local_path_rbac() -> list[Obj]:
    subjects = [{"kind": "ServiceAccount", "name": LOCAL_PATH_SERVICE_ACCOUNT, "namespace": LOCAL_PATH_NAMESPACE},
                _user("localkube:local-path-provisioner")]
    name = "localkube:local-path-provisioner"
    return [
        _cluster_role(name, [
            {"apiGroups": [""], "resources": ["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["persistentvolumes"],
             "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
        ]),
        _binding("ClusterRole", name, subjects),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": name, "namespace": LOCAL_PATH_NAMESPACE},
         "rules": [{"apiGroups": [""], "resources": ["pods"],
                    "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]}]},
        _binding("Role", name, subjects, LOCAL_PATH_NAMESPACE),
    ]


def storage(cfg: Settings) -> list[Obj]:
    config = {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [str(cfg.volumes)]}]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LOCAL_PATH_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": LOCAL_PATH_SERVICE_ACCOUNT, "namespace": LOCAL_PATH_NAMESPACE}},
        *_local_path_rbac(),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": LOCAL_PATH_CONFIGMAP, "namespace": LOCAL_PATH_NAMESPACE},
         "data": {"config.json": json.dumps(config), "setup": SETUP_SCRIPT, "teardown": TEARDOWN_SCRIPT,
                  "helperPod.yaml": _helper_pod_yaml()}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": STORAGE_CLASS,
                      "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
         "provisioner": PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"},
    ]


def expandable_storage() -> list[Obj]:
    """The opt-in StorageClass whose volumes grow while mounted: csi-loop (csi-loop/main.go) and the upstream
    external-provisioner and external-resizer (their deploy/kubernetes/rbac.yaml, less what is off here:
    leader election, snapshots, capacity tracking, attaching). The default class stays local-path's."""
    provisioner, resizer = "localkube:csi-provisioner", "localkube:csi-resizer"
    read = ["get", "list", "watch"]
    events = {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch", "create", "update", "patch"]}
    return [
        _cluster_role(provisioner, [
            {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": [*read, "create", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": [*read, "update"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": read},
            {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes"], "verbs": read},
            events,
        ]),
        _binding("ClusterRole", provisioner, [_user(provisioner)]),
        _cluster_role(resizer, [
            {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": [*read, "patch"]},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims", "pods"], "verbs": read},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["patch"]},
            {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattributesclasses"], "verbs": read},
            events,
        ]),
        _binding("ClusterRole", resizer, [_user(resizer)]),
        # Nothing to attach (a loop device is set up where the volume is mounted), so no external-attacher;
        # the kubelet gives the files to a pod's fsGroup (brokers run as non-root).
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": s.CSI_DRIVER},
         "spec": {"attachRequired": False, "podInfoOnMount": False, "fsGroupPolicy": "File",
                  "volumeLifecycleModes": ["Persistent"]}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": EXPANDABLE_STORAGE_CLASS},
         "provisioner": s.CSI_DRIVER, "parameters": {"csi.storage.k8s.io/fstype": "xfs"},
         "allowVolumeExpansion": True, "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"},
    ]


def network_policies() -> list[Obj]:
    """What kube-router's firewall reads: the policies and who they select (its informers list them all)."""
    name = "localkube:kube-router"
    return [
        _cluster_role(name, [
            {"apiGroups": [""], "resources": ["namespaces", "pods", "services", "nodes", "endpoints"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
        ]),
        _binding("ClusterRole", name, [_user(name)]),
    ]


def manifest(objects: list[Obj]) -> Obj:
    return {"apiVersion": "v1", "kind": "List", "items": objects}
