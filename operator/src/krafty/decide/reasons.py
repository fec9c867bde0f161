"""Every reason a condition or an Event of the operator gives, what it means and what to do: one list, from which
docs/reference/reasons.md is generated (scripts/reasons-reference.py), and against which the unit tier checks the
source (operator/tests/unit/repo/test_reasons.py): a reason used and not listed here fails it, as does one listed
and used nowhere. A reason made of parts is listed by its pattern (`Restart<RestartReason>`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    name: str
    on: str  # where it shows: the object, and the condition types or "Event"
    meaning: str
    action: str = ""  # what to do ("" when nothing is needed)


_C = "KafkaCluster"
REASONS: tuple[Reason, ...] = (
    # -- a KafkaCluster's conditions
    Reason("ClusterReady", f"{_C} Ready", "every broker serves, every node runs the current configuration, every "
           "replica is in sync, every volume is at its size"),
    Reason("Serving", f"{_C} Available", "every partition has a leader and min.insync.replicas in sync; the quorum "
           "has a leader"),
    Reason("Reconciled", f"{_C} Progressing", "nothing is under way"),
    Reason("AsExpected", f"{_C} Degraded", "nothing needs attention"),
    Reason("Paused", f"{_C} Progressing; Topic and KafkaUser Ready", "the pause annotation is set: the operator "
           "changes nothing", "kubectl krafty resume"),
    Reason("PartitionsOffline", f"{_C} Available, Ready", "some partitions have no leader: their clients fail",
           "see status.partitions and the brokers that hold them"),
    Reason("UnderMinIsr", f"{_C} Available, Ready", "some partitions have fewer in-sync replicas than "
           "min.insync.replicas: acks=all writes to them fail", "bring the missing brokers back"),
    Reason("NoQuorumLeader", f"{_C} Available, Ready", "the controller quorum has no leader", "see the controllers' "
           "pods and status.quorum"),
    Reason("KafkaUnreachable", f"{_C} Available (Unknown), Ready; Topic and KafkaUser Ready", "the operator cannot "
           "ask Kafka (the message gives Kafka's error); nothing is decided that needs Kafka's answer", "see that the "
           "brokers run and the operator reaches them; a cluster that refuses the operator's identity: "
           "kubectl krafty restart --force after putting the spec back"),
    Reason("BrokersNotReady", f"{_C} Ready", "not every broker serves yet"),
    Reason("NodesStarting", f"{_C} Progressing", "nodes are starting"),
    Reason("RollingRestart", f"{_C} Ready, Progressing", "a roll is under way; the message says how far and which "
           "node is next"),
    Reason("RestoringLeaders", f"{_C} Progressing", "preferred leaders are being elected back after a restart or "
           "a move"),
    Reason("CatchingUp", f"{_C} Progressing", "a node is back but not yet in every ISR, or a voter not yet caught up"),
    Reason("UnderReplicated", f"{_C} Ready, Degraded", "some replicas are out of sync", "see status.partitions; it "
           "clears by itself once the brokers catch up"),
    Reason("NodeDown", f"{_C} Degraded", "a node's pod is not running and will not by itself, or its Kubernetes node "
           "is lost (named)", "bring the Kubernetes node back, or fix what the message quotes"),
    Reason("RollBlocked", f"{_C} Degraded, Event", "the roll waits: a restart would take a partition offline or below "
           "min.insync.replicas (named), or a node on the new configuration does not come back", "fix what it names; "
           "changing the spec again restarts the broken node first"),
    Reason("RollHeldByCanary", f"{_C} Progressing, Event", "the canary's p99s are above spec.restarts.canaryGate: "
           "the next restart waits for clients to recover", "nothing; raise the threshold if it holds for good"),
    Reason("PreflightFailed", f"{_C} Degraded, Event", "the new pod template could not be scheduled, pulled or "
           "started in a preflight pod: no node restarted", "change the spec back, or fix the image, JVM options or "
           "scheduling"),
    Reason("ScaleDownBlocked", f"{_C} Degraded", "a scale-down would leave a topic more replicas than brokers "
           "(named): refused, nothing changes", "lower those topics' replication factor, or keep the brokers"),
    Reason("ExpandingVolumes", f"{_C} Ready, Progressing", "volumes are growing to storage.size"),
    Reason("FinalizingUpgrade", f"{_C} Progressing", "every node runs the new release; metadata.version is raised "
           "after the healthy time"),
    Reason("InvalidSpec", f"{_C}, Topic Ready and Degraded; Event", "the spec cannot work (the message names each "
           "field): nothing changes until it is fixed", "fix the fields it names"),
    Reason("VersionRefused", f"{_C} Ready, Degraded, Event", "spec.version cannot run the finalized metadata.version "
           "(a downgrade after it was raised), or no path leads there", "set spec.version back"),
    Reason("FeatureRefused", f"{_C} Ready, Degraded, Event", "spec.features asks below a level Kafka cannot lower "
           "(kraft.version)", "set the feature back"),
    Reason("QuorumRefused", f"{_C} Ready, Degraded, Event", "spec.controllers.replicas changes the voters of a static "
           "quorum (kraft.version 0), which cannot change: nothing changes", "set spec.features kraft.version: 1 "
           "with it (a point of no return), or set the replicas back"),
    Reason("ConfigSecretMissing", f"{_C} Ready, Degraded, Event", "a Secret or key brokers.configFromSecrets names "
           "is missing: nothing changes", "create it"),
    Reason("CaUnusable", f"{_C} Ready, Degraded, Event", "a CA Secret named in spec.tls cannot be used (unreadable, "
           "not a CA, or the cluster CA's key as the clients CA)", "fix or replace the Secret it names"),
    Reason("ClusterIdConflict", f"{_C} Degraded, Event", "the cluster id in the ConfigMap and in status differ, or "
           "volumes of an earlier cluster lack theirs", "follow the message: restore the ConfigMap or delete the "
           "volumes"),
    Reason("ApplyRefused", f"{_C} Ready, Degraded, Event", "Kubernetes refused a child the spec asks for (quoted); "
           "what the nodes run was not sent", "fix the spec field it names"),
    Reason("NameConflict", f"{_C} Ready, Degraded, Event", "an object of a child's name that is not the cluster's "
           "exists (named): it is left alone", "rename or delete that object, or the cluster"),
    Reason("RackAwarenessNotInstalled", f"{_C} Ready, Degraded", "spec.rack needs the chart's "
           "rackAwareness.enabled", "install the chart with it, or remove spec.rack"),
    Reason("AuthorizationNeedsTls", f"{_C} Ready, Degraded", "authorization on a cluster created without TLS "
           "between its nodes", "turn authorization off, or create the cluster anew"),
    Reason("WaitingForExternalAddress", f"{_C} Ready, Progressing", "a nodeport or loadbalancer listener waits for "
           "its addresses before it is published"),
    Reason("Deleting", f"{_C} Ready, Progressing", "the cluster is being torn down in order"),
    Reason("<ScalePhase>", f"{_C} Progressing: AddingBrokers, MovingReplicas, Rebalancing, RemovingBrokers, "
           "RemovingVoter, ScalingControllers, Blocked, Stable", "where a scaling stands"),
    # -- a KafkaCluster's Events
    Reason("Restart<RestartReason>", f"{_C} Event: RestartConfigChanged, RestartCertificatesChanged, "
           "RestartPodTemplateChanged, RestartManualRestart, RestartForcedRestart, RestartFileSystemResize, "
           "RestartPodNotRunning", "a node restarted, and why (ForcedRestart: without Kafka's checks)"),
    Reason("<Action>Failed", f"{_C} Event, warning", "an action Kafka did not carry out (SetClusterDefaultsFailed, "
           "MoveReplicasFailed, UpdateFeatureFailed, ...): nothing after it ran this pass", "the next pass tries "
           "again; the message gives Kafka's error"),
    Reason("DynamicConfigApplied", f"{_C} Event", "brokers.config keys set without a restart"),
    Reason("ReplicasMoving", f"{_C} Event", "replicas are moved (scaling, a replication factor), throttled"),
    Reason("ReplicasMoved", f"{_C} Event", "a replica move finished; throttles removed"),
    Reason("LeadersRebalanced", f"{_C} Event", "preferred leaders elected back"),
    Reason("BrokerUnregistered", f"{_C} Event", "a removed broker was unregistered from the KRaft metadata"),
    Reason("VoterAdded", f"{_C} Event", "a controller became a voter of the quorum"),
    Reason("VoterRemoved", f"{_C} Event", "a controller left the quorum's voters"),
    Reason("QuorumFormed", f"{_C} Event", "a new cluster's controller quorum formed"),
    Reason("MetadataVersionFinalized", f"{_C} Event", "metadata.version was raised: no release below it can start "
           "any more"),
    Reason("FeatureRaised", f"{_C} Event", "a feature level was raised as spec.features asks"),
    Reason("FeatureLowered", f"{_C} Event", "a feature level was lowered as spec.features asks"),
    Reason("VolumeExpanding", f"{_C} Event", "a claim was asked for a larger size"),
    Reason("VolumeExpansionRefused", f"{_C} Event, warning", "Kubernetes refused a claim's growth", "see the message"),
    Reason("VolumeResizeRefused", f"{_C} Ready", "storage.size cannot grow on the claim's StorageClass",
           "use a class with allowVolumeExpansion, or keep the size"),
    Reason("VolumeResizeFailed", f"{_C} Ready", "the storage driver failed to grow a volume (quoted)",
           "see the driver's message"),
    Reason("VolumeDeleted", f"{_C} Event", "a removed node's volume was deleted (storage.deleteClaim)"),
    Reason("PreflightStarted", f"{_C} Event", "a preflight pod tries the new pod template"),
    Reason("PreflightDeleted", f"{_C} Event", "a preflight pod is done"),
    Reason("ListenersPublished", f"{_C} Event", "the listeners applications are sent to changed (every broker "
           "serves them)"),
    Reason("RestartsHeld", f"{_C} Event, warning", "what the nodes run was not sent after Kubernetes refused "
           "another child: no node restarts into part of a change", "fix what ApplyRefused names"),
    Reason("ClusterIdRenewed", f"{_C} Event", "no volume of the earlier cluster of this name was left: it starts "
           "clean with a new cluster id"),
    Reason("InternalTlsFixed", f"{_C} Event, warning", "spec.tls.internal differs from what the cluster was created "
           "with, which cannot change while it runs", "set it back"),
    Reason("CanaryTopicChanged", f"{_C} Event", "the canary's topic was made, grown or deleted"),
    Reason("CanaryTopicFailed", f"{_C} Event, warning", "the canary's topic could not be changed", "see the message"),
    Reason("RackBindingUpdated", f"{_C} Event", "the chart's rack binding now holds (or no longer holds) the "
           "cluster's account"),
    Reason("RackBindingMissing", f"{_C} Ready, Degraded", "the chart's rack binding is missing", "reinstall the "
           "chart with rackAwareness.enabled"),
    Reason("RackBindingRefused", f"{_C} Ready, Degraded", "the rack binding could not be updated", "see the message"),
    Reason("Ca<IssueReason>", f"{_C} Event: CaNew, CaExpiring, CaRequested, CaUnusable, CaProvided", "a CA was made "
           "or renewed, and why"),
    Reason("CaRenewed", f"{_C} Event", "a renewal finished: the previous CA is no longer trusted"),
    Reason("Certificate<IssueReason>", f"{_C} Event: CertificateNew, CertificateExpiring, CertificateNamesChanged, "
           "CertificateAddressesChanged, CertificateNewCa, CertificateChainChanged, ...", "node certificates were "
           "issued, and why"),
    Reason("BrokersStopping", f"{_C} Event", "a deleted cluster's brokers stop first"),
    Reason("ControllersStopping", f"{_C} Event", "then its controllers"),
    Reason("TeardownUnordered", f"{_C} Event, warning", "the brokers did not stop in time: the rest goes unordered"),
    Reason("PassFailed", f"{_C} Event, warning; status.failingPasses", "a pass of the operator raised; it retries "
           "later and later", "read the error; report it if it is the operator's"),
    Reason("PassRecovered", f"{_C} Event", "a failing pass succeeded again"),
    Reason("NamespaceClaimed", f"{_C}, KafkaClusterPlan Event, warning", "another operator install acts in this "
           "namespace", "watch each namespace from one install"),
    Reason("ConsumerDataLost", f"{_C} Event, warning", "retention deleted records a group had not read"),
    Reason("DataLossForecast", f"{_C} Event, warning", "retention will delete records a group has not read, at its "
           "pace", "speed the group up or lengthen retention"),
    Reason("DataLossForecastCleared", f"{_C} Event", "the forecast no longer sees such a loss"),
    # -- Topics
    Reason("TopicReady", "Topic Ready", "the Kafka topic matches the spec"),
    Reason("Creating", "Topic Ready, Progressing", "the topic is being created"),
    Reason("Updating", "Topic Ready", "a change is being applied"),
    Reason("WaitingForBrokers", "Topic Ready", "a new topic waits for as many registered brokers as its replicas"),
    Reason("Conflict", "Topic Ready", "another Topic manages that Kafka topic", "delete this one, or give it "
           "another topicName"),
    Reason("AdoptionPending", "Topic, KafkaUser Ready", "what Kafka holds differs from the spec and was not made by "
           "the operator: left alone", "match the spec, or annotate kafka.krafty.io/adopt=force"),
    Reason("PartitionsAboveSpec", "Topic Ready", "the topic has more partitions than the spec; Kafka cannot "
           "remove partitions", "raise spec.partitions"),
    Reason("InvalidConfig", "Topic Ready, Event", "Kafka refused the change when validating it (quoted)",
           "fix the config"),
    Reason("ApplyFailed", "Topic Ready, Event", "Kafka refused the change when applying it (quoted)",
           "see the message"),
    Reason("ReassignmentFailed", "Topic Ready, Event", "a replica move was refused", "see the message"),
    Reason("DeletionBlocked", "Topic Ready, Event", "the deletion waits while groups read the topic (named)",
           "stop them, or annotate kafka.krafty.io/confirm-deletion=true"),
    Reason("DeletionPending", "Topic Ready", "the deletion waits for Kafka to say who reads the topic"),
    Reason("PartitionsUnhealthy", "Topic Ready", "some partitions are offline or under-replicated"),
    Reason("ClusterNotFound", "Topic, KafkaUser, KafkaClusterPlan Ready", "the KafkaCluster named in clusterRef is "
           "not there", "create it, or name another"),
    Reason("TopicCreated", "Topic Event", "the Kafka topic was created"),
    Reason("TopicAdopted", "Topic Event", "an existing Kafka topic was taken over"),
    Reason("DriftReverted", "Topic, KafkaUser Event, warning", "something was changed behind the operator's back: "
           "put back to the spec"),
    Reason("TopicDeleted", "Topic Event", "the Kafka topic was deleted"),
    Reason("TopicRetained", "Topic Event", "deletionPolicy Retain: the Kafka topic stays"),
    Reason("TopicNotManaged", "Topic Event", "the resource never managed a Kafka topic: nothing to delete"),
    Reason("TopicLeftToCluster", "Topic Event", "its cluster is gone or going: let go without asking Kafka"),
    # -- KafkaUsers
    Reason("UserReady", "KafkaUser Ready", "the credential, ACLs and quotas are as declared"),
    Reason("CredentialPending", "KafkaUser Ready", "the credential is being made"),
    Reason("CredentialSet", "KafkaUser Event", "a SCRAM credential was put into Kafka"),
    Reason("CertificateIssued", "KafkaUser Event", "a client certificate was issued"),
    Reason("CredentialRefused", "KafkaUser Ready, Event", "Kafka refused the SCRAM credential", "see the message"),
    Reason("AclRefused", "KafkaUser Ready, Event", "Kafka refused an ACL", "see the message"),
    Reason("QuotaRefused", "KafkaUser Ready, Event", "Kafka refused the quotas (spec.quotas)", "fix them"),
    Reason("AuthenticationUnavailable", "KafkaUser Ready", "no listener of the cluster serves the user's "
           "authentication type", "add such a listener"),
    Reason("PasswordSecretMissing", "KafkaUser Ready", "the Secret the password is taken from is missing",
           "create it"),
    Reason("AuthorizationPending", "KafkaUser Ready", "the nodes restart into the authorizer: no ACL changes yet"),
    Reason("SecretConflict", "KafkaUser Ready", "a Secret of the user's name that is not the user's exists",
           "rename or delete it"),
    Reason("ClusterInvalid", "KafkaUser Ready", "the cluster's spec cannot be parsed", "fix the cluster"),
    Reason("UserAdopted", "KafkaUser Event", "ACLs, a credential or quotas Kafka held were taken over"),
    Reason("UserDeleted", "KafkaUser Event", "the user holds nothing in Kafka any more"),
    # -- KafkaClusterPlans, the operator
    Reason("Planned", "KafkaClusterPlan Ready, Event", "the plan of the current spec is in status"),
    Reason("PlanFailed", "KafkaClusterPlan Ready", "the plan could not be made (Kafka or the API server did not "
           "answer); tried again"),
    Reason("LeaderElected", "Lease Event", "an operator replica took the lead"),
)
