"""The Spark pins agree everywhere, and the Maven-resolved connector fits PySpark's own jars."""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

import pyspark
import pytest

from krafty_spark.session import SPARK_DIR, connector_jars

REPO = SPARK_DIR.parent
PYSPARK_JARS = Path(pyspark.__file__).parent / "jars"


def pins(path: Path) -> dict[str, str]:
    found = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            found[name.strip().lower()] = version.strip()
        elif "=" in line:
            key, value = line.split("=", 1)
            found[key.strip()] = value.strip()
    return found


SPARK = pins(SPARK_DIR / "spark.env")


def artifact(jar: str) -> str:
    """kafka-clients-3.9.2.jar -> kafka-clients; spark-sql_2.13-4.2.0.jar -> spark-sql_2.13."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", Path(jar).name)


def test_one_spark_version_everywhere():
    version = SPARK["SPARK_VERSION"]
    image = pins(SPARK_DIR / "requirements.txt")
    dev = pins(REPO / "requirements-dev.txt")
    operator = pins(REPO / "operator" / "requirements.txt")
    assert pyspark.__version__ == version
    assert image["pyspark"] == dev["pyspark"] == version
    assert image["py4j"] == dev["py4j"]
    assert image["confluent-kafka"] == operator["confluent-kafka"]
    assert f"spark-kubernetes_{SPARK['SCALA_BINARY_VERSION']}-{version}.jar" in (SPARK_DIR / "Dockerfile").read_text()
    assert f'sparkVersion: "{version}"' in (SPARK_DIR / "k8s" / "spark-application.yaml").read_text()
    assert f"krafty-spark:{version}" in (SPARK_DIR / "k8s" / "spark-application.yaml").read_text()


def test_pyspark_ships_spark_kubernetes_so_the_image_needs_no_extra_resolution():
    scala, version = SPARK["SCALA_BINARY_VERSION"], SPARK["SPARK_VERSION"]
    assert (PYSPARK_JARS / f"spark-kubernetes_{scala}-{version}.jar").is_file()
    assert any(p.name.startswith("kubernetes-client-") for p in PYSPARK_JARS.iterdir())


def test_connector_jars_are_the_connector_and_what_pyspark_lacks():
    # Given the jars Maven resolved from spark/connector/pom.xml
    names = {Path(j).name for j in connector_jars()}
    scala = SPARK["SCALA_BINARY_VERSION"]
    # Then they hold the connector at the pinned version and its Kafka client
    assert f"spark-sql-kafka-0-10_{scala}-{SPARK['SPARK_VERSION']}.jar" in names
    assert f"spark-token-provider-kafka-0-10_{scala}-{SPARK['SPARK_TOKEN_PROVIDER_VERSION']}.jar" in names
    assert any(n.startswith("kafka-clients-") for n in names)
    # And the job's own parser, built against the same Spark
    assert "krafty-spark-parser.jar" in names
    # And none of them is a second version of a jar PySpark already has
    duplicated = {artifact(n) for n in names} & {artifact(p.name) for p in PYSPARK_JARS.glob("*.jar")}
    assert not duplicated


def _classes(jar: Path) -> set[str]:
    with zipfile.ZipFile(jar) as archive:
        return {n[:-6] for n in archive.namelist() if n.endswith(".class") and not n.endswith("module-info.class")}


_CLASS_REF = re.compile(r"= Class\s+#\d+\s+// \"?\[*L?(org/apache/spark/[\w/$]+)")


def _spark_references(jar: Path) -> dict[str, set[str]]:
    """referenced org.apache.spark class -> classes of `jar` that reference it (from javap's constant pools)."""
    own = sorted(_classes(jar))
    referrers: dict[str, set[str]] = {}
    for i in range(0, len(own), 150):
        chunk = own[i:i + 150]
        out = subprocess.run(["javap", "-v", "-cp", str(jar), *(c.replace("/", ".") for c in chunk)],
                             check=True, capture_output=True, text=True).stdout
        for name, text in zip(chunk, re.split(r"^Classfile ", out, flags=re.MULTILINE)[1:], strict=True):
            for match in _CLASS_REF.finditer(text):
                referrers.setdefault(match.group(1), set()).add(name)
    return referrers


@pytest.mark.timeout(300)
def test_connector_classes_link_against_pyspark_jars():
    # Given every org.apache.spark class the connector jars and the job's parser refer to
    jars = [Path(j) for j in connector_jars() if Path(j).name.startswith(("spark-", "krafty-"))]
    defined = set().union(*(_classes(j) for j in [*PYSPARK_JARS.glob("*.jar"), *map(Path, connector_jars())]))
    missing: dict[str, set[str]] = {}
    referenced = 0
    for jar in jars:
        references = _spark_references(jar)
        referenced += len(references)
        for name, referrers in references.items():
            if name not in defined:
                missing.setdefault(name, set()).update(referrers)
    assert referenced > 100, "javap's output no longer parses: no references found"
    # Then each exists in PySpark's jars, except what the older token provider (spark.env explains) logs
    # when it obtains Kerberos delegation tokens, which this job never does.
    if SPARK["SPARK_TOKEN_PROVIDER_VERSION"] == SPARK["SPARK_VERSION"]:
        assert missing == {}
    else:
        provider = {"org/apache/spark/kafka010/KafkaDelegationTokenProvider"}
        assert missing == {"org/apache/spark/internal/LogKeys$CLUSTER_ID$": provider,
                           "org/apache/spark/internal/LogKeys$SERVICE_NAME$": provider}
