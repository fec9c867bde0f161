"""Carrying out a cluster plan: each action in order, each logged and emitted as an Event.

Nothing here decides: every action says what to do and why (krafty.planning.cluster).
An action Kafka cannot carry out now is reported (a warning Event) and the
actions after it wait for the next pass, which plans again from what it
then reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, assert_never

from krafty import naming
from krafty.clients import kraft
from krafty.clients.errors import KafkaUnavailable
from krafty.clients.kafka_admin import KafkaAdmin
from krafty.clients.kube import Kube, Refused, api_message
from krafty.decide import ownership
from krafty.decide.canary import TopicChange
from krafty.model.context import ClusterContext
from krafty.planning.actions import (
    Action,
    AddVoter,
    Announce,
    ApplyChildren,
    ChangeCanaryTopic,
    DeletePreflights,
    DeleteVolumes,
    ElectLeaders,
    ExpandVolumes,
    FeatureAction,
    FinalizeMetadata,
    KafkaAction,
    MoveReplicas,
    RemoveThrottles,
    RemoveVoter,
    RestartNode,
    SetClusterDefaults,
    StartPreflight,
    Unregister,
    UpdateFeature,
)
from krafty.reconcile.applied import Applied, cluster_key
from krafty.render.cluster import Child, runs_nodes
from krafty.telemetry import metrics
from krafty.wire import METADATA_VERSION, KafkaProtocolError

# The canary's records are a few bytes each: an hour of them is kept, in segments of ten minutes.
CANARY_TOPIC_CONFIG = {"retention.ms": "3600000", "segment.ms": "600000"}


class Actor:
    def __init__(self, kube: Kube, admin: KafkaAdmin, controllers: str, ctx: ClusterContext,
                 body: dict[str, Any], applied: Applied) -> None:
        self.kube = kube
        self.admin = admin
        self.applied = applied
        self.controllers = admin.connection.to(controllers)  # the brokers' credentials, the controllers' addresses
        self.ctx = ctx
        self.body = body
        self.refused: list[str] = []  # what the API server refused to apply, with its reason
        self.conflicts: list[str] = []  # objects of children's names that are not the cluster's, left alone
        self.withheld: list[str] = []  # what the nodes run, not sent after a refusal or a conflict before it
        # A StatefulSet sent changed: its pods' revisions as observed before are stale (a roll may be due)
        self.workloads_changed = False

    def run(self, actions: Iterable[Action]) -> bool:
        """Carries out the actions in order, up to the first one Kafka cannot carry out (what comes after
        may rely on it: a controller stops only once it is no longer a voter); returns whether all ran."""
        for action in actions:
            try:
                self._on_kubernetes(action)
            except (KafkaUnavailable, KafkaProtocolError) as error:
                self.say(f"{type(action).__name__}Failed", f"not done, nor what follows it this pass: {error}",
                         warning=True)
                return False
        return True

    def _on_kubernetes(self, action: Action) -> None:
        """The actions that change Kubernetes objects (or only tell); the others go to Kafka."""
        match action:
            case ApplyChildren():
                self._apply_children(action)
            case Announce():
                self.say(action.reason, action.message, action.warning)
            case DeleteVolumes():
                self._delete_volumes(action)
            case ExpandVolumes():
                self._expand_volumes(action)
            case StartPreflight():
                self._start_preflight(action)
            case DeletePreflights():
                self._delete_preflights(action)
            case RestartNode():
                self._restart(action)
            case _:
                self._on_kafka(action)

    def _on_kafka(self, action: KafkaAction) -> None:
        match action:
            case SetClusterDefaults():
                self._set_defaults(action)
            case MoveReplicas():
                self._move(action)
            case RemoveThrottles():
                self._unthrottle(action)
            case RemoveVoter():
                self._remove_voter(action)
            case AddVoter():
                self._add_voter(action)
            case Unregister():
                self._unregister(action)
            case ElectLeaders():
                self._elect(action)
            case FinalizeMetadata() | UpdateFeature():
                self._on_features(action)
            case ChangeCanaryTopic():
                self._canary_topic(action)
            case _:
                assert_never(action)

    def _on_features(self, action: FeatureAction) -> None:
        match action:
            case FinalizeMetadata():
                self._finalize(action)
            case UpdateFeature():
                self._feature(action)
            case _:
                assert_never(action)

    def say(self, reason: str, message: str, warning: bool = False, node: str | None = None) -> None:
        """A decision or its outcome, as an Event on the KafkaCluster and in the operator's log."""
        self.kube.event(self.body, naming.CLUSTER_KIND, reason, message, warning=warning, node=node)

    # -- the steps ------------------------------------------------------------------------
    def _apply_children(self, action: ApplyChildren) -> None:
        """Sends each child that changed since it was last sent (or was sent too long ago: see Applied)."""
        cluster = cluster_key(self.body)
        for child in action.children:
            if not self.applied.due(*cluster, child) or self._stranger(cluster, child):
                continue
            if (self.refused or self.conflicts) and child.desired is not None and runs_nodes(child, self.ctx.name):
                # Nothing restarts into a change Kubernetes took only part of (a listener whose Service was
                # refused would be advertised with no Service behind it): sent once all before it is taken.
                self.applied.failed(*cluster, child)
                self.withheld.append(f"{child.kind} {child.name}")
                continue
            if child.desired is None:
                self.kube.delete(child.kind, child.name, self.ctx.namespace)
                self.applied.done(*cluster, child)
                continue
            changed = child.kind == "StatefulSet" and self.applied.changed(*cluster, child)
            try:
                self.kube.apply(child.desired)
            except Refused as error:
                self.applied.failed(*cluster, child)
                # A spec value the validation let through and Kubernetes refuses (an affinity, a toleration, a
                # node port another Service holds, a policy): the object keeps what it had, and the status says why.
                self.refused.append(f"{child.kind} {child.name}: {api_message(error)}")
                self.say("ApplyRefused", self.refused[-1], warning=True)
                continue
            self.applied.done(*cluster, child)
            self.workloads_changed |= changed
        if self.withheld:
            self.say("RestartsHeld", "not sent, so that no node restarts into part of the change: "
                     + ", ".join(self.withheld), warning=True)

    def _stranger(self, cluster: tuple[str, str, str], child: Child) -> bool:
        """A child this process has not sent yet is looked at first: an object of its name that is not the
        cluster's is neither applied over nor deleted (NameConflict), and is looked at again next pass."""
        if self.applied.sent(*cluster, child):
            return False
        why = ownership.stranger(self.kube.get(child.kind, child.name, self.ctx.namespace), self.ctx.name, cluster[2])
        if why is None:
            return False
        self.applied.failed(*cluster, child)
        self.conflicts.append(f"{child.kind} {child.name} exists and is left alone: {why}")
        self.say("NameConflict", self.conflicts[-1] + "; rename or remove it, or rename the cluster", warning=True)
        return True

    def _set_defaults(self, action: SetClusterDefaults) -> None:
        self.admin.alter_dynamic_cluster_defaults(dict(action.changes.set), action.changes.unset)
        self.say("DynamicConfigApplied", "applied without a restart: " + ", ".join(action.changes.describe()))

    def _move(self, action: MoveReplicas) -> None:
        rate = str(action.throttle_rate)
        self.admin.alter_dynamic_cluster_defaults(dict.fromkeys(naming.THROTTLE_RATE_KEYS, rate), [])
        self.admin.alter_topic_configs({t: dict.fromkeys(naming.THROTTLED_REPLICAS_KEYS, "*") for t in action.topics})
        errors = kraft.alter_reassignments(self.admin.connection, action.reassign)
        message = (f"{action.message}; replication throttled to {action.throttle_rate // 2**20} MiB/s per broker"
                   + (f"; refused for {len(errors)}: {'; '.join(list(errors.values())[:3])}" if errors else ""))
        self.say("ReplicasMoving", message, warning=bool(errors))

    def _unthrottle(self, action: RemoveThrottles) -> None:
        self.admin.alter_topic_configs({t: dict.fromkeys(naming.THROTTLED_REPLICAS_KEYS) for t in action.topics})
        self.admin.alter_dynamic_cluster_defaults({}, naming.THROTTLE_RATE_KEYS)
        self.say("ReplicasMoved", f"replica moves finished; throttles removed from {len(action.topics)} topics")

    def _remove_voter(self, action: RemoveVoter) -> None:
        voter = action.voter
        kraft.remove_voter(self.controllers, self.ctx.cluster_id, voter.node_id, voter.directory_id)
        self.say("VoterRemoved", f"controller {voter.node_id} removed from the KRaft voters")

    def _add_voter(self, action: AddVoter) -> None:
        voter = action.voter
        kraft.add_voter(self.controllers, self.ctx.cluster_id, voter.node_id, voter.directory_id, action.host,
                        naming.CONTROLLER_PORT, naming.CONTROLLER_LISTENER)
        self.say("VoterAdded", f"controller {voter.node_id} added to the KRaft voters")

    def _unregister(self, action: Unregister) -> None:
        for broker in action.brokers:
            try:
                kraft.unregister_broker(self.controllers, broker)
            except KafkaProtocolError as error:
                if error.error_name != "BROKER_ID_NOT_REGISTERED":
                    raise
            self.say("BrokerUnregistered", f"broker {broker} removed from the cluster metadata")

    def _delete_volumes(self, action: DeleteVolumes) -> None:
        for claim in action.claims:
            self.kube.delete("PersistentVolumeClaim", claim, self.ctx.namespace)
            self.say("VolumeDeleted", f"{claim} deleted: its node was removed, emptied and forgotten by Kafka")

    def _expand_volumes(self, action: ExpandVolumes) -> None:
        for claim, size in action.claims:
            try:
                self.kube.merge_patch("PersistentVolumeClaim", claim, self.ctx.namespace,
                                      {"spec": {"resources": {"requests": {"storage": size}}}})
            except Refused as error:  # admission refused it (a quota, a policy): not ours to retry
                self.refused.append(f"PersistentVolumeClaim {claim}: {api_message(error)}")
                self.say("VolumeExpansionRefused", self.refused[-1], warning=True)
                continue
            self.say("VolumeExpanding", f"{claim} asked to grow to {size}: the storage driver grows the volume, "
                                        "the kubelet its file system")

    def _start_preflight(self, action: StartPreflight) -> None:
        try:
            self.kube.apply(dict(action.pod))
        except Refused as error:
            # Admission refused the template itself (a priority class or service account that does not exist,
            # a quota): no node can run it either
            self.refused.append(f"preflight Pod {action.pod['metadata']['name']}: {api_message(error)}")
            self.say("PreflightFailed", self.refused[-1], warning=True)
            return
        self.say("PreflightStarted", action.message)

    def _delete_preflights(self, action: DeletePreflights) -> None:
        for pod in action.pods:
            self.kube.delete("Pod", pod, self.ctx.namespace)
        self.say("PreflightDeleted", f"{', '.join(action.pods)} deleted: no node waits to restart into its template")

    def _restart(self, action: RestartNode) -> None:
        self.say(f"Restart{action.reason.value}", f"restarting {action.node.pod}: {action.message}",
                 node=action.node.pod)
        self.kube.delete("Pod", action.node.pod, self.ctx.namespace)
        metrics.RESTARTS.labels(self.ctx.namespace, self.ctx.name, action.reason.value).inc()

    def _elect(self, action: ElectLeaders) -> None:
        failed = self.admin.elect_preferred(action.partitions)
        message = f"preferred leader elected for {len(action.partitions) - len(failed)} partitions ({action.message})"
        if failed:
            message += f"; not possible yet for {len(failed)}: {'; '.join(list(failed.values())[:3])}"
        self.say("LeadersRebalanced", message)

    def _canary_topic(self, action: ChangeCanaryTopic) -> None:
        topic = action.topic
        match topic.change:
            case TopicChange.CREATE:
                error = self.admin.create_placed_topic(naming.CANARY_TOPIC, topic.replicas, {
                    "min.insync.replicas": str(topic.min_isr), **CANARY_TOPIC_CONFIG})
            case TopicChange.ADD_PARTITIONS:
                error = self.admin.add_placed_partitions(naming.CANARY_TOPIC, topic.total, topic.replicas)
            case TopicChange.DELETE:
                error = self.admin.delete_topics([naming.CANARY_TOPIC])[naming.CANARY_TOPIC]
        if error:
            self.say("CanaryTopicFailed", f"{topic.message}: not done: {error}", warning=True)
        else:
            self.say("CanaryTopicChanged", topic.message)

    def _feature(self, action: UpdateFeature) -> None:
        change = action.change
        kraft.upgrade_feature(self.admin.connection, change.name, change.level, downgrade=change.lowering)
        self.say("FeatureLowered" if change.lowering else "FeatureRaised", change.message)

    def _finalize(self, action: FinalizeMetadata) -> None:
        kraft.upgrade_feature(self.admin.connection, METADATA_VERSION, action.level)
        self.say("MetadataVersionFinalized", f"{action.message}; from now on spec.version cannot go below "
                                             f"{self.ctx.spec.version}")
