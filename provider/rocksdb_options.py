"""RocksDB options of a store's database, from ttlstate's `rocksdb.*` settings.

`rocksdb.profile` picks one of Flink's predefined option sets (`PredefinedOptions`), the
other keys override single options, and `rocksdb.boundedMemory.totalBytes` bounds the memory
of all stores of a worker process together: one block cache of that size, shared by every
database the process opens, with their memtables charged to it through one write buffer
manager (Flink's managed memory, Spark's `boundedMemoryUsage`). Index and filter blocks stay
outside it, in each table reader, so they grow with the data instead of being evicted and
read again (docs/decisions/050-rocksdb-budget-per-worker.md).
"""

from __future__ import annotations

import dataclasses
import threading

from rocksdict import (BlockBasedOptions, Cache, DBCompactionStyle, DBCompressionType, Options, WriteBufferManager,
                       WriteOptions)

PROFILES = ("DEFAULT", "SPINNING_DISK_OPTIMIZED", "SPINNING_DISK_OPTIMIZED_HIGH_MEM", "FLASH_SSD_OPTIMIZED")
COMPRESSIONS = ("none", "snappy", "lz4", "lz4hc", "zstd", "zlib", "bz2")

# A snapshot uploads the SSTs that are new since the last one; an L0 -> L1 compaction
# rewrites (under random updates) every SST of the store. Compacting after 16 flushed files
# instead of RocksDB's 4 makes that happen a quarter as often (benchmarks/
# test_checkpoint_bytes.py; docs/decisions/030-level0-compaction-and-bloom-filters.md); Bloom
# filters keep gets cheap across them.
L0_COMPACTION_TRIGGER = 16
# ...except in a store the worker scans whole (a join's watermark eviction reads every entry of
# a state beyond the JVM's cache each batch): a scan merges every L0 file, each spanning the whole
# key range, and what the store removes stays in them as tombstones until compaction. Such a store
# compacts after RocksDB's 4 (docs/decisions/092-scanned-stores-compact-after-4.md).
SCANNED_L0_COMPACTION_TRIGGER = 4
BLOOM_BITS_PER_KEY = 10
INFO_LOG_BYTES = 1 << 20
_MIB = 1 << 20
# Block cache of a store when neither the profile nor rocksdb.blockCacheSize sets one: Spark's
# RocksDB provider default (blockCacheSizeMB=8), not RocksDB's 32 MiB
# (docs/decisions/042-block-cache-per-store.md).
DEFAULT_BLOCK_CACHE_BYTES = 8 * _MIB
# Data block of the SSTs when neither the profile nor rocksdb.blockSize sets one: 16 KiB, not
# RocksDB's (and Spark's RocksDB provider's) 4 KiB. A batch reads its keys sorted, so a state far
# larger than the caches is read nearly block after block; a quarter as many blocks means a
# quarter of the reads, lookups and cache churn for the same bytes (docs/decisions/091-16k-sst-blocks.md).
DEFAULT_BLOCK_BYTES = 16 * 1024
# SST block compression of every database ttlstate writes (the service's and the offline tools'):
# Spark's RocksDB provider's default; a read beyond the caches decompresses a whole block, and
# LZ4 does that faster than RocksDB's default Snappy (docs/decisions/076-lz4-sst-compression.md).
DEFAULT_COMPRESSION = "lz4"
# A whole-key Bloom filter in each memtable lets a get of a key the memtable lacks (nearly
# every get of a state far larger than a memtable) skip the skip list's search. Its bytes are
# this fraction of the write buffer's (1.3 MiB of RocksDB's 64 MiB: about 16 bits an entry of
# a full memtable of 100-byte entries), allocated with every memtable, so a database gets it
# only once its store holds MEMTABLE_BLOOM_MIN_KEYS keys
# (docs/decisions/077-memtable-bloom-and-sorted-writes.md).
MEMTABLE_BLOOM_RATIO = 0.02
MEMTABLE_BLOOM_MIN_KEYS = 1 << 18


@dataclasses.dataclass(frozen=True)
class RocksDbSettings:
    """The resolved `rocksdb.*` settings of a store (None: the profile's value). Built
    directly (tests, offline tools) it is RocksDB's profile with a block cache per store and
    ttlstate's default compression."""

    profile: str = "DEFAULT"
    block_cache_bytes: int | None = None
    block_bytes: int | None = None
    write_buffer_bytes: int | None = None
    max_write_buffers: int | None = None
    compression: str | None = DEFAULT_COMPRESSION
    bounded_total_bytes: int = 0
    bounded_write_buffer_ratio: float = 0.5

    @staticmethod
    def from_conf(settings: dict) -> "RocksDbSettings":
        """From `conf.resolve(..., "store")` output (short names; conf.py fills the defaults)."""
        return RocksDbSettings(
            profile=settings["rocksdb.profile"],
            block_cache_bytes=settings.get("rocksdb.blockCacheSize"),
            block_bytes=settings.get("rocksdb.blockSize"),
            write_buffer_bytes=settings.get("rocksdb.writeBufferSize"),
            max_write_buffers=settings.get("rocksdb.maxWriteBufferNumber"),
            compression=settings.get("rocksdb.compression"),
            bounded_total_bytes=settings["rocksdb.boundedMemory.totalBytes"],
            bounded_write_buffer_ratio=settings["rocksdb.boundedMemory.writeBufferRatio"])


class _SharedMemory:
    """One block cache and write buffer manager per worker process and budget."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_budget: dict[tuple[int, float], tuple[Cache, WriteBufferManager]] = {}

    def get(self, total: int, ratio: float) -> tuple[Cache, WriteBufferManager]:
        with self.lock:
            shared = self.by_budget.get((total, ratio))
            if shared is None:
                cache = Cache(total)
                wbm = WriteBufferManager.new_write_buffer_manager_with_cache(int(total * ratio), False, cache)
                shared = self.by_budget[(total, ratio)] = (cache, wbm)
            return shared


SHARED = _SharedMemory()


def options(s: RocksDbSettings, statistics: bool) -> Options:
    """The Options of one database (raw mode: keys and values are plain bytes)."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    compact, slow_down, stop = _level0_limits(L0_COMPACTION_TRIGGER)
    opts.set_level_zero_file_num_compaction_trigger(compact)
    opts.set_level_zero_slowdown_writes_trigger(slow_down)
    opts.set_level_zero_stop_writes_trigger(stop)
    # RocksDB's info LOG never rotates by default and grows with every flush and compaction
    # (benchmarks/results/soak.md): roll it at 1 MiB, keep one old file, no stats dumps.
    opts.set_max_log_file_size(INFO_LOG_BYTES)
    opts.set_keep_log_file_num(2)
    opts.set_stats_dump_period_sec(0)
    table = BlockBasedOptions()
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)
    block_cache, block_bytes = s.block_cache_bytes, s.block_bytes
    write_buffer, max_buffers = s.write_buffer_bytes, s.max_write_buffers
    if s.profile != "DEFAULT":  # Flink's PredefinedOptions, all but DEFAULT
        opts.increase_parallelism(4)
        opts.set_max_open_files(-1)
    if s.profile in ("SPINNING_DISK_OPTIMIZED", "SPINNING_DISK_OPTIMIZED_HIGH_MEM"):
        opts.set_compaction_style(DBCompactionStyle.level())
        opts.set_level_compaction_dynamic_level_bytes(True)
    if s.profile == "SPINNING_DISK_OPTIMIZED_HIGH_MEM":
        opts.set_target_file_size_base(256 * _MIB)
        opts.set_max_bytes_for_level_base(1024 * _MIB)
        opts.set_min_write_buffer_number_to_merge(3)
        block_cache = block_cache if block_cache is not None else 256 * _MIB
        block_bytes = block_bytes if block_bytes is not None else 128 * 1024
        write_buffer = write_buffer if write_buffer is not None else 64 * _MIB
        max_buffers = max_buffers if max_buffers is not None else 4
    if s.bounded_total_bytes:
        cache, wbm = SHARED.get(s.bounded_total_bytes, s.bounded_write_buffer_ratio)
        table.set_block_cache(cache)
        opts.set_write_buffer_manager(wbm)
    elif block_cache == 0:
        table.disable_cache()
    else:
        table.set_block_cache(Cache(block_cache if block_cache is not None else DEFAULT_BLOCK_CACHE_BYTES))
    table.set_block_size(block_bytes if block_bytes is not None else DEFAULT_BLOCK_BYTES)
    if write_buffer is not None:
        opts.set_write_buffer_size(write_buffer)
    if max_buffers is not None:
        opts.set_max_write_buffer_number(max_buffers)
    if s.compression is not None:
        opts.set_compression_type(getattr(DBCompressionType, s.compression)())
    opts.set_block_based_table_factory(table)
    if statistics:
        opts.enable_statistics()
    return opts


def _level0_limits(trigger: int) -> tuple[int, int, int]:
    """The L0 file counts at which RocksDB compacts, slows writes down and stops them."""
    return trigger, 2 * trigger, 3 * trigger


def scanned_store() -> dict[str, str]:
    """The mutable options (`Rdict.set_options`) of a store the worker scans whole."""
    compact, slow_down, stop = _level0_limits(SCANNED_L0_COMPACTION_TRIGGER)
    return {"level0_file_num_compaction_trigger": str(compact), "level0_slowdown_writes_trigger": str(slow_down),
            "level0_stop_writes_trigger": str(stop)}


def memtable_bloom() -> dict[str, str]:
    """The mutable options (`Rdict.set_options`) that give a database's next memtables a
    whole-key Bloom filter."""
    return {"memtable_prefix_bloom_size_ratio": str(MEMTABLE_BLOOM_RATIO), "memtable_whole_key_filtering": "true"}


def write_options() -> WriteOptions:
    """No write-ahead log: a local database is never reopened after a crash (every load
    builds a fresh directory from the checkpoint), and snapshots flush the memtable."""
    wo = WriteOptions()
    wo.disable_wal = True
    return wo
