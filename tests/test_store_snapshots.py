"""Incremental snapshots in the store: RocksDB checkpoints, manifests, loads, migrations.

Real RocksDB and real files throughout; the JVM's part (upload, cache, download) is played
by copying the SSTs a snapshot names into a "checkpoint" directory under their names.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time

import pytest
from rocksdict import AccessType, Options, Rdict

from local_store import options_file
from ttlstate import manifest, rocksdb_options, ttl_cleanup
from ttlstate.errors import CorruptFileError, StorageError, TtlstateError, VersionMismatchError
from ttlstate.rocksdb_options import RocksDbSettings
from ttlstate.statefile import LAYOUT_TTL
from ttlstate.store import Store
from ttlstate.ttl.config import StateVisibility, TtlConfig

PLAIN = TtlConfig()
TTL = TtlConfig(ttl_ms=3_600_000, compaction_filter=False)  # TTL layout, plain database
TTL_DB = TtlConfig(ttl_ms=3_600_000)  # TTL layout in RocksDB's TTL database (compaction filter)
KINDS = {"plain": PLAIN, "ttl": TTL, "ttl-db": TTL_DB}
NOW = 1_700_000_000_000


class Lineage:
    """A store plus the checkpoint files it wrote: changelogs, manifests and SSTs by name."""

    def __init__(self, tmp_path, name, config=PLAIN, rocksdb=RocksDbSettings()):
        self.root = tmp_path / f"{name}-checkpoint"
        (self.root / "sst").mkdir(parents=True)
        self.tmp = tmp_path
        self.store = Store(name, str(tmp_path / name), config, rocksdb=rocksdb)
        self.uploaded: list[str] = []  # SST names in upload order (a name is never uploaded twice)

    def commit(self, puts=(), removes=(), batch_ts=NOW, changelog=True):
        s = self.store
        t = s.begin(s.version, False, batch_ts)
        for k in puts:
            t.put(k, b"v-" + k)
        for k in removes:
            t.remove(k)
        v = s.version + 1
        s.commit(t, v, str(self.root / f"{v}.changelog") if changelog else "")
        return v

    def snapshot(self):
        """Snapshot the store and do what the JVM does with the reply."""
        work = self.tmp / f"{self.store.store_id}-snap-{self.store.version}-{time.monotonic_ns()}"
        version, num_keys, path, ssts = self.store.snapshot(str(work))
        for name, local, size in ssts:
            target = self.root / "sst" / name
            if not target.exists():
                shutil.copyfile(local, target)
                self.uploaded.append(name)
            assert target.stat().st_size == size
        shutil.copyfile(path, self.root / f"{version}.manifest")
        shutil.rmtree(work)
        return version, num_keys, [name for name, _, _ in ssts]

    def load_into(self, store: Store, version: int, manifest_version: int, batch_ts=NOW) -> int:
        m = str(self.root / f"{manifest_version}.manifest") if manifest_version else ""
        names = manifest.read(m, manifest_version).ssts if m else ()
        ssts = {f.name: str(self.root / "sst" / f.name) for f in names}
        logs = [(v, str(self.root / f"{v}.changelog")) for v in range(manifest_version + 1, version + 1)]
        return store.load(version, batch_ts, manifest_version, m, ssts, logs)


@pytest.fixture
def mk(tmp_path):
    made = []

    def make(name, config=PLAIN, rocksdb=RocksDbSettings()):
        lin = Lineage(tmp_path, name, config, rocksdb)
        made.append(lin.store)
        return lin
    yield make
    for s in made:
        s.close(delete_files=True)


def _new_store(mk, name, config=PLAIN, rocksdb=RocksDbSettings()) -> Store:
    return mk(name, config, rocksdb).store


def _entries(store: Store, version=None, batch_ts=NOW):
    t = store.begin(store.version if version is None else version, True, batch_ts)
    try:
        return list(t.iterate(b""))
    finally:
        t.end()


def _raw_values(db_dir: str) -> dict[bytes, bytes]:
    db = Rdict(db_dir, Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return dict(db.items())
    finally:
        db.close()


def test_snapshot_is_a_checkpoint_with_a_manifest(mk, tmp_path):
    lin = mk("a", TTL_DB)
    lin.commit(puts=[b"k%04d" % i for i in range(1000)])
    lin.commit(puts=[b"x"], removes=[b"k0000"], batch_ts=NOW + 5)
    version, num_keys, path, ssts = lin.store.snapshot(str(tmp_path / "snap"))
    assert (version, num_keys) == (2, 1000)
    assert path == str(tmp_path / "snap" / "2.manifest")
    files = set(os.listdir(tmp_path / "snap" / "rocksdb"))
    m = manifest.read(path, 2)
    assert {f.local for f in m.ssts} | set(m.inline) == files
    assert {f for f in files if not f.endswith(".sst")} == set(m.inline)
    assert "CURRENT" in m.inline and any(f.startswith("MANIFEST-") for f in m.inline)
    assert any(f.startswith("OPTIONS-") for f in m.inline) and "rocksdict-config.json" in m.inline
    assert [(f.name, str(tmp_path / "snap" / "rocksdb" / f.local), f.size) for f in m.ssts] == ssts
    for f in m.ssts:
        assert re.fullmatch(r"\d{6}-[0-9a-f]{16}\.sst", f.name) and f.name[:6] == f.local[:6]
    assert (m.num_keys, m.layout, m.db_ttl, m.batch_ts) == (1000, LAYOUT_TTL, True, NOW + 5)
    assert dict(m.histogram) == {NOW: 999, NOW + 5: 1}
    with pytest.raises(StorageError, match="exists"):
        lin.store.snapshot(str(tmp_path / "snap"))


def test_snapshot_of_an_empty_store(mk):
    lin = mk("a", TTL_DB)
    assert lin.snapshot() == (0, 0, [])
    lin.commit(puts=[b"a"], changelog=False)
    lin.commit(removes=[b"a"], changelog=False)
    version, num_keys, names = lin.snapshot()
    assert (version, num_keys) == (2, 0)
    other = _new_store(mk, "b", TTL_DB)
    assert lin.load_into(other, 2, 2) == 0 and _entries(other) == []
    assert lin.load_into(other, 0, 0) == 0


def test_round_trip_with_changelogs_after_the_snapshot(mk):
    lin = mk("a", TTL)
    lin.commit(puts=[b"k%04d" % i for i in range(500)])
    lin.commit(puts=[b"k%04d" % i for i in range(0, 500, 7)], batch_ts=NOW + 1)
    lin.snapshot()
    lin.commit(removes=[b"k%04d" % i for i in range(100)], batch_ts=NOW + 2)
    lin.commit(puts=[b"new"], batch_ts=NOW + 3)
    expected = _entries(lin.store)
    for manifest_version in (0, 2):
        other = _new_store(mk, f"b{manifest_version}", TTL)
        assert lin.load_into(other, 4, manifest_version) == 401
        assert _entries(other) == expected
        assert (other.batch_ts, other.cursor) == (lin.store.batch_ts, lin.store.cursor)
        assert other.hist.counts == lin.store.hist.counts
        assert not other.migrated
        lin.load_into(other, 2, 2)  # the snapshot alone, loaded again into the same store
        assert other.version == 2 and other.num_keys == 500


def test_incremental_snapshot_reuses_names_of_files_it_already_named(mk):
    lin = mk("a", PLAIN)
    for part in range(2):  # two flushed files (fewer than RocksDB's L0 compaction trigger)
        lin.commit(puts=[b"k%06d" % i for i in range(part * 30_000, (part + 1) * 30_000)], changelog=False)
        _, _, names = lin.snapshot()
    assert len(names) == 2 and lin.uploaded == names
    lin.commit(puts=[b"k%06d" % i for i in range(0, 60_000, 100)], changelog=False)  # 1% updates
    _, num_keys, second = lin.snapshot()
    assert num_keys == 60_000
    assert set(names) < set(second) and len(second) == 3  # every SST reported, one new name
    assert lin.uploaded == names + sorted(set(second) - set(names))
    assert lin.store.ssts.keys() == {f.local for f in manifest.read(str(lin.root / "3.manifest")).ssts}
    # a store loaded from the manifest knows the names: a snapshot of it uploads nothing
    other = mk("b", PLAIN)
    other.root, other.uploaded = lin.root, list(lin.uploaded)
    lin.load_into(other.store, 3, 3)
    _, _, third = other.snapshot()
    assert third == second and other.uploaded == lin.uploaded


def test_names_are_unique_across_attempts_and_reset_by_a_load(mk):
    """Two stores loaded from one manifest name their new files differently, and a store
    reloaded from an older manifest forgets the names of files it made since."""
    lin = mk("a", PLAIN)
    lin.commit(puts=[b"a"], changelog=False)
    lin.snapshot()
    names = []
    for attempt in ("x", "y"):
        s = _new_store(mk, attempt)
        lin.load_into(s, 1, 1)
        t = s.begin(1, False)
        t.put(b"b", b"1")
        s.commit(t, 2, "")
        names.append(set(n for n, _, _ in s.snapshot(str(lin.tmp / f"s-{attempt}"))[3]))
    assert len(names[0] ^ names[1]) == 2 and len(names[0] & names[1]) == 1
    assert s.ssts  # now reload version 1: only the manifest's file is known
    lin.load_into(s, 1, 1)
    assert [f.name for f in s.ssts.values()] == [f.name for f in manifest.read(str(lin.root / "1.manifest")).ssts]


def test_load_links_ssts_into_a_fresh_directory(mk):
    lin = mk("a", PLAIN)
    lin.commit(puts=[b"k%04d" % i for i in range(1000)], changelog=False)
    lin.snapshot()
    other = _new_store(mk, "b")
    dirs = set()
    for _ in range(3):
        lin.load_into(other, 1, 1)
        dirs.add(other.db_dir)
        sst = manifest.read(str(lin.root / "1.manifest")).ssts[0]
        cached = lin.root / "sst" / sst.name
        assert os.stat(os.path.join(other.db_dir, sst.local)).st_ino == cached.stat().st_ino
    assert len(dirs) == 3
    assert os.listdir(other.local_dir) == [os.path.basename(other.db_dir)]  # old ones deleted


def test_load_copies_ssts_it_cannot_link(mk, tmp_path):
    """An SST on another file system (EXDEV) is copied, and still checked."""
    other_fs = "/dev/shm"
    if not os.path.isdir(other_fs) or os.stat(other_fs).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs a second file system")
    lin = mk("a", PLAIN)
    lin.commit(puts=[b"k%04d" % i for i in range(1000)], changelog=False)
    lin.snapshot()
    m = manifest.read(str(lin.root / "1.manifest"))
    away = tempfile.mkdtemp(dir=other_fs)
    try:
        ssts = {}
        for f in m.ssts:
            ssts[f.name] = shutil.copyfile(lin.root / "sst" / f.name, os.path.join(away, f.name))
        other = _new_store(mk, "b")
        assert other.load(1, NOW, 1, str(lin.root / "1.manifest"), ssts) == 1000
        assert len(_entries(other)) == 1000
        local = os.path.join(other.db_dir, m.ssts[0].local)
        assert os.stat(local).st_ino != os.stat(ssts[m.ssts[0].name]).st_ino
    finally:
        shutil.rmtree(away)


@pytest.mark.parametrize("damage", ["size", "bitflip", "missing", "not-given"])
def test_load_refuses_a_damaged_sst_naming_it_and_its_path(mk, damage):
    lin = mk("a", TTL)
    lin.commit(puts=[b"k%04d" % i for i in range(2000)])
    lin.snapshot()
    m = manifest.read(str(lin.root / "1.manifest"), 1)
    sst = m.ssts[0]
    path = lin.root / "sst" / sst.name
    ssts = {sst.name: str(path)}
    data = bytearray(path.read_bytes())
    if damage == "size":
        path.write_bytes(data[:-1])
    elif damage == "bitflip":
        data[len(data) // 3] ^= 0x80
        path.write_bytes(data)
    elif damage == "missing":
        path.unlink()
    else:
        ssts = {}
    other = _new_store(mk, "b", TTL)
    with pytest.raises(CorruptFileError) as e:
        other.load(1, NOW, 1, str(lin.root / "1.manifest"), ssts)
    assert sst.name in str(e.value) and "version 1" in str(e.value)
    if damage != "not-given":
        assert str(path) in str(e.value)
    assert other.version == -1 and other.num_keys == 0
    with pytest.raises(VersionMismatchError):
        other.begin(1, True)
    with pytest.raises(TtlstateError, match="no version"):
        other.snapshot(str(lin.tmp / "nope"))
    assert other.load(0) == 0 and _entries(other) == []


def test_load_checks_changelogs_follow_the_manifest(mk):
    lin = mk("a")
    for i in range(3):
        lin.commit(puts=[b"k%d" % i])
        if i == 0:
            lin.snapshot()
    other = _new_store(mk, "b")
    m = str(lin.root / "1.manifest")
    ssts = {f.name: str(lin.root / "sst" / f.name) for f in manifest.read(m).ssts}
    with pytest.raises(StorageError, match="is version 3, expected 2"):
        other.load(3, NOW, 1, m, ssts, [(3, str(lin.root / "3.changelog"))])
    with pytest.raises(StorageError, match="files end at version 2, asked to load 3"):
        other.load(3, NOW, 1, m, ssts, [(2, str(lin.root / "2.changelog"))])
    with pytest.raises(CorruptFileError, match="expected version 2"):
        other.load(2, NOW, 2, m, ssts)
    with pytest.raises(TtlstateError, match="no manifest path"):
        other.load(2, NOW, 1, "", {})
    assert other.load(3, NOW, 1, m, ssts, [(2, str(lin.root / "2.changelog")), (3, str(lin.root / "3.changelog"))]) == 3


def test_rocksdb_ttl_database_values_carry_a_4_byte_write_time(mk, tmp_path):
    """What the manifest's dbTtl is for: a plain database opened on the SSTs of RocksDB's
    TTL database sees each value with 4 more bytes (its write time, in seconds)."""
    lin = mk("a", TTL_DB)
    lin.commit(puts=[b"k"])
    before = int(time.time())
    _, _, path, _ = lin.store.snapshot(str(tmp_path / "snap"))
    raw = _raw_values(str(tmp_path / "snap" / "rocksdb"))[b"k"]
    stored = lin.store.db.get(b"k")  # what the TTL database returns: Flink layout, no suffix
    assert raw[:-4] == stored and len(raw) == len(stored) + 4
    assert abs(int.from_bytes(raw[-4:], "little") - before) <= 5
    assert manifest.read(path).db_ttl


@pytest.mark.parametrize("src", list(KINDS))
@pytest.mark.parametrize("dst", list(KINDS))
def test_load_migrates_layout_and_database_kind(mk, src, dst):
    lin = mk("src", KINDS[src])
    lin.commit(puts=[b"k%04d" % i for i in range(300)], batch_ts=NOW)
    lin.commit(removes=[b"k0000"], puts=[b"late"], batch_ts=NOW + 10)
    lin.snapshot()
    lin.commit(puts=[b"after"], batch_ts=NOW + 20)  # a changelog after the manifest
    store = _new_store(mk, "dst", KINDS[dst])
    restore = NOW + 1000
    assert lin.load_into(store, 3, 2, batch_ts=restore) == 301
    assert store.migrated == (src != dst)
    entries = dict(_entries(store, batch_ts=restore))
    assert len(entries) == 301 and entries[b"k0001"] == b"v-k0001" and entries[b"after"] == b"v-after"
    if store.ttl_ms:
        hist = store.hist.counts
        if src == "plain":  # values gaining a TTL get the restore time (the changelog's too)
            assert hist == {restore: 301}
        else:
            assert hist == {NOW: 299, NOW + 10: 1, NOW + 20: 1}
    # the migrated database snapshots with new names only, and loads back without migrating
    lin2 = mk("dst-lineage", KINDS[dst])
    lin2.store.close(delete_files=True)
    lin2.store = store
    _, _, names = lin2.snapshot()
    if src != dst:
        assert not set(names) & set(lin.uploaded)
    again = _new_store(mk, "again", KINDS[dst])
    assert lin2.load_into(again, 3, 3, batch_ts=restore) == 301 and not again.migrated
    assert dict(_entries(again, batch_ts=restore)) == entries


def test_compaction_filter_snapshot_into_a_plain_database_and_back(mk, tmp_path):
    """TTL with the compaction filter -> TTL without it -> with it again: values never keep
    (or lose) RocksDB's 4-byte write time."""
    a = mk("a", TTL_DB)
    a.commit(puts=[b"k1", b"k2"])
    a.snapshot()
    b = mk("b", TTL)
    b.root, b.uploaded = a.root, a.uploaded
    a.load_into(b.store, 1, 1)
    assert b.store.migrated and b.store.db.get(b"k1") == a.store.db.get(b"k1")
    b.commit(puts=[b"k3"], batch_ts=NOW + 1)
    b.snapshot()
    b.store.snapshot(str(tmp_path / "b-snap"))
    raw = _raw_values(str(tmp_path / "b-snap" / "rocksdb"))
    assert raw[b"k1"] == a.store.db.get(b"k1")  # 8-byte timestamp + value, nothing after
    c = _new_store(mk, "c", TTL_DB)
    b.load_into(c, 2, 2)
    assert c.migrated
    assert dict(_entries(c)) == {b"k1": b"v-k1", b"k2": b"v-k2", b"k3": b"v-k3"}
    c.snapshot(str(tmp_path / "c-snap"))
    raw = _raw_values(str(tmp_path / "c-snap" / "rocksdb"))
    assert {k: v[:-4] for k, v in raw.items()} == {k: c.db.get(k) for k in raw}
    assert len(raw[b"k3"]) == 8 + len(b"v-k3") + 4


def test_full_snapshot_cleanup_keeps_open_transactions_views(mk):
    cfg = TtlConfig(ttl_ms=1000, compaction_filter=False, cleanup_in_background=False,
                    full_snapshot=True, state_visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP)
    lin = mk("a", cfg)
    lin.commit(puts=[b"old%d" % i for i in range(10)], batch_ts=0)
    lin.commit(puts=[b"new"], batch_ts=5000)
    reader = lin.store.begin(2, True, 5000)
    view = list(reader.iterate(b""))
    assert len(view) == 11  # expired entries are returned until cleaned up
    writer = lin.store.begin(2, False, 5000)
    writer.put(b"old0", b"x")  # touched before the snapshot
    _, num_keys, _ = lin.snapshot()
    assert num_keys == 1
    assert list(reader.iterate(b"")) == view  # the reader keeps its version
    assert reader.get(b"old5") == b"v-old5"
    writer.put(b"old1", b"y")  # touched after the snapshot
    writer.remove(b"old2")
    assert writer.get(b"old3") == b"v-old3"  # returned once, and cleaned up
    assert writer.get(b"old3") is None
    assert writer.num_keys == 3
    reader.end()
    lin.store.commit(writer, 3, "")
    assert lin.store.num_keys == 3 == sum(1 for _ in lin.store.db.keys())
    assert lin.store.hist.counts == {5000: 3}


def test_full_snapshot_cleanup_leaves_expired_entries_out_of_the_ssts(mk):
    cfg = TtlConfig(ttl_ms=1000, compaction_filter=False, cleanup_in_background=False, full_snapshot=True)
    lin = mk("a", cfg)
    lin.commit(puts=[b"old%05d" % i for i in range(5000)], batch_ts=0)
    lin.snapshot()  # nothing expired yet: all kept
    first = manifest.read(str(lin.root / "1.manifest"))
    assert first.num_keys == 5000
    lin.commit(puts=[b"new%03d" % i for i in range(100)], batch_ts=2000)
    _, num_keys, names = lin.snapshot()
    assert num_keys == 100
    other = _new_store(mk, "b", cfg)
    lin.load_into(other, 2, 2, batch_ts=2000)
    assert other.num_keys == 100 == sum(1 for _ in other.db.keys())
    assert sum(f["num_entries"] for f in other.db.live_files()) == 100
    assert other.hist.counts == {2000: 100}


def test_read_transaction_open_during_snapshot_keeps_its_view(mk):
    lin = mk("a", TTL_DB)
    lin.commit(puts=[b"k%04d" % i for i in range(3000)])
    reader = lin.store.begin(1, True, NOW)
    it = reader.iterate(b"")
    head = [next(it) for _ in range(10)]
    lin.snapshot()
    lin.commit(removes=[b"k%04d" % i for i in range(0, 3000, 2)], batch_ts=NOW + 1)
    lin.snapshot()
    assert len(head + list(it)) == 3000  # the iterator began before: all of version 1
    assert len(list(reader.iterate(b""))) == 3000 and reader.get(b"k0000") == b"v-k0000"
    assert lin.store.num_keys == 1500


def test_snapshot_after_migration_clears_the_request_for_one(mk):
    plain = mk("plain", PLAIN)
    plain.commit(puts=[b"a"])
    on = mk("on", TTL)
    plain.load_into(on.store, 1, 0)
    assert on.store.migrated
    on.root = plain.root
    on.commit(puts=[b"b"])
    assert on.store.migrated  # snapshotWanted until a snapshot is written
    on.snapshot()
    assert not on.store.migrated


def test_manifest_only_load_does_not_scan(mk):
    """A load that migrates nothing takes count and histogram from the manifest."""
    n = 200_000
    lin = mk("a", TTL_DB)
    s = lin.store
    t = s.begin(0, False, NOW)
    for i in range(n):
        t.put(b"key%08d" % i, b"value-%d" % i)
    s.commit(t, 1, "")
    lin.snapshot()
    other = _new_store(mk, "b", TTL_DB)
    assert lin.load_into(other, 1, 1) == n
    stats = other.opts.get_statistics()
    assert re.search(r"rocksdb\.number\.db\.next COUNT : 0\b", stats), "the load iterated"
    assert other.num_keys == n and other.hist.counts == {NOW: n}  # from the manifest
    ttl_cleanup.recount(other)  # what a scan finds agrees
    assert other.num_keys == n and other.hist.counts == {NOW: n}


def test_a_ttl_database_loaded_from_a_snapshot_keeps_its_entries_through_compaction(mk):
    # docs/decisions/093-store-options-not-snapshot-options.md: the snapshot's OPTIONS file once
    # wrapped its TTL compaction filter into the new
    # one; the inner filter read the value's last bytes as a write time and dropped live entries
    lin = mk("a", TTL_DB)
    keys = [b"k%04d" % i for i in range(500)]
    lin.commit(puts=keys)
    lin.snapshot()
    loaded = _new_store(mk, "b", TTL_DB)
    assert lin.load_into(loaded, 1, 1) == 500
    assert options_file(loaded)["compaction_filter_factory"].count("TtlCompactionFilterFactory") == 1
    loaded.db.compact_range(None, None)
    assert _entries(loaded) == [(k, b"v-" + k) for k in keys]
    assert len(_raw_values(loaded.db_dir)) == 500


def test_a_database_loaded_from_a_snapshot_runs_with_the_loading_stores_options(mk):
    # docs/decisions/093-store-options-not-snapshot-options.md: not with those of the OPTIONS file
    # the snapshot carries (another block size here)
    lin = mk("a", rocksdb=RocksDbSettings(block_bytes=4096))
    lin.commit(puts=[b"k%04d" % i for i in range(100)])
    lin.snapshot()
    assert options_file(lin.store)["block_size"] == "4096"
    loaded = _new_store(mk, "b")  # ttlstate's default options
    assert lin.load_into(loaded, 1, 1) == 100
    assert options_file(loaded)["block_size"] == str(rocksdb_options.DEFAULT_BLOCK_BYTES)
    assert len(_entries(loaded)) == 100


def test_a_database_loaded_from_a_snapshot_shares_the_workers_block_cache(mk):
    # docs/decisions/093-store-options-not-snapshot-options.md: it got a block cache of its own
    # from the snapshot's OPTIONS file, outside the budget
    bounded = RocksDbSettings(bounded_total_bytes=64 << 20)
    lin = mk("a", rocksdb=bounded)
    lin.commit(puts=[b"k%06d" % i for i in range(50_000)])
    lin.snapshot()
    loaded, other = _new_store(mk, "b", rocksdb=bounded), _new_store(mk, "c", rocksdb=bounded)
    assert lin.load_into(loaded, 1, 1) == 50_000
    before = other.db.property_int_value("rocksdb.block-cache-usage")
    t = loaded.begin(1, True)
    assert all(t.get(b"k%06d" % i) == b"v-k%06d" % i for i in range(0, 50_000, 7))
    t.end()
    grown = other.db.property_int_value("rocksdb.block-cache-usage") - before
    assert grown > 1 << 20  # the blocks the loaded store read are in the cache the others use
    assert loaded.db.property_int_value("rocksdb.block-cache-usage") == \
        other.db.property_int_value("rocksdb.block-cache-usage")
