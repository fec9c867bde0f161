"""e2e fixtures: a real Kubernetes cluster for the whole session.

kube_cluster (session) brings up the cluster krafty_testkit.kube chooses (the local kind cluster of
e2e/localkube: a control plane and three workers in three zones; or KRAFTY_E2E_CLUSTER=existing, the
current kubectl context) and yields it. Bringing it up is idempotent: a cluster that is already up
costs about a second. When the session brought the cluster up, it takes it down at the end, unless
KRAFTY_E2E_KEEP_CLUSTER=1 (handy while iterating: the next session starts in a second).

KRAFTY_E2E_BUDGET_MINUTES (`make e2e` sets it from CI's time limit) ends the run, failed, before a test whose
timeout could carry it past the budget starts, counted from KRAFTY_RUN_STARTED (the Makefile sets it when `make`
starts: `make test` counts the unit and integration tiers too) or else from this session's start, less the first
builds the run waited for (krafty_testkit.budget: a fresh machine builds for half an hour): the summary of
what failed, and how many tests were not run, is printed instead of the run being killed in the middle. A run
whose last test ends past the budget has left nothing unrun, and passes.

Tests marked cluster_lifecycle take the cluster down and up again; they run before every other e2e test
so nothing another test set up is lost, and they leave the cluster up. They, and tests marked local_cluster,
inspect this machine (processes, files, loop devices), so they need the local cluster: with another kind of
cluster they are deselected, and the run says so.

After them come the tests that need none of the KafkaClusters the session shares (SHARED_CLUSTERS: made at
their first use, kept to the end), so that those bringing their own cluster (the upgrade, the volumes, external
access, users) have the nodes' CPU to themselves: on two cores, with the shared clusters' nine JVMs beside it,
the upgrade's roll took 361 s, against 220 s alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterator

import pytest

from krafty_testkit import budget, kube
from krafty_testkit.k8s_kafka import IMAGES, NAMESPACE, TENANT_NAMESPACE, ClientPod, install_operator
from krafty_testkit.kube import KubeCluster

LIFECYCLE = "cluster_lifecycle"
LOCAL = "local_cluster"
FAULTS = "local_faults"
OPERATOR_LABEL = "app.kubernetes.io/name=krafty-operator"
SHARED_CLUSTERS = frozenset({"prod", "small"})  # the session's KafkaCluster fixtures (e2e/tests/conftest.py)

_timings: list[tuple[str, float]] = []
_started = float(os.environ.get("KRAFTY_RUN_STARTED") or time.time())  # (epoch seconds)
_session_cluster: list[KubeCluster] = []  # the cluster kube_cluster brought up: a failed fixture's report shows it


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{LIFECYCLE}: takes the local cluster down and up; runs first")
    config.addinivalue_line("markers", f"{LOCAL}: inspects this machine, so it needs the local cluster")
    config.addinivalue_line("markers", f"{FAULTS}: signals a container, faults a node or caps a CPU through the "
                                       "local cluster's nodes (found by operator/tests/unit/repo/test_suite_rules.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    local = [item for item in items if any(item.get_closest_marker(m) for m in (LIFECYCLE, LOCAL, FAULTS))]
    if local and kube.chosen_kind() != "local":
        config.hook.pytest_deselected(items=local)
        items[:] = [item for item in items if item not in local]
        print(f"\ndeselected {len(local)} {LIFECYCLE}/{LOCAL}/{FAULTS} test(s): they need the local cluster")
    lifecycle = [item for item in items if item.get_closest_marker(LIFECYCLE)]
    rest = [item for item in items if item not in lifecycle]
    alone = [item for item in rest if not SHARED_CLUSTERS & set(getattr(item, "fixturenames", ()))]
    items[:] = lifecycle + alone + [item for item in rest if item not in alone]


@pytest.fixture(autouse=True)
def time_budget(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    limit = os.environ.get("KRAFTY_E2E_BUDGET_MINUTES")
    if not limit:
        return
    spent, built = budget.minutes_spent(_started, time.time())
    longest = float(request.config.getini("timeout") or 0) / 60  # what the next test may take (its timeout)
    items = request.session.items
    left = len(items) - items.index(request.node) - 1 if request.node in items else 0
    if left and spent + longest > float(limit):
        request.session.shouldfail = (
            f"out of time: {spent:.0f} min spent ({built:.0f} min of first builds not counted), and the next test "
            f"may take {longest:.0f} min (its timeout), past "
            f"KRAFTY_E2E_BUDGET_MINUTES={limit}: {left} test(s) not run (stopped after {request.node.nodeid})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, None]:
    """A failed test's report, a failed fixture's too, carries what the cluster looked like: nodes, pods,
    KafkaClusters, warnings, the operators' logs."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _session_cluster:
        report.sections.append(("cluster when it failed", _diagnostics(_session_cluster[0])))
    if report.failed:
        _print_now(item.config, report)


def _print_now(config: pytest.Config, report: pytest.TestReport) -> None:
    """A failure printed as it happens, not only in the summary: a run cut short (CI's time limit) still
    shows why each test failed."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        return
    sections = "".join(f"\n--- {title}\n{content}" for title, content in report.sections
                       if title == "cluster when it failed")
    terminal.write_line(f"\nFAILED {report.nodeid} ({report.when}, {report.duration:.0f} s)\n"
                        f"{report.longreprtext[-4000:]}{sections[-6000:]}")
    terminal.flush()


def _diagnostics(cluster: KubeCluster) -> str:
    queries = [
        ("nodes", ["get", "nodes", "-o", "wide"]),
        ("pods", ["get", "pods", "-A", "-o", "wide"]),
        ("warning events", ["get", "events", "-A", "--field-selector", "type=Warning", "--sort-by=.lastTimestamp"]),
    ]
    try:
        operators = cluster.kubectl_json("get", "deployments", "-A", "-l", OPERATOR_LABEL, timeout=30)["items"]
    except kube.KubeError:
        operators = []
    for deployment in operators:
        namespace = deployment["metadata"]["namespace"]
        queries.append((f"operator log, {namespace}", ["logs", "-n", namespace, "-l", OPERATOR_LABEL, "--tail=60"]))
    # last, so that a report cut to its end (CI prints the end) still shows each cluster's conditions
    queries.append(("KafkaClusters", ["get", "kafkaclusters", "-A", "-o", "custom-columns=NS:.metadata.namespace,"
                                      "NAME:.metadata.name,CONDITIONS:.status.conditions"]))
    parts = []
    for title, args in queries:
        try:
            parts.append(f"--- {title}\n{cluster.kubectl(*args, timeout=30)}")
        except kube.KubeError as error:
            parts.append(f"--- {title}: {error}")
    return "\n".join(parts)


@pytest.fixture(scope="session")
def cluster_timings() -> list[tuple[str, float]]:
    """(what, seconds) pairs shown at the end of the run: how long bringing the cluster up and down took, and
    other durations the tests measure."""
    return _timings


@pytest.fixture(scope="session")
def kube_cluster(cluster_timings: list[tuple[str, float]]) -> Iterator[kube.KubeCluster]:
    cluster = kube.detect()
    was_up = cluster.is_up()
    seconds = cluster.up()
    cluster_timings.append((f"{cluster.kind}: up ({'already up' if was_up else 'fresh cluster'})", seconds))
    _session_cluster.append(cluster)
    yield cluster
    if not was_up and os.environ.get("KRAFTY_E2E_KEEP_CLUSTER") != "1":
        cluster_timings.append((f"{cluster.kind}: down (end of session)", cluster.down()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _timings:
        return
    terminalreporter.section("Kubernetes cluster: measured durations")
    for what, seconds in _timings:
        terminalreporter.write_line(f"{seconds:>7.1f}s  {what}")


@pytest.fixture(scope="session")
def images(kube_cluster: KubeCluster, cluster_timings: list[tuple[str, float]]) -> KubeCluster:
    began = time.monotonic()
    kube_cluster.load_images(IMAGES)
    cluster_timings.append(("build and load the operator, broker and client images", time.monotonic() - began))
    return kube_cluster


@pytest.fixture(scope="session")
def operator(images: KubeCluster) -> KubeCluster:
    """The operator installed with Helm, watching a namespace emptied of earlier runs' clusters.

    The namespace itself stays: the operator's Role lives in it, and without it nobody could
    release the Topics' finalizers.
    """
    for name in (NAMESPACE, TENANT_NAMESPACE):
        namespace = images.kubectl("create", "namespace", name, "--dry-run=client", "-o", "yaml")
        images.kubectl("apply", "-f", "-", stdin=namespace)
    install_operator(images)
    images.kubectl("delete", "topics,kafkaclusters", "--all", "-n", NAMESPACE, "--wait=true", timeout=600)
    # Brokers of a deleted cluster wait out their grace period (their controllers are gone): no need here.
    images.kubectl("delete", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/part-of=krafty", "--grace-period=0",
                   "--force", "--wait=true", timeout=600)
    images.kubectl("delete", "pvc,configmaps", "-n", NAMESPACE, "-l", "app.kubernetes.io/part-of=krafty",
                   "--wait=true", timeout=600)
    images.kubectl("delete", "pod", "kafka-client", "-n", NAMESPACE, "--ignore-not-found", "--wait=true")
    return images


@pytest.fixture(scope="session")
def client(operator: KubeCluster) -> ClientPod:
    pod = ClientPod(operator)
    pod.create()
    return pod
