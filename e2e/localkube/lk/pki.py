"""Certificates, the service-account key pair and kubeconfigs, made locally with openssl.

One CA signs everything (P-256 keys: fast to make, accepted by every component). The set is kept across
`down`: a missing certificate (a component added since) is made on its own, and all are remade when the
node IP in the serving certificates changed.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import settings as s
from .settings import Settings

DAYS = "3650"


@dataclass(frozen=True)
class Cert:
    name: str
    cn: str
    org: str = ""
    server_sans: tuple[str, ...] = ()  # "DNS:x" / "IP:y"; empty means a client certificate


def certificates(node_ip: str) -> tuple[Cert, ...]:
    apiserver_sans = (
        "DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
        f"DNS:kubernetes.default.svc.{s.CLUSTER_DOMAIN}", "DNS:localhost", f"DNS:{s.NODE_NAME}",
        f"IP:{s.KUBERNETES_SERVICE_IP}", "IP:127.0.0.1", f"IP:{node_ip}",
    )
    return (
        Cert("apiserver", "kube-apiserver", server_sans=apiserver_sans),
        Cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"),
        Cert("admin", "krafty-localkube-admin", "system:masters"),
        Cert("controller-manager", "system:kube-controller-manager"),
        Cert("scheduler", "system:kube-scheduler"),
        Cert("kubelet", f"system:node:{s.NODE_NAME}", "system:nodes"),
        Cert("kubelet-serving", s.NODE_NAME,
             server_sans=(f"DNS:{s.NODE_NAME}", "DNS:localhost", "IP:127.0.0.1", f"IP:{node_ip}")),
        Cert("kube-proxy", "system:kube-proxy"),
        Cert("coredns", "localkube:coredns"),
        Cert("local-path-provisioner", "localkube:local-path-provisioner"),
        Cert("kube-router", "localkube:kube-router"),
        Cert("csi-provisioner", "localkube:csi-provisioner"),
        Cert("csi-resizer", "localkube:csi-resizer"),
    )


# Which certificate each kubeconfig carries.
KUBECONFIGS = {
    "admin": "admin", "controller-manager": "controller-manager", "scheduler": "scheduler",
    "kubelet": "kubelet", "kube-proxy": "kube-proxy", "coredns": "coredns",
    "local-path-provisioner": "local-path-provisioner", "kube-router": "kube-router",
    "csi-provisioner": "csi-provisioner", "csi-resizer": "csi-resizer",
}


def _openssl(*args: str, stdin: str | None = None) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, text=True, input=stdin)


# RSA keys in PKCS#1 form: every client reads them, Java ones (Spark's fabric8 client) included,
# which cannot read EC keys without extra providers.
KEY_FORMAT = "rsa-pkcs1"


def _new_key(path: Path) -> None:
    _openssl("genrsa", "-traditional", "-out", str(path), "2048")
    path.chmod(0o600)


def _extensions(cert: Cert) -> str:
    if cert.server_sans:
        return ("keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n"
                f"subjectAltName={','.join(cert.server_sans)}\n")
    return "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"


def _issue(pki: Path, cert: Cert) -> None:
    key, csr, ext = pki / f"{cert.name}.key", pki / f"{cert.name}.csr", pki / f"{cert.name}.ext"
    _new_key(key)
    subject = (f"/O={cert.org}" if cert.org else "") + f"/CN={cert.cn}"
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    ext.write_text(_extensions(cert))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
             "-CAcreateserial", "-days", DAYS, "-sha256", "-extfile", str(ext), "-out", str(pki / f"{cert.name}.crt"))
    csr.unlink()
    ext.unlink()


def _make_ca(pki: Path) -> None:
    _new_key(pki / "ca.key")
    _openssl("req", "-x509", "-new", "-key", str(pki / "ca.key"), "-subj", "/CN=krafty-localkube-ca",
             "-days", DAYS, "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", str(pki / "ca.crt"))


def kubeconfig(cfg: Settings, cert_name: str, server: str) -> dict[str, object]:
    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "localkube", "preferences": {},
        "clusters": [{"name": "localkube", "cluster": {
            "server": server, "certificate-authority-data": b64(cfg.pki / "ca.crt")}}],
        "users": [{"name": cert_name, "user": {
            "client-certificate-data": b64(cfg.pki / f"{cert_name}.crt"),
            "client-key-data": b64(cfg.pki / f"{cert_name}.key")}}],
        "contexts": [{"name": "localkube", "context": {"cluster": "localkube", "user": cert_name}}],
    }


def _marker(node_ip: str) -> str:
    return f"{node_ip} {KEY_FORMAT}"


def _complete(cfg: Settings, node_ip: str) -> bool:
    marker = cfg.pki / "node-ip"
    needed = [cfg.pki / "ca.crt", cfg.pki / "sa.key", cfg.pki / "sa.pub"]
    needed += [cfg.pki / f"{c.name}.crt" for c in certificates(node_ip)]
    needed += [cfg.kubeconfigs / f"{name}.conf" for name in KUBECONFIGS]
    return marker.exists() and marker.read_text() == _marker(node_ip) and all(p.exists() for p in needed)


def ensure(cfg: Settings, node_ip: str) -> bool:
    """Makes the CA, certificates, service-account keys and kubeconfigs unless they are there; True if made."""
    if _complete(cfg, node_ip):
        return False
    marker = cfg.pki / "node-ip"
    if marker.exists() and not marker.read_text().endswith(KEY_FORMAT):
        shutil.rmtree(cfg.pki)  # keys of an older format: start the PKI over
    cfg.pki.mkdir(parents=True, exist_ok=True)
    cfg.pki.chmod(0o700)
    if not (cfg.pki / "ca.key").exists():
        _make_ca(cfg.pki)
    # Same node IP: only what is missing (a component added since), the running ones keep theirs.
    same_node = marker.exists() and marker.read_text() == _marker(node_ip)
    for cert in certificates(node_ip):
        if not (same_node and (cfg.pki / f"{cert.name}.crt").exists()):
            _issue(cfg.pki, cert)
    if not (cfg.pki / "sa.key").exists():
        _new_key(cfg.pki / "sa.key")
    _openssl("pkey", "-in", str(cfg.pki / "sa.key"), "-pubout", "-out", str(cfg.pki / "sa.pub"))
    cfg.kubeconfigs.mkdir(parents=True, exist_ok=True)
    server = f"https://127.0.0.1:{s.APISERVER_PORT}"
    for name, cert_name in KUBECONFIGS.items():
        path = cfg.kubeconfigs / f"{name}.conf"
        path.write_text(json.dumps(kubeconfig(cfg, cert_name, server), indent=2))
        path.chmod(0o600)
    marker.write_text(_marker(node_ip))
    return True
