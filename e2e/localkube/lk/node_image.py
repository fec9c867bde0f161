"""The kind node image, built from source without a registry and without `kind build node-image` (which
drives a Docker engine and pulls its base image).

Three steps:
1. the component images, built with buildah: the control plane (kube-apiserver, kube-controller-manager,
   kube-scheduler, etcd), kube-proxy, CoreDNS, the pause sandbox, kube-router (the network and its
   policies), local-path-provisioner and csi-loop (the storage), MetalLB's controller and speaker (the
   load balancer), and the Debian base local-path's helper pods run;
2. the node's file system (kind/node/Dockerfile, buildah): Debian's systemd, containerd, runc and CNI
   plugins, kind's own base files from the kind module the Go proxy serves, kubeadm, kubelet, kubectl and
   crictl, /kind/version, and the manifests kind applies after `kubeadm init` (the network, the storage);
3. the preload (podman): a container of (2) runs containerd alone, the images of (1) are imported into its
   k8s.io namespace without unpacking, and the container is committed as the node image, as kind's own
   node-image build does. kubeadm then finds every image it names already there.

The node image's tag is a digest of every input (programs by size and time, files by content, the base
image's ID), so an unchanged tree costs a few stat calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import images
from . import settings as s
from .progress import first_build, say, ticking
from .settings import Settings

KIND_DIR = s.HERE / "kind"
PRELOAD_CONTAINER = "krafty-kind-preload"
RECIPE_VERSION = "1"  # bump when the recipe below changes in a way the inputs do not show


@dataclass(frozen=True)
class Component:
    """A component image: its reference in the nodes, its Dockerfile, and the programs its build context holds."""

    ref: str
    dockerfile: Path
    programs: tuple[Path, ...]
    build_args: tuple[str, ...] = ()

    def spec(self, context: Path) -> images.ImageSpec:
        return images.ImageSpec(self.ref, context / "Dockerfile", context, self.build_args)

    def context(self, folder: Path) -> Path:
        """A build context of the Dockerfile and copies of the programs (the cache holds links to them)."""
        folder.mkdir(parents=True)
        shutil.copy2(self.dockerfile, folder / "Dockerfile")
        for program in self.programs:
            shutil.copy2(program, folder / program.name)
        return folder


def _dockerfile(name: str) -> Path:
    return KIND_DIR / "images" / name / "Dockerfile"


def _program(ref: str, program: Path) -> Component:
    return Component(ref, _dockerfile("binary"), (program,), (f"PROGRAM={program.name}",))


def components(cfg: Settings) -> list[Component]:
    v = cfg.versions
    k8s = v["K8S_VERSION"]
    tool = cfg.tool
    return [
        *(_program(s.kind_image(name, k8s), cfg.k8s_bin / name)
          for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")),
        _program(s.kind_image("etcd", v["ETCD_VERSION"]), tool("etcd")),
        Component(s.kind_image("coredns", v["COREDNS_VERSION"]), _dockerfile("coredns"), (tool("coredns"),)),
        _program(s.kind_image("local-path-provisioner", v["LOCAL_PATH_PROVISIONER_VERSION"]),
                 tool("local-path-provisioner")),
        Component(s.kind_image("kube-proxy", k8s), _dockerfile("kube-proxy"), (cfg.k8s_bin / "kube-proxy",)),
        Component(s.kind_image("kube-router", v["KUBE_ROUTER_VERSION"]), _dockerfile("kube-router"),
                  (tool("kube-router"),)),
        Component(s.kind_image("csi-loop", csi_loop_tag(cfg)), _dockerfile("csi-loop"),
                  (tool("csi-loop"), tool("csi-provisioner"), tool("csi-resizer"))),
        Component(cfg.pause_image, _dockerfile("pause"), (tool("pause"),)),
        *(_program(s.kind_image(f"metallb-{name}", v["METALLB_VERSION"]), tool(f"metallb-{name}"))
          for name in ("controller", "speaker")),
    ]


def csi_loop_tag(cfg: Settings) -> str:
    """The driver's build folder is named by a hash of its sources (build-tools.sh): the tag says which."""
    return cfg.tool("csi-loop").parent.name.removeprefix("csi-loop-")


def _digest_tree(digest: hashlib._Hash, path: Path) -> None:
    """Files by content, except large ones (programs), by size and modification time."""
    for item in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
        stat = item.stat()
        digest.update(str(item.relative_to(path.parent)).encode())
        if stat.st_size > 1 << 20:
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
        else:
            digest.update(item.read_bytes())


def _node_programs(cfg: Settings) -> dict[str, Path]:
    return {**{name: cfg.k8s_bin / name for name in ("kubeadm", "kubelet", "kubectl")}, "crictl": cfg.tool("crictl")}


def key(cfg: Settings, kind_module: Path, base_id: str) -> str:
    digest = hashlib.sha256(RECIPE_VERSION.encode())
    digest.update(json.dumps(cfg.versions, sort_keys=True).encode())
    digest.update(base_id.encode())
    for path in (KIND_DIR / "node", kind_module / "images" / "base" / "files", *_node_programs(cfg).values()):
        _digest_tree(digest, path)
    for component in components(cfg):
        for path in (component.dockerfile, *component.programs):
            _digest_tree(digest, path)
    digest.update(_default_storage(cfg).encode())
    return digest.hexdigest()[:12]


def kind_module(cfg: Settings) -> Path:
    """The kind module's folder in Go's module cache (downloaded through the Go proxy if missing)."""
    out = subprocess.run(["go", "mod", "download", "-json", f"sigs.k8s.io/kind@{cfg.versions['KIND_VERSION']}"],
                         capture_output=True, text=True, check=False, cwd="/tmp",
                         env={**os.environ, "GOFLAGS": "-mod=mod"})
    found = json.loads(out.stdout or "{}")
    if "Dir" not in found:
        raise RuntimeError(f"go mod download sigs.k8s.io/kind failed: {found.get('Error') or out.stderr[-2000:]}")
    return Path(found["Dir"])


def _exists(engine: str, ref: str) -> bool:
    argv = [engine, "image", "inspect", ref]
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def _run(argv: list[str], timeout: float = 1800) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({result.returncode}): {result.stderr.strip()[-3000:]}")
    return result.stdout


def _manifests(cfg: Settings, folder: Path) -> None:
    """The manifests kind applies after `kubeadm init`, with the images of this build."""
    folder.mkdir(parents=True)
    cni = (KIND_DIR / "node" / "manifests" / "default-cni.yaml").read_text()
    (folder / "default-cni.yaml").write_text(
        cni.replace("KUBE_ROUTER_IMAGE", s.kind_image("kube-router", cfg.versions["KUBE_ROUTER_VERSION"])))
    (folder / "default-storage.yaml").write_text(_default_storage(cfg))


def _default_storage(cfg: Settings) -> str:
    from . import addons
    return addons.default_storage(cfg, s.kind_image("csi-loop", csi_loop_tag(cfg)))


def _context(cfg: Settings, module: Path, folder: Path) -> None:
    """The node image's build context: the Dockerfile's folder, kind's base files and the programs."""
    shutil.copytree(KIND_DIR / "node", folder, ignore=shutil.ignore_patterns("manifests"))
    shutil.copytree(module / "images" / "base" / "files", folder / "kind-base")
    (folder / "bin").mkdir()
    for name, path in _node_programs(cfg).items():
        shutil.copy2(path, folder / "bin" / name)
    _manifests(cfg, folder / "manifests")
    (folder / "version").write_text(cfg.versions["K8S_VERSION"])
    for name, placeholder, value in (("containerd.toml", "SANDBOX_IMAGE", cfg.pause_image),
                                     ("krafty-service-cidr.service", "SERVICE_CIDR", s.SERVICE_CIDR)):
        path = folder / name
        path.write_text(path.read_text().replace(placeholder, value))
    for path in folder.rglob("*"):  # the module cache is read-only; the build copies modes as they are
        path.chmod(path.stat().st_mode | 0o200)


def _preload(base_ref: str, archives: list[Path], ref: str) -> None:
    subprocess.run(["podman", "rm", "-f", PRELOAD_CONTAINER], capture_output=True, check=False)
    _run(["podman", "run", "-d", "--name", PRELOAD_CONTAINER, "--entrypoint", "/usr/bin/containerd", base_ref])
    try:
        for archive in archives:
            _run(["podman", "cp", str(archive), f"{PRELOAD_CONTAINER}:/image.tar"])
            _run(["podman", "exec", PRELOAD_CONTAINER, "sh", "-c",
                  "ctr --namespace=k8s.io images import --all-platforms --no-unpack --digests /image.tar"
                  " && rm /image.tar"])
        _run(["podman", "stop", "-t", "30", PRELOAD_CONTAINER])
        _run(["podman", "commit", "--quiet",
              "--change", 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]', "--change", "CMD []",
              PRELOAD_CONTAINER, ref])
    finally:
        subprocess.run(["podman", "rm", "-f", PRELOAD_CONTAINER], capture_output=True, check=False)


def ensure(cfg: Settings, engine: str) -> str:
    """The node image's reference, building it unless the engine has an image of the same inputs. Built with
    buildah and podman; where the engine is Docker, copied into it afterwards."""
    base_id = images.buildah_image_id(s.BASE_IMAGE)
    if base_id is None:
        raise RuntimeError(f"{s.BASE_IMAGE} is missing from buildah's storage")
    module = kind_module(cfg)
    ref = f"{s.KIND_IMAGE_REPOSITORY}/node:{cfg.versions['K8S_VERSION']}-{key(cfg, module, base_id)}"
    if _exists(engine, ref):
        return ref
    with first_build("the node image"):
        return _build(cfg, engine, base_id, module, ref)


def _build(cfg: Settings, engine: str, base_id: str, module: Path, ref: str) -> str:
    args = images.build_args(images.pip_settings())
    parts = components(cfg)
    with tempfile.TemporaryDirectory(dir=cfg.cache) as tmp:
        archives = []
        for n, component in enumerate(parts, 1):
            say(f"node image: building {component.ref} ({n} of {len(parts) + 2})")
            with ticking(f"node image: building {component.ref}") as at_step:
                image_id = images.build(component.spec(component.context(Path(tmp) / f"context-{n}")), args, at_step)
            archive = Path(tmp) / f"{n}.tar"
            _run(["buildah", "push", "--quiet", image_id, f"docker-archive:{archive}:{component.ref}"])
            archives.append(archive)
        base_archive = Path(tmp) / "base.tar"
        _run(["buildah", "push", "--quiet", base_id, f"docker-archive:{base_archive}:{s.BASE_IMAGE}"])
        archives.append(base_archive)
        say(f"node image: building the node's file system ({len(parts) + 1} of {len(parts) + 2})")
        context = Path(tmp) / "context"
        _context(cfg, module, context)
        base_ref = f"{s.KIND_IMAGE_REPOSITORY}/node-base:latest"
        with ticking("node image: building the node's file system") as at_step:
            images.build(images.ImageSpec(base_ref, context / "Dockerfile", context), args, at_step)
        say(f"node image: importing {len(archives)} images into its containerd ({len(parts) + 2} of "
            f"{len(parts) + 2})")
        with ticking("node image: importing the images"):
            _preload(base_ref, archives, ref)
    if engine == "docker":
        _run(["podman", "push", "--quiet", ref, f"docker-daemon:{ref}"])
    return ref
