"""The node's programs: how each is started and how we learn that it is ready (pure, except probes)."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import settings as s
from .settings import Settings


@dataclass(frozen=True)
class Component:
    name: str
    argv: tuple[str, ...]
    probe: Callable[[], str]  # "ok" when ready, else what it said


def http_get(url: str, cfg: Settings | None = None, timeout: float = 3) -> tuple[int, str]:
    """GET with our admin client certificate (cfg given) or without verifying (a component's own port)."""
    context = None
    if url.startswith("https"):
        if cfg is not None:
            context = ssl.create_default_context(cafile=str(cfg.pki / "ca.crt"))
            context.load_cert_chain(str(cfg.pki / "admin.crt"), str(cfg.pki / "admin.key"))
        else:
            context = ssl._create_unverified_context()  # our own component on loopback, self-signed
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def _http_probe(url: str, cfg: Settings | None = None) -> Callable[[], str]:
    def probe() -> str:
        status, body = http_get(url, cfg)
        return "ok" if status == 200 else f"HTTP {status}: {body.strip()[:300]}"
    return probe


def _ctr_probe(cfg: Settings) -> Callable[[], str]:
    def probe() -> str:
        result = subprocess.run(["ctr", "--address", str(cfg.containerd_socket), "version"],
                                capture_output=True, text=True, timeout=10, check=False)
        return "ok" if result.returncode == 0 else result.stderr.strip()[:300]
    return probe


def _socket_probe(path: Path) -> Callable[[], str]:
    def probe() -> str:
        with socket.socket(socket.AF_UNIX) as sock:
            try:
                sock.connect(str(path))
            except OSError as error:
                return f"{path}: {error.strerror}"
        return "ok"
    return probe


def _always_ok() -> str:
    return "ok"


def components(cfg: Settings, node_ip: str) -> dict[str, Component]:
    """Every program of the cluster, in start order."""
    pki, conf, bin_ = cfg.pki, cfg.kubeconfigs, cfg.binary
    etcd_url = f"http://127.0.0.1:{s.ETCD_CLIENT_PORT}"
    peer_url = f"http://127.0.0.1:{s.ETCD_PEER_PORT}"

    def delegated(name: str) -> tuple[str, ...]:
        kubeconfig = str(conf / f"{name}.conf")
        return ("--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig,
                "--authorization-kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--leader-elect=false")

    items = [
        Component("etcd", (
            "etcd", "--name", s.NODE_NAME, "--data-dir", str(cfg.etcd_data),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"{s.NODE_NAME}={peer_url}", "--initial-cluster-state", "new",
            "--logger", "zap", "--log-outputs", "stderr"),
            _http_probe(f"{etcd_url}/health")),
        Component("containerd", ("containerd", "--config", str(cfg.config / "containerd.toml")), _ctr_probe(cfg)),
        Component("kube-apiserver", (
            str(bin_("kube-apiserver")), "--advertise-address", node_ip, "--bind-address", "0.0.0.0",
            "--secure-port", str(s.APISERVER_PORT), "--etcd-servers", etcd_url,
            "--service-cluster-ip-range", s.SERVICE_CIDR,
            "--client-ca-file", str(pki / "ca.crt"),
            "--tls-cert-file", str(pki / "apiserver.crt"), "--tls-private-key-file", str(pki / "apiserver.key"),
            "--kubelet-client-certificate", str(pki / "apiserver-kubelet-client.crt"),
            "--kubelet-client-key", str(pki / "apiserver-kubelet-client.key"),
            "--kubelet-certificate-authority", str(pki / "ca.crt"),
            "--kubelet-preferred-address-types", "InternalIP",
            "--service-account-issuer", f"https://kubernetes.default.svc.{s.CLUSTER_DOMAIN}",
            "--service-account-key-file", str(pki / "sa.pub"),
            "--service-account-signing-key-file", str(pki / "sa.key"),
            # Delegated authentication in the controller manager and the scheduler reads these; no
            # aggregated API server runs here, so no front-proxy certificate exists to match them.
            "--requestheader-client-ca-file", str(pki / "ca.crt"),
            "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
            "--allow-privileged=true", "--profiling=false", "--v", "1"),
            _http_probe(f"https://127.0.0.1:{s.APISERVER_PORT}/readyz", cfg)),
        Component("kube-controller-manager", (
            str(bin_("kube-controller-manager")), *delegated("controller-manager"),
            "--secure-port", str(s.CONTROLLER_MANAGER_PORT), "--cluster-name", s.NODE_NAME,
            "--cluster-signing-cert-file", str(pki / "ca.crt"), "--cluster-signing-key-file", str(pki / "ca.key"),
            "--root-ca-file", str(pki / "ca.crt"), "--service-account-private-key-file", str(pki / "sa.key"),
            "--use-service-account-credentials=true", "--v", "1"),
            _http_probe(f"https://127.0.0.1:{s.CONTROLLER_MANAGER_PORT}/healthz")),
        Component("kube-scheduler", (
            str(bin_("kube-scheduler")), *delegated("scheduler"), "--secure-port", str(s.SCHEDULER_PORT), "--v", "1"),
            _http_probe(f"https://127.0.0.1:{s.SCHEDULER_PORT}/healthz")),
        Component("kubelet", (
            str(bin_("kubelet")), "--config", str(cfg.config / "kubelet.json"),
            "--kubeconfig", str(conf / "kubelet.conf"), "--root-dir", str(cfg.kubelet_root),
            "--hostname-override", s.NODE_NAME, "--node-ip", node_ip, "--v", "1"),
            _http_probe(f"http://127.0.0.1:{s.KUBELET_HEALTHZ_PORT}/healthz")),
        Component("kube-proxy", (str(bin_("kube-proxy")), "--config", str(cfg.config / "kube-proxy.json"), "--v", "1"),
                  _http_probe(f"http://127.0.0.1:{s.KUBE_PROXY_HEALTHZ_PORT}/healthz")),
        Component("coredns", (str(bin_("coredns")), "-conf", str(cfg.config / "Corefile")),
                  _http_probe(f"http://127.0.0.1:{s.COREDNS_READY_PORT}/ready")),
        Component("local-path-provisioner", (
            str(bin_("local-path-provisioner")), "start", "--kubeconfig", str(conf / "local-path-provisioner.conf"),
            "--namespace", "local-path-storage", "--configmap-name", "local-path-config",
            "--service-account-name", "local-path-provisioner-service-account",
            "--provisioner-name", "rancher.io/local-path", "--helper-image", s.BASE_IMAGE),
            _always_ok),
        # Volumes that grow online (StorageClass "expandable", addons.py): our loop-file CSI driver, which
        # registers itself with the kubelet, and the upstream provisioner and resizer that drive it.
        Component("csi-loop", (
            str(bin_("csi-loop")), "--endpoint", str(cfg.csi_socket), "--registration-dir", str(cfg.plugins_registry),
            "--volumes", str(cfg.csi_volumes), "--node-id", s.NODE_NAME, "--driver-name", s.CSI_DRIVER),
            _socket_probe(cfg.csi_socket)),
        Component("csi-provisioner", (
            str(bin_("csi-provisioner")), "--kubeconfig", str(conf / "csi-provisioner.conf"),
            "--csi-address", str(cfg.csi_socket), "--leader-election=false", "--v", "1"),
            _always_ok),
        Component("csi-resizer", (
            str(bin_("csi-resizer")), "--kubeconfig", str(conf / "csi-resizer.conf"),
            "--csi-address", str(cfg.csi_socket), "--leader-election=false", "--v", "1"),
            _always_ok),
        # The NetworkPolicy enforcer: kube-router's firewall only (the bridge plugin routes, kube-proxy
        # serves Services); its chains see bridged pod traffic through bridge-nf-call-iptables.
        Component("kube-router", (
            str(bin_("kube-router")), "--kubeconfig", str(conf / "kube-router.conf"),
            "--hostname-override", s.NODE_NAME, "--run-firewall=true", "--run-router=false",
            "--run-service-proxy=false", "--run-loadbalancer=false", "--gobgp-admin-port=0",
            "--service-cluster-ip-range", s.SERVICE_CIDR, "--health-port", str(s.KUBE_ROUTER_HEALTH_PORT),
            "--v", "1"),
            _http_probe(f"http://127.0.0.1:{s.KUBE_ROUTER_HEALTH_PORT}/healthz")),
    ]
    return {c.name: c for c in items}


def node_ready(cfg: Settings) -> str:
    status, body = http_get(f"https://127.0.0.1:{s.APISERVER_PORT}/api/v1/nodes/{s.NODE_NAME}", cfg)
    if status != 200:
        return f"HTTP {status}"
    conditions = {c["type"]: c for c in json.loads(body)["status"].get("conditions", [])}
    ready = conditions.get("Ready", {})
    return "ok" if ready.get("status") == "True" else f"Ready={ready.get('status')}: {ready.get('message')}"


def default_service_account(cfg: Settings) -> str:
    status, _ = http_get(f"https://127.0.0.1:{s.APISERVER_PORT}/api/v1/namespaces/default/serviceaccounts/default",
                         cfg)
    return "ok" if status == 200 else f"HTTP {status}"
