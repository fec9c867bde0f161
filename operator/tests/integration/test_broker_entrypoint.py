"""The broker image's entrypoint formats a node's storage with the real kafka-storage tool, and waits for a
certificate that names its node's address when a TLS nodeport listener needs one; the JVM settings it gives a node
(config/node.java.security) make a peer's new address seen within seconds."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from krafty_testkit.kafka_dist import kafka_home
from krafty_testkit.kube import ROOT
from krafty_testkit.waiting import wait_for

ENTRYPOINT = ROOT / "broker-image" / "bin" / "entrypoint.sh"
NODE_SECURITY = ROOT / "broker-image" / "config" / "node.java.security"
# Looks a peer up, moves it in the JVM's hosts file (as a restarted pod gets a new address), looks it up again
# 2.5 s later: prints both addresses.
MOVED = """
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;

public class Moved {
    public static void main(String[] args) throws Exception {
        String before = InetAddress.getByName("peer").getHostAddress();
        Files.writeString(Path.of(args[0]), "10.0.0.2 peer\\n");
        Thread.sleep(2500);
        System.out.println(before + " " + InetAddress.getByName("peer").getHostAddress());
    }
}
"""


def _node_files(tmp_path: Path, cluster_id: str) -> tuple[dict[str, str], Path]:
    """The operator's ConfigMap as the entrypoint finds it mounted, for one combined node; its environment and
    data directory."""
    config, data = tmp_path / "config", tmp_path / "data"
    config.mkdir()
    (config / "cluster.id").write_text(cluster_id)
    (config / "initial-controllers").write_text("0@localhost:19093:aiJolDprsf_WeFT2ZLNQAw")
    (config / "broker-0.properties").write_text(
        "process.roles=broker,controller\nnode.id=0\ncontroller.listener.names=CONTROLLER\n"
        "listeners=PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093\n"
        "controller.quorum.bootstrap.servers=localhost:19093\n"
        f"log.dirs={data}\n")
    env = {**os.environ, "KRAFTY_CONFIG_DIR": str(config), "KAFKA_HOME": str(kafka_home()),
           "POD_NAME": "dash-broker-0", "KRAFTY_POOL": "broker", "KRAFTY_METRICS": "false"}
    return env, data


def test_a_cluster_id_starting_with_a_dash_is_formatted(tmp_path: Path) -> None:
    # Such an id once made kafka-storage read it as an option, and every broker crash-looped.
    cluster_id = "-H4Ccfg2R02D8gpYuJaerA"
    env, data = _node_files(tmp_path, cluster_id)
    # Once formatted, the entrypoint execs Kafka: the test stops it, it only needs the storage.
    node = subprocess.Popen(["bash", str(ENTRYPOINT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        meta = data / "meta.properties"
        wait_for(lambda: meta.is_file() or node.poll() is not None, bool, 90, "meta.properties or an exit")
    finally:
        node.kill()
        output = node.communicate(timeout=30)[0]
    assert meta.is_file(), output
    assert f"cluster.id={cluster_id}" in meta.read_text(), output
    assert "directory.id=aiJolDprsf_WeFT2ZLNQAw" in meta.read_text(), output


def test_a_broker_on_a_node_its_certificate_does_not_name_waits_until_the_mounted_certificate_does(
        tmp_path: Path) -> None:
    # Given a broker of a TLS nodeport listener on node 10.9.0.7, whose mounted certificate names other nodes
    env, data = _node_files(tmp_path, "H4Ccfg2R02D8gpYuJaerAw")
    certs = tmp_path / "certs"
    certs.mkdir()
    names = certs / "broker-0.names"
    names.write_text("10.9.0.1\n10.9.0.70\nkafka.example.com\n")
    env |= {"KRAFTY_CERTIFICATE_NAMES_NODE": "true", "KRAFTY_NODE_ADDRESS": "10.9.0.7",
            "KRAFTY_NODE_CERTS_DIR": str(certs)}
    node = subprocess.Popen(["bash", str(ENTRYPOINT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    meta = data / "meta.properties"
    try:
        # Then it does not start Kafka (no storage formatted) while the certificate lacks its node
        time.sleep(6)
        waited = (node.poll(), meta.exists())
        # When the kubelet brings the Secret up to date with the certificate the operator issued again
        names.write_text("10.9.0.1\n10.9.0.7\n10.9.0.70\n")
        # Then it goes on and starts
        wait_for(lambda: meta.is_file() or node.poll() is not None, bool, 90, "meta.properties or an exit")
    finally:
        node.kill()
        output = node.communicate(timeout=30)[0]
    assert waited == (None, False), output
    assert meta.is_file(), output
    assert "waiting for a certificate that names node address 10.9.0.7" in output
    assert "the certificate names node address 10.9.0.7" in output


def test_a_nodes_jvm_looks_a_peer_up_again_after_it_moved(tmp_path: Path) -> None:
    source, hosts = tmp_path / "Moved.java", tmp_path / "hosts"
    source.write_text(MOVED)

    def addresses(*options: str) -> list[str]:
        hosts.write_text("10.0.0.1 peer\n")
        java = f"{os.environ['JAVA_HOME']}/bin/java" if os.environ.get("JAVA_HOME") else "java"
        return subprocess.run([java, *options, f"-Djdk.net.hosts.file={hosts}", str(source), str(hosts)],
                              capture_output=True, text=True, check=True, timeout=120).stdout.split()

    # A JVM with the JDK's defaults keeps the old address (for 30 s): a follower told to fetch from a broker that
    # had just restarted connected to its old pod's address, and waited out its connection timeout, again and again
    assert addresses() == ["10.0.0.1", "10.0.0.1"]
    # The settings the entrypoint gives a node's JVM look the name up again
    assert addresses(f"-Djava.security.properties={NODE_SECURITY}") == ["10.0.0.1", "10.0.0.2"]
    assert f"-Djava.security.properties=$kafka_home/config/{NODE_SECURITY.name}" in ENTRYPOINT.read_text()
