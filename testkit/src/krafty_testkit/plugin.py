"""pytest plugin: fixtures for real Kafka clusters, and a summary of their start-up times.

Fixtures
- kafka_home: the pinned Kafka distribution (resolved once, cached).
- apiserver: a real kube-apiserver with etcd, no node (CRD validation, dry runs).
- local_kafka: a factory `local_kafka(Layout.combined(3), **options)` that
  starts a cluster, waits until the cluster itself reports ready, and stops it
  when the test ends (pass scope="module" fixtures for sharing, see
  local_kafka_module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from krafty_testkit import bench_size, kafka_dist
from krafty_testkit.apiserver import LocalApiServer, running_apiserver
from krafty_testkit.local_kafka import Layout, LocalKafkaCluster

ClusterFactory = Callable[..., LocalKafkaCluster]

_ready_times: list[tuple[str, str, float]] = []
_tables: list[tuple[str, list[str]]] = []


def report_table(title: str, header: list[str], rows: list[list[object]]) -> None:
    """A table printed at the end of the run (benchmarks and measured figures)."""
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=False)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=False)) for line in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    _tables.append((title, lines))


@pytest.fixture(scope="session")
def kafka_home() -> Path:
    return kafka_dist.kafka_home()


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApiServer]:
    """A real kube-apiserver + etcd (no node) for API validation and dry-run tests."""
    with running_apiserver(tmp_path_factory.mktemp("apiserver")) as server:
        yield server


def _factory(workdir_factory: Callable[[], Path], owner: str) -> Iterator[ClusterFactory]:
    clusters: list[LocalKafkaCluster] = []

    def start(layout: Layout, **options: object) -> LocalKafkaCluster:
        cluster = LocalKafkaCluster(layout, workdir_factory(), **options)  # type: ignore[arg-type]
        clusters.append(cluster)
        seconds = cluster.start()
        _ready_times.append((owner, layout.describe(), seconds))
        return cluster

    try:
        yield start
    finally:
        for cluster in clusters:
            cluster.close()


@pytest.fixture
def local_kafka(kafka_home: Path, tmp_path_factory: pytest.TempPathFactory,
                request: pytest.FixtureRequest) -> Iterator[ClusterFactory]:
    yield from _factory(lambda: tmp_path_factory.mktemp("kafka"), request.node.nodeid)


@pytest.fixture(scope="module")
def local_kafka_module(kafka_home: Path, tmp_path_factory: pytest.TempPathFactory,
                       request: pytest.FixtureRequest) -> Iterator[ClusterFactory]:
    yield from _factory(lambda: tmp_path_factory.mktemp("kafka"), request.node.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """In the benchmarks' smoke run (bench_size.SMOKE), a benchmark that printed no table fails: running without
    an error is not enough."""
    before = len(_tables)
    result = yield
    if bench_size.SMOKE and item.get_closest_marker("bench") is not None and len(_tables) == before:
        pytest.fail(f"{item.nodeid} ran in the smoke run and printed no table")
    return result


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for title, lines in _tables:
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)
    if not _ready_times:
        return
    terminalreporter.section("Kafka clusters: time from process start to ready")
    terminalreporter.write_line(f"{'layout':<22} {'ready (s)':>9}  started by")
    for owner, layout, seconds in _ready_times:
        terminalreporter.write_line(f"{layout:<22} {seconds:>9.1f}  {owner}")
