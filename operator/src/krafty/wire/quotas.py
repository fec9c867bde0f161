"""Client quotas of users (DescribeClientQuotas v1, AlterClientQuotas v1), which librdkafka lacks."""

from __future__ import annotations

from collections.abc import Mapping

from krafty.wire.codec import ERROR_NAMES, Reader, Writer, check

DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
USER_ENTITY = "user"
_MATCH_ANY = 2  # every entity that names a user (not the default user entity)


def encode_describe_user_quotas() -> Writer:
    """The quotas of every user entity that names a user alone (strict: no user and client-id pairs)."""
    def component(w: Writer, _: None) -> None:
        w.compact_string(USER_ENTITY).int8(_MATCH_ANY).compact_string(None).tags()

    return Writer().compact_array([None], component).int8(1).tags()


def _entity(r: Reader) -> tuple[str, str | None]:
    kind, name = r.compact_string() or "", r.compact_string()
    r.skip_tags()
    return kind, name


def decode_describe_user_quotas(r: Reader) -> dict[str, dict[str, float]]:
    """Quota values per user name."""
    r.int32()
    check("DescribeClientQuotas", r.int16(), r.compact_string())
    out: dict[str, dict[str, float]] = {}

    def value(v: Reader) -> tuple[str, float]:
        key, number = v.compact_string() or "", v.float64()
        v.skip_tags()
        return key, number

    def entry(e: Reader) -> None:
        entity = dict(e.compact_array(_entity))
        values = dict(e.compact_array(value))
        e.skip_tags()
        user = entity.get(USER_ENTITY)
        if user is not None and set(entity) == {USER_ENTITY}:
            out[user] = values

    r.compact_array(entry)
    r.skip_tags()
    return out


def encode_alter_user_quotas(changes: Mapping[str, Mapping[str, float | None]], validate_only: bool) -> Writer:
    """changes: per user, per quota key, the value to set or None to remove the quota."""
    def op(w: Writer, item: tuple[str, float | None]) -> None:
        w.compact_string(item[0]).float64(item[1] or 0.0).int8(1 if item[1] is None else 0).tags()

    def entry(w: Writer, item: tuple[str, Mapping[str, float | None]]) -> None:
        w.compact_array([item[0]], lambda ww, user: ww.compact_string(USER_ENTITY).compact_string(user).tags())
        w.compact_array(sorted(item[1].items()), op).tags()

    return Writer().compact_array(sorted(changes.items()), entry).int8(1 if validate_only else 0).tags()


def decode_alter_user_quotas(r: Reader) -> dict[str, str]:
    """Kafka's refusal per user ({} when every change was accepted)."""
    r.int32()
    errors: dict[str, str] = {}

    def entry(e: Reader) -> None:
        code, message = e.int16(), e.compact_string()
        entity = dict(e.compact_array(_entity))
        e.skip_tags()
        if code:
            errors[entity.get(USER_ENTITY) or ""] = f"{ERROR_NAMES.get(code, code)}: {message or ''}".strip(" :")

    r.compact_array(entry)
    r.skip_tags()
    return errors
