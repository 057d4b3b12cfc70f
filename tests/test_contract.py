"""Provider-level contract of Spark 4.3 (Spark's `StateStore` and `StateStoreProvider` API; the
contract notes these tests were first written from are outside this repository and not needed:
each test states the rule it checks), driven through py4j on the real provider, the real
service and real checkpoint files."""

import os
import random
import shutil
import time

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from jvm_state import CACHE_DIR_KEY, FORMAT_KEY, HDFS, MODE_KEY, TTLSTATE, JvmState, new_root


# A JVM exception reaches Python as py4j's error, or as PySpark's converted one.
JavaError = (Py4JJavaError, CapturedException)


def _error(excinfo) -> str:
    e = excinfo.value
    return str(e.java_exception) if isinstance(e, Py4JJavaError) else str(e)


def _condition(excinfo) -> str:
    e = excinfo.value
    try:
        if isinstance(e, Py4JJavaError):
            return e.java_exception.getCondition() or ""
        return e.getCondition() or ""
    except Exception:  # not a SparkThrowable
        return ""


def test_get_put_remove_commit_iterator_and_durability(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root)
    s = js.get_store(p, 0)
    assert s.version() == 0 and js.get(s, "a", 1) is None and js.data(s) == {}
    js.put(s, "a", 1, 10)
    js.put(s, "b", 2, 20)
    js.put(s, "c", 3, 30)
    js.remove(s, "b", 2)
    js.remove(s, "zz", 0)  # missing key: no-op
    assert js.get(s, "a", 1) == 10 and js.get(s, "b", 2) is None
    assert s.keyExists(js.key("c", 3), "default") and not s.keyExists(js.key("b", 2), "default")
    assert js.data(s) == {("a", 1): 10, ("c", 3): 30}
    assert not s.hasCommitted()
    assert s.commit() == 1 and s.hasCommitted()
    assert js.data(s) == {("a", 1): 10, ("c", 3): 30}  # iterator works after commit
    with pytest.raises(JavaError) as e:
        js.put(s, "d", 4, 40)
    assert "after already committed or aborted" in _error(e)
    p.close()

    fresh = js.provider(root)  # a new instance reads only what is durable
    s2 = js.get_store(fresh, 1)
    assert js.data(s2) == {("a", 1): 10, ("c", 3): 30}
    js.put(s2, "a", 1, 11)
    assert s2.commit() == 2
    assert js.data(js.get_store(js.provider(root), 1)) == {("a", 1): 10, ("c", 3): 30}
    assert js.data(js.get_store(js.provider(root), 2)) == {("a", 1): 11, ("c", 3): 30}
    with pytest.raises(JavaError) as e:
        js.get_store(js.provider(root), 3)
    assert "does not exist" in _error(e) and "3" in _error(e)
    assert _condition(e).startswith("CANNOT_LOAD_STATE_STORE")


def test_put_null_and_rows_reused_by_the_caller(js, tmp_path):
    p = js.provider(new_root(tmp_path))
    s = js.get_store(p, 0)
    with pytest.raises(JavaError) as e:
        s.put(js.key("a", 1), None, "default")
    assert "Cannot put a null value" in _error(e)
    key, value = js.key("a", 1), js.value(5)
    s.put(key, value, "default")
    key.setInt(1, 99)  # the caller reuses its rows
    value.setInt(0, 77)
    assert js.get(s, "a", 1) == 5 and js.get(s, "a", 99) is None
    s.commit()
    assert js.data(js.get_store(js.provider(p.stateStoreId().checkpointRootLocation()), 1)) == {("a", 1): 5}


def test_prefix_scan_with_uncommitted_writes_abort_and_reload(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root, prefix_cols=1)
    s = js.get_store(p, 0)
    keys = [(k1, k2) for k1 in ("x", "y", "zz") for k2 in range(4)]
    for i, (k1, k2) in enumerate(reversed(keys)):
        js.put(s, k1, k2, i)
    got = js.pairs(s.prefixScan(js.prefix("y"), "default"))
    assert sorted(got) == [("y", k2) for k2 in range(4)]
    assert js.pairs(s.prefixScan(js.prefix("nope"), "default")) == {}
    assert s.commit() == 1
    s = js.get_store(js.provider(root, prefix_cols=1), 1)
    js.put(s, "y", 9, 9)
    assert sorted(js.pairs(s.prefixScan(js.prefix("y"), "default"))) == [("y", k2) for k2 in (0, 1, 2, 3, 9)]
    s.abort()
    s = js.get_store(js.provider(root, prefix_cols=1), 1)
    assert sorted(js.pairs(s.prefixScan(js.prefix("y"), "default"))) == [("y", k2) for k2 in range(4)]
    assert js.get(s, "zz", 3) is not None


def test_num_keys_exact_including_uncommitted_and_memory(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root)
    s = js.get_store(p, 0)
    for i in range(5):
        js.put(s, "k", i, i)
    js.put(s, "k", 0, 100)  # overwrite: still 5 keys
    assert s.metrics().numKeys() == 5
    js.remove(s, "k", 1)
    js.remove(s, "k", 1)
    assert s.metrics().numKeys() == 4
    s.commit()
    m = s.metrics()
    assert m.numKeys() == 4 and m.memoryUsedBytes() > 0
    names = {metric.name() for metric in js.jvm.scala.jdk.javaapi.CollectionConverters.asJava(m.customMetrics().keySet())}
    assert {"ttlstateCommitMs", "ttlstateUploadedBytes"} <= names
    s = js.get_store(js.provider(root), 1)
    js.remove(s, "k", 2)
    assert s.metrics().numKeys() == 3
    assert s.commit() == 2 and s.metrics().numKeys() == 3


def test_removing_while_iterating(js, tmp_path):
    p = js.provider(new_root(tmp_path))
    s = js.get_store(p, 0)
    for i in range(3000):  # several iterator chunks
        js.put(s, "k", i, i)
    s.commit()
    s = js.get_store(p, 1)
    it = s.iterator("default")
    seen = 0
    while it.hasNext():
        pair = it.next()
        k = js.decode_key(pair.key())
        if k[1] % 2 == 0:
            s.remove(pair.key().copy(), "default")
        else:
            js.put(s, "new", k[1], 1)
        seen += 1
    assert seen == 3000
    assert s.metrics().numKeys() == 3000
    after = js.data(s)
    assert len(after) == 3000 and all(k[0] == "new" or k[1] % 2 for k in after)


def test_abort_is_idempotent_and_never_touches_committed_data(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root)
    s = js.get_store(p, 0)
    js.put(s, "a", 1, 1)
    s.commit()
    s.abort()  # after commit: no-op
    s = js.get_store(p, 1)
    js.put(s, "a", 1, 2)
    js.put(s, "b", 1, 2)
    s.abort()
    s.abort()
    with pytest.raises(JavaError):
        js.put(s, "c", 1, 1)
    assert js.data(js.get_store(p, 1)) == {("a", 1): 1}
    assert js.data(js.get_store(js.provider(root), 1)) == {("a", 1): 1}


def test_invalid_versions_older_versions_and_recommit(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root)
    with pytest.raises(JavaError) as e:
        js.get_store(p, -1)
    assert _condition(e) == "CANNOT_LOAD_STATE_STORE.UNEXPECTED_VERSION"
    with pytest.raises(JavaError) as e:
        js.get_store(p, 1)
    assert "does not exist" in _error(e)
    for v in range(3):
        s = js.get_store(p, v)
        js.put(s, "v", v, v)
        assert s.commit() == v + 1
    assert set(js.data(js.get_store(p, 1))) == {("v", 0)}
    # a task retry re-commits version 2 with other content: the new content wins
    s = js.get_store(p, 1)
    js.put(s, "retry", 0, 0)
    assert s.commit() == 2
    assert set(js.data(js.get_store(js.provider(root), 2))) == {("v", 0), ("retry", 0)}
    s = js.get_store(p, 1)
    assert s.commit() == 2 and set(js.data(js.get_store(js.provider(root), 2))) == {("v", 0)}


def test_read_store_and_write_store_coexist(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root)
    s = js.get_store(p, 0)
    js.put(s, "a", 1, 1)
    s.commit()
    read = p.getReadStore(1, js.none)
    write = js.get_store(p, 1)
    assert js.get(read, "a", 1) == 1
    js.put(write, "a", 1, 2)
    js.put(write, "b", 1, 3)
    assert js.get(read, "a", 1) == 1 and js.get(write, "a", 1) == 2
    assert write.commit() == 2
    assert js.get(read, "a", 1) == 1 and js.data(read) == {("a", 1): 1}
    read.abort()
    read.release()
    assert js.data(js.get_store(js.provider(root), 2)) == {("a", 1): 2, ("b", 1): 3}


def test_checkpoint_info_format_v1(js, tmp_path):
    p = js.provider(new_root(tmp_path), part=3)
    s = js.get_store(p, 0)
    js.put(s, "a", 1, 1)
    s.commit()
    info = s.getStateStoreCheckpointInfo()
    assert (info.partitionId(), info.batchVersion()) == (3, 1)
    assert info.stateStoreCkptId().isEmpty() and info.baseStateStoreCkptId().isEmpty()


def _store_dir(root, op=0, part=0):
    return os.path.join(root, str(op), str(part))


def _files(root, op=0, part=0):
    """Visible file names of a store directory (no Hadoop .crc side files, no sst/ dir)."""
    d = _store_dir(root, op, part)
    return sorted(n for n in os.listdir(d) if not n.startswith(".") and n != "sst") if os.path.isdir(d) else []


def _ssts(root, op=0, part=0):
    d = os.path.join(_store_dir(root, op, part), "sst")
    return {n for n in os.listdir(d) if not n.startswith(".")} if os.path.isdir(d) else set()


def _manifest_ssts(root, name, op=0, part=0):
    from ttlstate import manifest
    return {f.name for f in manifest.read(os.path.join(_store_dir(root, op, part), name)).ssts}


def _versions(names, suffix):
    return sorted(int(n.split(".")[0].split("_")[0]) for n in names if n.endswith(suffix))


def _commit_random(js, p, version, rng, model, n=60, keys=200):
    """One version of random puts and removes over `keys` keys, applied to `model` too."""
    s = js.get_store(p, version)
    for _ in range(n):
        k = ("k", rng.randrange(keys))
        if rng.random() < 0.8:
            model[k] = rng.randrange(10_000)
            js.put(s, *k, model[k])
        else:
            model.pop(k, None)
            js.remove(s, *k)
    assert s.commit() == version + 1
    return s


def test_maintenance_snapshots_and_retention(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root, conf=js.store_conf(**{
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "3",
        "spark.sql.streaming.minBatchesToRetain": "2"}))
    for v in range(12):
        s = js.get_store(p, v)
        js.put(s, "k", v, v)
        s.commit()
        p.doMaintenance()
    names = _files(root)
    manifests, changelogs = _versions(names, ".manifest"), _versions(names, ".changelog")
    assert manifests and not any(n.endswith(".snapshot") for n in names)
    base = max(m for m in manifests if m <= 11)  # newest manifest at or below 12 - 2 + 1
    assert manifests == [m for m in manifests if m >= base], names
    # every version after the base, and the retained versions' own (docs/decisions/094-state-rules-audit.md g)
    assert changelogs == list(range(min(base + 1, 11), 13)), names
    assert "1.changelog" not in names  # cleaned: not needed to recover versions 11-12
    referenced = set().union(*(_manifest_ssts(root, f"{m}.manifest") for m in manifests))
    assert _ssts(root) == referenced
    for v in (11, 12):  # the retained versions load in a fresh provider
        assert len(js.data(js.get_store(js.provider(root), v))) == v


def test_maintenance_snapshots_a_large_changelog_before_min_deltas(js, tmp_path):
    """A version whose changelog is large (over 1 MiB) is snapshotted by the next maintenance
    even before `minDeltasForSnapshot` versions (docs/decisions/103-large-changelog-snapshots.md):
    as Spark's RocksDB provider
    snapshots a version with over 10,000 changes, so a restart after a large batch does not
    replay it. A small changelog after that waits for `minDeltasForSnapshot` as before."""
    import base64
    root = new_root(tmp_path)
    p = js.provider(root, conf=js.store_conf(**{"spark.sql.streaming.stateStore.minDeltasForSnapshot": "10"}))
    s = js.get_store(p, 0)
    rng = random.Random(7)
    for i in range(400):  # 400 keys of 4 KiB of incompressible text: a changelog of over 1 MiB
        js.put(s, base64.b64encode(rng.randbytes(3072)).decode(), i, i)
    s.commit()
    changelog = os.path.join(_store_dir(root), "1.changelog")
    assert os.path.getsize(changelog) > 1 << 20, os.path.getsize(changelog)
    p.doMaintenance()
    assert _versions(_files(root), ".manifest") == [1]
    s = js.get_store(p, 1)
    js.put(s, "small", 1, 1)
    s.commit()
    p.doMaintenance()  # 1 small changelog since the snapshot, minDeltasForSnapshot 10: none
    assert _versions(_files(root), ".manifest") == [1]
    p.close()


def test_a_snapshot_due_while_a_batch_writes_is_taken_at_its_commit(js, tmp_path):
    """Snapshot maintenance that finds a snapshot due while a write store is open does not
    write one then (the worker's database is being written); before
    docs/decisions/100-snapshot-at-commit-when-due.md it skipped the
    round, and a store that was busy whenever maintenance ran went on without snapshots (a
    restart replayed every changelog). Now the write store's commit takes it."""
    root = new_root(tmp_path)
    p = js.provider(root)  # minDeltasForSnapshot 3
    for v in range(3):
        s = js.get_store(p, v)
        js.put(s, "k", v, v)
        s.commit()
    p.doMaintenance()  # idle, 3 changelogs since version 0: a snapshot now
    assert _versions(_files(root), ".manifest") == [3]
    for v in range(3, 6):
        s = js.get_store(p, v)
        js.put(s, "k", v, v)
        s.commit()
    s = js.get_store(p, 6)
    js.put(s, "k", 6, 6)
    p.doSnapshotMaintenance()  # due (3 changelogs since version 3), but version 7 is being written
    assert _versions(_files(root), ".manifest") == [3]
    s.commit()
    assert _versions(_files(root), ".manifest") == [3, 7]
    s = js.get_store(p, 7)  # the next commit snapshots no more
    js.put(s, "k", 7, 7)
    s.commit()
    assert _versions(_files(root), ".manifest") == [3, 7]
    assert js.data(js.get_store(js.provider(root), 8)) == {("k", v): v for v in range(8)}


def test_force_snapshot_on_commit(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root)
    s = js.get_store(p, 0, force_snapshot=True)
    js.put(s, "a", 1, 1)
    s.commit()
    assert _files(root) == ["1.changelog", "1.manifest"]
    assert _ssts(root) == _manifest_ssts(root, "1.manifest") != set()
    m = js.custom_metrics(s)
    assert m["ttlstateSnapshotMs"] > 0 and m["ttlstateCommitMs"] >= m["ttlstateSnapshotMs"]
    assert m["ttlstateUploadedFiles"] == 2 + len(_ssts(root))  # changelog, manifest, SSTs


def test_snapshot_mode_uploads_only_new_ssts(js, tmp_path):
    root = new_root(tmp_path)
    conf = js.store_conf(**{MODE_KEY: "snapshot"})
    p = js.provider(root, conf=conf)
    s = js.get_store(p, 0)
    for i in range(500):
        js.put(s, "k", i, i)
    s.commit()
    assert _files(root) == ["1.manifest"]  # no changelog in snapshot mode
    first = _manifest_ssts(root, "1.manifest")
    m1 = js.custom_metrics(s)
    assert m1["ttlstateUploadedFiles"] == len(first) + 1 and m1["ttlstateReusedFiles"] == 0
    assert m1["ttlstateUploadedBytes"] > 0 and m1["ttlstateSnapshotMs"] > 0

    s = js.get_store(p, 1)
    js.put(s, "new", 1, 1)
    s.commit()
    assert _files(root) == ["1.manifest", "2.manifest"]
    second = _manifest_ssts(root, "2.manifest")
    m2 = js.custom_metrics(s)
    new = second - first
    assert m2["ttlstateReusedFiles"] == len(second & first) > 0
    assert m2["ttlstateUploadedFiles"] == len(new) + 1  # the new SSTs and the manifest
    assert _ssts(root) == first | second
    # a fresh provider (a mode switch is fine: it reads either mode's files)
    fresh = js.provider(root)
    data = js.data(js.get_store(fresh, 2))
    assert len(data) == 501 and data[("new", 1)] == 1
    assert len(js.data(js.get_store(fresh, 1))) == 500


def test_load_from_manifest_and_changelogs_in_a_fresh_provider(js, tmp_path):
    root = new_root(tmp_path)
    rng, model, models = random.Random(3), {}, {0: {}}
    p = js.provider(root)
    for v in range(6):
        if v == 2:  # version 3 gets a manifest at commit
            s = js.get_store(p, v, force_snapshot=True)
            for i in range(40):
                js.put(s, "k", i, -i)
                model[("k", i)] = -i
            s.commit()
        else:
            _commit_random(js, p, v, rng, model)
        models[v + 1] = dict(model)
    assert _versions(_files(root), ".manifest") == [3]
    for v in (6, 3, 4, 1):
        other = JvmState(js.spark, cache_dir=str(tmp_path / f"cache-{v}"))  # nothing cached
        s = other.get_store(other.provider(root), v)
        assert js.data(s) == models[v], v
        m = js.custom_metrics(s)
        assert m["ttlstateDownloadedBytes"] > 0 and m["ttlstateLoadMs"] > 0, (v, m)


def test_checkpoint_format_v2_loads_exactly_the_named_lineage(js, tmp_path):
    root = new_root(tmp_path)
    conf = js.store_conf(**{FORMAT_KEY: "2"})
    p = js.provider(root, conf=conf)
    s = js.get_store(p, 0)
    js.put(s, "a", 1, 1)
    with pytest.raises(JavaError) as e:
        s.getStateStoreCheckpointInfo()
    assert _condition(e) == "STATE_STORE_OPERATION_OUT_OF_ORDER"
    assert s.commit() == 1
    id1, base = js.checkpoint_ids(s)
    assert id1 and base is None
    assert s.getStateStoreCheckpointInfo().batchVersion() == 1

    # two attempts at version 2, both built on (1, id1), each with its own id
    ids = {}
    for value in (10, 20):
        s = js.get_store(p, 1, id1)
        js.put(s, "x", 1, value)
        assert s.commit() == 2
        ids[value], base = js.checkpoint_ids(s)
        assert base == id1
        time.sleep(0.05)  # distinct modification times for the newest-file rule
    assert ids[10] != ids[20]
    assert sorted(_files(root)) == sorted([f"1_{id1}_0.changelog", f"2_{ids[10]}_{id1}.changelog",
                                           f"2_{ids[20]}_{id1}.changelog"])
    fresh = js.provider(root, conf=conf)
    for value in (10, 20, 10):  # switching lineages reloads
        assert js.data(js.get_store(fresh, 2, ids[value])) == {("a", 1): 1, ("x", 1): value}
    # no id, nothing loaded: the newest file of version 2 (with an id of the loaded version, reuse)
    assert js.get(js.get_store(js.provider(root, conf=conf), 2), "x", 1) == 20

    # version 3 on each lineage; lineage 10 snapshots at commit (manifest named by its id)
    ids3 = {}
    for value, force in ((10, True), (20, False)):
        s = js.get_store(p, 2, ids[value], force_snapshot=force)
        js.put(s, "y", 1, value)
        s.commit()
        ids3[value], base = js.checkpoint_ids(s)
        assert base == ids[value]
    assert f"3_{ids3[10]}.manifest" in _files(root)
    for value in (10, 20):
        got = js.data(js.get_store(js.provider(root, conf=conf), 3, ids3[value]))
        assert got == {("a", 1): 1, ("x", 1): value, ("y", 1): value}
    with pytest.raises(JavaError) as e:
        js.get_store(js.provider(root, conf=conf), 3, "no-such-id")
    assert "does not exist" in _error(e) and _condition(e).startswith("CANNOT_LOAD_STATE_STORE")



def test_a_snapshot_mode_retry_deletes_the_changelog_of_an_earlier_attempt(js, tmp_path):
    """Format v1: a run in changelog mode uploaded version 3's changelog and failed before Spark
    committed the batch; the re-run, in snapshot mode, writes 3.manifest and must delete
    3.changelog, or a replay from an older snapshot (Spark's state reader) mixes the two
    attempts (found by an audit)."""
    root = new_root(tmp_path)
    p = js.provider(root)
    for v in range(3):
        s = js.get_store(p, v)
        js.put(s, "k", v, v)
        s.commit()
    assert _files(root) == ["1.changelog", "2.changelog", "3.changelog"]
    s = js.get_store(js.provider(root, conf=js.store_conf(**{MODE_KEY: "snapshot"})), 2)
    js.put(s, "k", 2, 20)
    s.commit()
    assert _files(root) == ["1.changelog", "2.changelog", "3.manifest"]
    assert js.data(js.get_store(js.provider(root), 3)) == {("k", 0): 0, ("k", 1): 1, ("k", 2): 20}


def test_retention_deletes_unreferenced_ssts_and_keeps_every_retained_version(js, tmp_path):
    root = new_root(tmp_path)
    conf = js.store_conf(**{"spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
                            "spark.sql.streaming.minBatchesToRetain": "3"})
    p = js.provider(root, conf=conf)
    rng, model, models, orphans = random.Random(5), {}, {}, set()
    for v in range(16):
        if v in (3, 8):  # a first attempt with a snapshot, then a task retry re-commits v + 1:
            before = _ssts(root)  # the retry drops the stale manifest, orphaning its new SSTs
            s = js.get_store(p, v, force_snapshot=True)
            js.put(s, "attempt", v, v)
            s.commit()
            orphans |= _ssts(root) - before
        _commit_random(js, p, v, rng, model, n=150, keys=300)
        models[v + 1] = dict(model)
        p.doMaintenance()
    names = _files(root)
    manifests, changelogs = _versions(names, ".manifest"), _versions(names, ".changelog")
    base = max(m for m in manifests if m <= 16 - 3 + 1)
    assert manifests == [m for m in manifests if m >= base], names
    # the changelogs the plans need, and those of the retained versions 14-16 (their change feed)
    assert changelogs == list(range(min(base + 1, 16 - 3 + 1), 17)), names
    referenced = set().union(*(_manifest_ssts(root, f"{m}.manifest") for m in manifests))
    assert orphans and _ssts(root) == referenced and not orphans & referenced
    other = JvmState(js.spark, cache_dir=str(tmp_path / "other-cache"))
    for v in range(14, 17):
        assert other.data(other.get_store(other.provider(root, conf=conf), v)) == models[v], v
    with pytest.raises(JavaError) as e:
        other.get_store(other.provider(root, conf=conf), 1)
    assert "does not exist" in _error(e)


def test_local_cache_serves_a_second_provider_and_a_lost_cache_downloads(js, tmp_path):
    root = new_root(tmp_path)
    rng, model = random.Random(9), {}
    p = js.provider(root)
    for v in range(4):
        if v == 1:
            s = js.get_store(p, v, force_snapshot=True)
            js.put(s, "snap", 1, 1)
            model[("snap", 1)] = 1
            s.commit()
        else:
            _commit_random(js, p, v, rng, model)
    p.close()
    cache = tmp_path / "cache"

    s = js.get_store(js.provider(root), 4)  # same machine, same cache: nothing downloaded
    m = js.custom_metrics(s)
    assert js.data(s) == model
    assert m["ttlstateDownloadedBytes"] == 0 and m["ttlstateReusedFiles"] >= 3, m

    shutil.rmtree(cache)  # a lost cache: everything is downloaded again
    s = js.get_store(js.provider(root), 4)
    m = js.custom_metrics(s)
    assert js.data(s) == model
    assert m["ttlstateDownloadedBytes"] > 0 and m["ttlstateReusedFiles"] == 0, m

    # a damaged cached SST (same size, other bytes): dropped and downloaded once more
    cached = [os.path.join(d, n) for d, _, ns in os.walk(cache) for n in ns if n.endswith(".sst")]
    assert cached
    for path in cached:
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0xFF
        with open(path + ".new", "wb") as f:  # a new inode: a hard-linked database keeps its file
            f.write(data)
        os.replace(path + ".new", path)
    s = js.get_store(js.provider(root), 4)
    m = js.custom_metrics(s)
    assert js.data(s) == model
    assert m["ttlstateDownloadedBytes"] > 0, m


MAX_AGE_KEY = "spark.sql.streaming.stateStore.ttlstate.checkpoint.localCacheMaxAge"


@pytest.mark.parametrize("max_age, swept", [("7d", True), ("0", False)])
def test_maintenance_sweeps_cache_dirs_no_store_used_for_max_age(js, tmp_path, max_age, swept):
    """The local cache's store directories unused for `localCacheMaxAge` (a query gone long
    ago) are deleted by a maintenance of any store with the same cache root; the store's own,
    recently used ones and names that are not a store's are kept; 0 keeps everything."""
    cache = tmp_path / "cache"
    week_ago = time.time() - 8 * 24 * 3600

    def store_dir(name, mtime=None):
        d = cache / name
        (d / "sst").mkdir(parents=True)
        (d / "sst" / "000001-0123456789abcdef.sst").write_bytes(b"x" * 100)
        (d / "1.changelog#100#1").write_bytes(b"y" * 100)
        if mtime:
            os.utime(d, (mtime, mtime))
        return d

    gone = store_dir("0_3_default_0123456789abcdef", week_ago)  # its query stopped 8 days ago
    recent = store_dir("1_0_left-keyToNumValues_fedcba9876543210")  # used now
    other = store_dir("notes", week_ago)  # not a store's: never ours to delete
    root = new_root(tmp_path)
    p = js.provider(root, conf=js.store_conf(**{MAX_AGE_KEY: max_age}))
    for v in range(3):
        s = js.get_store(p, v)
        js.put(s, "k", v, v)
        s.commit()
    own = [d for d in cache.iterdir() if d.name.startswith("0_0_default_")]
    os.utime(own[0], (week_ago, week_ago))  # marked used again by the maintenance itself
    p.doMaintenance()
    assert gone.exists() is not swept
    assert recent.exists() and other.exists() and own[0].exists()
    assert len(own) == 1 and any(own[0].iterdir())
    p.close()
    assert js.data(js.get_store(js.provider(root), 3)) == {("k", v): v for v in range(3)}


def test_failed_upload_fails_the_commit_and_leaves_no_version(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root, conf=js.store_conf(**{MODE_KEY: "snapshot"}))
    s = js.get_store(p, 0)
    js.put(s, "a", 1, 1)
    s.commit()
    blocker = os.path.join(_store_dir(root), "sst")
    shutil.rmtree(blocker)
    open(blocker, "w").close()  # a file where the sst/ directory must be: SST uploads fail
    s = js.get_store(p, 1)
    js.put(s, "b", 1, 2)
    with pytest.raises(JavaError) as e:
        s.commit()
    err = _error(e)
    assert _condition(e) == "CANNOT_WRITE_STATE_STORE.CANNOT_COMMIT"
    assert "TTLSTATE_CHECKPOINT_WRITE" in err and "/sst/" in err and "version 2" in err, err
    assert _files(root) == ["1.manifest"]
    os.remove(blocker)
    # the retry of the batch: the version is reloaded (the worker's one was never durable)
    s = js.get_store(p, 1)
    js.put(s, "b", 1, 3)
    assert s.commit() == 2
    assert js.data(js.get_store(js.provider(root), 2)) == {("a", 1): 1, ("b", 1): 3}


def test_metrics_reach_query_progress(spark, tmp_path):
    import streaming as st
    files = st.generate_events(3, 30, seed=5)
    st.write_files(tmp_path / "in", files)
    result = st.run_query(spark, TTLSTATE, st.agg_by_key, "update", tmp_path / "in", tmp_path / "ck",
                          confs={CACHE_DIR_KEY: str(tmp_path / "cache"), MODE_KEY: "snapshot"})
    ops = [op for p in result.progress for op in p.get("stateOperators", [])]
    names = {"ttlstateUploadedBytes", "ttlstateUploadedFiles", "ttlstateReusedFiles",
             "ttlstateDownloadedBytes", "ttlstateCommitMs", "ttlstateLoadMs", "ttlstateSnapshotMs"}
    assert names <= result.custom_metric_names()
    total = {n: sum(op["customMetrics"][n] for op in ops) for n in names}
    assert total["ttlstateCommitMs"] > 0 and total["ttlstateSnapshotMs"] > 0, total
    assert total["ttlstateUploadedBytes"] > 0 and total["ttlstateUploadedFiles"] > 0, total
    assert total["ttlstateReusedFiles"] > 0, total  # later snapshots reuse earlier SSTs


def test_supported_custom_metrics_on_an_uninitialised_instance(js):
    p = js.pkg.StateStoreProvider.create(TTLSTATE)
    metrics = js.jvm.scala.jdk.javaapi.CollectionConverters.asJava(p.supportedCustomMetrics())
    names = {m.name() for m in metrics}
    assert {"ttlstateCommitMs", "ttlstateLoadMs", "ttlstateSnapshotMs", "ttlstateUploadedBytes",
            "ttlstateUploadedFiles", "ttlstateReusedFiles", "ttlstateDownloadedBytes",
            "ttlstateRoundTrips"} <= names
    p.close()  # close without init, twice
    p.close()


def test_close_is_idempotent_and_iterators_survive_it(js, tmp_path):
    p = js.provider(new_root(tmp_path))
    s = js.get_store(p, 0)
    for i in range(20):
        js.put(s, "k", i, i)
    s.commit()
    s = js.get_store(p, 1)
    it = s.iterator("default")
    first = it.next()
    p.close()
    p.close()
    rest = 1
    while it.hasNext():
        it.next()
        rest += 1
    assert rest == 20 and js.decode_key(first.key())[0] == "k"


def test_refuses_what_it_cannot_serve_with_sparks_error_classes(js, tmp_path):
    pkg = js.pkg
    root = new_root(tmp_path)
    with pytest.raises(JavaError) as e:
        js.provider(root, multi=True)
    assert _condition(e) == "STATE_STORE_UNSUPPORTED_OPERATION"
    ordinals = js.jvm.java.util.ArrayList()
    ordinals.add(1)
    seq = js.jvm.scala.jdk.javaapi.CollectionConverters.asScala(ordinals).toList()
    with pytest.raises(JavaError) as e:
        js.provider(root, spec=pkg.RangeKeyScanStateEncoderSpec(js.key_schema, seq))
    assert _condition(e) == "STATE_STORE_UNSUPPORTED_OPERATION"
    p = js.provider(root)  # checkpoint format 1: Spark never passes ids, and one passed is refused
    with pytest.raises(JavaError) as e:
        p.getStore(1, js.some("some-id"), False, False)
    assert _condition(e) == "STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED"
    with pytest.raises(JavaError) as e:
        p.getStore(0, js.none, False, True)
    assert "loadEmpty" in _error(e)
    s = js.get_store(p, 0)
    with pytest.raises(JavaError) as e:
        s.put(js.key("a", 1), js.value(1), "other_cf")
    assert "COLUMN_FAMIL" in _condition(e) or "COLUMN_FAMIL" in _error(e)
    with pytest.raises(JavaError) as e:
        s.merge(js.key("a", 1), js.value(1), "default")
    assert _condition(e) == "STATE_STORE_UNSUPPORTED_OPERATION"
    assert js.jvm.scala.jdk.javaapi.CollectionConverters.asJava(s.allColumnFamilyNames()).toString() == "[default]"
    s.abort()


def test_invalid_ttlstate_conf_fails_with_key_value_and_allowed(js, tmp_path):
    key = "spark.sql.streaming.stateStore.ttlstate.iteratorChunkEntries"
    p = js.provider(new_root(tmp_path), conf=js.store_conf(**{key: "zero"}))
    with pytest.raises(JavaError) as e:
        js.get_store(p, 0)
    assert key in _error(e) and "'zero'" in _error(e) and "integer" in _error(e)


def test_same_answers_as_hdfs_provider_on_a_random_workload(js, tmp_path):
    import random
    rng = random.Random(11)
    roots = {cls: new_root(tmp_path) for cls in (TTLSTATE, HDFS)}
    providers = {cls: js.provider(root, cls=cls) for cls, root in roots.items()}
    for v in range(6):
        ops = [(rng.random() < 0.7, f"k{rng.randrange(50)}", rng.randrange(5), rng.randrange(1000))
               for _ in range(200)]
        results = {}
        for cls, p in providers.items():
            s = js.get_store(p, v)
            for is_put, k1, k2, val in ops:
                if is_put:
                    js.put(s, k1, k2, val)
                else:
                    js.remove(s, k1, k2)
            results[cls] = (js.data(s), s.metrics().numKeys(), s.commit())
        assert results[TTLSTATE] == results[HDFS]
    for cls, root in roots.items():
        results[cls] = js.data(js.get_store(js.provider(root, cls=cls), 6))
    assert results[TTLSTATE] == results[HDFS] and len(results[HDFS]) > 50
