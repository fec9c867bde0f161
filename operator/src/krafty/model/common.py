"""Model base and the Kubernetes quantity type shared by the specs."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel


class Spec(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields refused, immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


S = TypeVar("S", bound=Spec)


def spec_of(model: type[S], body: Mapping[str, Any] | None) -> S | None:
    """A resource's spec as the model reads it; None for a resource that is gone or whose spec is invalid."""
    if body is None:
        return None
    try:
        return model.model_validate(body.get("spec") or {})
    except ValidationError:
        return None


def deleting(body: Mapping[str, Any] | None) -> bool:
    """Whether the resource is being deleted (the API server set its deletionTimestamp)."""
    return bool((body or {}).get("metadata", {}).get("deletionTimestamp"))


_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_SUFFIX = {
    "": Decimal(1), "m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9),
    "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18), "Ki": Decimal(2**10), "Mi": Decimal(2**20),
    "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}


# The largest quantity Kubernetes holds (an int64 of the unit; it refuses more), and the longest text read as one
MAX_QUANTITY = Decimal(2**63 - 1)
_MAX_QUANTITY_TEXT = 64


def parse_quantity(value: str | int) -> Decimal:
    """A Kubernetes resource quantity ("512Mi", "0.5", "100m", 3) as a number, at most MAX_QUANTITY either way."""
    text = str(value).strip()
    match = _QUANTITY.match(text) if len(text) <= _MAX_QUANTITY_TEXT else None
    if not match:
        raise ValueError(f"{_shown(value)} is not a Kubernetes quantity (for example 512Mi, 2Gi, 500m)")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    exponent = None if suffix in _SUFFIX else int(suffix[1:])  # (1e3; but 1Ei is a binary suffix)
    if exponent is not None and abs(exponent) > 30:  # (far past either bound: not computed)
        raise ValueError(f"{value!r} is out of the range Kubernetes holds (at most {MAX_QUANTITY:,})")
    quantity = number * (Decimal(10) ** exponent if exponent is not None else _SUFFIX[suffix])
    if abs(quantity) > MAX_QUANTITY:
        raise ValueError(f"{value!r} is out of the range Kubernetes holds (at most {MAX_QUANTITY:,})")
    return quantity


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_QUANTITY_TEXT + 2 else f"{text[:_MAX_QUANTITY_TEXT]}... ({len(text):,} characters)"


def parse_time(stamp: object) -> datetime.datetime | None:
    """A Kubernetes timestamp ("2026-11-28T12:00:00Z") as an aware datetime; None for none."""
    return datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if stamp else None


def format_bytes(count: int) -> str:
    """A byte count as the shortest exact binary quantity (2Gi, 1536Mi, 1000)."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = int(_SUFFIX[suffix])
        if count and count % unit == 0:
            return f"{count // unit}{suffix}"
    return str(count)


def _quantity(value: Any) -> str:
    parse_quantity(value)
    return str(value)


Quantity = Annotated[str, BeforeValidator(_quantity)]


def _config_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"config values are strings or integers, got {value!r}")
    return str(value)


ConfigValue = Annotated[str, BeforeValidator(_config_value)]


# A Kubernetes object name (DNS subdomain): Secrets, KafkaUsers
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)]
