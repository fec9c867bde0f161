"""Where everything lives and what the cluster is called: one frozen value built from the environment.

Everything localkube keeps is in the cache ($KRAFTY_CACHE/localkube): the built programs, the base image
tarball, the admin kubeconfig (the same path across down and up) and podman's settings for our calls. Images
live in podman's (and buildah's) own storage; a cluster lives in its node containers and their volumes, which
`down` removes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # e2e/localkube

POD_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"
BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
KIND_IMAGE_REPOSITORY = "localhost/krafty-kind"  # kubeadm's imageRepository: every image the nodes preload
CSI_DRIVER = "loop.csi.localkube"  # our driver (csi-loop/): the provisioner of the StorageClass "expandable"
CONTAINERS_CONF = """# podman's settings for localkube's containers (CONTAINERS_CONF, for localkube's podman and kind
# calls only): rlimits at the hard limit this machine allows instead of podman's default (1048576), which it
# refuses; netavark, whose aardvark-dns lets the nodes find each other by name (kind joins the workers to
# <cluster>-control-plane), where Debian's podman would use CNI without name resolution.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=20000:20000"]

[network]
network_backend = "netavark"
"""


def kind_image(name: str, tag: str) -> str:
    return f"{KIND_IMAGE_REPOSITORY}/{name}:{tag}"


def read_versions(path: Path = HERE / "versions.env") -> dict[str, str]:
    versions = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


@dataclass(frozen=True)
class Settings:
    cache: Path
    k8s_bin: Path
    versions: dict[str, str]

    @classmethod
    def from_env(cls) -> Settings:
        krafty_cache = Path(os.environ.get("KRAFTY_CACHE", Path.home() / ".cache" / "krafty"))
        versions = read_versions()
        return cls(cache=krafty_cache / "localkube", k8s_bin=krafty_cache / "k8s" / versions["K8S_VERSION"] / "bin",
                   versions=versions)

    @property
    def tools_bin(self) -> Path:
        return self.cache / "bin"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.cache / "kubeconfig"

    def tool(self, name: str) -> Path:
        """A program build-tools.sh built (its link in tools_bin resolved)."""
        return (self.tools_bin / name).resolve()

    def binary(self, name: str) -> Path:
        """A Kubernetes program or a localkube tool by name."""
        for folder in (self.k8s_bin, self.tools_bin):
            if (folder / name).exists():
                return folder / name
        return Path(name)

    @property
    def pause_image(self) -> str:
        return kind_image("pause", self.versions["PAUSE_VERSION"])

    def containers_conf(self) -> Path:
        """podman's settings for our calls (and kind's, which calls podman), written where missing or changed."""
        conf = self.cache / "containers.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        if not conf.exists() or conf.read_text() != CONTAINERS_CONF:
            conf.write_text(CONTAINERS_CONF)
        return conf
