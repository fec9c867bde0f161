"""The Spark session of the job, with Spark's Kafka connector and the job's parser on its classpath.

The connector jars are resolved, and the parser's jar built, by Maven
(spark/fetch-connector.sh, from spark/connector/) and passed as `spark.jars`.
Where they come from:
1. `KRAFTY_SPARK_JARS_DIR` when set (a directory of jars);
2. in a checkout of the repository, the fetch script (cached after the
   first run);
3. otherwise nothing: the container image copies them into PySpark's own
   jars/ folder, so they are on every driver and executor classpath already.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_DIR = Path(__file__).resolve().parents[2]
FETCH_SCRIPT = SPARK_DIR / "fetch-connector.sh"

# Results carry window bounds as timestamps; render them in UTC whatever the machine's zone.
BASE_CONF = {"spark.sql.session.timeZone": "UTC"}


@functools.cache
def connector_jars() -> tuple[str, ...]:
    """Paths of the Kafka connector's jars, or () when the classpath already has them."""
    override = os.environ.get("KRAFTY_SPARK_JARS_DIR")
    if override:
        directory = Path(override)
    elif FETCH_SCRIPT.is_file():
        out = subprocess.run([str(FETCH_SCRIPT)], check=True, capture_output=True, text=True)
        directory = Path(out.stdout.strip().splitlines()[-1])
    else:
        return ()
    jars = tuple(sorted(str(p) for p in directory.glob("*.jar")))
    if not jars:
        raise FileNotFoundError(f"no jars in {directory}: run spark/fetch-connector.sh")
    return jars


def build_session(app_name: str, master: str | None = None,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A SparkSession with the connector jars; `master` and `conf` are for local runs and tests.

    Under spark-submit, leave both unset: spark-submit's --master and --conf
    decide (the builder's settings would override them).
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = {**BASE_CONF, **(conf or {})}
    jars = connector_jars()
    if jars:
        settings["spark.jars"] = ",".join(jars)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
