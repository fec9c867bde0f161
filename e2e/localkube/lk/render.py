"""The configuration files of the node's programs, rendered from Settings (pure: no I/O here).

Machine facts that shape them (see /work/shared/notes/test-machines.md):
- no CAP_SYS_RESOURCE, even for root: nothing may lower an oom_score_adj, so containerd runs with
  restrict_oom_score_adj and the kubelet and kube-proxy are told oomScoreAdj 0 (their own, unchanged);
- the hard nofile limit is 20000: no rlimit may go above it (kubelet maxOpenFiles);
- cgroup v1 without systemd: the cgroupfs driver everywhere, and failCgroupV1 false;
- image garbage collection and disk-pressure eviction are off: images here cannot be pulled back, and
  a shared test machine's disk usage says nothing about this cluster.
"""

from __future__ import annotations

import json

from . import settings as s
from .settings import Settings


def containerd_toml(cfg: Settings) -> str:
    return f"""version = 2
root = "{cfg.containerd_root}"
state = "{cfg.containerd_state}"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "{cfg.containerd_socket}"

[ttrpc]
  address = "{cfg.containerd_socket}.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = "{cfg.containerd_root}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{cfg.pause_image}"
  restrict_oom_score_adj = true
  # Pod network namespaces under our run dir, not /run/netns: podman and `ip netns` may bind /run/netns
  # onto itself at any time, which hides the namespaces mounted there before from umount and unlink.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  max_container_log_line_size = 16384

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{cfg.runc_root}"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cfg.cni_conf_dir}"
    max_conf_num = 1
"""


def cni_conflist(cfg: Settings) -> str:
    return json.dumps({
        "cniVersion": "1.0.0",
        "name": s.NETWORK_NAME,
        "plugins": [
            {"type": "bridge", "bridge": s.BRIDGE, "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(cfg.cni_ipam_dir),
                      "ranges": [[{"subnet": s.NODE_POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }, indent=2)


def kubelet_config(cfg: Settings) -> str:
    pki = cfg.pki
    return json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(pki / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "containerRuntimeEndpoint": f"unix://{cfg.containerd_socket}",
        "clusterDomain": s.CLUSTER_DOMAIN,
        "clusterDNS": [s.DNS_SERVICE_IP],
        "resolvConf": "/etc/resolv.conf",
        "tlsCertFile": str(pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "port": s.KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": s.KUBELET_HEALTHZ_PORT,
        "podLogsDir": str(cfg.pod_logs),
        "oomScoreAdj": 0,
        "maxOpenFiles": 16384,
        "failSwapOn": False,
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "registerNode": True,
        "maxPods": 110,
        # The kubelet finishes a volume's online expansion only when it next syncs the pod: every 10 s
        # rather than every minute, so a grown PersistentVolumeClaim shows its size within seconds.
        "syncFrequency": "10s",
    }, indent=2)


def kube_proxy_config(cfg: Settings) -> str:
    return json.dumps({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(cfg.kubeconfigs / "kube-proxy.conf")},
        "mode": "iptables",
        "clusterCIDR": s.POD_CIDR,
        "hostnameOverride": s.NODE_NAME,
        "bindAddress": "0.0.0.0",
        "healthzBindAddress": f"127.0.0.1:{s.KUBE_PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{s.KUBE_PROXY_METRICS_PORT}",
        "oomScoreAdj": 0,
        # 0 leaves the kernel's conntrack settings alone: this is somebody's shared machine.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }, indent=2)


def corefile(cfg: Settings, node_ip: str) -> str:
    kubeconfig = cfg.kubeconfigs / "coredns.conf"
    return f""".:{s.COREDNS_PORT} {{
    bind {node_ip}
    errors
    health 127.0.0.1:{s.COREDNS_HEALTH_PORT}
    ready 127.0.0.1:{s.COREDNS_READY_PORT}
    kubernetes {s.CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} localkube
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    forward . /etc/resolv.conf
    cache 5
    loop
    loadbalance
}}
"""
