"""A local SparkSession with rmqlab's data sources registered (``--master`` for a cluster).

Spark starts its Python workers with ``python3`` from PATH unless ``PYSPARK_PYTHON`` is set, which
in a venv loses pyarrow and rmqlab; so both Python variables are set to ``sys.executable`` unless
the caller already set them. Local defaults: few shuffle partitions (the data of a store dir is
small after the first aggregation), no UI, Python filter pushdown on, Arrow batches for Python,
and a generated-code cache large enough for the audit's plans (Spark's default keeps 100 classes;
the audit makes more, so a second audit in the session compiled and JIT-warmed them all again).
The driver logs errors only (``log4j2.properties`` here), so a CLI run prints its findings, not
Spark's start-up chatter.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

__all__ = ["LOCAL_DEFAULTS", "LOG4J2_PROPERTIES", "get_session"]

#: the driver's log4j2 configuration (errors only, on stderr), unless the caller passes its own
#: ``spark.driver.extraJavaOptions``
LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")

LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.codegen.cache.maxEntries": "2000",
}


def get_session(master: str = "local[*]", app_name: str = "rmqlab", conf: dict[str, str] | None = None) -> Any:
    """Get or create a SparkSession on ``master`` with the rmq_* sources registered.

    ``conf`` entries override :data:`LOCAL_DEFAULTS` (which apply to every master; pass
    ``{"spark.sql.shuffle.partitions": "200"}`` for a large cluster job).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # pyspark 4 warns on every import of pyspark.testing.utils that pandas 3 is not fully
    # supported; rmqlab's sources and jobs use Arrow and no pandas API it names (tests use chispa)
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    from pyspark.sql import SparkSession

    from rmqlab.spark import register

    builder = SparkSession.builder.master(master).appName(app_name)
    logging = {"spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile={LOG4J2_PROPERTIES.as_uri()}"}
    for k, v in {**LOCAL_DEFAULTS, **logging, **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
