"""Writes docs/reference/api.md, the API reference, from the CRDs in crds/: every field of every kind, with its type,
default, limits and description, and the rules the API server checks.

`python scripts/api-reference.py` rewrites it; `--check` fails when it is out of date (the unit tier runs that).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from generated import write_or_check

REPO = Path(__file__).resolve().parents[1]
CRDS = REPO / "crds"
OUT = REPO / "docs" / "reference" / "api.md"
HEAD = """# API reference

Generated from the CRDs in `crds/` by `python scripts/api-reference.py` (a unit test fails when this page differs
from what they generate). `kubectl explain kafkacluster.spec` shows the same descriptions. A field's limits are
the API server's: a value outside them is refused when it is applied, naming the field. What needs Kafka's own
knowledge (its config catalog, another resource) is checked by the operator and said in the resource's status.
"""
LIMITS = (("minimum", "≥ {}"), ("maximum", "≤ {}"), ("minLength", "at least {} character(s)"),
          ("maxLength", "at most {} characters"), ("minItems", "at least {} item(s)"), ("maxItems", "at most {} items"),
          ("maxProperties", "at most {} entries"), ("pattern", "matches `{}`"))


def _type(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "integer or string"
    kind = schema.get("type", "object")
    if kind == "array":
        return f"array of {_type(schema.get('items') or {})}"
    if kind == "object" and "additionalProperties" in schema and "properties" not in schema:
        values = schema["additionalProperties"]
        return f"map of {_type(values) if isinstance(values, dict) else 'any'}"
    return str(kind)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _limits(schema: dict[str, Any]) -> str:
    found = [template.format(_cell(str(schema[key]))) for key, template in LIMITS if key in schema]
    if "enum" in schema:
        found.append("one of " + ", ".join(f"`{value}`" for value in schema["enum"]))
    return "; ".join(found)


def _fields(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(path, schema, required) of every field below `schema`, depth first in the CRD's order."""
    required = set(schema.get("required") or [])
    for name, field in (schema.get("properties") or {}).items():
        at = f"{path}.{name}" if path else name
        yield at, field, name in required
        items = field.get("items") if field.get("type") == "array" else None
        values = field.get("additionalProperties")
        if isinstance(items, dict):
            yield from _fields(items, f"{at}[]")
        elif isinstance(values, dict) and "properties" in values:
            yield from _fields(values, f"{at}.<key>")
        else:
            yield from _fields(field, at)


def _rules(schema: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    for rule in schema.get("x-kubernetes-validations") or []:
        yield path or "(the object)", rule.get("message") or rule["rule"]
    for name, field in (schema.get("properties") or {}).items():
        at = f"{path}.{name}" if path else name
        yield from _rules(field, at)
        if isinstance(field.get("items"), dict):
            yield from _rules(field["items"], f"{at}[]")


def kind_page(crd: dict[str, Any]) -> str:
    names = crd["spec"]["names"]
    version = crd["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    lines = [f"## {names['kind']}", "",
             f"`{crd['spec']['group']}/{version['name']}`, namespaced; `kubectl get {names['plural']}` "
             f"(short names: {', '.join(names.get('shortNames') or ['none'])}).", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    for part in ("spec", "status"):
        top = (schema.get("properties") or {}).get(part)
        if not top:
            continue
        lines += [f"### {names['kind']}.{part}", "", "| field | type | default | limits | description |",
                  "|---|---|---|---|---|"]
        for at, field, required in _fields(top, ""):
            default = f"`{json.dumps(field['default'])}`" if "default" in field else ("required" if required else "")
            lines.append(f"| `{at}` | {_type(field)} | {_cell(default)} | {_limits(field)} | "
                         f"{_cell(field.get('description', ''))} |")
        lines.append("")
        rules = list(_rules(top, part))
        if rules:
            lines += [f"Rules the API server checks on `{part}`:", ""]
            lines += [f"- `{at}`: {_cell(message)}" for at, message in rules]
            lines.append("")
    return "\n".join(lines)


def render() -> str:
    crds = [yaml.safe_load(path.read_text()) for path in sorted(CRDS.glob("*.yaml"))]
    pages = [kind_page(crd) for crd in sorted(crds, key=lambda c: c["spec"]["names"]["kind"])]
    return HEAD + "\n" + "\n".join(pages)


def main(argv: list[str]) -> int:
    return write_or_check(OUT, render(), argv, "api-reference.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
