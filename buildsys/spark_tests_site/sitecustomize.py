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


class _PatchingLoader(importlib.abc.Loader):
    """The loader of `pyspark.conf`, patching SparkConf once the module ran. A wrapper, not a
    patched loader: a zipimporter (pyspark.zip, which Python workers import from) loads every
    module of the zip."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        force_provider(module.SparkConf, FORCED)

    def __getattr__(self, name):  # get_source, get_resource_reader, ...
        return getattr(self.loader, name)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds `pyspark.conf` where the path finder would, with a loader that patches it."""

    def find_spec(self, name, path, target=None):
        if name != "pyspark.conf":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


if FORCED:
    sys.meta_path.insert(0, _PatchOnImport())
