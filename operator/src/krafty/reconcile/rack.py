"""Rack-aware clusters' ServiceAccounts in the chart's one rack ClusterRoleBinding (krafty.decide.rack_binding)."""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from krafty import naming
from krafty.clients.kube import Kube, api_message
from krafty.decide.rack_binding import account, membership


class RackBindingMissing(RuntimeError):
    """The binding the chart should have made is not there."""


class RackBindingRefused(RuntimeError):
    """Kubernetes refused the change (the operator's rights are not what the chart grants)."""


def admit(kube: Kube, binding: str, namespace: str, cluster: str, wanted: bool) -> bool:
    """Puts the cluster's ServiceAccount in the binding (wanted) or takes it out; returns whether it changed it.
    A concurrent change by another cluster's pass is read again (the update is conditional)."""
    member = account(namespace, naming.service_account(cluster))
    try:
        return _admit(kube, binding, member, wanted)
    except ApiException as error:
        if error.status != 403:
            raise
        raise RackBindingRefused(f"Kubernetes refused to change ClusterRoleBinding {binding}: "
                                 f"{api_message(error)}") from error


def _admit(kube: Kube, binding: str, member: dict[str, str], wanted: bool) -> bool:
    for _ in range(3):
        body = kube.get("ClusterRoleBinding", binding, None)
        if body is None:
            if not wanted:
                return False
            raise RackBindingMissing(f"ClusterRoleBinding {binding}, which the chart makes for rack awareness, "
                                     "does not exist")
        subjects = membership(body.get("subjects") or [], member, wanted)
        if subjects is None:
            return False
        body["subjects"] = subjects
        try:
            kube.replace(body)
        except ApiException as error:
            if error.status != 409:
                raise
            continue  # another cluster's pass changed it first: read it again
        return True
    return False  # changed by others three times in a row: the next pass tries again
