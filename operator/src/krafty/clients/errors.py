"""The one error every Kafka client of the operator raises when Kafka cannot answer.

Passes catch KafkaUnavailable (and only it) around Kafka calls: a broker
restarting, a timeout, a connection refused. Anything else is a bug and
surfaces with its traceback.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException


class KafkaUnavailable(Exception):
    """Kafka did not answer (or answered "ask again later"); the message says what failed."""


def describe_error(error: BaseException) -> str:
    """A short, readable text for a client error."""
    if isinstance(error, KafkaException) and error.args:
        kafka_error: Any = error.args[0]
        return str(getattr(kafka_error, "str", lambda: kafka_error)())
    if isinstance(error, KafkaUnavailable):
        return str(error)
    return f"{type(error).__name__}: {error}"
