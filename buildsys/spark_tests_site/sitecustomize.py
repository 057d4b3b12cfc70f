"""Loaded at start-up by every Python of a `make spark-tests` run with ttlstate forced (this
directory is put on PYTHONPATH by buildsys/spark_tests.py).

spark-defaults.conf (SPARK_CONF_DIR) makes ttlstate the provider of every session that does not
choose one; but Spark's tests for transformWithState, offline repartition and real-time mode set
`spark.sql.streaming.stateStore.providerClass` to Spark's RocksDB provider in their SparkConf,
which outranks spark-defaults. So when TTLSTATE_FORCE_PROVIDER names a class, a value set for
that key through `SparkConf.set` (what `SparkSession.Builder.getOrCreate` and the tests'
`conf()` use) is replaced by that class: every session then runs on ttlstate, as for a user who
switches the provider class. The patch is applied when `pyspark.conf` is first imported, so
Pythons that never import pyspark (the store service) do not pay for it.
"""

import importlib.abc
import importlib.machinery
import os
import sys

KEY = "spark.sql.streaming.stateStore.providerClass"
FORCED = os.environ.get("TTLSTATE_FORCE_PROVIDER")


def force_provider(spark_conf_class, provider: str) -> None:
    """Makes `SparkConf.set(KEY, anything)` store `provider`."""
    original = spark_conf_class.set
    if getattr(original, "ttlstate_forced", False):
        return

    def set(self, key, value):  # noqa: A001 - the method it replaces
        return original(self, key, provider if key == KEY else value)

    set.ttlstate_forced = True
    spark_conf_class.set = set


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of `pyspark.conf` to patch SparkConf once loaded."""

    def find_spec(self, name, path, target=None):
        if name != "pyspark.conf":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            force_provider(module.SparkConf, FORCED)

        spec.loader.exec_module = exec_and_patch
        return spec


if FORCED:
    sys.meta_path.insert(0, _PatchOnImport())
