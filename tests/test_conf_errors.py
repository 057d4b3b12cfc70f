"""Every ttlstate conf key with a wrong value fails the query at its start, naming the key,
the value and what is allowed (one table row per key; the table must cover every key).

Each row runs a real query (dropDuplicates on a key, ttlstate) with the bad value set; the
query must fail before any batch commits, with the key, the value and the allowed values
in its error. TTL keys other than `ttl` are set next to a valid `ttl`, so they are in force.
"""

from __future__ import annotations

import uuid

import pytest

import ttl_queries as tq
from ttlstate import conf
from ttlstate.ttl import config as ttl_config

pytestmark = pytest.mark.slow

# short name -> (bad value, fragments of the allowed values the error must show)
BAD_VALUES = {
    "workers": ("many", ["integer from 1 to 64"]),
    "writeBatchBytes": ("-5", ["integer from 1 to 16777216"]),
    "iteratorChunkEntries": ("0", ["integer from 1 to 1000000"]),
    "workerTimeout": ("0", ["duration from 1s to 7d"]),
    "checkpoint.mode": ("diff", ["changelog", "snapshot"]),
    "checkpoint.transferThreads": ("1000", ["integer from 1 to 64"]),
    "checkpoint.localCacheDir": ("relative/dir", ["absolute local directory path"]),
    "checkpoint.localCacheMaxAge": ("4000d", ["duration from 0 to 3650d"]),
    "cache.maxBytes": ("lots", ["size from 0 to", "64m"]),
    "keyFilter.enabled": ("maybe", ["true or false"]),
    "latencyTracking.enabled": ("sure", ["true or false"]),
    "latencyTracking.sampleInterval": ("0", ["integer from 1 to 1000000"]),
    "rocksdb.profile": ("FAST", ["DEFAULT", "SPINNING_DISK_OPTIMIZED", "SPINNING_DISK_OPTIMIZED_HIGH_MEM",
                                 "FLASH_SSD_OPTIMIZED"]),
    "rocksdb.blockCacheSize": ("-1", ["size from 0 to"]),
    "rocksdb.blockSize": ("4kib", ["size from 0 to"]),
    "rocksdb.writeBufferSize": ("big", ["size from 0 to"]),
    "rocksdb.maxWriteBufferNumber": ("0", ["integer from 1 to 64"]),
    "rocksdb.compression": ("gzip", ["none", "snappy", "lz4", "lz4hc", "zstd", "zlib", "bz2"]),
    "rocksdb.boundedMemory.totalBytes": ("2t", ["size from 0 to"]),
    "rocksdb.boundedMemory.writeBufferRatio": ("1.5", ["between 0 and 1"]),
    "ttl": ("ten minutes", ["duration", "30s"]),
    "updateType": ("Sometimes", ["OnCreateAndWrite", "OnReadAndWrite", "Disabled"]),
    "stateVisibility": ("Maybe", ["NeverReturnExpired", "ReturnExpiredIfNotCleanedUp"]),
    "timeCharacteristic": ("IngestionTime", ["BatchTimestamp", "ProcessingTime", "EventTime"]),
    "cleanup.inBackground": ("yes", ["true or false"]),
    "cleanup.incremental.size": ("0", ["integer from 1 to 1000000"]),
    "cleanup.incremental.everyRecord": ("1", ["true or false"]),
    "cleanup.compactionFilter.enabled": ("on", ["true or false"]),
    "cleanup.compactionFilter.periodicCompaction": ("-1d", ["duration", "30s"]),
    "cleanup.compactionFilter.safetyMargin": ("an hour", ["duration", "30s"]),
    "cleanup.fullSnapshot": ("sometimes", ["true or false"]),
}
UNKNOWN_KEY = conf.PREFIX + "checkpoint.modes"  # a typo of checkpoint.mode
ROWS = {**{name: (conf.PREFIX + name, *bad) for name, bad in BAD_VALUES.items()},
        "unknown key": (UNKNOWN_KEY, "snapshot", ["unknown ttlstate key", "checkpoint.mode"])}


def test_the_table_covers_every_key():
    declared = {e.name for e in conf.REGISTRY}
    assert set(BAD_VALUES) == declared


def test_bad_values_fail_the_query_at_start(spark, tmp_path):
    inputs = [str(tq.write_batches(tmp_path / "in", [[("a", 0), ("b", 0)], [("a", 1)]]))]
    specs = []
    for i, (row, (key, value, _)) in enumerate(ROWS.items()):
        confs = {key: value}
        if key != tq.key("ttl") and row in ttl_config.BY_NAME:
            confs[tq.key("ttl")] = "1h"
        specs.append(tq.QuerySpec(name=f"bad_conf_{i}_{uuid.uuid4().hex[:8]}", query="dedup_key",
                                  inputs=inputs, checkpoint=str(tmp_path / f"ck-{i}"),
                                  confs=confs))
    failures = []
    for (row, (key, value, allowed)), o in zip(ROWS.items(), tq.run_side_by_side(spark, specs)):
        if o.error is None:
            failures.append(f"{row}: {key}={value!r} was accepted")
            continue
        missing = [part for part in [key, f"'{value}'", *allowed] if part not in o.error]
        if missing:
            failures.append(f"{row}: {missing} not in the error:\n{o.error[:1500]}")
        if o.batches or tq.committed_batches(o.checkpoint):
            failures.append(f"{row}: a batch ran or committed")
    assert not failures, "\n".join(failures)


def test_a_cache_larger_than_the_jvm_can_hold_fails_naming_the_limit(spark, tmp_path):
    # the value cache lives in direct buffers (docs/decisions/054-native-memory-slabs.md): a budget
    # above the JVM's direct
    # memory limit could never be held, so the store refuses it at open
    inputs = [str(tq.write_batches(tmp_path / "in", [[("a", 0)]]))]
    key = conf.PREFIX + "cache.maxBytes"
    spec = tq.QuerySpec(name=f"cache_too_big_{uuid.uuid4().hex[:8]}", query="dedup_key", inputs=inputs,
                        checkpoint=str(tmp_path / "ck"), confs={key: "512g"})
    (o,) = tq.run_side_by_side(spark, [spec])
    assert o.error is not None
    for part in [key, str(512 << 30), "direct memory limit", "-XX:MaxDirectMemorySize"]:
        assert part in o.error, (part, o.error[:1500])
    assert not o.batches and not tq.committed_batches(o.checkpoint)
