"""The pinned Apache Kafka distribution, resolved once into the cache.

`broker-image/fetch-kafka.sh` owns the pin and the download; this module
only calls it and runs the real Kafka command-line tools from its output.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
FETCH_SCRIPT = REPO_ROOT / "broker-image" / "fetch-kafka.sh"


def pinned_versions() -> dict[str, str]:
    """The KEY=VALUE pins of broker-image/kafka.env."""
    pins = {}
    for line in (REPO_ROOT / "broker-image" / "kafka.env").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            pins[key.strip()] = value.strip().strip("\"")
    return pins


@functools.cache
def kafka_home(version: str | None = None) -> Path:
    """The directory holding libs/, bin/, agent/ and config/ of the pinned Kafka (KAFKA_VERSION), or of another
    version kafka.env pins (KAFKA_VERSIONS)."""
    override = os.environ.get("KRAFTY_KAFKA_HOME")
    if override and version in (None, pinned_versions()["KAFKA_VERSION"]):
        return Path(override)
    out = subprocess.run([str(FETCH_SCRIPT), *([version] if version else [])], check=True, capture_output=True,
                         text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def pinned_kafka_versions() -> tuple[str, ...]:
    """Every Kafka version the operator runs, oldest first (kafka.env KAFKA_VERSIONS)."""
    return tuple(pinned_versions()["KAFKA_VERSIONS"].split())


def tool_path(name: str, version: str | None = None) -> Path:
    """The launcher of a Kafka tool, e.g. tool_path("kafka-topics.sh")."""
    path = kafka_home(version) / "bin" / name
    if not path.exists():
        raise FileNotFoundError(f"{name} is not a Kafka tool in {kafka_home(version) / 'bin'}")
    return path


def run_tool(name: str, *args: str, timeout: float = 120, check: bool = True,
             input: str | None = None, version: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs a real Kafka command-line tool and returns its completed process.

    With check=True a non-zero exit raises, carrying the tool's stderr.
    """
    env = dict(os.environ)
    # Client tools start faster with the client JIT and a small heap.
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256m")
    env.setdefault("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true")
    proc = subprocess.run([str(tool_path(name, version)), *args], check=False, capture_output=True, text=True,
                          timeout=timeout, env=env, input=input)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")
    return proc
