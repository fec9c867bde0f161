"""The Debian bookworm base image, made without a registry.

debootstrap --variant=minbase fetches bookworm from the mirror the machine's own apt configuration
names (read here at run time, never written into the repository). The image's apt sources are the
host's bookworm entries, so `apt-get` in a Dockerfile RUN step reaches the same mirror, and it trusts the
CA certificates the host trusts (a TLS-inspecting egress proxy otherwise breaks pip and curl inside
builds). The root filesystem is packed once into a tarball in the cache, keyed by those inputs; buildah
turns the tarball into an OCI image tagged docker.io/library/debian:bookworm-slim in its local storage.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import settings as s
from .progress import first_build
from .settings import Settings

SUITE = "bookworm"
KEY_LABEL = "krafty.localkube/base-key"
RECIPE_VERSION = "1"  # bump when the rootfs recipe below changes
APT_DIR = Path("/etc/apt")
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

# What Debian's own slim images leave out, as their dpkg and apt configuration says.
DPKG_EXCLUDES = """path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""
APT_CLEAN = """DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
"""


@dataclass(frozen=True)
class AptSource:
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]


def _deb822(text: str) -> list[AptSource]:
    sources = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line and not line.startswith(("#", " ", "\t")) and ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes") != "no":
            sources += [AptSource(uri, tuple(fields.get("suites", "").split()),
                                  tuple(fields.get("components", "").split()))
                        for uri in fields.get("uris", "").split()]
    return sources


def _one_line(text: str) -> list[AptSource]:
    sources = []
    for line in text.splitlines():
        words = [w for w in line.split("#", 1)[0].split() if not w.startswith("[")]
        if len(words) >= 3 and words[0] == "deb":
            sources.append(AptSource(words[1], (words[2],), tuple(words[3:])))
    return sources


def host_sources(apt_dir: Path = APT_DIR) -> list[AptSource]:
    """The host's enabled Debian bookworm entries (sources.list, sources.list.d/*.list and *.sources)."""
    found = _one_line((apt_dir / "sources.list").read_text()) if (apt_dir / "sources.list").exists() else []
    for path in sorted((apt_dir / "sources.list.d").glob("*")):
        if path.suffix == ".sources":
            found += _deb822(path.read_text())
        elif path.suffix == ".list":
            found += _one_line(path.read_text())
    debian = [AptSource(src.uri.rstrip("/"), tuple(x for x in src.suites if x.split("-")[0] == SUITE),
                        src.components) for src in found]
    return [src for src in debian if src.suites]


def mirror(sources: list[AptSource]) -> str:
    for src in sources:
        if SUITE in src.suites and "main" in src.components:
            return src.uri
    raise RuntimeError(f"no '{SUITE} main' entry in the apt configuration under {APT_DIR}")


def image_sources(sources: list[AptSource]) -> str:
    stanzas = [f"Types: deb\nURIs: {src.uri}\nSuites: {' '.join(src.suites)}\nComponents: {' '.join(src.components)}\n"
               "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n" for src in sources]
    return "\n".join(stanzas)


def _host_cas() -> list[Path]:
    return sorted(HOST_CA_DIR.glob("*.crt")) if HOST_CA_DIR.is_dir() else []


def recipe_key(sources: list[AptSource]) -> str:
    digest = hashlib.sha256(RECIPE_VERSION.encode())
    digest.update(json.dumps([src.__dict__ for src in sources]).encode())
    for ca in [*_host_cas(), HOST_CA_BUNDLE]:
        if ca.exists():
            digest.update(ca.read_bytes())
    return digest.hexdigest()[:16]


def _customize(rootfs: Path, sources: list[AptSource]) -> None:
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(image_sources(sources))
    (rootfs / "etc/dpkg/dpkg.cfg.d/docker").write_text(DPKG_EXCLUDES)
    (rootfs / "etc/apt/apt.conf.d/docker-clean").write_text(APT_CLEAN)
    (rootfs / "etc/apt/apt.conf.d/docker-no-languages").write_text('Acquire::Languages "none";\n')
    ca_dir = rootfs / "usr/local/share/ca-certificates"
    ca_dir.mkdir(parents=True, exist_ok=True)
    for ca in _host_cas():
        shutil.copy2(ca, ca_dir / ca.name)
    if HOST_CA_BUNDLE.exists():
        (rootfs / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
        shutil.copy2(HOST_CA_BUNDLE, rootfs / "etc/ssl/certs/ca-certificates.crt")
    for leftover in ("etc/hostname", "etc/resolv.conf"):  # debootstrap copies the host's; runtimes provide them
        (rootfs / leftover).unlink(missing_ok=True)
    for folder in ("var/lib/apt/lists", "var/cache/apt/archives", "var/log", "tmp"):
        for item in (rootfs / folder).glob("*"):
            if item.is_file() or item.is_symlink():
                item.unlink()


def _debootstrap(tarball: Path, sources: list[AptSource]) -> None:
    work = tarball.parent / "rootfs.partial"
    # A killed debootstrap leaves /proc and friends mounted in its work folder.
    subprocess.run(["umount", "-R", str(work)], capture_output=True, check=False)
    shutil.rmtree(work, ignore_errors=True)
    print(f"localkube: debootstrap {SUITE} from {mirror(sources)} (first time only)", flush=True)
    result = subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(work), mirror(sources)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"debootstrap failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")
    _customize(work, sources)
    partial = tarball.with_suffix(".partial")
    subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(work), "-cf", str(partial),
                    "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "."], check=True)
    partial.rename(tarball)
    shutil.rmtree(work, ignore_errors=True)


def _commit(tarball: Path, key: str) -> None:
    container = subprocess.run(["buildah", "from", "scratch"], check=True, capture_output=True,
                               text=True).stdout.strip()
    try:
        subprocess.run(["buildah", "add", "--quiet", container, str(tarball), "/"], check=True, capture_output=True)
        subprocess.run(["buildah", "config", "--cmd", "bash", "--label", f"{KEY_LABEL}={key}",
                        "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        "--os", "linux", "--arch", "amd64", container], check=True, capture_output=True)
        subprocess.run(["buildah", "commit", "--quiet", "--rm", container, s.BASE_IMAGE], check=True,
                       capture_output=True)
    except subprocess.CalledProcessError:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
        raise


def _current_key() -> str:
    result = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                             f'{{{{index .OCIv1.Config.Labels "{KEY_LABEL}"}}}}',
                             s.BASE_IMAGE], capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


def ensure(cfg: Settings) -> str:
    """Makes the base image unless buildah already has it from the same recipe; returns the recipe key."""
    sources = host_sources()
    key = recipe_key(sources)
    if _current_key() == key:
        return key
    with first_build("the nodes' base image"):
        tarball = cfg.cache / "base" / f"debian-{SUITE}-minbase-{key}.tar"
        tarball.parent.mkdir(parents=True, exist_ok=True)
        if not tarball.exists():
            _debootstrap(tarball, sources)
        _commit(tarball, key)
    return key
