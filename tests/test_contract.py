"""Provider-level contract of Spark 4.3 (shared/spark-4.3-state-store-contract.md), driven
through py4j on the real provider, the real service and real checkpoint files."""

import os

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from jvm_state import HDFS, TTLSTATE, JvmState, new_root


@pytest.fixture
def js(spark):
    return JvmState(spark)


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


def _files(root, op=0, part=0):
    d = os.path.join(root, str(op), str(part))
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


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
    names = [n for n in _files(root) if not n.startswith(".")]
    assert any(n.endswith(".snapshot") for n in names)
    assert "1.changelog" not in names  # cleaned: not needed to recover versions 11-12
    for v in (11, 12):  # the retained versions load in a fresh provider
        assert len(js.data(js.get_store(js.provider(root), v))) == v
    snaps = [int(n.split(".")[0]) for n in names if n.endswith(".snapshot")]
    assert min(snaps) <= 11


def test_force_snapshot_on_commit(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root)
    s = p.getStore(0, js.none, True, False)
    js.put(s, "a", 1, 1)
    s.commit()
    assert "1.snapshot" in _files(root) and "1.changelog" in _files(root)


def test_supported_custom_metrics_on_an_uninitialised_instance(js):
    p = js.pkg.StateStoreProvider.create(TTLSTATE)
    metrics = js.jvm.scala.jdk.javaapi.CollectionConverters.asJava(p.supportedCustomMetrics())
    names = {m.name() for m in metrics}
    assert {"ttlstateCommitMs", "ttlstateLoadMs", "ttlstateUploadedBytes", "ttlstateUploadedFiles",
            "ttlstateDownloadedBytes", "ttlstateRoundTrips"} <= names
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
    with pytest.raises(JavaError) as e:
        js.provider(root, conf=js.store_conf(**{"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}))
    assert _condition(e) == "STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED"
    p = js.provider(root)
    with pytest.raises(JavaError) as e:
        p.getStore(0, js.jvm.scala.Option.apply("some-id"), False, False)
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
