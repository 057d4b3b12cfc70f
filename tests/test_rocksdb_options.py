"""RocksDB tuning keys: profiles, single overrides and the bounded memory of a worker, the
memtable Bloom filter of large stores and the level-0 trigger of stores scanned whole, checked in
the OPTIONS file RocksDB writes for each real database and in its live properties."""

from __future__ import annotations

import pytest

from cluster import wait_until
from local_store import options_file
from service_client import encode_records
from ttlstate import conf, protocol, rocksdb_options
from ttlstate.errors import InvalidConfError
from ttlstate.rocksdb_options import PROFILES, RocksDbSettings
from ttlstate.store import Store

P = conf.PREFIX


def _settings(**confs) -> RocksDbSettings:
    return RocksDbSettings.from_conf(conf.resolve({P + k: v for k, v in confs.items()}, "store"))


@pytest.fixture
def open_store(tmp_path):
    stores = []

    def make(settings: RocksDbSettings) -> Store:
        s = Store(f"s{len(stores)}", str(tmp_path / f"s{len(stores)}"), rocksdb=settings)
        stores.append(s)
        return s
    yield make
    for s in stores:
        s.close(delete_files=True)


def _round_trip(store: Store, tmp_path):
    t = store.begin(0, read_only=False)
    for i in range(1000):
        t.put(b"k%04d" % i, b"v" * 20)
    store.commit(t, 1, str(tmp_path / f"{store.store_id}-1.changelog"))
    assert store.begin(1, read_only=True).get(b"k0500") == b"v" * 20


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_opens_a_working_database_with_its_options(open_store, tmp_path, profile):
    store = open_store(_settings(**{"rocksdb.profile": profile.lower(),  # case does not matter
                                    "rocksdb.boundedMemory.totalBytes": "0"}))
    _round_trip(store, tmp_path)
    o = options_file(store)
    assert o["level0_file_num_compaction_trigger"] == "16" and o["max_log_file_size"] == "1048576"
    assert o["compression"] == "kLZ4Compression"  # ttlstate's default, not RocksDB's snappy (docs/decisions/076-lz4-sst-compression.md)
    tuned = profile != "DEFAULT"
    assert (o["max_background_jobs"] == "4") == tuned  # RocksDB's default is 2
    if tuned:  # (RocksDB 8 already defaults to both)
        assert o["max_open_files"] == "-1"
    if "SPINNING" in profile:
        assert o["level_compaction_dynamic_level_bytes"] == "true" and o["compaction_style"] == "kCompactionStyleLevel"
    high_mem = profile == "SPINNING_DISK_OPTIMIZED_HIGH_MEM"
    assert (o["target_file_size_base"] == str(256 << 20)) == high_mem
    assert o["block_size"] == str((128 if high_mem else 16) << 10)  # ttlstate's 16 KiB but the profile's own
    assert (o["max_write_buffer_number"] == "4") == high_mem
    assert store.db.property_int_value("rocksdb.block-cache-capacity") == (256 << 20 if high_mem else 8 << 20)


def test_a_store_built_without_confs_compresses_as_the_service_does(open_store, tmp_path):
    """Offline tools (repartition, the checkpoint reader) open stores without ttlstate's confs:
    their SSTs are LZ4-compressed too, not RocksDB's Snappy (docs/decisions/076-lz4-sst-compression.md)."""
    store = open_store(RocksDbSettings())
    _round_trip(store, tmp_path)
    assert options_file(store)["compression"] == "kLZ4Compression"


def test_single_keys_override_the_profile(open_store, tmp_path):
    store = open_store(_settings(**{"rocksdb.profile": "SPINNING_DISK_OPTIMIZED_HIGH_MEM",
                                    "rocksdb.blockCacheSize": "4m", "rocksdb.blockSize": "8k",
                                    "rocksdb.writeBufferSize": "4m", "rocksdb.maxWriteBufferNumber": "3",
                                    "rocksdb.compression": "zstd", "rocksdb.boundedMemory.totalBytes": "0"}))
    _round_trip(store, tmp_path)
    o = options_file(store)
    assert o["block_size"] == str(8 << 10) and o["write_buffer_size"] == str(4 << 20)
    assert o["max_write_buffer_number"] == "3" and o["compression"] == "kZSTD"
    assert o["target_file_size_base"] == str(256 << 20)  # the rest of the profile stays
    assert store.db.property_int_value("rocksdb.block-cache-capacity") == 4 << 20


@pytest.mark.parametrize("confs,budget", [({}, 64 << 20),  # the default
                                          ({"rocksdb.boundedMemory.totalBytes": "48m",
                                            "rocksdb.boundedMemory.writeBufferRatio": "0.25"}, 48 << 20)])
def test_bounded_memory_is_one_cache_for_all_stores_of_a_worker(open_store, tmp_path, confs, budget):
    settings = _settings(**confs)
    a, b = open_store(settings), open_store(settings)
    _round_trip(a, tmp_path)
    _round_trip(b, tmp_path)
    for s in (a, b):
        assert s.db.property_int_value("rocksdb.block-cache-capacity") == budget
        # index and filter blocks live with each table, not in the shared cache
        # (docs/decisions/050-rocksdb-budget-per-worker.md)
        assert options_file(s)["cache_index_and_filter_blocks"] == "false"
        s.db.flush()
        assert s.db.property_int_value("rocksdb.estimate-table-readers-mem") > 0
    # the memtables are charged to the shared cache: its usage covers both stores' writes
    usage = a.db.property_int_value("rocksdb.block-cache-usage")
    assert usage == b.db.property_int_value("rocksdb.block-cache-usage") and usage > 0


@pytest.mark.parametrize("key,value,allowed", [
    ("rocksdb.profile", "FASTEST", "SPINNING_DISK_OPTIMIZED_HIGH_MEM"),
    ("rocksdb.compression", "gzip", "zstd"),
    ("rocksdb.blockCacheSize", "12q", "such as 64m or 1g"),
    ("rocksdb.boundedMemory.writeBufferRatio", "0", "between 0 and 1"),
])
def test_bad_values_name_the_key_and_what_is_allowed(key, value, allowed):
    with pytest.raises(InvalidConfError) as e:
        conf.resolve({P + key: value}, "store")
    assert P + key in str(e.value) and f"'{value}'" in str(e.value) and allowed in str(e.value)


def test_a_store_gets_a_memtable_bloom_once_it_holds_enough_keys(open_store, tmp_path, monkeypatch):
    # docs/decisions/077-memtable-bloom-and-sorted-writes.md: the filter's memory comes with every
    # memtable, so small stores go without
    monkeypatch.setattr(rocksdb_options, "MEMTABLE_BLOOM_MIN_KEYS", 1000)
    bloom = {"memtable_prefix_bloom_size_ratio": "0.020000", "memtable_whole_key_filtering": "true"}

    def memtable_options(store):
        o = options_file(store)
        return {k: o[k] for k in bloom}

    store = open_store(RocksDbSettings())
    assert memtable_options(store)["memtable_prefix_bloom_size_ratio"] == "0.000000"
    t = store.begin(0, read_only=False)
    for i in range(999):
        t.put(b"k%04d" % i, b"v")
    store.commit(t, 1, str(tmp_path / "1.changelog"))
    assert memtable_options(store)["memtable_prefix_bloom_size_ratio"] == "0.000000"  # 999 keys
    t = store.begin(1, read_only=False)
    t.put(b"k9999", b"v")
    store.commit(t, 2, str(tmp_path / "2.changelog"))
    assert memtable_options(store) == bloom and store.begin(2, read_only=True).get(b"k0998") == b"v"

    # a reload of that store opens a new database: checked again, it gets the filter again
    first_db = store.db_dir
    assert store.load(2, changelogs=[(1, str(tmp_path / "1.changelog")), (2, str(tmp_path / "2.changelog"))]) == 1000
    assert store.db_dir != first_db and memtable_options(store) == bloom

    # a transaction's write frames cross the threshold, counted with the committed keys
    growing = open_store(RocksDbSettings())
    t = growing.begin(0, read_only=False)
    for i in range(500):
        t.put(b"k%04d" % i, b"v")
    growing.commit(t, 1, str(tmp_path / "g1.changelog"))
    t = growing.begin(1, read_only=False)
    for start, n, ratio in ((500, 499, "0.000000"), (999, 1, "0.020000")):
        records = [(protocol.RECORD_PUT_NEW, b"k%04d" % i, b"v") for i in range(start, start + n)]
        t.apply(records, encode_records(protocol.Writer(), records).body())
        assert memtable_options(growing)["memtable_prefix_bloom_size_ratio"] == ratio


def test_a_store_scanned_whole_compacts_level_0_after_4_files(open_store, tmp_path):
    # docs/decisions/092-scanned-stores-compact-after-4.md: a scan merges every L0 file; a store
    # read by key keeps RocksDB's files for 16
    def level0(store):
        o = options_file(store)
        return [o[k] for k in ("level0_file_num_compaction_trigger", "level0_slowdown_writes_trigger",
                               "level0_stop_writes_trigger")]

    expected = {}

    def flushed_files(store, n):
        for f in range(n):  # n overlapping L0 files
            t = store.begin(store.version, read_only=False)
            for i in range(f, 400, 2):
                t.put(b"k%04d" % i, b"v%d" % f)
                if store is scanned:
                    expected[b"k%04d" % i] = b"v%d" % f
            store.commit(t, store.version + 1, str(tmp_path / f"{store.store_id}-{store.version + 1}.changelog"))
            store.db.flush()

    def files_at_level0(store):
        return store.db.property_int_value("rocksdb.num-files-at-level0")

    scanned, by_key = open_store(RocksDbSettings()), open_store(RocksDbSettings())
    for store in (scanned, by_key):
        flushed_files(store, 1)
        r = store.begin(store.version, read_only=True)
        assert len(list(r.iterate(b"k000"))) == 5  # a prefix scan: not a scan of the store
        r.end()
    assert level0(scanned) == level0(by_key) == ["16", "32", "48"]

    r = scanned.begin(scanned.version, read_only=True)
    assert len(list(r.iterate(b""))) == 200
    r.end()
    assert level0(scanned) == ["4", "8", "12"] and level0(by_key) == ["16", "32", "48"]

    flushed_files(scanned, 4)
    flushed_files(by_key, 4)
    wait_until(lambda: files_at_level0(scanned) < 4, 30, "the scanned store's L0 compaction")
    assert files_at_level0(by_key) == 5
    r = scanned.begin(scanned.version, read_only=True)
    assert dict(r.iterate(b"")) == expected and len(expected) == 400  # compaction lost nothing
    r.end()

    # a reload opens a new database with the default; its next scan sets it again
    changelogs = [(v, str(tmp_path / f"{scanned.store_id}-{v}.changelog")) for v in range(1, scanned.version + 1)]
    assert scanned.load(scanned.version, changelogs=changelogs) == 400
    assert level0(scanned) == ["16", "32", "48"]
    r = scanned.begin(scanned.version, read_only=True)
    list(r.iterate(b""))
    r.end()
    assert level0(scanned) == ["4", "8", "12"]
