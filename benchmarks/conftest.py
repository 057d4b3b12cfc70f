"""Benchmarks run real Spark queries: `python -m pytest benchmarks/ --benchmark-only`."""

import pytest
from pyspark.sql import SparkSession

import ttlstate

PROVIDERS = {
    "ttlstate": ttlstate.PROVIDER_CLASS,
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


@pytest.fixture(scope="session")
def spark():
    session = (ttlstate.configure(SparkSession.builder.master("local[2]").appName("ttlstate-bench"))
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.enabled", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
