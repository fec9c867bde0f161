"""The cluster's identity: generated once, found again with its data, renewed only when its data is gone."""

from __future__ import annotations

import itertools

import pytest

from krafty import naming
from krafty.decide.identity import IdentityConflict, internal_tls, resolve

VOTERS = [1000, 1001, 1002]
FORMED = {naming.CLUSTER_ID_KEY: "old-id", naming.INITIAL_CONTROLLERS_KEY: ""}
FORMING = {naming.CLUSTER_ID_KEY: "old-id",
           naming.INITIAL_CONTROLLERS_KEY: "1000@h0:9093:d0,1001@h1:9093:d1,1002@h2:9093:d2"}
VOLUMES = ("data-prod-broker-0", "data-prod-controller-0")


def ids() -> object:
    counter = itertools.count()
    return lambda: f"new-{next(counter)}"


def test_a_new_cluster_gets_a_new_id_and_first_voters():
    found = resolve(None, None, VOTERS, ids())
    assert found.cluster_id == "new-0"
    assert [v.node_id for v in found.initial_voters] == VOTERS
    assert found.renewed_from is None


def test_a_running_cluster_keeps_its_id():
    assert resolve("old-id", FORMED, VOTERS, ids(), VOLUMES).cluster_id == "old-id"
    # (its volumes deleted by hand while it runs change nothing: status remembers the id)
    assert resolve("old-id", FORMED, VOTERS, ids()).cluster_id == "old-id"


def test_a_cluster_created_again_finds_its_data_and_its_id_together():
    found = resolve(None, FORMED, VOTERS, ids(), VOLUMES)
    assert (found.cluster_id, found.initial_voters, found.renewed_from) == ("old-id", (), None)


def test_a_cluster_created_again_without_its_volumes_starts_clean_with_a_new_id():
    # Given the ConfigMap kept with the volumes, and the volumes deleted since
    found = resolve(None, FORMED, VOTERS, ids())
    # Then a quorum can form again: a new id and new first voters, and it says which id it leaves
    assert found.cluster_id == "new-0"
    assert [v.node_id for v in found.initial_voters] == VOTERS
    assert found.renewed_from == "old-id"


def test_a_cluster_that_never_formed_keeps_its_first_voters():
    found = resolve(None, FORMING, VOTERS, ids())
    assert found.cluster_id == "old-id"
    assert [v.directory_id for v in found.initial_voters] == ["d0", "d1", "d2"]


def test_volumes_without_the_id_they_were_formatted_with_stop_the_cluster():
    with pytest.raises(IdentityConflict, match="restore that ConfigMap, or delete the volumes"):
        resolve(None, None, VOTERS, ids(), VOLUMES, "prod-kafka-config")


def test_an_id_in_status_and_another_in_the_config_map_stop_it():
    with pytest.raises(IdentityConflict, match=r"differs from status\.clusterId"):
        resolve("other-id", FORMED, VOTERS, ids(), VOLUMES)


@pytest.mark.parametrize(("config", "wanted", "expected"), [
    (None, None, True),  # a new cluster: mutual TLS between its nodes unless the spec says otherwise
    (None, False, False),
    ({naming.INTERNAL_TLS_KEY: "true"}, False, True),  # once chosen, kept: the spec cannot switch it
    ({naming.INTERNAL_TLS_KEY: "false"}, True, False),
    ({naming.CLUSTER_ID_KEY: "x"}, None, False),  # a cluster made before the operator had TLS stays plaintext
])
def test_tls_between_the_nodes_is_chosen_once(config, wanted, expected):
    assert internal_tls(config, wanted) is expected
