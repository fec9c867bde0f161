"""server.properties as Kafka reads it: rendered values come back exactly, and none can inject a key.

The file is loaded by Java's own java.util.Properties.load, the call Kafka makes on server.properties.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from krafty.naming import Pool
from krafty.render.kafka_config import node_properties, render_properties

from ..conftest import context, example

LOADER = Path(__file__).parent / "java" / "LoadProperties.java"


def java_load(text: str, tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "server.properties"
    path.write_bytes(text.encode("ascii"))  # the rendering is pure ASCII: escapes carry everything else
    out = subprocess.run(["java", str(LOADER), str(path)], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    pairs = (line.split(" ") for line in out.splitlines())
    return {base64.b64decode(k).decode(): base64.b64decode(v).decode() for k, v in pairs}


@pytest.mark.parametrize("value", [
    "1\nnode.id=7",  # a newline would start a key the operator owns
    "ends with a backslash\\",  # would swallow the next line
    "  leading spaces", "tab\there", "a=b:c", "#not a comment", "!not either", "\\n is not a newline",
    "r\u00e9sum\u00e9", "\u4e2d\u6587", "emoji \U0001f680", "carriage\rreturn", "form\ffeed",
])
def test_every_value_comes_back_exactly_and_injects_nothing(value: str, tmp_path: Path):
    # Given a broker config value with characters that mean something in a properties file
    spec = example("kafkacluster-combined.yaml")["spec"]
    spec["brokers"]["config"] = {"log.cleaner.threads": "2", "ssl.principal.mapping.rules": value}
    props = node_properties(context(spec), Pool.BROKER, 0)
    # When Java loads the rendered file, Then it reads back every key and value as they were, nothing more
    assert java_load(render_properties(props), tmp_path) == props
