"""The cluster's storage as API objects (pure), applied by kind after `kubeadm init` (node_image.py writes them
into the node image as /kind/manifests/default-storage.yaml):
- the default StorageClass `standard`: rancher's local-path-provisioner (a directory per volume on the
  node), run as kind runs it, from the image built here; its helper pods run the locally built base image;
- the StorageClass `expandable`: csi-loop on every node (volumes that grow online, each on one node).
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
LOCAL_PATH_DIR = "/var/local-path-provisioner"  # on each node, in the node container's /var volume
PROVISIONER = "rancher.io/local-path"
STORAGE_CLASS = "standard"
EXPANDABLE_STORAGE_CLASS = "expandable"
CSI_LOOP_DIR = "/var/lib/csi-loop"  # the backing files of a node's `expandable` volumes, likewise
KUBELET_DIR = "/var/lib/kubelet"
CSI_NAMESPACE = "kube-system"
CSI_ACCOUNT = "csi-loop"


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
    subjects = [{"kind": "ServiceAccount", "name": LOCAL_PATH_SERVICE_ACCOUNT, "namespace": LOCAL_PATH_NAMESPACE}]
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


def local_path_storage(cfg: Settings) -> list[Obj]:
    config = {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [LOCAL_PATH_DIR]}]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LOCAL_PATH_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": LOCAL_PATH_SERVICE_ACCOUNT, "namespace": LOCAL_PATH_NAMESPACE}},
        *_local_path_rbac(),
        local_path_provisioner(cfg),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": LOCAL_PATH_CONFIGMAP, "namespace": LOCAL_PATH_NAMESPACE},
         "data": {"config.json": json.dumps(config), "setup": SETUP_SCRIPT, "teardown": TEARDOWN_SCRIPT,
                  "helperPod.yaml": _helper_pod_yaml()}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": STORAGE_CLASS,
                      "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
         "provisioner": PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"},
    ]


def local_path_provisioner(cfg: Settings) -> Obj:
    labels = {"app": "local-path-provisioner"}
    image = s.kind_image("local-path-provisioner", cfg.versions["LOCAL_PATH_PROVISIONER_VERSION"])
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "local-path-provisioner", "namespace": LOCAL_PATH_NAMESPACE},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": LOCAL_PATH_SERVICE_ACCOUNT,
                "priorityClassName": "system-cluster-critical",
                "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                                 "effect": "NoSchedule"}],
                "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                "containers": [{
                    "name": "local-path-provisioner", "image": image, "imagePullPolicy": "Never",
                    "command": ["local-path-provisioner", "start", "--helper-image", s.BASE_IMAGE,
                                "--config", "/etc/config/config.json"],
                    "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            {"name": "CONFIG_MOUNT_PATH", "value": "/etc/config/"}],
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/config/"}],
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                }],
                "volumes": [{"name": "config", "configMap": {"name": LOCAL_PATH_CONFIGMAP}}],
            }}},
    }


def _csi_rbac() -> list[Obj]:
    """What the external-provisioner and -resizer ask of the API (their deploy/kubernetes/rbac.yaml, less what
    is off here: snapshots, capacity tracking, attaching), and the resizers' leader election."""
    read = ["get", "list", "watch"]
    name = "localkube:csi-loop"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": CSI_ACCOUNT, "namespace": CSI_NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": [
            {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": [*read, "create", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": [*read, "update", "patch"]},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": read},
            {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes", "volumeattributesclasses"],
             "verbs": read},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch", "create", "update", "patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": [*read, "create", "update"]},
        ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": CSI_ACCOUNT, "namespace": CSI_NAMESPACE}]},
    ]


def csi_loop(cfg: Settings, image: str) -> list[Obj]:
    """csi-loop on every node beside an external-provisioner that provisions and deletes that node's volumes
    only (node-deployment) and an external-resizer (one leads); the CSIDriver and the StorageClass."""
    plugin_dir = f"{KUBELET_DIR}/plugins/{s.CSI_DRIVER}"
    socket = f"{plugin_dir}/csi.sock"
    node_name = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    plugin = {"name": "plugin-dir", "mountPath": plugin_dir}
    labels = {"app": "csi-loop"}

    def sidecar(name: str, args: list[str]) -> Obj:
        return {"name": name, "image": image, "imagePullPolicy": "Never",
                "command": [name, f"--csi-address={socket}", "--v=1", *args], "env": [node_name],
                "volumeMounts": [plugin], "resources": {"requests": {"cpu": "5m", "memory": "24Mi"}}}

    driver = {
        "name": "csi-loop", "image": image, "imagePullPolicy": "Never",
        "command": ["csi-loop", f"--driver-name={s.CSI_DRIVER}", f"--endpoint={socket}",
                    f"--registration-dir={KUBELET_DIR}/plugins_registry", f"--volumes={CSI_LOOP_DIR}",
                    "--node-id=$(NODE_NAME)"],
        "env": [node_name], "securityContext": {"privileged": True},
        "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}},
        "volumeMounts": [{"name": "kubelet-dir", "mountPath": KUBELET_DIR, "mountPropagation": "Bidirectional"},
                         {"name": "volumes", "mountPath": CSI_LOOP_DIR}],
    }
    return [
        *_csi_rbac(),
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "csi-loop", "namespace": CSI_NAMESPACE},
         "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
             "serviceAccountName": CSI_ACCOUNT, "priorityClassName": "system-node-critical", "hostNetwork": True,
             "containers": [
                 driver,
                 sidecar("csi-provisioner", ["--node-deployment=true", "--node-deployment-immediate-binding=false",
                                             "--leader-election=false", "--extra-create-metadata=false"]),
                 sidecar("csi-resizer", ["--leader-election=true", f"--leader-election-namespace={CSI_NAMESPACE}"]),
             ],
             "volumes": [{"name": "kubelet-dir", "hostPath": {"path": KUBELET_DIR, "type": "Directory"}},
                         {"name": "plugin-dir", "hostPath": {"path": plugin_dir, "type": "DirectoryOrCreate"}},
                         {"name": "volumes", "hostPath": {"path": CSI_LOOP_DIR, "type": "DirectoryOrCreate"}}],
         }}}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": s.CSI_DRIVER},
         "spec": {"attachRequired": False, "podInfoOnMount": False, "fsGroupPolicy": "File",
                  "volumeLifecycleModes": ["Persistent"]}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": EXPANDABLE_STORAGE_CLASS},
         "provisioner": s.CSI_DRIVER, "parameters": {"csi.storage.k8s.io/fstype": "xfs"},
         # XFS lends a growing file room past its end for up to 5 minutes (speculative preallocation): a Kafka
         # volume filled to 90% read 81% five minutes later. A fixed 64k makes `df` say what the data takes.
         "mountOptions": ["allocsize=64k"],
         "allowVolumeExpansion": True, "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"},
    ]


def default_storage(cfg: Settings, csi_image: str) -> str:
    """What kind applies as the default storage: local-path's objects and its Deployment, and csi-loop's, as JSON
    (which is YAML)."""
    objects = [*local_path_storage(cfg), *csi_loop(cfg, csi_image)]
    return json.dumps(manifest(objects), indent=1)


def manifest(objects: list[Obj]) -> Obj:
    return {"apiVersion": "v1", "kind": "List", "items": objects}
