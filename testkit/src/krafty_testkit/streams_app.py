"""A real Kafka Streams application for the tests (testkit/streams/StreamsPipe.java): it copies one topic to
another as a group of the Streams protocol (KIP-1071), and can hold after a number of records, a live member whose
committed offsets stay put (an application stuck on a record). Compiled once per source and Kafka
release against the pinned distribution's own jars, and run as a local process or in a pod of the broker image."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from krafty_testkit import kafka_dist
from krafty_testkit.kafka_dist import REPO_ROOT

SOURCE = REPO_ROOT / "testkit" / "streams" / "StreamsPipe.java"
MAIN = "StreamsPipe"


def jar(version: str | None = None) -> Path:
    """streams-pipe.jar, compiled (once) against the Kafka release's libs/."""
    home = kafka_dist.kafka_home(version)
    key = hashlib.sha256(SOURCE.read_bytes() + str(home.resolve()).encode()).hexdigest()[:16]
    out = Path(os.environ.get("KRAFTY_CACHE", Path.home() / ".cache" / "krafty")) / "streams-pipe" / key
    built = out / "streams-pipe.jar"
    if not built.exists():
        classes = out / "classes"
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "--release", "17", "-cp", f"{home}/libs/*", "-d", str(classes), str(SOURCE)],
                       check=True, capture_output=True, text=True)
        subprocess.run(["jar", "--create", "--file", str(built), "-C", str(classes), "."], check=True)
    return built


def properties(application: str, bootstrap: str, **extra: str) -> str:
    """The application's properties: its id (the group's), the Streams protocol, commits each 200 ms, and a held
    application kept a member for 10 minutes."""
    settings: Mapping[str, str] = {"application.id": application, "bootstrap.servers": bootstrap,
                                   "group.protocol": "streams", "commit.interval.ms": "200",
                                   "auto.offset.reset": "earliest", "max.poll.interval.ms": "600000", **extra}
    return "".join(f"{key}={value}\n" for key, value in settings.items())


@contextlib.contextmanager
def running(application: str, bootstrap: str, source: str, sink: str, hold_after: int | None = None) -> Iterator[
        subprocess.Popen[bytes]]:
    """The application as a local process while the block runs; stopped with SIGTERM after (a clean close: its
    offsets committed, its member gone from the group)."""
    home = kafka_dist.kafka_home()
    with tempfile.TemporaryDirectory(prefix="streams-") as work:
        config = Path(work) / "streams.properties"
        config.write_text(properties(application, bootstrap, **{"state.dir": f"{work}/state"}))
        log = (Path(work) / "streams.log").open("wb")
        process = subprocess.Popen(["java", "-Xmx128m", "-cp", f"{home}/libs/*:{jar()}", MAIN, str(config), source,
                                    sink, *([str(hold_after)] if hold_after is not None else [])],
                                   stdout=log, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            log.close()
