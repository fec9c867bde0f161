"""Every reason the operator gives is documented, and every documented reason is still given: the source's
CamelCase string literals are each a reason in krafty.decide.reasons (or a part of one made of parts), or a name
of another sort listed below; each listed reason is in the source."""

from __future__ import annotations

import ast
import re

from krafty.decide.certificates import IssueReason
from krafty.decide.reasons import REASONS
from krafty.decide.roll import RestartReason
from krafty.decide.scaling import ScalePhase
from krafty.planning import actions

from ...conftest import REPO

SOURCE = REPO / "operator" / "src" / "krafty"
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")
# CamelCase names in the source that are not reasons: Kubernetes kinds and values, Kafka requests and types, the
# wire module's types, the operator's own types and states
NOT_REASONS = {
    # Kubernetes kinds, field values and container states
    "ConfigMap", "ServiceAccount", "StatefulSet", "PersistentVolumeClaim", "PodDisruptionBudget", "NetworkPolicy",
    "ClusterRoleBinding", "StorageClass", "KafkaCluster", "KafkaClusterPlan", "KafkaUser", "ClusterIP", "NodePort",
    "LoadBalancer", "ExternalIP", "InternalIP", "DoNotSchedule", "ScheduleAnyway", "IfNotPresent", "OnDelete",
    "OnRootMismatch", "ReadWriteOnce", "RuntimeDefault", "FallbackToLogsOnError", "NoExecute", "PodScheduled",
    "NotIn", "DoesNotExist", "AlwaysAllow", "CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff",
    "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
    "ControllerResizeError", "ControllerResizeInProgress", "ControllerResizeInfeasible", "NodeResizeError",
    "NodeResizeInProgress", "NodeResizeInfeasible", "NodeResizePending", "FileSystemResizePending",
    # Kafka's requests, ACL operations and resource types
    "AddRaftVoter", "RemoveRaftVoter", "UnregisterBroker", "AlterClientQuotas", "AlterConfigs",
    "AlterPartitionReassignments", "AlterUserScramCredentials", "ApiVersions", "CreateAcls", "CreatePartitions",
    "CreateTopics", "DeleteAcls", "DeleteTopics", "DescribeAcls", "DescribeClientQuotas", "DescribeCluster",
    "DescribeConfigs", "DescribeLogDirs", "DescribeQuorum", "DescribeShareGroupOffsets",
    "DescribeUserScramCredentials", "ElectLeaders", "FindCoordinator", "IncrementalAlterConfigs", "ListGroups",
    "ListOffsets", "ListPartitionReassignments", "OffsetFetch", "ShareGroupDescribe", "UpdateFeatures",
    "DescribeTopicPartitions", "StreamsGroupDescribe", "ClusterAction", "IdempotentWrite",
    # types named in __all__ lists and model exports
    "AclEntry", "EligiblePage", "GroupOffsets", "GroupReaders", "KafkaProtocolError", "LogDir", "NewTopic",
    "OngoingReassignment", "PartitionMetadata", "ReplicaState", "ScramUpsert", "TopicConfig", "TopicMetadata",
    "TopicPartition", "KafkaClusterSpec", "ControllerMode", "DeletionPolicy", "LeaderBalanceMode", "NodePool",
    "TopicSpec",
    # states that are not reasons: a pod's phase, a volume's, a risk, a plan's verdict, teardown steps
    "NotReady", "WarmingUp", "AtSize", "AtRisk", "NoChange", "StopBrokers", "WaitBrokers", "NodesStopping",
}
PATTERNS = {
    "Restart<RestartReason>": {f"Restart{r.value}" for r in RestartReason},
    "Ca<IssueReason>": {f"Ca{r.value}" for r in IssueReason},
    "Certificate<IssueReason>": {f"Certificate{r.value}" for r in IssueReason},
    "<ScalePhase>": {p.value for p in ScalePhase},
    "<Action>Failed": {f"{name}Failed" for name in vars(actions) if isinstance(getattr(actions, name), type)},
}
PARTS = {*(r.value for r in RestartReason), *(r.value for r in IssueReason), *(p.value for p in ScalePhase)}


def literals(camel_only: bool = True) -> dict[str, str]:
    """Each string constant of the source (only the CamelCase ones of two words or more: those a new reason would
    be), with where it first stands."""
    found: dict[str, str] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        if path.name == "reasons.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    CAMEL.match(node.value) or not camel_only):
                found.setdefault(node.value, f"{path.relative_to(SOURCE)}:{node.lineno}")
    return found


def documented() -> set[str]:
    names = {r.name for r in REASONS}
    return {n for n in names if "<" not in n} | {made for n in names if n in PATTERNS for made in PATTERNS[n]}


def test_every_reason_the_source_gives_is_documented():
    found = literals()
    missing = sorted(f"{name} ({where})" for name, where in found.items()
                     if name not in documented() and name not in NOT_REASONS and name not in PARTS)
    assert not missing, f"document these in krafty/decide/reasons.py (or list them in NOT_REASONS): {missing}"


def test_every_documented_reason_is_still_given():
    found = literals(camel_only=False)
    stale = sorted(r.name for r in REASONS if "<" not in r.name and r.name not in found)
    assert not stale, f"no longer in the source: {stale}"
    assert {r.name for r in REASONS if "<" in r.name} <= PATTERNS.keys()
    assert not NOT_REASONS & documented()

