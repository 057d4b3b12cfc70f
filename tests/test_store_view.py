"""The JVM's view of the loaded version (value cache and key filter) and the read store that
an aggregation upgrades: through Spark's provider API (py4j), real provider, service and files.

Each test counts round trips (`ttlstateRoundTrips`) and the view's answers
(`ttlstateCacheHits`, `ttlstateFilterSkips`, `ttlstateCacheMisses`) and checks every answer
against what was written, so a cache that answered wrongly fails as surely as one that did
not answer.
"""

import struct

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from jvm_state import JvmState, new_root
from test_ttl_contract import offsets

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
JavaError = (Py4JJavaError, CapturedException)


class _RowsFromBytes(JvmState):
    """JvmState whose key and value rows are the UnsafeRow bytes Spark's projection makes
    (checked against it in the `js` fixture), built here and handed to the JVM whole, and whose
    iterators' rows are read back as bytes: the tests put, get and iterate thousands of keys,
    and each py4j call costs CPU in both processes. A key took 7 calls (an array, its items, a
    GenericInternalRow, the projection, a copy), a value 5, an iterated entry 8; now 2, 2 and 6.
    The stores get byte-identical rows, so what they answer is what they answered before."""

    def _unsafe_row(self, fields: int, data: bytes):
        row = self._unsafe_row_class(fields)
        row.pointTo(bytearray(data), len(data))
        return row

    @staticmethod
    def key_bytes(k1: str, k2: int) -> bytes:
        # null bits (one word); key1's (offset << 32 | size); key2 in its 8-byte word; key1's bytes padded to words
        s = k1.encode()
        return struct.pack("<qqi4x", 0, (24 << 32) | len(s), k2) + s + bytes(-len(s) % 8)

    @staticmethod
    def value_bytes(v: int) -> bytes:
        return struct.pack("<qi4x", 0, v)

    def key(self, k1: str, k2: int):
        return self._unsafe_row(2, self.key_bytes(k1, k2))

    def value(self, v: int):
        return self._unsafe_row(1, self.value_bytes(v))

    @staticmethod
    def _decode_key_bytes(b: bytes) -> tuple:
        size_offset, k2 = struct.unpack_from("<qi", b, 8)
        offset, size = size_offset >> 32, size_offset & 0xFFFFFFFF
        return b[offset:offset + size].decode(), k2

    def pairs(self, it) -> dict:
        out = {}
        while it.hasNext():
            pair = it.next()
            value = pair.value()
            out[self._decode_key_bytes(bytes(pair.key().getBytes()))] = (
                None if value is None else struct.unpack_from("<i", bytes(value.getBytes()), 8)[0])
        return out


@pytest.fixture
def js(spark, tmp_path):
    s = _RowsFromBytes(spark, cache_dir=str(tmp_path / "cache"))
    s._unsafe_row_class = s.jvm.org.apache.spark.sql.catalyst.expressions.UnsafeRow
    plain = JvmState(spark)
    for k1, k2 in (("k", 0), ("k", -1), ("bb", 65536), ("x" * 200, 7), ("c" * 40, 2**31 - 1), ("", 3)):
        assert bytes(plain.key(k1, k2).getBytes()) == s.key_bytes(k1, k2) == bytes(s.key(k1, k2).getBytes())
        assert s._decode_key_bytes(s.key_bytes(k1, k2)) == (k1, k2)
    for v in (0, -5, 2**31 - 1):
        assert bytes(plain.value(v).getBytes()) == s.value_bytes(v) == bytes(s.value(v).getBytes())
    return s


def _commit_keys(js, p, version: int, keys, value=lambda i: i):
    s = js.get_store(p, version)
    for i in keys:
        js.put(s, "k", i, value(i))
    assert s.commit() == version + 1
    return s


def test_reads_of_a_committed_version_cost_no_round_trip(js, tmp_path):
    p = js.provider(new_root(tmp_path))
    _commit_keys(js, p, 0, range(300))
    s = js.get_store(p, 1)
    assert all(js.get(s, "k", i) == i for i in range(300))  # written at v1: cached
    absent = sum(js.get(s, "k", i) is None for i in range(1000, 2000))
    assert absent == 1000
    m = js.custom_metrics(s)
    assert m["ttlstateCacheHits"] == 300
    assert m["ttlstateFilterSkips"] >= 950, m  # the issue's bar: 95% of absent lookups
    # BEGIN, STATS (for these metrics) and the filter's false positives
    assert m["ttlstateRoundTrips"] <= 2 + (1000 - m["ttlstateFilterSkips"]), m
    js.put(s, "k", 5, 55)  # read-your-writes of the open version, before and after a flush
    js.remove(s, "k", 6)
    assert js.get(s, "k", 5) == 55 and js.get(s, "k", 6) is None
    assert s.commit() == 2
    s = js.get_store(p, 2)
    assert js.get(s, "k", 5) == 55 and js.get(s, "k", 6) is None and js.get(s, "k", 7) == 7
    assert js.custom_metrics(s)["ttlstateCacheBytes"] > 0


def test_a_fresh_provider_builds_its_filter_and_cache_from_the_checkpoint(js, tmp_path):
    root = new_root(tmp_path)
    _commit_keys(js, js.provider(root), 0, range(500))
    fresh = js.provider(root)
    s = js.get_store(fresh, 1)  # loads from the checkpoint, then reads its keys once
    assert all(js.get(s, "k", i) == i for i in range(0, 500, 7))
    assert all(js.get(s, "k", i) is None for i in range(500, 1500))
    m = js.custom_metrics(s)
    assert m["ttlstateCheckpointLoads"] == 1
    assert m["ttlstateCacheHits"] == len(range(0, 500, 7))
    assert m["ttlstateFilterSkips"] >= 950, m


def test_a_store_answers_the_same_with_the_view_off(js, tmp_path):
    conf = js.store_conf(**{PREFIX + "cache.maxBytes": "0", PREFIX + "keyFilter.enabled": "false"})
    root = new_root(tmp_path)
    p = js.provider(root, conf=conf)
    _commit_keys(js, p, 0, range(50))
    s = js.get_store(p, 1)
    assert [js.get(s, "k", i) for i in range(60)] == list(range(50)) + [None] * 10
    m = js.custom_metrics(s)
    assert m["ttlstateCacheHits"] == 0 and m["ttlstateFilterSkips"] == 0
    assert m["ttlstateRoundTrips"] == 1 + 60 + 1  # BEGIN, every GET, STATS


def test_the_cache_stays_within_its_budget(js, tmp_path):
    budget, keys = 32 * 1024, 2000  # about 250 of the 2,000 values fit
    conf = js.store_conf(**{PREFIX + "cache.maxBytes": str(budget)})
    p = js.provider(new_root(tmp_path), conf=conf)
    s = _commit_keys(js, p, 0, range(keys))
    filter_bytes = 1024 * 16 // 8  # the filter's first stage holds 1,024 keys, the second 2,048
    assert 0 < js.custom_metrics(s)["ttlstateCacheBytes"] <= budget + 3 * filter_bytes
    s = js.get_store(p, 1)
    assert all(js.get(s, "k", i) == i for i in range(keys))  # evicted values come from the worker
    m = js.custom_metrics(s)
    assert m["ttlstateCacheMisses"] > 0 and m["ttlstateCacheHits"] + m["ttlstateCacheMisses"] == keys


def test_a_store_that_rewrites_its_values_keeps_few_dead_bytes(js, tmp_path):
    """A small state rewritten every batch (a session window's) leaves its old bytes dead in
    the cache's slabs: once they outweigh the live ones, a commit moves the live entries and
    frees the slabs (docs/decisions/075-slab-compaction-at-commit.md), instead of holding them
    until the budget (128 MiB) presses."""
    p = js.provider(new_root(tmp_path))
    k1, keys, versions = "x" * 200, 100, 40  # about 25 KiB a version, 1 MiB in all
    peak = 0
    for version in range(versions):
        s = js.get_store(p, version)
        for i in range(keys):
            js.put(s, k1, i, version)
        assert s.commit() == version + 1
        peak = max(peak, js.custom_metrics(s)["ttlstateCacheBytes"])
    s = js.get_store(p, versions)
    assert js.data(s) == {(k1, i): versions - 1 for i in range(keys)}
    m = js.custom_metrics(s)
    assert m["ttlstateResidentScans"] == 1, m  # nothing was evicted: the view is still complete
    # the live entries (about 25 KiB), at most one slab (256 KiB) of dead ones, the head slab's
    # room and the key filter; without compaction the slabs grew to 1 MiB
    assert peak <= 640 * 1024, peak


def test_a_busy_store_uses_what_an_idle_one_leaves_of_the_budget(js, tmp_path):
    # two stores with one budget: an equal share would be half of it each
    budget, keys = 64 * 1024, 2000  # the busy store's 2,000 values need about 4x the budget
    conf = js.store_conf(**{PREFIX + "cache.maxBytes": str(budget)})
    idle = _commit_keys(js, js.provider(new_root(tmp_path), conf=conf), 0, range(10))
    busy_p = js.provider(new_root(tmp_path), conf=conf)
    _commit_keys(js, busy_p, 0, range(keys))  # the warm-up after it fills at most a share
    busy = js.get_store(busy_p, 1)
    assert all(js.get(busy, "k", i) == i for i in range(keys))  # values read are remembered
    filter_bytes = 1024 * 16 // 8  # one filter stage of 1,024 keys
    idle_bytes = js.custom_metrics(idle)["ttlstateCacheBytes"]
    busy_bytes = js.custom_metrics(busy)["ttlstateCacheBytes"]
    assert busy_bytes - 3 * filter_bytes > budget // 2  # more than an equal share of values
    assert idle_bytes + busy_bytes <= budget + 4 * filter_bytes  # together within the budget


def test_a_store_below_its_share_takes_it_back_from_one_above_it(js, tmp_path):
    # the first store fills the whole budget while it is alone; a second one opened later (a
    # new query's, while a stopped query's stores are still loaded) must still get its half.
    # Caches share a budget by its size: one no other test uses keeps this test's views alone.
    budget, keys = 72 * 1024, 2000
    conf = js.store_conf(**{PREFIX + "cache.maxBytes": str(budget)})
    first = _commit_keys(js, js.provider(new_root(tmp_path), conf=conf), 0, range(keys))
    filter_bytes = 1024 * 16 // 8
    assert js.custom_metrics(first)["ttlstateCacheBytes"] > budget * 3 // 4
    second_p = js.provider(new_root(tmp_path), conf=conf)
    second = _commit_keys(js, second_p, 0, range(keys))  # its writes are cached as it commits
    first_bytes = js.custom_metrics(first)["ttlstateCacheBytes"]
    second_bytes = js.custom_metrics(second)["ttlstateCacheBytes"]
    assert second_bytes - 3 * filter_bytes > budget // 4, (first_bytes, second_bytes)
    assert first_bytes + second_bytes <= budget + 6 * filter_bytes, (first_bytes, second_bytes)
    s = js.get_store(second_p, 1)
    recent = range(keys - 100, keys)  # the last written are the newest values it holds
    assert all(js.get(s, "k", i) == i for i in recent)
    assert js.custom_metrics(s)["ttlstateCacheHits"] == len(recent)


def test_a_cached_value_is_never_served_after_it_expired(js, tmp_path):
    root = new_root(tmp_path / "ckpt")
    p = js.provider(root, conf=js.store_conf(**{PREFIX + "ttl": "1s",
                                                PREFIX + "cleanup.inBackground": "false"}))
    offsets(root, 0, 10_000)
    _commit_keys(js, p, 0, [1, 2])  # written at 10_000: live until 11_000
    offsets(root, 1, 10_999)
    s = js.get_store(p, 1)
    assert js.get(s, "k", 1) == 1 and js.get(s, "k", 2) == 2
    assert js.custom_metrics(s)["ttlstateCacheHits"] == 2
    assert s.commit() == 2  # nothing written: the cached values keep their expiry
    offsets(root, 2, 11_000)
    s = js.get_store(p, 2)
    assert js.get(s, "k", 1) is None and js.get(s, "k", 2) is None
    m = js.custom_metrics(s)
    assert m["ttlstateCacheHits"] == 0 and m["ttlstateExpiredOnRead"] == 2  # the worker cleaned them


def test_on_read_and_write_refreshes_entries_the_cache_answers(js, tmp_path):
    root = new_root(tmp_path / "ckpt")
    conf = {PREFIX + "ttl": "1s", PREFIX + "updateType": "OnReadAndWrite", PREFIX + "cleanup.inBackground": "false"}
    p = js.provider(root, conf=js.store_conf(**conf))
    offsets(root, 0, 10_000)
    _commit_keys(js, p, 0, [1, 2])
    offsets(root, 1, 10_900)
    s = js.get_store(p, 1)
    assert js.get(s, "k", 1) == 1  # a cache hit, refreshed to 10_900 as the worker would
    assert js.custom_metrics(s)["ttlstateCacheHits"] == 1
    s.commit()
    offsets(root, 2, 11_500)
    s = js.get_store(js.provider(root, conf=js.store_conf(**conf)), 2)  # a fresh provider: the worker decides
    assert js.get(s, "k", 1) == 1 and js.get(s, "k", 2) is None



def test_an_aborted_refresh_on_read_is_not_remembered(js, tmp_path):
    """A write transaction beside an open read store keeps its writes apart; the worker's
    refresh on its read is part of them. Aborted, the refresh must leave the view too, or the
    retry sees the refreshed expiry, skips the refresh, and a later batch is served a value
    the worker holds as expired (found by an audit)."""
    root = new_root(tmp_path / "ckpt")
    conf = js.store_conf(**{PREFIX + "ttl": "1s", PREFIX + "updateType": "OnReadAndWrite",
                            PREFIX + "cleanup.inBackground": "false", PREFIX + "keyFilter.enabled": "false"})
    offsets(root, 0, 10_000)
    _commit_keys(js, js.provider(root, conf=conf), 0, [1])  # k1 expires at 11_000
    p = js.provider(root, conf=conf)  # a fresh provider: an empty view
    offsets(root, 1, 10_500)
    read = p.getReadStore(1, js.none)
    w = js.get_store(p, 1)
    assert js.get(w, "k", 1) == 1  # the worker refreshes k1 to 11_500 in the transaction
    w.abort()
    read.abort()
    w = js.get_store(p, 1)  # the retry of batch 1
    assert js.get(w, "k", 1) == 1
    assert w.commit() == 2
    offsets(root, 2, 11_200)  # live only if the retry refreshed it
    s = js.get_store(p, 2)
    same = js.get(s, "k", 1)
    s.abort()
    s = js.get_store(js.provider(root, conf=conf), 2)  # a fresh provider: the worker decides
    assert js.get(s, "k", 1) == 1 and same == 1


def test_a_post_commit_scan_the_jvm_serves_ends_its_read_transaction(js, tmp_path):
    """A store's iterator after its commit reads through a read transaction on the worker.
    Served from the JVM in several chunks and walked to the end without close(), it left that
    transaction open: each later commit copied pre-images into it (found by an audit)."""
    p = js.provider(new_root(tmp_path), conf=js.store_conf(**{PREFIX + "iteratorChunkEntries": "100"}))
    s = _commit_keys(js, p, 0, range(500))
    assert len(js.data(s)) == 500  # five chunks from the JVM's complete view, not closed
    s = js.get_store(p, 1)
    assert js.custom_metrics(s)["ttlstateOpenTransactions"] == 0
    s.abort()

def test_an_upgraded_read_store_ends_before_the_write_store_commits(js, tmp_path):
    """Spark's aggregation reads through a read store and upgrades it to the write store; it
    never ends the read store, so the write store must, or its transaction stays open on the
    worker and receives the pre-images of every later commit."""
    p = js.provider(new_root(tmp_path))
    _commit_keys(js, p, 0, range(10))
    for version in range(1, 6):
        read = p.getReadStore(version, js.none)
        assert js.get(read, "k", 3) == 3
        write = p.upgradeReadStoreToWriteStore(read, version, js.none, False)
        assert js.get(read, "k", 4) == 4  # still usable while the write store works
        js.put(write, "k", 100 + version, version)
        assert write.commit() == version + 1
        assert js.custom_metrics(write)["ttlstateOpenTransactions"] == 0
        with pytest.raises(JavaError) as e:
            js.get(read, "k", 3)
        assert "has ended" in str(e.value)
    assert js.data(js.get_store(p, 6)) == {**{("k", i): i for i in range(10)},
                                           **{("k", 100 + v): v for v in range(1, 6)}}


def test_latency_tracking_reports_percentiles_of_sampled_accesses(js, tmp_path):
    on = js.store_conf(**{PREFIX + "latencyTracking.enabled": "true",
                          PREFIX + "latencyTracking.sampleInterval": "2"})
    for conf, tracked in ((on, True), (js.store_conf(), False)):
        p = js.provider(new_root(tmp_path), conf=conf)
        s = js.get_store(p, 0)
        for i in range(40):
            js.put(s, "k", i, i)
            assert js.get(s, "k", i) == i and js.get(s, "k", 1000 + i) is None
        s.commit()
        m = js.custom_metrics(s)
        names = ("ttlstateLatencyGetP50Micros", "ttlstateLatencyGetP99Micros", "ttlstateLatencyPutP50Micros",
                 "ttlstateLatencyPutP99Micros", "ttlstateLatencyCommitMaxMs")
        if tracked:
            assert all(m[n] > 0 for n in names), m
            assert m["ttlstateLatencyGetP99Micros"] >= m["ttlstateLatencyGetP50Micros"]
            assert m["ttlstateLatencyPutP99Micros"] >= m["ttlstateLatencyPutP50Micros"]
            assert m["ttlstateLatencyCommitMaxMs"] == m["ttlstateCommitMs"]
        else:
            assert all(m[n] == 0 for n in names), m


# -- iterators served from a complete view (no worker) -----------------------------------

def _walk_removing(js, store, drop):
    """Iterates `store` as Spark's watermark eviction does: removes entries while it walks."""
    seen = {}
    it = store.iterator("default")
    while it.hasNext():
        pair = it.next()
        k, v = js.decode_key(pair.key()), js.decode_value(pair.value())
        seen[k] = v
        if drop(k):
            store.remove(pair.key(), "default")
    return seen


def test_iterating_a_version_the_view_holds_entirely_needs_no_worker(js, tmp_path):
    root = new_root(tmp_path)
    p = js.provider(root)
    _commit_keys(js, p, 0, range(300))  # an empty version grown by this provider: complete
    s = js.get_store(p, 1)
    js.put(s, "k", 1000, 1)  # the open transaction's own write is part of what it iterates
    before = js.custom_metrics(s)["ttlstateRoundTrips"]
    seen = _walk_removing(js, s, lambda k: k[1] % 2 == 0)
    expected = {("k", i): i for i in range(300)} | {("k", 1000): 1}
    assert seen == expected
    m = js.custom_metrics(s)
    assert m["ttlstateResidentScans"] == 1
    assert m["ttlstateRoundTrips"] - before <= 1, m  # the metrics' STATS only
    kept = {k: v for k, v in expected.items() if k[1] % 2}
    assert js.data(s) == kept  # the removes made while walking are visible to the next iterator
    assert s.commit() == 2
    assert js.data(js.get_store(js.provider(root), 2)) == kept  # the worker wrote what the JVM iterated


def test_an_iterator_sees_its_transaction_as_it_was_when_first_used(js, tmp_path):
    p = js.provider(new_root(tmp_path))
    _commit_keys(js, p, 0, range(5))
    s = js.get_store(p, 1)
    it = s.iterator("default")
    js.put(s, "k", 7, 7)  # before the first hasNext: seen, as on the worker (ITER_OPEN at first use)
    first = it.hasNext()
    js.put(s, "k", 8, 8)  # after it: not seen
    assert first and js.pairs(it) == {("k", i): i for i in (0, 1, 2, 3, 4, 7)}
    assert js.custom_metrics(s)["ttlstateResidentScans"] == 1


def test_a_transaction_beside_another_overlays_its_writes_on_the_view(js, tmp_path):
    p = js.provider(new_root(tmp_path))
    _commit_keys(js, p, 0, range(10))
    read = p.getReadStore(1, js.none)  # open beside the writer: the writer keeps an overlay
    write = js.get_store(p, 1)
    js.put(write, "k", 3, 33)
    js.remove(write, "k", 4)
    js.put(write, "k", 20, 20)
    expected = {("k", i): i for i in range(10) if i != 4} | {("k", 3): 33, ("k", 20): 20}
    assert js.data(write) == expected
    assert js.data(read) == {("k", i): i for i in range(10)}
    assert js.custom_metrics(write)["ttlstateResidentScans"] == 1
    assert write.commit() == 2
    assert js.data(js.get_store(p, 2)) == expected


def test_a_view_that_lost_a_value_iterates_through_the_worker(js, tmp_path):
    budget = 32 * 1024  # about 250 of the 2,000 values fit
    root = new_root(tmp_path)
    p = js.provider(root, conf=js.store_conf(**{PREFIX + "cache.maxBytes": str(budget)}))
    _commit_keys(js, p, 0, range(2000))
    s = js.get_store(p, 1)
    assert js.data(s) == {("k", i): i for i in range(2000)}
    assert js.custom_metrics(s)["ttlstateResidentScans"] == 0
    # a fresh provider whose warm-up reads the whole version into its cache is complete again
    fresh = js.provider(root)
    s = js.get_store(fresh, 1)
    assert js.data(s) == {("k", i): i for i in range(2000)}
    assert js.get(s, "k", 5000) is None
    m = js.custom_metrics(s)
    assert m["ttlstateResidentScans"] == 1 and m["ttlstateCheckpointLoads"] == 1
    assert m["ttlstateCacheMisses"] == 0  # a complete view answers absent keys without its filter


def test_ttl_stores_scan_their_view_where_the_workers_scan_does_no_more(js, tmp_path):
    """docs/decisions/102-ttl-batch-clock-fast-paths.md: on the batch clock, under OnCreateAndWrite
    and NeverReturnExpired, a TTL
    store's complete view serves a full scan, without the values expired at the transaction's
    clock, and so does a fresh provider's view after its warm-up (which caches the live entries
    only); under OnReadAndWrite the worker's iterator refreshes what it returns, so scans go
    there."""
    root = new_root(tmp_path / "ckpt")
    p = js.provider(root, conf=js.store_conf(**{PREFIX + "ttl": "1s"}))
    offsets(root, 0, 10_000)
    _commit_keys(js, p, 0, range(10))  # expire at 11,000
    offsets(root, 1, 10_500)
    s = js.get_store(p, 1)
    assert js.data(s) == {("k", i): i for i in range(10)}
    assert js.custom_metrics(s)["ttlstateResidentScans"] == 1
    for i in range(10, 15):
        js.put(s, "k", i, i)  # expire at 11,500
    assert s.commit() == 2
    offsets(root, 2, 11_200)
    live = {("k", i): i for i in range(10, 15)}
    s = js.get_store(p, 2)
    assert js.data(s) == live
    assert js.custom_metrics(s)["ttlstateResidentScans"] == 1
    fresh = js.provider(root, conf=js.store_conf(**{PREFIX + "ttl": "1s"}))
    s = js.get_store(fresh, 2)
    assert js.data(s) == live
    assert js.custom_metrics(s)["ttlstateResidentScans"] == 1

    root = new_root(tmp_path / "ckpt-read-and-write")
    p = js.provider(root, conf=js.store_conf(**{PREFIX + "ttl": "1s", PREFIX + "updateType": "OnReadAndWrite"}))
    offsets(root, 0, 10_000)
    _commit_keys(js, p, 0, range(10))
    offsets(root, 1, 10_500)
    s = js.get_store(p, 1)
    assert js.data(s) == {("k", i): i for i in range(10)}
    assert js.custom_metrics(s)["ttlstateResidentScans"] == 0


def _scan(js, store, k1) -> list:
    """A prefix scan's ((key1, key2), value) pairs, sorted (Spark requires no order of a prefix scan)."""
    it = store.prefixScan(js.prefix(k1), "default")
    out = []
    while it.hasNext():
        pair = it.next()
        out.append((js.decode_key(pair.key()), js.decode_value(pair.value())))
    assert len(set(k for k, _ in out)) == len(out), out  # no key twice
    return sorted(out)


_GROUPS = {"a": list(range(0, 420, 7)), "bb": [3, 1, 256, 65536, 2], "c" * 40: list(range(5))}
_SCANNED = [*_GROUPS, "new", "nope"]


@pytest.mark.parametrize("beside", [False, True], ids=["direct", "beside-a-reader"])
def test_a_prefix_scan_of_a_version_the_view_holds_entirely_needs_no_worker(js, tmp_path, beside):
    """Session windows scan each key's sessions twice a batch: from a complete view they cost
    no round trip, and answer what the worker answers, own writes included."""
    tiny = {PREFIX + "cache.maxBytes": "4096"}  # the view loses values: the worker answers
    confs = {"whole": js.store_conf(), "off": js.store_conf(**{PREFIX + "cache.maxBytes": "0"}),
             "tiny": js.store_conf(**tiny)}
    answers, metrics = {}, {}
    for name, conf in confs.items():
        root = new_root(tmp_path / name)
        p = js.provider(root, prefix_cols=1, conf=conf)
        s = js.get_store(p, 0)
        for k1, k2s in _GROUPS.items():
            for k2 in k2s:
                js.put(s, k1, k2, k2)
        assert s.commit() == 1
        read = p.getReadStore(1, js.none) if beside else None  # the writer then overlays its writes
        s = js.get_store(p, 1)
        js.put(s, "a", 1000, 1)
        js.put(s, "bb", 256, -1)
        js.remove(s, "bb", 3)
        js.put(s, "new", 7, 7)
        before = js.custom_metrics(s)["ttlstateRoundTrips"]
        answers[name, "open"] = [_scan(js, s, k1) for k1 in _SCANNED]
        metrics[name] = js.custom_metrics(s), before
        if read is not None:
            answers[name, "reader"] = [_scan(js, read, k1) for k1 in _SCANNED]
            read.abort()
        assert s.commit() == 2
        s = js.get_store(p, 2)
        answers[name, "committed"] = [_scan(js, s, k1) for k1 in _SCANNED]
        s.abort()
    expected = dict(_GROUPS) | {"new": [7], "nope": []}
    expected["a"] = expected["a"] + [1000]
    expected["bb"] = [1, 256, 65536, 2]
    for name in confs:
        got = answers[name, "open"]
        assert [[k2 for (_, k2), _ in pairs] for pairs in got] == [sorted(expected[k]) for k in _SCANNED]
        assert all(v == (-1 if k2 == 256 else 1 if k2 == 1000 else k2) for pairs in got for (_, k2), v in pairs)
        assert answers[name, "committed"] == got
    for key in answers:  # the same entries, whoever answered
        assert answers[key] == answers[("off",) + key[1:]], key
    if beside:  # the reader sees the committed version without the writer's writes
        assert [[k2 for (_, k2), _ in pairs] for pairs in answers["off", "reader"]] == \
            [sorted(_GROUPS.get(k1, [])) for k1 in _SCANNED]
    m, before = metrics["whole"]
    assert m["ttlstateResidentScans"] == len(_SCANNED), m
    assert m["ttlstateRoundTrips"] - before <= 1, m  # the metrics' STATS only
    for name in ("off", "tiny"):
        assert metrics[name][0]["ttlstateResidentScans"] == 0, (name, metrics[name])


@pytest.mark.parametrize("filter_on", ["true", "false"])
def test_writes_after_reads_the_worker_answered_keep_the_key_count(js, tmp_path, filter_on):
    """With the cache off, a write's presence hint comes from the worker's answer to an
    earlier read of the key (what an aggregation over a state larger than the cache does:
    read every key, then write it). A wrong hint would miscount the keys."""
    conf = js.store_conf(**{PREFIX + "cache.maxBytes": "0", PREFIX + "keyFilter.enabled": filter_on})
    p = js.provider(new_root(tmp_path), conf=conf)
    _commit_keys(js, p, 0, range(300))
    s = js.get_store(p, 1)
    assert [js.get(s, "k", i) for i in range(250, 350)] == list(range(250, 300)) + [None] * 50
    for i in range(250, 350):  # 50 over present keys, 50 new
        js.put(s, "k", i, i + 1)
    for i in (0, 1, 2, 400, 401):  # removes of keys read present and absent
        assert js.get(s, "k", i) == (i if i < 300 else None)
        js.remove(s, "k", i)
    js.remove(s, "k", 250)  # a key written in this transaction
    assert s.commit() == 2
    assert s.metrics().numKeys() == 300 + 50 - 3 - 1
    assert js.data(js.get_store(p, 2)) == {("k", i): (i if i < 250 else i + 1) for i in range(3, 350) if i != 250}


@pytest.mark.parametrize("batch_bytes", ["1", "262144"])
def test_a_key_written_again_after_its_read_keeps_the_key_count(js, tmp_path, batch_bytes):
    """The worker's answer to a read says whether the key was there before this transaction
    wrote it, not after: a second write of the key must not take its hint from that answer,
    whether the first write was sent already (a write batch of one byte) or not."""
    conf = js.store_conf(**{PREFIX + "cache.maxBytes": "0", PREFIX + "writeBatchBytes": batch_bytes})
    p = js.provider(new_root(tmp_path), conf=conf)
    _commit_keys(js, p, 0, range(300))
    s = js.get_store(p, 1)
    assert js.get(s, "k", 5) == 5 and js.get(s, "k", 500) is None
    js.put(s, "k", 5, 6)
    js.remove(s, "k", 5)
    js.put(s, "k", 5, 7)  # absent again before this write: one key more than after the remove
    js.put(s, "k", 500, 1)
    js.put(s, "k", 500, 2)  # present since the write before
    js.remove(s, "k", 500)
    js.remove(s, "k", 500)  # absent already
    assert s.commit() == 2
    assert s.metrics().numKeys() == 300
    assert js.data(js.get_store(p, 2)) == {("k", i): (7 if i == 5 else i) for i in range(300)}


def _unsafe_row_of_long(v: int) -> bytes:
    """An UnsafeRow of one BIGINT as Spark encodes it: 8 bytes of null bits, the value (little-endian)."""
    return bytes(8) + v.to_bytes(8, "little", signed=True)


def _key_sets(kind: str) -> tuple[set[bytes], list[bytes]]:
    import random
    rnd = random.Random(7)
    if kind == "random 12 bytes":
        keys = {rnd.randbytes(12) for _ in range(20_000)}
        return keys, [k for k in (rnd.randbytes(12) for _ in range(20_000)) if k not in keys]
    if kind == "sequential longs":  # an aggregation's keys: they differ only in a few low bytes
        return {_unsafe_row_of_long(i) for i in range(10_000)}, [_unsafe_row_of_long(i) for i in range(10_000, 20_000)]
    assert kind == "short strings"  # lengths 2-6: the hash's bytes after the last whole word
    return {f"k{i}".encode() for i in range(10_000)}, [f"a{i}".encode() for i in range(10_000)]


@pytest.mark.parametrize("kind", ["random 12 bytes", "sequential longs", "short strings"])
def test_the_key_filter_has_no_false_negatives_and_few_false_positives(spark, kind):
    keys, absent = _key_sets(kind)
    for first_capacity in (len(keys), 1024):  # one stage; stages added as it fills
        f = spark._jvm.io.ttlstate.spark.cache.KeyFilter(first_capacity)
        for k in keys:
            f.add(bytearray(k))
        assert all(f.mightContain(bytearray(k)) for k in keys)
        false_positives = sum(f.mightContain(bytearray(k)) for k in absent)
        assert false_positives < 0.01 * len(absent), (first_capacity, false_positives)
