"""The cluster's identity: its KRaft cluster id and first voters, generated once.

Both live in the node ConfigMap the pods format their storage from (and the
id also in status). They are never regenerated while a cluster runs: a
cluster whose ConfigMap was lost but whose status remembers the id gets the
same id back, and a disagreement between the two stops the reconcile instead
of guessing. A KafkaCluster created again with the same name finds its data
and its id together (the ConfigMap stays with the volumes), or starts clean
with a new id when no volume of the earlier cluster is left; volumes without
the id they were formatted with stop it with a condition saying what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from krafty import naming
from krafty.model.context import QuorumKind, Voter
from krafty.model.network import UnnamedPeers


class IdentityConflict(ValueError):
    pass


@dataclass(frozen=True)
class Identity:
    cluster_id: str
    initial_voters: tuple[Voter, ...]  # empty once the quorum has formed
    renewed_from: str | None = None  # an earlier cluster's id, left in a ConfigMap whose volumes are gone


def parse_initial_controllers(text: str) -> tuple[Voter, ...]:
    """Voters from a `kafka-storage format --initial-controllers` value (id@host:port:directory-id,...)."""
    voters = []
    for item in filter(None, text.split(",")):
        node, _, rest = item.partition("@")
        voters.append(Voter(int(node), rest.rsplit(":", 1)[-1]))
    return tuple(voters)


def _fresh(voter_ids: list[int], new_id: Callable[[], str], renewed_from: str | None = None) -> Identity:
    return Identity(new_id(), tuple(Voter(node, new_id()) for node in voter_ids), renewed_from)


def resolve(status_cluster_id: str | None, config_data: Mapping[str, str] | None, voter_ids: list[int],
            new_id: Callable[[], str], volumes: tuple[str, ...] = (), config_map: str = "") -> Identity:
    """The persisted identity, or a new one for a cluster that never started. `volumes`: the data claims
    of this cluster's nodes that exist now; `config_map`: the name of the ConfigMap `config_data` comes from."""
    stored_id = (config_data or {}).get(naming.CLUSTER_ID_KEY)
    if stored_id and status_cluster_id and stored_id != status_cluster_id:
        raise IdentityConflict(f"the cluster id in ConfigMap data ({stored_id}) differs from status.clusterId "
                               f"({status_cluster_id}); fix or remove the wrong one, nothing changes until then")
    if not status_cluster_id:  # a KafkaCluster that never ran, or one created again with the same name
        formed = config_data is not None and config_data.get(naming.INITIAL_CONTROLLERS_KEY) == ""
        if stored_id and formed and not volumes:
            return _fresh(voter_ids, new_id, renewed_from=stored_id)  # its data is gone: start clean
        if not stored_id and volumes:
            raise IdentityConflict(
                f"volumes {', '.join(volumes[:3])} hold the data of an earlier cluster, but the cluster id they were "
                f"formatted with (in ConfigMap {config_map}) is gone: restore that ConfigMap, or "
                "delete the volumes to start clean; nothing changes until then")
    cluster_id = stored_id or status_cluster_id or new_id()
    if config_data is not None and naming.INITIAL_CONTROLLERS_KEY in config_data:
        stored = config_data[naming.INITIAL_CONTROLLERS_KEY]
        if not stored:
            # The quorum formed; the first voters' directory ids are no longer needed.
            return Identity(cluster_id, ())
        return Identity(cluster_id, parse_initial_controllers(stored))
    if status_cluster_id and config_data is None:
        # Running before, ConfigMap lost: formatting must not invent a new first quorum.
        return Identity(cluster_id, ())
    return Identity(cluster_id, tuple(Voter(node, new_id()) for node in voter_ids))


def internal_tls(config_data: Mapping[str, str] | None, wanted: bool | None) -> bool:
    """Whether the nodes speak mutual TLS to each other. Chosen once, like the cluster id: what the ConfigMap
    says once the cluster exists; plaintext for a cluster made before the operator had TLS (a ConfigMap
    without the key); for a new cluster the spec's choice, on unless it says otherwise."""
    if config_data is not None and naming.INTERNAL_TLS_KEY in config_data:
        return config_data[naming.INTERNAL_TLS_KEY] == "true"
    if config_data is not None:
        return False
    return wanted is not False


def unnamed_peers(config_data: Mapping[str, str] | None) -> UnnamedPeers:
    """Who a listener or the metrics port naming no peers admits unless the spec says: chosen when the cluster was
    created and kept in its ConfigMap, like internal_tls; every pod for a cluster made before the operator had
    the choice (a ConfigMap without the key), so that its clients in other namespaces keep their way in; its own
    namespace for a new cluster."""
    if config_data is not None and naming.UNNAMED_PEERS_KEY in config_data:
        return UnnamedPeers(config_data[naming.UNNAMED_PEERS_KEY])
    return UnnamedPeers.EVERYONE if config_data is not None else UnnamedPeers.NAMESPACE


def stored_quorum(config_data: Mapping[str, str] | None) -> QuorumKind:
    """How the nodes find their quorum, as the ConfigMap last said: dynamic for a new cluster, or one made before the
    key (krafty formats every cluster with --initial-controllers). A cluster adopted with a static quorum says so
    in the ConfigMap restored with its cluster id (kraft-quorum: static)."""
    value = (config_data or {}).get(naming.KRAFT_QUORUM_KEY)
    if value is None:
        return QuorumKind.DYNAMIC
    if value not in QuorumKind.__members__.values():
        raise IdentityConflict(f"ConfigMap key {naming.KRAFT_QUORUM_KEY} is {value!r}, neither "
                               f"{QuorumKind.STATIC.value} nor {QuorumKind.DYNAMIC.value}: fix it; nothing changes "
                               "until then")
    return QuorumKind(value)


def quorum_kind(stored: QuorumKind, kraft_version: int | None) -> QuorumKind:
    """How the nodes find their quorum: what kraft.version says when Kafka was read (0: static, a cluster formatted
    before KIP-853, until spec.features raises it), else what was stored."""
    if kraft_version is None:
        return stored
    return QuorumKind.STATIC if kraft_version == 0 else QuorumKind.DYNAMIC
