"""Admin requests no Python client has (see krafty.wire), each sent by krafty.clients.kraft_transport.call: to the
given servers in turn, on a kept connection, the first answer that is not "ask someone else" returned."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from krafty import wire
from krafty.clients.connection import Connection
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kraft_transport import Target, call

T = TypeVar("T")
log = logging.getLogger(__name__)

CONFIG_BATCH = 1000  # topics per DescribeConfigs request (an answer of about 2 MiB)


def describe_brokers(servers: Target, timeout: float = 10.0) -> tuple[wire.Broker, ...]:
    """Every registered broker, fenced ones too (sent to brokers: the bootstrap address)."""
    return call(servers, wire.DESCRIBE_CLUSTER, 2, wire.encode_describe_cluster(), wire.decode_describe_cluster,
                timeout)


def controller_nodes(controllers: Target, timeout: float = 10.0) -> frozenset[int]:
    """The nodes that run as controllers, voters or not (sent to controllers: each registers with the active one)."""
    return frozenset(c.node_id for c in call(controllers, wire.DESCRIBE_CLUSTER, 2,
                                              wire.encode_describe_cluster(wire.CONTROLLER_ENDPOINTS),
                                              wire.decode_describe_cluster, timeout))


def log_dirs(broker: Target, timeout: float = 10.0) -> tuple[wire.LogDir, ...]:
    """The log directories of the broker asked (each broker answers for its own), with their volumes' sizes."""
    return call(broker, wire.DESCRIBE_LOG_DIRS, 4, wire.encode_describe_log_dirs(), wire.decode_describe_log_dirs,
                timeout)


def topic_metadata(brokers: Target, timeout: float = 30.0, names: Sequence[str] | None = None
                   ) -> dict[str, wire.TopicMetadata]:
    """Each topic's id and partitions (leader, replicas, ISR), as the broker asked knows them: every topic, or only
    those of `names` that exist."""
    return call(brokers, wire.METADATA, 12, wire.encode_metadata(names), wire.decode_metadata, timeout)


def eligible_leaders(brokers: Target, timeout: float = 30.0) -> dict[tuple[str, int], tuple[int, ...]]:
    """Each partition's eligible leader replicas (KIP-966), for those that have any, a page at a time."""
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    cursor: tuple[str, int] | None = None
    while True:
        page = call(brokers, wire.DESCRIBE_TOPIC_PARTITIONS, 0, wire.encode_describe_topic_partitions(cursor),
                    wire.decode_describe_topic_partitions, timeout)
        out.update(page.eligible)
        if page.next_cursor is None or page.next_cursor == cursor:
            return out
        cursor = page.next_cursor


def topic_configs(brokers: Target, topics: Sequence[str], timeout: float = 30.0,
                  keys: Sequence[str] | None = None) -> dict[str, wire.TopicConfig]:
    """The configs set on each topic (of `keys` only, when given) and its effective min.insync.replicas (asked
    for among `keys`); a topic not known (yet) is left out."""
    return _describe_topics(brokers, topics, keys, wire.decode_describe_topic_configs, timeout)


def topic_config_values(brokers: Target, topics: Sequence[str], keys: Sequence[str], timeout: float = 15.0
                        ) -> dict[str, dict[str, str]]:
    """The values in effect of `keys` for each topic (set on it, for the brokers, or Kafka's defaults); a topic not
    known is left out."""
    return _describe_topics(brokers, topics, keys, wire.decode_describe_topic_values, timeout)


def _describe_topics(brokers: Target, topics: Sequence[str], keys: Sequence[str] | None,
                     decode: Callable[[wire.Reader], Mapping[str, T]], timeout: float) -> dict[str, T]:
    out: dict[str, T] = {}
    for start in range(0, len(topics), CONFIG_BATCH):
        body = wire.encode_describe_topic_configs(topics[start:start + CONFIG_BATCH], keys)
        out.update(call(brokers, wire.DESCRIBE_CONFIGS, 4, body, decode, timeout))
    return out


def cluster_defaults(brokers: Target, timeout: float = 15.0) -> dict[str, str]:
    """The dynamic broker configs set for every broker at once."""
    return call(brokers, wire.DESCRIBE_CONFIGS, 4, wire.encode_describe_cluster_defaults(),
                wire.decode_describe_cluster_defaults, timeout)


def describe_quorum(servers: Target, timeout: float = 10.0) -> wire.Quorum:
    return call(servers, wire.DESCRIBE_QUORUM, 2, wire.encode_describe_quorum(), wire.decode_describe_quorum, timeout)


def add_voter(servers: Target, cluster_id: str | None, voter_id: int, directory_id: str, host: str, port: int,
              listener: str, timeout: float = 30.0) -> None:
    """Makes a controller that runs as an observer a voter (KIP-853), once it has caught up."""
    body = wire.encode_add_raft_voter(cluster_id, voter_id, directory_id, [(listener, host, port)],
                                      int(timeout * 1000))
    call(servers, wire.ADD_RAFT_VOTER, 0, body, wire.decode_simple("AddRaftVoter"), timeout + 5)


def remove_voter(servers: Target, cluster_id: str | None, voter_id: int, directory_id: str,
                 timeout: float = 30.0) -> None:
    call(servers, wire.REMOVE_RAFT_VOTER, 0, wire.encode_remove_raft_voter(cluster_id, voter_id, directory_id),
         wire.decode_simple("RemoveRaftVoter"), timeout)


def unregister_broker(servers: Target, broker_id: int, timeout: float = 30.0) -> None:
    call(servers, wire.UNREGISTER_BROKER, 0, wire.encode_unregister_broker(broker_id),
         wire.decode_simple("UnregisterBroker"), timeout)


def alter_reassignments(servers: Target, targets: Mapping[wire.TopicPartition, list[int] | None],
                        timeout: float = 30.0) -> dict[wire.TopicPartition, str]:
    body = wire.encode_alter_reassignments(targets, int(timeout * 1000))
    return call(servers, wire.ALTER_PARTITION_REASSIGNMENTS, 0, body, wire.decode_alter_reassignments, timeout + 5)


def list_reassignments(servers: Target, timeout: float = 30.0) -> dict[wire.TopicPartition, wire.OngoingReassignment]:
    body = wire.encode_list_reassignments(int(timeout * 1000))
    return call(servers, wire.LIST_PARTITION_REASSIGNMENTS, 0, body, wire.decode_list_reassignments, timeout + 5)


def alter_cluster_defaults(servers: Target, changes: dict[str, str | None], timeout: float = 30.0) -> None:
    """Sets (or with None deletes) cluster-wide dynamic broker settings: the default broker resource ""."""
    if changes:
        call(servers, wire.INCREMENTAL_ALTER_CONFIGS, 1, wire.encode_alter_cluster_defaults(changes),
             wire.decode_alter_configs, timeout)


def alter_topic_configs(servers: Target, changes: Mapping[str, Mapping[str, str | None]], validate_only: bool,
                        timeout: float = 30.0) -> dict[str, str | None]:
    """Sets (None: deletes) configs of many topics in one request; Kafka's refusal per topic (None: done)."""
    if not changes:
        return {}
    return call(servers, wire.INCREMENTAL_ALTER_CONFIGS, 1, wire.encode_alter_topic_configs(changes, validate_only),
                wire.decode_alter_config_errors, timeout)


def create_topics(servers: Target, topics: Sequence[wire.NewTopic], validate_only: bool = False,
                  timeout: float = 30.0) -> dict[str, str | None]:
    """Creates (or only validates) topics in one request; Kafka's refusal per topic (None: done)."""
    if not topics:
        return {}
    return call(servers, wire.CREATE_TOPICS, 7, wire.encode_create_topics(topics, int(timeout * 1000), validate_only),
                wire.decode_create_topics, timeout + 5)


def create_partitions(servers: Target, totals: Mapping[str, int], placed: Mapping[str, Sequence[Sequence[int]]],
                      validate_only: bool = False, timeout: float = 30.0) -> dict[str, str | None]:
    """Grows each topic to its total partitions (the new ones' replicas given for those in `placed`); Kafka's
    refusal per topic (None: done)."""
    if not totals:
        return {}
    body = wire.encode_create_partitions(totals, placed, int(timeout * 1000), validate_only)
    return call(servers, wire.CREATE_PARTITIONS, 3, body, wire.decode_create_partitions, timeout + 5)


def delete_topics(servers: Target, names: Sequence[str], timeout: float = 30.0) -> dict[str, str | None]:
    """Deletes topics in one request; Kafka's refusal per topic (None: done)."""
    if not names:
        return {}
    return call(servers, wire.DELETE_TOPICS, 5, wire.encode_delete_topics(names, int(timeout * 1000)),
                wire.decode_delete_topics, timeout + 5)


def elect_preferred(servers: Target, partitions: Iterable[wire.TopicPartition], timeout: float = 30.0
                    ) -> dict[wire.TopicPartition, str]:
    """Preferred-leader elections; the partitions whose election failed, with the error."""
    wanted = list(partitions)
    if not wanted:
        return {}
    return call(servers, wire.ELECT_LEADERS, 2, wire.encode_elect_preferred(wanted, int(timeout * 1000)),
                wire.decode_elect_leaders, timeout + 5)


def acls(servers: Target, timeout: float = 15.0) -> list[wire.AclEntry]:
    """Every ACL the cluster holds."""
    return call(servers, wire.DESCRIBE_ACLS, 3, wire.encode_describe_every_acl(), wire.decode_describe_acls, timeout)


def create_acls(servers: Target, entries: Sequence[wire.AclEntry], timeout: float = 15.0) -> list[str | None]:
    """Kafka's refusal of each ACL, in order (None: created)."""
    if not entries:
        return []
    return call(servers, wire.CREATE_ACLS, 3, wire.encode_create_acls(entries), wire.decode_create_acls, timeout)


def delete_acls(servers: Target, entries: Sequence[wire.AclEntry], timeout: float = 15.0) -> list[str | None]:
    """Kafka's refusal of each deletion, in order (None: deleted, or none held)."""
    if not entries:
        return []
    return call(servers, wire.DELETE_ACLS, 3, wire.encode_delete_acls(entries), wire.decode_delete_acls, timeout)


def scram_users(servers: Target, timeout: float = 15.0) -> dict[str, frozenset[int]]:
    """The SCRAM mechanisms each user has a credential for."""
    return call(servers, wire.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, wire.encode_describe_every_scram_user(),
                wire.decode_describe_scram_users, timeout)


def alter_scram(servers: Target, upserts: Sequence[wire.ScramUpsert], deletes: Sequence[str],
                timeout: float = 15.0) -> dict[str, str | None]:
    """Sets and removes SCRAM-SHA-512 credentials; Kafka's refusal per user (None: done)."""
    if not upserts and not deletes:
        return {}
    return call(servers, wire.ALTER_USER_SCRAM_CREDENTIALS, 0, wire.encode_alter_scram(upserts, deletes),
                wire.decode_alter_scram, timeout)


def user_quotas(servers: Target, timeout: float = 15.0) -> dict[str, dict[str, float]]:
    """The quotas Kafka holds per user name."""
    return call(servers, wire.DESCRIBE_CLIENT_QUOTAS, 1, wire.encode_describe_user_quotas(),
                wire.decode_describe_user_quotas, timeout)


def alter_user_quotas(servers: Target, changes: Mapping[str, Mapping[str, float | None]], validate_only: bool,
                      timeout: float = 15.0) -> dict[str, str]:
    """Sets (None: removes) quotas per user; returns Kafka's refusal per user."""
    if not changes:
        return {}
    return call(servers, wire.ALTER_CLIENT_QUOTAS, 1, wire.encode_alter_user_quotas(changes, validate_only),
                wire.decode_alter_user_quotas, timeout)


def features(servers: Target, timeout: float = 10.0) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    """The cluster's finalized feature levels (metadata.version among them) as a broker knows them, and the
    (min, max) level of each feature that broker's release supports."""
    # (v4: a v3 request is told only of the features whose lowest supported level is above 0, KIP-1022)
    return call(servers, wire.API_VERSIONS, 4, wire.encode_api_versions("krafty", "1"), wire.decode_features,
                timeout)


def upgrade_feature(servers: Target, feature: str, level: int, timeout: float = 30.0, *, downgrade: bool = False,
                    validate_only: bool = False) -> None:
    """Raises a feature's finalized level (metadata.version after every node runs the new release), or lowers it
    (`downgrade`: a safe downgrade, where Kafka allows it); raises KafkaProtocolError when the controller refuses."""
    call(servers, wire.UPDATE_FEATURES, 1, wire.encode_upgrade_feature(feature, level, int(timeout * 1000),
                                                                       validate_only, downgrade),
         wire.decode_update_features, timeout + 5)


def group_ids(servers: Target, timeout: float = 10.0) -> dict[str, str]:
    """The groups of the cluster, each with its type (classic, consumer, share, streams): each broker asked for
    those it coordinates. A broker that does not answer leaves its groups out (they come back with it); none
    answering raises KafkaUnavailable."""
    connection = Connection(servers) if isinstance(servers, str) else servers
    found: dict[str, str] = {}
    answered, errors = 0, []
    for broker in (b for b in describe_brokers(connection, timeout) if not b.fenced):
        try:
            found.update(call(connection.to(f"{broker.host}:{broker.port}"), wire.LIST_GROUPS, 5,
                              wire.encode_list_groups(), wire.decode_list_groups, timeout))
            answered += 1
        except (KafkaUnavailable, wire.KafkaProtocolError) as error:
            errors.append(f"broker {broker.node_id}: {error}")
    if not answered:
        raise KafkaUnavailable("ListGroups: no broker answered: " + "; ".join(errors))
    if errors:
        log.info("consumer groups of some brokers left out: %s", "; ".join(errors))
    return found


def _by_coordinator(connection: Connection, groups: Sequence[str], timeout: float
                    ) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The groups by their coordinator's address (one FindCoordinator for all of them), and why the others have
    none now."""
    try:
        coordinators = call(connection, wire.FIND_COORDINATOR, 4, wire.encode_find_coordinators(groups),
                            wire.decode_find_coordinators, timeout)
    except (KafkaUnavailable, wire.KafkaProtocolError) as error:
        return {}, {group: f"no coordinator: {error}" for group in groups}
    by_address: dict[str, list[str]] = {}
    failed: dict[str, str] = {}
    for group, coordinator in ((g, coordinators.get(g)) for g in groups):
        if coordinator is None:
            failed[group] = "no coordinator in the answer"
        elif coordinator.error is not None:
            failed[group] = f"coordinator: {coordinator.error}"
        else:
            by_address.setdefault(f"{coordinator.host}:{coordinator.port}", []).append(group)
    return by_address, failed


def committed_offsets(target: Target, groups: Sequence[str], timeout: float = 10.0, *,
                      share: bool = False) -> dict[str, wire.GroupOffsets]:
    """Each group's committed offsets (the partitions it committed, nothing else), or why they could not be read:
    one FindCoordinator for every group, then each coordinator asked once for all of its groups. `share`: the
    groups are share groups, and their positions are their share-partitions' start offsets."""
    if not groups:
        return {}
    connection = Connection(target) if isinstance(target, str) else target
    by_address, failed = _by_coordinator(connection, groups, timeout)
    found = {group: wire.GroupOffsets({}, why) for group, why in failed.items()}
    for address, members in sorted(by_address.items()):
        try:
            answers = (call(connection.to(address), wire.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                            wire.encode_describe_share_group_offsets(members),
                            wire.decode_describe_share_group_offsets, timeout) if share else
                       call(connection.to(address), wire.OFFSET_FETCH, 8, wire.encode_offset_fetch(members),
                            wire.decode_offset_fetch, timeout))
        except (KafkaUnavailable, wire.KafkaProtocolError) as error:
            answers = {group: wire.GroupOffsets({}, f"coordinator {address}: {error}") for group in members}
        found.update({group: answers.get(group, wire.GroupOffsets({}, "not in the answer")) for group in members})
    return found


_DESCRIBE = {wire.SHARE_GROUP: (wire.SHARE_GROUP_DESCRIBE, 1, wire.decode_share_group_describe),
             wire.STREAMS_GROUP: (wire.STREAMS_GROUP_DESCRIBE, 0, wire.decode_streams_group_describe)}


def group_readers(target: Target, kind: str, groups: Sequence[str], timeout: float = 10.0
                  ) -> dict[str, wire.GroupReaders]:
    """The topics each share or Streams group's (`kind`) live members read, or why they are not known: one
    FindCoordinator for every group, then each coordinator asked once (ShareGroupDescribe, StreamsGroupDescribe)
    for all of its groups."""
    if not groups:
        return {}
    api, version, decode = _DESCRIBE[kind]
    connection = Connection(target) if isinstance(target, str) else target
    by_address, failed = _by_coordinator(connection, groups, timeout)
    found = {group: wire.GroupReaders(frozenset(), why) for group, why in failed.items()}
    for address, members in sorted(by_address.items()):
        try:
            answers = call(connection.to(address), api, version, wire.encode_group_describe(members), decode, timeout)
        except (KafkaUnavailable, wire.KafkaProtocolError) as error:
            answers = {group: wire.GroupReaders(frozenset(), f"coordinator {address}: {error}") for group in members}
        found.update({group: answers.get(group, wire.GroupReaders(frozenset(), "not in the answer"))
                      for group in members})
    return found


def log_ranges(target: Target, partitions: Iterable[wire.TopicPartition], timeout: float = 10.0
               ) -> dict[wire.TopicPartition, tuple[int, int] | str]:
    """Where each partition's log starts and ends (its log start offset and high watermark), or why that is not
    known: the metadata of their topics, then each leader asked for its partitions' earliest and latest offsets."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    connection = Connection(target) if isinstance(target, str) else target
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in describe_brokers(connection, timeout) if not b.fenced}
    metadata = topic_metadata(connection, timeout, sorted({topic for topic, _ in wanted}))
    leaders = {(topic, p.partition): p.leader for topic, known in metadata.items() for p in known.partitions}
    found: dict[wire.TopicPartition, tuple[int, int] | str] = {}
    by_leader: dict[str, list[wire.TopicPartition]] = {}
    for topic, index in wanted:
        leader = leaders.get((topic, index))
        if leader is None:
            found[(topic, index)] = "not in the metadata"
        elif leader not in brokers:
            found[(topic, index)] = "no leader" if leader < 0 else f"leader {leader} not registered"
        else:
            by_leader.setdefault(brokers[leader], []).append((topic, index))
    for address, led in sorted(by_leader.items()):
        try:
            starts, ends = (call(connection.to(address), wire.LIST_OFFSETS, 6, wire.encode_list_offsets(led, at),
                                 wire.decode_list_offsets, timeout) for at in (wire.EARLIEST, wire.LATEST))
        except (KafkaUnavailable, wire.KafkaProtocolError) as error:
            found.update((tp, f"leader {address}: {error}") for tp in led)
            continue
        for tp in led:
            start, end = starts.get(tp, "not in the answer"), ends.get(tp, "not in the answer")
            if isinstance(start, str):
                found[tp] = start
            elif isinstance(end, str):
                found[tp] = end
            else:
                found[tp] = (start, end)
    return found
