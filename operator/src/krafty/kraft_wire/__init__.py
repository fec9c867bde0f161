"""Kafka wire format for the KRaft admin requests no Python client offers.

confluent-kafka covers topics, configs, groups, offsets and leader election;
it has no DescribeQuorum, DescribeCluster with fenced brokers, RemoveRaftVoter,
UnregisterBroker or partition reassignment calls. These are small
flexible-version messages, encoded here as pure functions from typed values to
bytes and back, and sent by krafty.clients.kraft. Field order follows Kafka's
message definitions (clients/src/main/resources/common/message/*.json).
"""

from krafty.kraft_wire.admin import (
    ALTER_PARTITION_REASSIGNMENTS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_PARTITION_REASSIGNMENTS,
    OngoingReassignment,
    TopicPartition,
    decode_alter_configs,
    decode_alter_reassignments,
    decode_list_reassignments,
    encode_alter_cluster_defaults,
    encode_alter_reassignments,
    encode_list_reassignments,
)
from krafty.kraft_wire.codec import (
    ERROR_NAMES,
    KafkaProtocolError,
    Reader,
    Writer,
    frame,
    random_kafka_uuid,
    read_response_header,
    request_header,
    uuid_from_kafka,
    uuid_to_kafka,
)
from krafty.kraft_wire.nodes import (
    ADD_RAFT_VOTER,
    DESCRIBE_CLUSTER,
    DESCRIBE_QUORUM,
    METADATA_TOPIC,
    REMOVE_RAFT_VOTER,
    UNREGISTER_BROKER,
    Broker,
    Quorum,
    ReplicaState,
    decode_describe_cluster,
    decode_describe_quorum,
    decode_simple,
    encode_add_raft_voter,
    encode_describe_cluster,
    encode_describe_quorum,
    encode_remove_raft_voter,
    encode_unregister_broker,
)

__all__ = [
    "ADD_RAFT_VOTER", "ALTER_PARTITION_REASSIGNMENTS", "DESCRIBE_CLUSTER", "DESCRIBE_QUORUM", "ERROR_NAMES",
    "INCREMENTAL_ALTER_CONFIGS", "LIST_PARTITION_REASSIGNMENTS", "METADATA_TOPIC", "REMOVE_RAFT_VOTER",
    "UNREGISTER_BROKER", "Broker", "KafkaProtocolError", "OngoingReassignment", "Quorum", "Reader", "ReplicaState",
    "TopicPartition", "Writer", "decode_alter_configs", "decode_alter_reassignments", "decode_describe_cluster",
    "decode_describe_quorum", "decode_list_reassignments", "decode_simple", "encode_add_raft_voter",
    "encode_alter_cluster_defaults", "encode_alter_reassignments", "encode_describe_cluster",
    "encode_describe_quorum", "encode_list_reassignments", "encode_remove_raft_voter", "encode_unregister_broker",
    "frame", "random_kafka_uuid", "read_response_header", "request_header", "uuid_from_kafka", "uuid_to_kafka",
]
