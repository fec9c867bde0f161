"""Container images without a registry: buildah builds them, containerd's k8s.io namespace imports them.

- The Debian base image is made with debootstrap from the machine's own apt mirror (base_image.py) and
  tagged docker.io/library/debian:bookworm-slim in buildah's local storage, so `FROM
  debian:bookworm-slim` builds with --pull=never.
- Builds use chroot isolation (no nested namespaces or cgroups needed; RUN steps share the host's
  network and DNS) with the layer cache on, so an unchanged Dockerfile rebuilds in about a second.
- The host's pip settings that choose an index or a CA bundle go in as build args, only when set.
- An image is imported into containerd (as a docker-archive) only when its ID differs from the one
  recorded on the containerd image as a label, so unchanged images cost no import.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .settings import Settings

ID_LABEL = "krafty.localkube/image-id"
IMAGE_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"  # where the base image keeps the host's CA bundle
PIP_BUILD_ARGS = {"index-url": "PIP_INDEX_URL", "extra-index-url": "PIP_EXTRA_INDEX_URL",
                  "trusted-host": "PIP_TRUSTED_HOST", "cert": "PIP_CERT"}


@dataclass(frozen=True)
class ImageSpec:
    name: str
    dockerfile: Path
    context: Path
    build_args: tuple[str, ...] = ()  # ARG=VALUE

    @classmethod
    def parse(cls, text: str, relative_to: Path | None = None) -> ImageSpec:
        """NAME=DOCKERFILE[:CONTEXT][;ARG=VALUE...]; the context defaults to the Dockerfile's folder."""
        text, *args = text.split(";")
        name, sep, rest = text.partition("=")
        if not sep or not name or not rest or any("=" not in arg for arg in args):
            raise ValueError(f"expected NAME=DOCKERFILE[:CONTEXT][;ARG=VALUE...], got {text!r}")
        dockerfile, _, context = rest.partition(":")
        base = relative_to or Path.cwd()
        dockerfile_path = (base / dockerfile).resolve()
        return cls(name, dockerfile_path, (base / context).resolve() if context else dockerfile_path.parent,
                   tuple(args))


def parse_list_file(path: Path) -> list[ImageSpec]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [ImageSpec.parse(line, path.parent) for line in lines if line]


def normalize(name: str) -> str:
    """The fully qualified reference the kubelet asks containerd for (docker.io/library/x:latest style)."""
    first, slash, _ = name.partition("/")
    if not slash or ("." not in first and ":" not in first and first != "localhost"):
        name = f"docker.io/{name}" if slash else f"docker.io/library/{name}"
    last = name.rsplit("/", 1)[-1]
    return name if (":" in last or "@" in last) else f"{name}:latest"


def _run(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} {argv[1]} failed ({result.returncode}): {result.stderr.strip()[-3000:]}")
    return str(result.stdout)


def pip_settings() -> dict[str, str]:
    """The host's pip settings (config files and PIP_* variables) as `pip config list` reports them."""
    for argv in (["pip3", "config", "list"], ["python3", "-m", "pip", "config", "list"]):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        found = {}
        for line in out.splitlines():
            key, _, value = line.partition("=")
            found[key.rsplit(".", 1)[-1]] = value.strip().strip("'\"")
        return found
    return {}


def build_args(pip: dict[str, str]) -> list[str]:
    args = []
    for key, arg in PIP_BUILD_ARGS.items():
        if pip.get(key):
            value = IMAGE_CA_BUNDLE if key == "cert" else pip[key]
            args += ["--build-arg", f"{arg}={value}"]
    return args


def build(spec: ImageSpec, extra_args: list[str]) -> str:
    """Builds with buildah and returns the image ID."""
    with tempfile.TemporaryDirectory() as tmp:
        iidfile = Path(tmp) / "iid"
        _run(["buildah", "build", "--isolation", "chroot", "--layers", "--pull=never", "--format", "oci",
              "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
              *extra_args, *(f"--build-arg={arg}" for arg in spec.build_args), "--iidfile", str(iidfile),
              "-t", spec.name, "-f", str(spec.dockerfile), str(spec.context)])
        return iidfile.read_text().strip().removeprefix("sha256:")


def _ctr(cfg: Settings, *args: str) -> list[str]:
    return ["ctr", "--address", str(cfg.containerd_socket), "--namespace", "k8s.io", *args]


def imported_id(cfg: Settings, ref: str) -> str | None:
    out = _run(_ctr(cfg, "images", "ls", f"name=={ref}"))
    for line in out.splitlines()[1:]:
        for label in line.split()[-1].split(","):
            key, _, value = label.partition("=")
            if key == ID_LABEL:
                return value
    return None


def buildah_image_id(name: str) -> str | None:
    result = subprocess.run(["buildah", "images", "--noheading", "--no-trunc", "--format", "{{.ID}}", name],
                            capture_output=True, text=True, check=False)
    ids = result.stdout.split()
    return ids[0].removeprefix("sha256:") if result.returncode == 0 and ids else None


def import_image(cfg: Settings, name: str, image_id: str) -> bool:
    """Copies a buildah image into containerd unless it is there already; True if it was copied."""
    ref = normalize(name)
    if imported_id(cfg, ref) == image_id:
        return False
    with tempfile.TemporaryDirectory(dir=cfg.cache) as tmp:
        archive = Path(tmp) / "image.tar"
        _run(["buildah", "push", "--quiet", image_id, f"docker-archive:{archive}:{ref}"])
        try:
            _run(_ctr(cfg, "images", "import", str(archive)))
        except RuntimeError:
            # containerd occasionally loses a parent snapshot while unpacking (seen here under load):
            # drop the half-imported image and import it once more.
            subprocess.run(_ctr(cfg, "images", "rm", ref), capture_output=True, check=False)
            _run(_ctr(cfg, "images", "import", str(archive)))
    _run(_ctr(cfg, "images", "label", ref, f"{ID_LABEL}={image_id}"))
    return True


def load(cfg: Settings, specs: list[ImageSpec]) -> list[tuple[str, str, bool]]:
    """Builds each image and imports what changed: [(name, image id, imported?)]."""
    args = build_args(pip_settings())
    results = []
    for spec in specs:
        image_id = build(spec, args)
        results.append((spec.name, image_id, import_image(cfg, spec.name, image_id)))
    return results
