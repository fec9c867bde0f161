"""Which client listeners applications are sent to: those every broker serves.

The connection ConfigMap and status.listeners publish the spec's listeners that every broker's running
pod serves (its static config says which, with their protocol), in the spec's order; while a roll has
not opened any of them everywhere they keep what they published before. So a listener added to a running
cluster is announced after the roll that opens it on every broker, and clients are moved to a listener
put first only once it is served everywhere: the steps of moving a cluster from plaintext to TLS without
a moment where the published address does not answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from krafty.facts.observed import NodeState, ServedListener
from krafty.model.cluster import Listener


def _served_everywhere(listener: Listener, brokers: Sequence[NodeState]) -> bool:
    wanted = ServedListener(listener.kafka_name, listener.port, listener.protocol, listener.authentication)
    return bool(brokers) and all(node.running and wanted in node.listeners for node in brokers)


def published(wanted: tuple[Listener, ...], before: tuple[Listener, ...],
              nodes: Iterable[NodeState]) -> tuple[Listener, ...]:
    """The listeners to publish this pass (`before`: what status.listeners said; empty for a new cluster)."""
    brokers = [node for node in nodes if node.is_broker]
    served = tuple(listener for listener in wanted if _served_everywhere(listener, brokers))
    return served or before or wanted


def from_status(entries: Iterable[dict[str, object]]) -> tuple[Listener, ...]:
    """status.listeners as written by an earlier pass (name, port, tls, authentication)."""
    return tuple(Listener.model_validate({key: entry[key] for key in STATUS_KEYS if key in entry})
                 for entry in entries)


STATUS_KEYS = ("name", "port", "type", "tls", "authentication")  # what status.listeners keeps of each


def _published_form(listeners: tuple[Listener, ...]) -> list[tuple[object, ...]]:
    return [tuple(getattr(listener, key) for key in STATUS_KEYS) for listener in listeners]


def moved(before: tuple[Listener, ...], after: tuple[Listener, ...]) -> str | None:
    """What changed for applications, when the published listeners do (None: nothing, or a new cluster)."""
    if not before or _published_form(before) == _published_form(after):
        return None
    first = after[0]
    return (f"published listeners now {', '.join(f'{lst.name}:{lst.port}' for lst in after)}; applications "
            f"reading the connection ConfigMap connect to {first.name} ({first.protocol}, port {first.port})")
