"""Whether an object of a child's name is the cluster's own: only those are applied over or deleted."""

from __future__ import annotations

import pytest

from krafty import naming
from krafty.decide.ownership import stranger

UID = "0b9c-uid"


def found(owners=None, labels=None):
    return {"metadata": {"name": "prod-kafka-bootstrap", **({"ownerReferences": owners} if owners else {}),
                         **({"labels": labels} if labels else {})}}


@pytest.mark.parametrize(("existing", "expected"), [
    (None, None),  # nothing of its name yet: made
    (found([{"kind": "KafkaCluster", "name": "prod", "uid": UID}]), None),
    (found([{"kind": "Deployment", "name": "web", "uid": "1"}, {"kind": "KafkaCluster", "name": "prod", "uid": UID}]),
     None),
    # another cluster's (or a tenant's own object's) child
    (found([{"kind": "KafkaCluster", "name": "prod-kafka", "uid": "other"}]),
     "it belongs to KafkaCluster prod-kafka"),
    (found([{"kind": "Deployment", "name": "web", "uid": "1"}]), "it belongs to Deployment web"),
    # the node ConfigMap kept beside volumes outliving their cluster: no owner, the cluster's labels
    (found(labels=naming.labels("prod")), None),
    (found(labels={naming.CLUSTER_LABEL: "prod"}),
     "it was not made by the operator for this cluster (no owner reference, nor the cluster's labels)"),
    (found(labels=naming.labels("prod-2")),
     "it was not made by the operator for this cluster (no owner reference, nor the cluster's labels)"),
    (found(), "it was not made by the operator for this cluster (no owner reference, nor the cluster's labels)"),
])
def test_only_the_clusters_own_objects_are_its_children(existing, expected):
    assert stranger(existing, "prod", UID) == expected
