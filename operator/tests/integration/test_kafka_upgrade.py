"""The wire client's feature requests against real Kafka processes upgraded from one release to the next: the
finalized metadata.version each release runs (the operator's version table), and raising it only once every
node runs the new release."""

from __future__ import annotations

import pytest

from krafty import wire
from krafty.clients import kraft
from krafty.model import versions
from krafty_testkit.kafka_dist import pinned_kafka_versions
from krafty_testkit.local_kafka import Layout
from krafty_testkit.waiting import wait_for

OLDER, NEWER = pinned_kafka_versions()[0], pinned_kafka_versions()[-1]


def test_the_version_table_is_the_pinned_one():
    assert pinned_kafka_versions() == versions.SUPPORTED_KAFKA_VERSIONS
    assert versions.DEFAULT_KAFKA_VERSION == NEWER


def test_metadata_version_is_raised_once_every_node_runs_the_newer_release(local_kafka):
    # Given a cluster formatted and started by the older release
    cluster = local_kafka(Layout.dedicated(1, 2), version=OLDER)
    older, newer = versions.release(OLDER), versions.release(NEWER)
    assert older is not None
    assert newer is not None
    # Then it runs the metadata.version the table says that release finalizes
    assert kraft.features(cluster.bootstrap_servers)[0][wire.METADATA_VERSION] == older.metadata_level
    # When the controller and one broker run the newer release, the other broker the older one
    controller, first, second = cluster.controllers[0], *cluster.brokers
    cluster.restart_node(controller.node_id, version=NEWER)
    cluster.restart_node(first.node_id, version=NEWER)
    # Then the newer level is refused: a node could not run it
    with pytest.raises(wire.KafkaProtocolError) as refused:
        kraft.upgrade_feature(cluster.bootstrap_servers, wire.METADATA_VERSION, newer.metadata_level)
    print(f"\nmetadata.version {newer.metadata_version} with a node on {OLDER}: {refused.value}")
    assert refused.value.error_name == "INVALID_UPDATE_VERSION"
    assert kraft.features(cluster.bootstrap_servers)[0][wire.METADATA_VERSION] == older.metadata_level
    # And once every node runs the newer release, it is raised, and every broker knows it
    cluster.restart_node(second.node_id, version=NEWER)
    kraft.upgrade_feature(cluster.bootstrap_servers, wire.METADATA_VERSION, newer.metadata_level)
    for broker in cluster.brokers:
        address = f"{cluster.host}:{broker.broker_port}"
        wait_for(lambda a=address: kraft.features(a)[0][wire.METADATA_VERSION],
                 lambda level: level == newer.metadata_level, 30, f"{address} on {newer.metadata_version}")


@pytest.mark.parametrize("version", pinned_kafka_versions())
def test_each_release_runs_the_features_of_the_version_table_and_formats_the_levels_asked(local_kafka, version):
    # Given a cluster of the release formatted with share groups and the Streams protocol off (spec.features)
    cluster = local_kafka(Layout.combined(1), version=version, features={"share.version": 0, "streams.version": 0})
    # When its broker is asked (ApiVersions, as status.features is read)
    finalized, supported = kraft.features(cluster.bootstrap_servers)
    # Then it runs exactly the levels the operator's table says that release runs
    release = versions.release(version)
    assert release is not None
    assert {name: (r.lowest, r.highest) for name, r in release.features.items()} == {
        name: levels for name, levels in supported.items() if name != wire.METADATA_VERSION}
    # And the two are off, the others at the release's default
    assert {name: finalized.get(name, 0) for name in release.features} == {
        **{name: r.default for name, r in release.features.items()}, "share.version": 0, "streams.version": 0}
