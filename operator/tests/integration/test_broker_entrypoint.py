"""The broker image's entrypoint formats a node's storage with the real kafka-storage tool."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from krafty_testkit.kafka_dist import kafka_home
from krafty_testkit.kube import ROOT
from krafty_testkit.waiting import wait_for

ENTRYPOINT = ROOT / "broker-image" / "bin" / "entrypoint.sh"


def test_a_cluster_id_starting_with_a_dash_is_formatted(tmp_path: Path) -> None:
    # Such an id once made kafka-storage read it as an option, and every broker crash-looped.
    cluster_id = "-H4Ccfg2R02D8gpYuJaerA"
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
