"""Container images without a registry: buildah builds them, containerd's k8s.io namespace imports them.

- The Debian base image is made with debootstrap from the machine's own apt mirror (base_image.py) and
  tagged docker.io/library/debian:bookworm-slim in buildah's local storage, so `FROM
  debian:bookworm-slim` builds with --pull=never.
- Builds use chroot isolation (no nested namespaces or cgroups needed; RUN steps share the host's
  network and DNS) with the layer cache on, so an unchanged Dockerfile rebuilds in about a second.
- The host's pip settings that choose an index or a CA bundle go in as build args, only when set.
- An image is imported into each node's containerd (as a docker-archive, through the node container's
  `ctr`) only when its ID differs from the one recorded on the containerd image as a label, so unchanged
  images cost no import.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from .progress import ticking
from .settings import Settings

STEP = re.compile(r"STEP \d+/\d+: ")
STEP_CHARS = 100
FAILED_LINES = 60  # the end of a failed build's output, in its error

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


def step_of(line: str) -> str | None:
    """The step a line of buildah's output starts ("STEP 4/9: RUN pip install ..."), cut to a line's length."""
    return line.strip()[:STEP_CHARS] if STEP.match(line) else None


def build(spec: ImageSpec, extra_args: list[str], at_step: Callable[[str], None]) -> str:
    """Builds with buildah, telling at_step each step it starts, and returns the image ID."""
    with tempfile.TemporaryDirectory() as tmp:
        iidfile = Path(tmp) / "iid"
        argv = ["buildah", "build", "--isolation", "chroot", "--layers", "--pull=never", "--format", "oci",
                "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
                *extra_args, *(f"--build-arg={arg}" for arg in spec.build_args), "--iidfile", str(iidfile),
                "-t", spec.name, "-f", str(spec.dockerfile), str(spec.context)]
        said: deque[str] = deque(maxlen=FAILED_LINES)
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace") as process:
            assert process.stdout is not None
            for line in process.stdout:
                said.append(line)
                if (step := step_of(line)) is not None:
                    at_step(step)
        if process.returncode != 0:
            raise RuntimeError(f"buildah build of {spec.name} failed ({process.returncode}): "
                               f"{''.join(said).strip()[-3000:]}")
        return iidfile.read_text().strip().removeprefix("sha256:")


def _run_in(argv: list[str], stdin_path: Path | None = None) -> str:
    if stdin_path is None:
        return _run(argv)
    with stdin_path.open("rb") as stdin:
        result = subprocess.run(argv, stdin=stdin, capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed ({result.returncode}): "
                           f"{result.stderr.decode(errors='replace').strip()[-3000:]}")
    return result.stdout.decode(errors="replace")


def imported_id(ctr: list[str], ref: str) -> str | None:
    """The buildah image ID recorded on a containerd image (ctr: the command that reaches that containerd)."""
    out = _run([*ctr, "images", "ls", f"name=={ref}"])
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


def archive(image_id: str, ref: str, folder: Path) -> Path:
    """The image as a docker-archive under folder, named ref inside."""
    path = folder / f"{image_id[:16]}.tar"
    if not path.exists():
        _run(["buildah", "push", "--quiet", image_id, f"docker-archive:{path}:{ref}"])
    return path


def import_archive(ctr: list[str], ref: str, image_id: str, tar: Path) -> None:
    """Imports an image archive into one containerd (ctr: the command that reaches it, reading the archive on its
    standard input) and records the buildah image ID on it."""
    try:
        _run_in([*ctr, "images", "import", "--digests", "-"], tar)
    except RuntimeError:
        # containerd occasionally loses a parent snapshot while unpacking (seen here under load):
        # drop the half-imported image and import it once more.
        subprocess.run([*ctr, "images", "rm", ref], capture_output=True, check=False)
        _run_in([*ctr, "images", "import", "--digests", "-"], tar)
    _run([*ctr, "images", "label", ref, f"{ID_LABEL}={image_id}"])


def _import_into(nodes: dict[str, list[str]], ref: str, image_id: str, tar: Path, node: str) -> None:
    import_archive(nodes[node], ref, image_id, tar)


def load(cfg: Settings, specs: list[ImageSpec], nodes: dict[str, list[str]]) -> list[tuple[str, str, list[str]]]:
    """Builds each image and imports it where it changed; nodes maps each node to the command that reaches its
    containerd. Returns [(name, image id, the nodes it was imported into)]."""
    args = build_args(pip_settings())
    results = []
    with tempfile.TemporaryDirectory(dir=cfg.cache) as tmp:
        for spec in specs:
            with ticking(f"building {spec.name}") as at_step:
                image_id = build(spec, args, at_step)
            ref = normalize(spec.name)
            # Only where it changed; into every such node at once (each import mostly waits on the disk)
            stale = [node for node, ctr in nodes.items() if imported_id(ctr, ref) != image_id]
            if stale:
                with ticking(f"importing {spec.name} into {', '.join(stale)}"):
                    tar = archive(image_id, ref, Path(tmp))
                    with ThreadPoolExecutor(len(stale)) as pool:
                        list(pool.map(partial(_import_into, nodes, ref, image_id, tar), stale))
            results.append((spec.name, image_id, stale))
    return results
