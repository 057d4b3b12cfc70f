"""ttlstate: a RocksDB state-store provider for Spark Structured Streaming with Flink-style TTL.

Enable it on a session with `ttlstate.configure(SparkSession.builder)`, or by hand with
`spark.sql.streaming.stateStore.providerClass=io.ttlstate.spark.TtlStateStoreProvider`
and the shim jar (`ttlstate.jar_path()`) on `spark.jars`.
"""

from __future__ import annotations

import os
import pathlib
import sys

from .confkeys import PREFIX

__version__ = "0.1.0"

PROVIDER_CLASS = "io.ttlstate.spark.TtlStateStoreProvider"
PROVIDER_CLASS_KEY = "spark.sql.streaming.stateStore.providerClass"
# Spark session extensions: the check that refuses EventTime TTL without a watermark.
EXTENSIONS_CLASS = "io.ttlstate.spark.TtlStateExtensions"
EXTENSIONS_KEY = "spark.sql.extensions"
CONF_PREFIX = PREFIX

_JAR_NAME = "ttlstate-shim.jar"
# The Spark lines the shim runs on: one jar, compiled against the newest, with version adapters
# for the others (io.ttlstate.spark.compat; docs/decisions/055-one-package-for-spark-4-0-to-4-3.md).
SPARK_LINES = ("4.0", "4.1", "4.2", "4.3")


def check_spark_version(version: str | None = None) -> str:
    """The pyspark version (or `version`), if its line is one ttlstate runs on; else an error
    naming it and the supported lines."""
    if version is None:
        import pyspark
        version = pyspark.__version__
    if ".".join(version.split(".")[:2]) not in SPARK_LINES:
        from .errors import UnsupportedSparkError
        raise UnsupportedSparkError(
            f"ttlstate runs on Spark {', '.join(SPARK_LINES)}; this is Spark {version} "
            f"(install a pyspark of a supported line)")
    return version


def jar_path() -> str:
    """Absolute path of the JVM shim jar shipped with this package."""
    path = pathlib.Path(__file__).resolve().parent / "jars" / _JAR_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"The ttlstate shim jar is missing at {path}. Build it with `make jar` "
            "(gradle) in the ttlstate source tree, or reinstall a wheel that contains it.")
    return str(path)


def check_server(spark):
    """Checks that the session's server (e.g. a Spark Connect server) serves ttlstate with a jar
    of this version; returns what it runs (`ttlstate.server_check`), else raises an error
    naming the `--jars`/`--conf` to start the server with."""
    from .server_check import check_server as check
    return check(spark)


def _append_path_list(current: str | None, item: str, sep: str) -> str:
    if not current:
        return item
    parts = [p for p in current.split(sep) if p]
    return current if item in parts else sep.join(parts + [item])


def configure(builder):
    """Set up a `SparkSession.Builder` to keep streaming state in ttlstate; returns it.

    Appends the shim jar to `spark.jars` and `spark.driver.extraClassPath` (keeping
    what is already set), selects the provider class, and pins the Python that runs the
    store service to this interpreter unless `spark.pyspark.python` or `PYSPARK_PYTHON`
    already choose one. It also turns on Spark's
    `spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled` (unless set),
    which TTL on stream-stream join state needs, and adds ttlstate's session extensions to
    `spark.sql.extensions` (keeping what is set): they refuse a query with EventTime TTL
    and no watermark before it starts.
    """
    check_spark_version()
    jar = jar_path()
    options = builder._options  # the builder's pending confs (pyspark keeps them here)
    builder.config("spark.jars", _append_path_list(options.get("spark.jars"), jar, ","))
    builder.config("spark.driver.extraClassPath",
                   _append_path_list(options.get("spark.driver.extraClassPath"), jar, os.pathsep))
    builder.config(PROVIDER_CLASS_KEY, PROVIDER_CLASS)
    builder.config(EXTENSIONS_KEY, _append_path_list(options.get(EXTENSIONS_KEY), EXTENSIONS_CLASS, ","))
    from .conf import SKIP_NULLS_KEY
    if SKIP_NULLS_KEY not in options:  # lets TTL expire rows of stream-stream joins (conf.py)
        builder.config(SKIP_NULLS_KEY, "true")
    if "spark.pyspark.python" not in options and not os.environ.get("PYSPARK_PYTHON"):
        builder.config("spark.pyspark.python", sys.executable)
    return builder
