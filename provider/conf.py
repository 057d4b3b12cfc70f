"""Every ttlstate conf key, declared once with its type, default and doc.

Keys live under `spark.sql.streaming.stateStore.ttlstate.`; Spark forwards that prefix to
every provider instance (`StateStoreConf.sqlConfs`), the shim passes them to the service,
and `resolve()` validates them here. An invalid value raises `InvalidConfError` naming the
key, the value and what is allowed; an unknown key under the prefix is refused too, since
it is almost always a typo. The TTL settings (and their per-operator / per-store overrides)
are declared in `ttlstate.ttl.config` and resolved per store by `ttl_settings`.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import rocksdb_options, values
from .confkeys import PREFIX
from .errors import InvalidConfError
from .ttl import config as ttl_config


Setting = values.Setting

ENTRIES: tuple[Setting, ...] = (
    Setting(
        "workers", values.int_between(1, 64), None,
        "Store worker processes per executor. Default: the executor's cores "
        "(`spark.executor.cores`, else the machine's processors). Stores are pinned to a "
        "worker by a hash of their id.",
        "service"),
    Setting(
        "writeBatchBytes", values.int_between(1, 16 * 1024 * 1024), "262144",
        "Write-behind buffer of the JVM shim: puts and removes are shipped to the worker in "
        "one frame when this many bytes are buffered (and before any read that needs them).",
        "store"),
    Setting(
        "iteratorChunkEntries", values.int_between(1, 1_000_000), "1024",
        "Entries per chunk when iterating or prefix-scanning a store.",
        "store"),
    Setting(
        "workerTimeout", values.duration_between(1_000, 7 * 24 * 3_600_000, "1s to 7d"), "10min",
        "How long the JVM waits for a store worker's answer to one request. A worker that "
        "does not answer in time (stopped, stuck on a disk) is killed, so its service "
        "starts a fresh one, and the task fails with `TTLSTATE_WORKER_TIMEOUT` naming the "
        "worker and this key; Spark's task retry then reloads the store from the checkpoint. "
        "Long requests (a load or snapshot of a big store) must fit in it.",
        "store"),
    Setting(
        "checkpoint.mode", values.one_of("changelog", "snapshot"), "changelog",
        "`changelog`: a commit uploads only a zstd log of the version's writes, and snapshot "
        "maintenance uploads an incremental SST snapshot every "
        "`spark.sql.streaming.stateStore.minDeltasForSnapshot` versions. `snapshot`: every "
        "commit is an incremental SST snapshot (only SST files the checkpoint does not hold "
        "yet are uploaded). Either mode loads the other's checkpoints, so it may change "
        "across a restart.",
        "store"),
    Setting(
        "checkpoint.transferThreads", values.int_between(1, 64), "4",
        "Threads of the executor's pool that upload and download checkpoint files (shared "
        "by all stores of the executor; the largest value any store asks for wins).",
        "store"),
    Setting(
        "checkpoint.localCacheDir", values.absolute_path, None,
        "Directory where the executor keeps copies of the checkpoint files its stores wrote "
        "or read, so a store that is loaded again on the same machine (a restarted query, "
        "a store that moved back) downloads only what it does not hold. Files of versions "
        "no longer retained are deleted by maintenance. Default: "
        "`<java.io.tmpdir>/ttlstate-cache-<user>`.",
        "store"),
    Setting(
        "checkpoint.localCacheMaxAge", values.duration_between(0, 3650 * 24 * 3_600_000, "0 to 3650d"), "7d",
        "A store's directory in the local checkpoint cache that no store has used for this "
        "long (its query stopped or deleted) is deleted by the next maintenance of a store "
        "that uses the same cache directory (each JVM looks at most once an hour); a store "
        "loaded again later downloads its files again. `0` keeps every directory.",
        "store"),
)

ENTRIES += (
    Setting(
        "cache.maxBytes", values.byte_size(1 << 40), "128m",
        "Memory the JVM may use to cache the values its stores read and wrote, so repeated "
        "reads of a key cost no round trip to the worker. One budget for all stores of an "
        "executor: a store may use what the others leave, and a store that adds values while "
        "they hold the whole budget frees its own oldest values (those read since written get "
        "a second chance); the warm-up after a load fills at most an equal share. The values "
        "live outside the Java heap, in direct buffers (count them in the executor's memory "
        "overhead; the JVM's -XX:MaxDirectMemorySize, by default -Xmx, must hold them), "
        "their index on the heap; both are counted. The cache holds exactly the loaded "
        "version (a commit updates it, a load empties it) and never serves an expired value. "
        "`0` turns it off.",
        "store"),
    Setting(
        "keyFilter.enabled", values.boolean, "true",
        "Keep a Bloom filter of the keys of each loaded version in the JVM (16 bits per "
        "key), so most reads of absent keys cost no round trip. After a load from the "
        "checkpoint it is built by reading the version's keys once.",
        "store"),
)

ENTRIES += (
    Setting(
        "latencyTracking.enabled", values.boolean, "false",
        "Sample the latency of gets and puts as the operator sees it (JVM side, cache hits "
        "included) and report percentiles per batch (`ttlstateLatency*` metrics), like "
        "Flink's `state.latency-track`. Off by default; two clock reads per sampled access.",
        "store"),
    Setting(
        "latencyTracking.sampleInterval", values.int_between(1, 1_000_000), "100",
        "With latency tracking, time every n-th get and every n-th put of a store.",
        "store"),
    Setting(
        "rocksdb.profile", values.one_of(*rocksdb_options.PROFILES, case=str.upper), "DEFAULT",
        "Flink's predefined RocksDB options: `DEFAULT`; `SPINNING_DISK_OPTIMIZED` (level "
        "compaction with dynamic level sizes, 4 background threads, unlimited open files); "
        "`SPINNING_DISK_OPTIMIZED_HIGH_MEM` (the same plus 256 MiB block cache, 128 KiB "
        "blocks, 256 MiB target file size, 1 GiB level base, 64 MiB write buffers, 4 of them, "
        "3 merged per flush); `FLASH_SSD_OPTIMIZED` (4 background threads, unlimited open "
        "files). The other `rocksdb.*` keys override single options of the profile.",
        "store"),
    Setting(
        "rocksdb.blockCacheSize", values.byte_size(1 << 40), None,
        "Block cache of each store's database (`0`: none). Default: the profile's (8 MiB, as "
        "Spark's RocksDB provider, except `SPINNING_DISK_OPTIMIZED_HIGH_MEM`: 256 MiB). Used only "
        "with `rocksdb.boundedMemory.totalBytes=0`.",
        "store"),
    Setting(
        "rocksdb.blockSize", values.byte_size(1 << 30), None,
        "Size of a data block in the SST files. Default: 16 KiB (RocksDB's and Spark's RocksDB "
        "provider's: 4 KiB); 128 KiB in `SPINNING_DISK_OPTIMIZED_HIGH_MEM`.",
        "store"),
    Setting(
        "rocksdb.writeBufferSize", values.byte_size(1 << 34), None,
        "Size of one memtable (RocksDB's default 64 MiB). Default: the profile's.",
        "store"),
    Setting(
        "rocksdb.maxWriteBufferNumber", values.int_between(1, 64), None,
        "Memtables a store's database may hold before writes stall (RocksDB's default 2). "
        "Default: the profile's.",
        "store"),
    Setting(
        "rocksdb.compression", values.one_of(*rocksdb_options.COMPRESSIONS), rocksdb_options.DEFAULT_COMPRESSION,
        "Compression of SST blocks: " + ", ".join(rocksdb_options.COMPRESSIONS) + ". Default "
        "`lz4`, as in Spark's RocksDB provider: a read that misses the caches decompresses a "
        "whole block, and LZ4 does that faster than RocksDB's own default, `snappy` "
        "(docs/decisions/076-lz4-sst-compression.md).",
        "store"),
    Setting(
        "rocksdb.boundedMemory.totalBytes", values.byte_size(1 << 40), "64m",
        "Bound the RocksDB memory of all stores of a worker process together: one block cache "
        "of this size shared by all their databases, with their memtables charged to it (a "
        "write buffer manager). Index and filter blocks stay outside it, with each table. "
        "`0`: off, each database has its own block cache (`rocksdb.blockCacheSize`) and "
        "memtables.",
        "store"),
    Setting(
        "rocksdb.boundedMemory.writeBufferRatio", values.ratio, "0.5",
        "With bounded memory, the share of it memtables may take.",
        "store"),
)

# Every ttlstate key, declared once each: the store's and service's here, the TTL's in ttl/config.py.
REGISTRY: tuple[Setting, ...] = ENTRIES + ttl_config.SETTINGS
BY_KEY: dict[str, Setting] = {e.key: e for e in ENTRIES}


def resolve(confs: Mapping[str, str], scope: str) -> dict[str, Any]:
    """Validate `confs` (full keys) and return {short name: value} for entries of `scope`.

    Keys of the other scope are validated too, so a bad value fails wherever it is seen.
    """
    out: dict[str, Any] = {}
    for key, text in confs.items():
        if not key.startswith(PREFIX):
            continue
        entry = BY_KEY.get(key)
        if entry is None:
            if ttl_config.split_key(key[len(PREFIX):])[2] in ttl_config.BY_NAME:
                continue  # validated by ttl_settings (ttl.config.resolve)
            known = ", ".join(sorted(e.name for e in REGISTRY))
            raise InvalidConfError(
                key, text, f"unknown ttlstate key; known keys are {known}, and "
                "operator.<operatorId>.[store.<storeName>.]<TTL key> overrides")
        try:
            value = entry.parse(text)
        except ValueError as e:
            raise InvalidConfError(key, text, str(e)) from None
        if entry.scope == scope:
            out[entry.name] = value
    for entry in ENTRIES:
        if entry.scope == scope and entry.name not in out and entry.default is not None:
            out[entry.name] = entry.parse(entry.default)
    return out


SKIP_NULLS_KEY = "spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled"
JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue",
               "right-keyToNumValues", "right-keyWithIndexToValue")


def ttl_settings(confs: Mapping[str, str], operator: int, store: str) -> "ttl_config.TtlConfig":
    """The TTL settings in force for one store (store > operator > global > default).

    A stream-stream join keeps a count per key in one store and the rows in another; a row
    that expires leaves a hole the count still covers, which Spark's join skips only with
    `SKIP_NULLS_KEY` on (the JVM passes its value), so TTL on join state requires it.
    """
    ttl = ttl_config.resolve(confs, operator, store)
    if ttl.enabled and store in JOIN_STORES and confs.get(SKIP_NULLS_KEY, "false") != "true":
        key = next((k for k in (f"{PREFIX}operator.{operator}.store.{store}.ttl",
                                f"{PREFIX}operator.{operator}.ttl", f"{PREFIX}ttl") if k in confs), PREFIX + "ttl")
        raise InvalidConfError(
            key, confs.get(key, ""),
            f"TTL on the state of a stream-stream join (operator {operator}, store {store}) "
            f"needs {SKIP_NULLS_KEY}=true, so the join skips rows that expired; set it, or "
            f"turn TTL off for this operator ({PREFIX}operator.{operator}.ttl=0)")
    return ttl
