"""Real KRaft clusters as local processes on loopback.

A cluster is combined (every node is broker and controller, every node votes)
or dedicated (C controllers and B brokers). Node ids follow the operator's
scheme: brokers and combined nodes are 0..N-1, dedicated controllers are
CONTROLLER_ID_OFFSET + i. The quorum is dynamic (KIP-853): nodes find it
through controller.quorum.bootstrap.servers and the controllers are
formatted with --initial-controllers.

With tls=True every listener speaks mutual TLS, as the operator's nodes do between themselves: a CA, node
certificates and a client certificate made with krafty.pki.signing, keys read by Kafka through its directory config
provider; `connection` is what a client needs.

Readiness is decided by asking the cluster, never by sleeping: every running
broker registered and unfenced (DescribeCluster) and the metadata quorum led,
with every running voter caught up (DescribeQuorum).

Every process is started in its own session with PR_SET_PDEATHSIG, so it dies
with the test process even when that is killed; close() stops what is left.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import datetime
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from krafty import wire
from krafty.clients import kraft
from krafty.clients.connection import Connection, TlsIdentity
from krafty.pki import signing
from krafty_testkit import kafka_dist
from krafty_testkit.traffic import client_config

CONTROLLER_ID_OFFSET = 1000
BROKER = "broker"
CONTROLLER = "controller"

START_TIMEOUT_S = 180
"""How long a start waits for readiness; brokers wait as long for the quorum to take their registration (Kafka's own
60 s runs out on two busy cores, where six JVMs starting together have taken longer)."""

_live_processes: set[subprocess.Popen[bytes]] = set()


class LayoutError(ValueError):
    """A cluster layout that cannot work, reported before anything starts."""


class ClusterStartError(RuntimeError):
    """A node exited or the cluster did not become ready in time."""


@dataclass(frozen=True)
class Layout:
    mode: Literal["combined", "dedicated"]
    brokers: int
    controllers: int = 0

    @classmethod
    def combined(cls, nodes: int) -> Layout:
        return cls("combined", nodes)

    @classmethod
    def dedicated(cls, controllers: int, brokers: int) -> Layout:
        return cls("dedicated", brokers, controllers)

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise LayoutError(f"a {self.mode} cluster needs at least 1 broker, got {self.brokers}")
        if self.mode == "dedicated":
            if self.controllers < 1 or self.controllers % 2 == 0:
                raise LayoutError(
                    f"dedicated mode needs an odd number of controllers (1, 3, 5...) so that a majority "
                    f"survives a failure; got {self.controllers}")
        elif self.mode == "combined":
            if self.controllers:
                raise LayoutError("combined mode has no separate controllers: every node votes; "
                                  f"got controllers={self.controllers}")
        else:
            raise LayoutError(f"mode must be 'combined' or 'dedicated', got {self.mode!r}")

    def node_roles(self) -> list[tuple[int, frozenset[str]]]:
        if self.mode == "combined":
            return [(i, frozenset({BROKER, CONTROLLER})) for i in range(self.brokers)]
        controllers = [(CONTROLLER_ID_OFFSET + i, frozenset({CONTROLLER})) for i in range(self.controllers)]
        return controllers + [(i, frozenset({BROKER})) for i in range(self.brokers)]

    def describe(self) -> str:
        if self.mode == "combined":
            return f"combined x{self.brokers}"
        return f"dedicated {self.controllers}c+{self.brokers}b"


@dataclass
class Node:
    node_id: int
    roles: frozenset[str]
    directory: Path
    broker_port: int | None
    controller_port: int | None
    directory_id: str = field(default_factory=wire.random_kafka_uuid)
    process: subprocess.Popen[bytes] | None = None
    metrics_port: int | None = None
    version: str | None = None  # the Kafka it runs; None: the pinned default

    @property
    def is_broker(self) -> bool:
        return BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER in self.roles

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The log's first ERROR lines (what made a node stop) and then its last lines (how it stopped)."""
        if not self.log_path.exists():
            return "(no log yet)"
        text = self.log_path.read_text(errors="replace").splitlines()
        tail = text[-lines:]
        errors = [line for line in text[:-lines] if " ERROR " in line][:5]
        return "\n".join([*errors, "...", *tail] if errors else tail)


def _set_parent_death_signal() -> None:
    """Runs in the child before exec: die with SIGKILL when the parent dies."""
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _reserve_ports(purposes: list[str], base_port: int | None) -> list[int]:
    """One loopback port per purpose: consecutive from base_port, or free ones."""
    if base_port is not None:
        ports = list(range(base_port, base_port + len(purposes)))
        for port, purpose in zip(ports, purposes, strict=True):
            if not _port_free(port):
                raise LayoutError(f"port {port} ({purpose}) is already in use on 127.0.0.1")
        return ports
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in purposes]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


class LocalKafkaCluster:
    """A KRaft cluster of real Kafka processes under one work directory."""

    def __init__(self, layout: Layout, workdir: Path, *, base_port: int | None = None,
                 config: Mapping[str, str] | None = None, heap: str = "384m", jmx_exporter: bool | Path = False,
                 tls: bool = False, version: str | None = None, features: Mapping[str, int] | None = None,
                 static_quorum: bool = False) -> None:
        """jmx_exporter: each node serves the Prometheus JMX exporter, as in a pod: True with the broker image's
        rules, a path with the rules in that file. features: levels to format the cluster with (kafka-storage
        format --feature), instead of its release's defaults. static_quorum: every node names the voters
        (controller.quorum.voters) and the storage is formatted without a voter set: kraft.version 0, a cluster
        as Kafka before 3.9 made them."""
        self.features = dict(features or {})
        self.static_quorum = static_quorum
        self.layout = layout
        self.exporter_rules = jmx_exporter if isinstance(jmx_exporter, Path) else None
        self.workdir = workdir
        # TLS checks names: the certificates name "localhost", and so do the addresses
        self.host = "localhost" if tls else "127.0.0.1"
        self.identity: TlsIdentity | None = None
        self.heap = heap
        self.cluster_id = wire.random_kafka_uuid()
        self.extra_config = dict(config or {})
        roles = layout.node_roles()
        purposes = []
        for node_id, node_roles in roles:
            purposes += [f"node {node_id} {role} listener" for role in (BROKER, CONTROLLER) if role in node_roles]
            if jmx_exporter:
                purposes.append(f"node {node_id} metrics")
        ports = iter(_reserve_ports(purposes, base_port))
        self.nodes: dict[int, Node] = {}
        for node_id, node_roles in roles:
            self.nodes[node_id] = Node(
                node_id, node_roles, workdir / f"node-{node_id}",
                broker_port=next(ports) if BROKER in node_roles else None,
                controller_port=next(ports) if CONTROLLER in node_roles else None,
                metrics_port=next(ports) if jmx_exporter else None, version=version)
        self.ready_seconds: float | None = None
        self._admin: Any = None
        if tls:
            self.identity = self._make_certificates()

    def _make_certificates(self) -> TlsIdentity:
        """A CA, a certificate per node (files under workdir/tls) and the client's, valid for a day."""
        now, day = datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1)
        ca = signing.new_ca("testkit CA", now, day)
        folder = self.workdir / "tls"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ca.crt").write_text(ca.cert)
        for node_id in self.nodes:
            pair = signing.issue(ca, "testkit-kafka", ["localhost"], now, day)
            (folder / f"node-{node_id}.crt").write_text(pair.cert)
            (folder / f"node-{node_id}.key").write_text(pair.key)
        client = signing.issue(ca, "testkit-client", [], now, day)
        return TlsIdentity(ca.cert, client.cert, client.key)

    @property
    def connection(self) -> Connection:
        """How a client reaches the brokers (with the client certificate on a TLS cluster)."""
        return Connection(self.bootstrap_servers, self.identity)

    # -- addresses -------------------------------------------------------
    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.is_broker]

    @property
    def controllers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.is_controller]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{n.broker_port}" for n in self.brokers)

    @property
    def running_bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{n.broker_port}" for n in self.brokers if n.running)

    @property
    def controller_bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{n.controller_port}" for n in self.controllers)

    # -- configuration and storage ---------------------------------------
    def server_properties(self, node: Node) -> dict[str, str]:
        replication = str(min(3, len(self.brokers)))
        min_isr = str(min(2, len(self.brokers)))
        listeners, advertised, protocols = [], [], []
        name, protocol = ("TLS", "SSL") if self.identity else ("PLAINTEXT", "PLAINTEXT")
        if node.is_broker:
            listeners.append(f"{name}://127.0.0.1:{node.broker_port}")
            advertised.append(f"{name}://{self.host}:{node.broker_port}")
            protocols.append(f"{name}:{protocol}")
        if node.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
            advertised.append(f"CONTROLLER://{self.host}:{node.controller_port}")
        protocols.append(f"CONTROLLER:{protocol}")
        props = {
            "node.id": str(node.node_id),
            "process.roles": ",".join(sorted(node.roles)),
            **({"controller.quorum.voters": ",".join(f"{c.node_id}@{self.host}:{c.controller_port}"
                                                     for c in self.controllers)} if self.static_quorum else
               {"controller.quorum.bootstrap.servers": self.controller_bootstrap_servers}),
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "log.dirs": str(node.directory / "data"),
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": "0",
        }
        if node.is_broker:
            props["inter.broker.listener.name"] = name
            props["initial.broker.registration.timeout.ms"] = str(START_TIMEOUT_S * 1000)
        if self.identity:
            folder = self.workdir / "tls"
            props.update({
                "config.providers": "dir",
                "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
                "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", "ssl.client.auth": "required",
                "ssl.keystore.certificate.chain": f"${{dir:{folder}:node-{node.node_id}.crt}}",
                "ssl.keystore.key": f"${{dir:{folder}:node-{node.node_id}.key}}",
                "ssl.truststore.certificates": f"${{dir:{folder}:ca.crt}}",
            })
        props.update(self.extra_config)
        return props

    def _write_config(self, node: Node) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in self.server_properties(node).items())
        node.config_path.write_text(text)

    def _format(self, node: Node) -> None:
        args = ["format", "--cluster-id", self.cluster_id, "--config", str(node.config_path)]
        if self.static_quorum:
            pass  # (the voters are the configuration's)
        elif node.is_controller:
            voters = ",".join(f"{c.node_id}@{self.host}:{c.controller_port}:{c.directory_id}"
                              for c in self.controllers)
            args += ["--initial-controllers", voters]
        else:
            args += ["--no-initial-controllers"]
        for name, level in sorted(self.features.items()):
            args += ["--feature", f"{name}={level}"]
        kafka_dist.run_tool("kafka-storage.sh", *args, version=node.version)
        meta = node.directory / "data" / "meta.properties"
        if node.is_controller and not self.static_quorum and node.directory_id not in meta.read_text():
            raise ClusterStartError(f"node {node.node_id}: {meta} does not hold directory id {node.directory_id}")

    # -- processes ---------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> float:
        """Writes configs, formats storage, starts every node, waits until ready.

        Returns the seconds from the first process start to readiness.
        """
        for node in self.nodes.values():
            self._write_config(node)
        for version in {node.version for node in self.nodes.values()}:
            kafka_dist.kafka_home(version)  # resolved once, before the nodes format in parallel
        with ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(self._format, self.nodes.values()))
        started = time.monotonic()
        for node in self.nodes.values():
            self.start_node(node.node_id)
        self.wait_ready(timeout)
        self.ready_seconds = time.monotonic() - started
        return self.ready_seconds

    def start_node(self, node_id: int, version: str | None = None) -> None:
        """Starts a node, on another Kafka version when one is given (an upgrade or downgrade of its binaries)."""
        node = self.nodes[node_id]
        node.version = version or node.version
        if node.running:
            raise ClusterStartError(f"node {node_id} is already running (pid {node.process.pid})")  # type: ignore[union-attr]
        env = dict(os.environ)
        env["KAFKA_HEAP_OPTS"] = f"-Xmx{self.heap} -Xms{self.heap}"
        env.setdefault("KAFKA_JVM_PERFORMANCE_OPTS",
                       "-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:TieredStopAtLevel=1 -Djava.awt.headless=true")
        if node.metrics_port is not None:
            # The broker image's exporter agent and (unless told others) its rules, as in the pods.
            home = kafka_dist.kafka_home(node.version)
            agent = next((home / "agent").glob("jmx_prometheus_javaagent-*.jar"))
            rules = self.exporter_rules or home / "config" / "jmx-exporter.yaml"
            env["KAFKA_OPTS"] = (f"-javaagent:{agent}=127.0.0.1:{node.metrics_port}:{rules} "
                                 + env.get("KAFKA_OPTS", ""))
        with node.log_path.open("ab") as log:
            node.process = subprocess.Popen(
                [str(kafka_dist.tool_path("kafka-server-start.sh", node.version)), str(node.config_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,
                preexec_fn=_set_parent_death_signal)  # noqa: PLW1509 - only calls prctl, which is async-signal-safe
        _live_processes.add(node.process)

    def stop_node(self, node_id: int, timeout: float = 60) -> int:
        """SIGTERM (controlled shutdown); returns the exit status (0 or 143)."""
        return self._signal_and_wait(self.nodes[node_id], signal.SIGTERM, timeout)

    def kill_node(self, node_id: int) -> int:
        """SIGKILL: an unclean crash."""
        return self._signal_and_wait(self.nodes[node_id], signal.SIGKILL, 30)

    def restart_node(self, node_id: int, timeout: float = 120, version: str | None = None) -> float:
        """Clean stop, start (on another Kafka version when one is given), and wait until the node is back;
        returns seconds to ready."""
        if self.nodes[node_id].running:
            self.stop_node(node_id)
        self.start_node(node_id, version)
        started = time.monotonic()
        self.wait_ready(timeout)
        return time.monotonic() - started

    def _signal_and_wait(self, node: Node, sig: signal.Signals, timeout: float) -> int:
        proc = node.process
        if proc is None or proc.poll() is not None:
            raise ClusterStartError(f"node {node.node_id} is not running")
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait(10)
            raise ClusterStartError(
                f"node {node.node_id} ignored {sig.name} for {timeout}s and was killed; log:\n{node.log_tail()}"
            ) from None
        finally:
            _live_processes.discard(proc)
        return code

    def exporter_text(self, node_id: int) -> str:
        """What the node's JMX exporter serves (the cluster started with jmx_exporter)."""
        port = self.nodes[node_id].metrics_port
        if port is None:
            raise ValueError(f"node {node_id} serves no JMX exporter: start the cluster with jmx_exporter")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            return str(answer.read().decode())

    def pids(self) -> list[int]:
        return [n.process.pid for n in self.nodes.values() if n.process is not None and n.running]

    def close(self) -> None:
        """Stops every node: brokers, then controllers; SIGKILL after a short grace."""
        for group, grace in ((self.brokers, 20.0), (self.controllers, 10.0)):
            running = [n for n in group if n.running]
            for node in running:
                node.process.terminate()  # type: ignore[union-attr]
            deadline = time.monotonic() + grace
            for node in running:
                proc = node.process
                assert proc is not None
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
                _live_processes.discard(proc)

    def __enter__(self) -> LocalKafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- readiness ---------------------------------------------------------
    def registered_brokers(self) -> set[int]:
        """Ids of the brokers the cluster reports as registered and unfenced."""
        if not any(n.running for n in self.brokers):
            return set()
        description = self.admin().describe_cluster(request_timeout=5).result(timeout=10)
        return {node.id for node in description.nodes}

    def quorum(self) -> wire.Quorum:
        """The metadata quorum as the running controllers report it."""
        return kraft.describe_quorum(self.connection.to(self.running_controller_bootstrap()))

    def running_controller_bootstrap(self) -> str:
        return ",".join(f"{self.host}:{n.controller_port}" for n in self.controllers if n.running)

    def _readiness_problem(self) -> str | None:
        """What still keeps the cluster from ready, or None when it is ready."""
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is not None and node.process in _live_processes:
                _live_processes.discard(node.process)
                raise ClusterStartError(
                    f"node {node.node_id} exited with {node.process.returncode}; log:\n{node.log_tail()}")
        want_brokers = {n.node_id for n in self.brokers if n.running}
        try:
            have = self.registered_brokers()
        except Exception as error:  # noqa: BLE001 - any client error means "not yet"
            return f"cannot describe cluster yet: {error}"
        if want_brokers - have:
            return f"brokers not registered yet: {sorted(want_brokers - have)} (registered: {sorted(have)})"
        try:
            quorum = self.quorum()
        except Exception as error:  # noqa: BLE001
            return f"cannot describe the metadata quorum yet: {error}"
        running_voters = {n.node_id for n in self.controllers if n.running}
        if quorum.leader_id not in running_voters:
            return f"no quorum leader among running controllers (leader {quorum.leader_id})"
        lagging = [v for v in quorum.voters if v.node_id in running_voters and quorum.lag(v) > 0]
        if lagging:
            return "voters not caught up: " + ", ".join(f"{v.node_id} lag {quorum.lag(v)}" for v in lagging)
        return None

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        problem: str | None = "not checked yet"
        while time.monotonic() < deadline:
            problem = self._readiness_problem()
            if problem is None:
                return
            time.sleep(0.25)
        raise ClusterStartError(f"{self.layout.describe()} not ready after {timeout}s: {problem}")

    # -- convenience ---------------------------------------------------------
    def admin(self) -> Any:
        """A confluent-kafka AdminClient for this cluster (one per cluster, reused)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(client_config(self.bootstrap_servers, **self.connection.librdkafka()))
        return self._admin

    def tool(self, name: str, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return kafka_dist.run_tool(name, *args, **kwargs)  # type: ignore[arg-type]


def _kill_leftovers() -> None:
    for proc in list(_live_processes):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


atexit.register(_kill_leftovers)


@contextlib.contextmanager
def running_cluster(layout: Layout, workdir: Path, **kwargs: object) -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster(layout, workdir, **kwargs)  # type: ignore[arg-type]
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
