"""Images that share their first build steps, so that a first build on a fresh machine makes them once: the layer
cache (buildah --layers) takes a step only when it and every step before it are the same, word for word."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def _steps(dockerfile: Path) -> list[str]:
    """The instructions, continuation lines joined, comments left out."""
    steps, current = [], ""
    for line in dockerfile.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            steps.append(current.strip())
            current = ""
    return steps


def test_the_kafka_client_image_starts_with_the_operator_images_build_stage():
    operator, client = _steps(ROOT / "Dockerfile"), _steps(ROOT / "e2e/images/kafka-client/Dockerfile")
    build_stage = operator[:operator.index(next(s for s in operator[1:] if s.startswith("FROM ")))]
    assert build_stage[0] == "FROM debian:bookworm-slim AS build"
    assert client[:len(build_stage)] == ["FROM debian:bookworm-slim", *build_stage[1:]]


def test_the_broker_images_build_arguments_come_after_their_packages():
    # (an argument is in the environment of every RUN after it: each Kafka version would install them again)
    steps = _steps(ROOT / "broker-image/Dockerfile")
    first_arg = next(i for i, s in enumerate(steps) if s.startswith("ARG "))
    assert any(s.startswith("RUN apt-get") for s in steps[:first_arg]), steps[:first_arg + 1]
