"""The Kafka versions this operator runs, in one table (broker-image/kafka.env pins the same list; a test
keeps the two equal), and what each can run on.

Each release finalizes its own metadata.version (the feature level Kafka's
`kafka-storage version-mapping` prints for it) and runs every lower one, so
nodes can be upgraded one at a time while the cluster keeps the older level,
and rolled back to the older release as long as that level was not raised.
Once it is raised (finalized), no release below it can start: Kafka has no
metadata.version downgrade.

Each release also knows the other KRaft features (kraft.version, group.version, share.version, ...): the range
of levels it runs and the one a new cluster is formatted with (`kafka-storage version-mapping`), as its brokers
answer ApiVersions (test_kafka_clients.py compares the two). Which can be lowered is Kafka's rule, the same in
both releases (a safe downgrade, tried in test_kafka_clients.py): all but kraft.version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

KafkaVersion = Literal["4.2.2", "4.3.1"]
DEFAULT_KAFKA_VERSION: KafkaVersion = "4.3.1"
SUPPORTED_KAFKA_VERSIONS: tuple[str, ...] = get_args(KafkaVersion)


@dataclass(frozen=True)
class FeatureRange:
    """What a release runs of one feature: its lowest and highest level, and a new cluster's."""

    lowest: int
    highest: int
    default: int


@dataclass(frozen=True)
class Feature:
    """A KRaft feature other than metadata.version, as Kafka treats it."""

    name: str
    lowerable: bool  # Kafka lowers it (UpdateFeatures, a safe downgrade); False: raising it is a point of no return
    used_by: str | None = None  # the type of group (ListGroups) that needs it: lowering it under them is refused
    about: str = ""


METADATA_VERSION = "metadata.version"  # (managed by spec.version and spec.upgrade, not spec.features)
ELIGIBLE_LEADERS = "eligible.leader.replicas.version"
KRAFT_VERSION = "kraft.version"
FEATURES: tuple[Feature, ...] = (
    Feature(KRAFT_VERSION, lowerable=False, about="1: a dynamic controller quorum (KIP-853)"),
    Feature("group.version", lowerable=True, used_by="consumer",
            about="1: consumer groups of the consumer protocol (KIP-848)"),
    Feature("share.version", lowerable=True, used_by="share", about="1: share groups (KIP-932)"),
    Feature("streams.version", lowerable=True, used_by="streams", about="1: the Streams group protocol (KIP-1071)"),
    Feature("transaction.version", lowerable=True, about="2: transactions of KIP-890"),
    Feature(ELIGIBLE_LEADERS, lowerable=True, about="1: eligible leader replicas (KIP-966)"),
)
_ALL_BUT_TRANSACTIONS = {f.name: FeatureRange(0, 1, 1) for f in FEATURES if f.name != "transaction.version"}
_FEATURES_4_2 = {**_ALL_BUT_TRANSACTIONS, "transaction.version": FeatureRange(0, 2, 2)}


def feature(name: str) -> Feature | None:
    return next((f for f in FEATURES if f.name == name), None)


@dataclass(frozen=True)
class KafkaRelease:
    version: str  # 4.3.1
    metadata_level: int  # the metadata.version feature level it finalizes (30)
    metadata_version: str  # that level's name (4.3-IV0)
    features: Mapping[str, FeatureRange] = field(default_factory=dict)  # every other feature it knows

    @property
    def line(self) -> str:
        """Its minor line (4.3): the release name Kafka's tools accept for its metadata.version."""
        return ".".join(self.version.split(".")[:2])


RELEASES: tuple[KafkaRelease, ...] = (
    KafkaRelease("4.2.2", 29, "4.2-IV1", _FEATURES_4_2),
    KafkaRelease("4.3.1", 30, "4.3-IV0", _FEATURES_4_2),
)
METADATA_VERSION_PATTERN = r"^\d+\.\d+(-IV\d+)?$"


def release(version: str) -> KafkaRelease | None:
    return next((r for r in RELEASES if r.version == version), None)


def metadata_name(level: int) -> str:
    """A feature level's name (4.3-IV0), or the bare number for a level no release here finalizes."""
    return next((r.metadata_version for r in RELEASES if r.metadata_level == level), f"level {level}")


def metadata_level(name: str) -> int | None:
    """The feature level of a metadata.version a user names: a release line (4.2) or a level's name (4.2-IV1);
    None when no release in the table finalizes it."""
    if not re.match(METADATA_VERSION_PATTERN, name):
        return None
    return next((r.metadata_level for r in RELEASES if name in (r.line, r.metadata_version)), None)


def upgrade_path(running: str, target: str) -> str | None:
    """Why nodes running one version cannot move to another (None: they can): both must be in the table,
    so an upgrade never skips a release line the operator does not know."""
    if release(running) is None:
        return (f"nodes run Kafka {running}, which this operator does not run or upgrade from (it runs "
                f"{', '.join(SUPPORTED_KAFKA_VERSIONS)}): upgrade through an operator release that runs both")
    if release(target) is None:
        return f"Kafka {target} is not one this operator runs ({', '.join(SUPPORTED_KAFKA_VERSIONS)})"
    return None
