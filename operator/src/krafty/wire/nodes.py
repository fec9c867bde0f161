"""The KRaft requests about nodes: DescribeQuorum, DescribeCluster (fenced brokers too),
AddRaftVoter, RemoveRaftVoter and UnregisterBroker."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from krafty.wire.codec import Reader, Writer, check

DESCRIBE_QUORUM = 55
DESCRIBE_CLUSTER = 60
UNREGISTER_BROKER = 64
ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81
METADATA_TOPIC = "__cluster_metadata"


# -- DescribeQuorum v2 ----------------------------------------------------------

@dataclass(frozen=True)
class ReplicaState:
    node_id: int
    directory_id: str
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True)
class Quorum:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]
    endpoints: dict[int, tuple[str, int]]

    def lag(self, replica: ReplicaState) -> int:
        """Offsets the replica is behind the leader's high watermark (0 when caught up)."""
        return max(0, self.high_watermark - replica.log_end_offset) if replica.log_end_offset >= 0 else -1

    def voter_ids(self) -> set[int]:
        return {v.node_id for v in self.voters}


def encode_describe_quorum() -> Writer:
    def partition(w: Writer, index: int) -> None:
        w.int32(index).tags()

    def topic(w: Writer, name: str) -> None:
        w.compact_string(name).compact_array([0], partition).tags()

    return Writer().compact_array([METADATA_TOPIC], topic).tags()


def _replica_state(r: Reader) -> ReplicaState:
    state = ReplicaState(r.int32(), r.uuid(), r.int64(), r.int64(), r.int64())
    r.skip_tags()
    return state


def decode_describe_quorum(r: Reader) -> Quorum:
    check("DescribeQuorum", r.int16(), r.compact_string())
    partitions: list[tuple[int, int, int, list[ReplicaState], list[ReplicaState]]] = []

    def partition(p: Reader) -> None:
        p.int32()
        check("DescribeQuorum partition", p.int16(), p.compact_string())
        leader, epoch, high_watermark = p.int32(), p.int32(), p.int64()
        voters = p.compact_array(_replica_state)
        observers = p.compact_array(_replica_state)
        p.skip_tags()
        partitions.append((leader, epoch, high_watermark, voters, observers))

    def topic(t: Reader) -> None:
        t.compact_string()
        t.compact_array(partition)
        t.skip_tags()

    r.compact_array(topic)
    endpoints: dict[int, tuple[str, int]] = {}

    def listener(lr: Reader) -> tuple[str, int]:
        lr.compact_string()
        host, port = lr.compact_string() or "", lr.uint16()
        lr.skip_tags()
        return host, port

    def node(n: Reader) -> None:
        node_id = n.int32()
        listeners = n.compact_array(listener)
        n.skip_tags()
        if listeners:
            endpoints[node_id] = listeners[0]

    r.compact_array(node)
    r.skip_tags()
    if len(partitions) != 1:
        raise ValueError(f"DescribeQuorum returned {len(partitions)} partitions for {METADATA_TOPIC}")
    leader, epoch, high_watermark, voters, observers = partitions[0]
    return Quorum(leader, epoch, high_watermark, tuple(voters), tuple(observers), endpoints)


# -- RemoveRaftVoter v0, UnregisterBroker v0 -------------------------------------

def encode_add_raft_voter(cluster_id: str | None, voter_id: int, directory_id: str,
                          listeners: Sequence[tuple[str, str, int]], timeout_ms: int) -> Writer:
    """listeners: (name, host, port) of the new voter's controller listeners."""
    def listener(w: Writer, item: tuple[str, str, int]) -> None:
        w.compact_string(item[0]).compact_string(item[1]).uint16(item[2]).tags()

    return (Writer().compact_string(cluster_id).int32(timeout_ms).int32(voter_id).uuid(directory_id)
            .compact_array(list(listeners), listener).tags())


def encode_remove_raft_voter(cluster_id: str | None, voter_id: int, directory_id: str) -> Writer:
    return Writer().compact_string(cluster_id).int32(voter_id).uuid(directory_id).tags()


def encode_unregister_broker(broker_id: int) -> Writer:
    return Writer().int32(broker_id).tags()


def decode_simple(api: str) -> Callable[[Reader], None]:
    """Responses of throttle time, error code and error message only."""
    def decode(r: Reader) -> None:
        r.int32()
        check(api, r.int16(), r.compact_string())
        r.skip_tags()
    return decode



# -- DescribeCluster v2 (KIP-1073: fenced brokers too) ------------------------------

BROKER_ENDPOINTS = 1
CONTROLLER_ENDPOINTS = 2


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool


def encode_describe_cluster(endpoints: int = BROKER_ENDPOINTS) -> Writer:
    """Without authorized operations, fenced brokers included; the brokers' endpoints, or (CONTROLLER_ENDPOINTS,
    asked of a controller) those of every node that runs as a controller, voter or not (KIP-919)."""
    return Writer().int8(0).int8(endpoints).int8(1).tags()


def decode_describe_cluster(r: Reader) -> tuple[Broker, ...]:
    r.int32()
    check("DescribeCluster", r.int16(), r.compact_string())
    r.int8()  # endpoint type
    r.compact_string()  # cluster id
    r.int32()  # controller id

    def broker(b: Reader) -> Broker:
        found = Broker(b.int32(), b.compact_string() or "", b.int32(), b.compact_string(), b.boolean())
        b.skip_tags()
        return found

    brokers = r.compact_array(broker)
    r.int32()  # authorized operations
    r.skip_tags()
    return tuple(brokers)
