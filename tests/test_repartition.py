"""`python -m ttlstate repartition`: rescaling a stopped query's state (docs/decisions/065-repartition.md).

- The placement: `spark_hash` against Spark's own `pmod(hash(cols), n)` on rows of int,
  long, string, double, timestamp and struct (window) columns (UnsafeRows encoded here).
- End to end: aggregations (a string and long key; a window), dropDuplicates(WithinWatermark),
  a session window, applyInPandasWithState and a stream-stream join run on 4 partitions, stop, are rescaled to 8, run more batches, stop,
  are rescaled to 3 and run more batches; every batch's output equals an undisturbed run of
  the HDFS-backed provider on the same input (a misplaced key gives another output).
- TTL (processing time, the batch clock): the stored TTL timestamps are the same before and
  after a rescale, and the output after a pause longer than the TTL equals the model of
  Flink's TTL on the batches' clocks (what expired, expired; the rest did not).
- Refusals: bad N, N unchanged, an uncommitted batch, no commit, another provider's
  checkpoint, an operator it cannot place, keys not where Spark's partitioning puts them,
  a checkpoint of format v2, a key type whose hash is not reproduced (a map), a remote
  scheme; nothing is changed by a refusal.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import shutil
import struct
import subprocess
import sys
import time

import pytest

import streaming as st
import ttl_queries as tq
from ttlstate import checkpoint_reader as cr
from ttlstate import errors, spark_hash
from ttlstate.repartition import repartition

SHUFFLE = "spark.sql.shuffle.partitions"


# -- the placement, against Spark ---------------------------------------------------------

def _words(n):
    return ((n + 63) // 64) * 8


def encode_row(values, types) -> bytes:
    """An UnsafeRow of `values` (None: null) of `types` ("int", "long", "double", "string",
    "ts" (micros), or a list of types: a struct)."""
    n = len(values)
    nulls = 0
    fixed = bytearray(_words(n) + 8 * n)
    var = bytearray()
    base = len(fixed)
    for i, (v, t) in enumerate(zip(values, types)):
        slot = _words(n) + 8 * i
        if v is None:
            nulls |= 1 << i
            continue
        if t == "int":
            struct.pack_into("<i", fixed, slot, v)
        elif t in ("long", "ts"):
            struct.pack_into("<q", fixed, slot, v)
        elif t == "double":
            struct.pack_into("<d", fixed, slot, v)
        else:
            data = v.encode("utf-8") if t == "string" else encode_row(v, t)
            struct.pack_into("<Q", fixed, slot, (base + len(var)) << 32 | len(data))
            var += data + b"\0" * (-len(data) % 8)
    fixed[:_words(n)] = nulls.to_bytes(_words(n), "little")
    return bytes(fixed + var)


def _schema(types):
    names = {"int": "integer", "long": "long", "double": "double", "string": "string", "ts": "timestamp"}
    return {"type": "struct", "fields": [
        {"name": f"c{i}", "nullable": True, "metadata": {},
         "type": _schema(t) if isinstance(t, list) else names[t]} for i, t in enumerate(types)]}


def test_murmur3_matches_spark_hash_partitioning(spark):
    from pyspark.sql import types as T

    micros = lambda d: int((d - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)  # noqa: E731
    t0 = dt.datetime(2024, 1, 1, 0, 3, 20)
    rows = []
    for i in range(60):
        s = ["", "a", "ab", "abc", "abcd", "k%d" % i, "ünï©ødé-%d" % i, "x" * (i % 13), "日本語%d" % i][i % 9]
        d = [0.0, -0.0, 1.5, -2.25, float("nan"), 1e300, i / 7][i % 7]
        ts = t0 + dt.timedelta(seconds=37 * i, microseconds=i)
        w = (ts, ts + dt.timedelta(minutes=2))
        rows.append((None if i % 11 == 5 else i * 7919 - 200, (i - 30) * 10_000_000_019,
                     None if i % 13 == 4 else s, d, ts, w))
    schema = T.StructType([
        T.StructField("i", T.IntegerType()), T.StructField("l", T.LongType()),
        T.StructField("s", T.StringType()), T.StructField("d", T.DoubleType()),
        T.StructField("t", T.TimestampType()),
        T.StructField("w", T.StructType([T.StructField("start", T.TimestampType()),
                                         T.StructField("end", T.TimestampType())]))])
    df = spark.createDataFrame(rows, schema)
    exprs = {"i": ["int"], "l": ["long"], "s": ["string"], "d": ["double"], "t": ["ts"],
             "w": [["ts", "ts"]], "i, l, s, d, t, w": ["int", "long", "string", "double", "ts", ["ts", "ts"]]}
    checked = 0
    for cols, types in exprs.items():
        for n in (3, 8, 200):
            got = [r[0] for r in df.selectExpr(f"pmod(hash({cols}), {n})").collect()]
            names = [c.strip() for c in cols.split(",")]
            for row, expected in zip(rows, got):
                by = dict(zip("ilsdtw", row))
                vals = []
                for name in names:
                    v = by[name]
                    if name == "t":
                        v = micros(v)
                    elif name == "w":
                        v = [micros(v[0]), micros(v[1])]
                    vals.append(v)
                ours = spark_hash.partition_of(encode_row(vals, types), _schema(types), n)
                assert ours == expected, (cols, n, row)
                checked += 1
    assert checked == len(exprs) * 3 * len(rows)


def test_hash_of_a_prefix_equals_hash_of_those_columns():
    """A session window's placement hashes the first columns of its key: the same as a row
    of just those columns."""
    full = encode_row(["k1", 5, [1, 2]], ["string", "long", ["ts", "ts"]])
    prefix = encode_row(["k1", 5], ["string", "long"])
    assert spark_hash.hash_row(full, _schema(["string", "long", ["ts", "ts"]]), 2) == \
        spark_hash.hash_row(prefix, _schema(["string", "long"]))


# -- end to end ----------------------------------------------------------------------------

def _agg(df):
    from pyspark.sql import functions as F
    return (df.groupBy("key", (F.col("value") % 3).alias("m"))
            .agg(F.count("*").alias("n"), F.sum("value").alias("s")))


def _window_agg(df):
    from pyspark.sql import functions as F
    return df.groupBy(F.window("ts", "3 minutes"), "key").agg(F.count("*").alias("n"))


def _dedup(df):
    return df.dropDuplicates(["key"]).select("key", "value")


def _dedup_within_watermark(df):
    return (df.withWatermark("ts", "30 seconds").dropDuplicatesWithinWatermark(["key"])
            .select("key", "value"))


def _session(df):
    from pyspark.sql import functions as F
    return (df.withWatermark("ts", "30 seconds")
            .groupBy(F.session_window("ts", "90 seconds"), "key")
            .agg(F.count("*").alias("n"), F.sum("value").alias("s")))


def _pandas(df):
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key, pdfs, state):
        total = state.get[0] if state.exists else 0
        seen = state.get[1] if state.exists else 0
        for pdf in pdfs:
            total += int(pdf["value"].sum())
            seen += len(pdf)
        state.update((total, seen))
        yield pd.DataFrame({"key": [key[0]], "total": [total], "seen": [seen]})

    return df.groupBy("key").applyInPandasWithState(
        count, "key string, total long, seen long", "total long, seen long", "Update",
        GroupStateTimeout.NoTimeout)


def _join(left, right):
    return tq.join_by_key(left, right)


QUERIES = {  # name: (build, output mode, inputs)
    "aggregation": (_agg, "update", 1),
    "window_aggregation": (_window_agg, "update", 1),
    "dedup": (_dedup, "append", 1),
    "dedup_within_watermark": (_dedup_within_watermark, "append", 1),
    "session_window": (_session, "append", 1),  # Spark has no update mode for session windows
    "apply_in_pandas_with_state": (_pandas, "update", 1),
    "stream_stream_join": (_join, "append", 2),
}
PHASES = [(0, 3, 4), (3, 6, 8), (6, 9, 3)]  # files [a, b) run on N partitions


def _files(seed: int, n_files: int = 9, n_keys: int = 40):
    files = []
    for f in range(n_files):
        rows = []
        for j in range(12):
            k = (seed * 31 + f * 17 + j * 7 + (j * j) % 5) % n_keys
            t = st.BASE_TS + dt.timedelta(seconds=f * 60 + j * 4 + seed)
            rows.append({"key": f"k{k}", "value": f * 100 + j, "ts": t.strftime("%Y-%m-%d %H:%M:%S")})
        files.append(rows)
    return files


def run_phase(spark, provider, build, mode, inputs, checkpoint, confs=None, name="q"):
    """Runs the query on what its inputs hold (Trigger.AvailableNow); {batch: sorted rows}."""
    return start_phase(spark, provider, build, mode, inputs, checkpoint, confs, name)()


def run_phases_side_by_side(spark, *phases):
    """`run_phase` of each (a tuple of its arguments after `spark`), the queries running at
    once (each on its own checkpoint); their outputs in order. Every query is waited for
    before the first failure is raised."""
    waits, outs, failure = [], [], None
    for args in phases:
        try:
            waits.append(start_phase(spark, *args))
        except Exception as e:  # noqa: BLE001 - raised once the others ended
            failure = failure or e
    for wait in waits:
        try:
            outs.append(wait())
        except Exception as e:  # noqa: BLE001
            failure = failure or e
    if failure is not None:
        raise failure
    return outs


def start_phase(spark, provider, build, mode, inputs, checkpoint, confs=None, name="q"):
    """Starts `run_phase`'s query; returns the function that waits for it and gives its output."""
    out = {}

    def on_batch(df, batch_id):
        out[batch_id] = st.sort_rows(st.to_plain(r) for r in df.collect())

    with st.session_confs(spark, {st.PROVIDER_CLASS_KEY: provider, **(confs or {})}):
        df = build(*[st.read_events(spark, d) for d in inputs])
        q = (df.writeStream.outputMode(mode).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).foreachBatch(on_batch).start())

    def wait():
        try:
            assert q.awaitTermination(300), f"{name}: no end in 300 s"
        finally:
            q.stop()
        if q.exception() is not None:
            raise AssertionError(f"{name} failed: {q.exception()}")
        return out
    return wait


def _offset_conf(checkpoint, batch):
    lines = (pathlib.Path(checkpoint) / "offsets" / str(batch)).read_text().splitlines()
    return json.loads(lines[1])["conf"]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "ttlstate", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def _loaded_stores(checkpoint, version=None):
    """(operator id, store, loaded store) for every store of the partitions in use, at the
    last committed batch's version (or `version`)."""
    loc = cr.CheckpointLocation(str(checkpoint))
    batch = loc.last_committed_batch()
    n = int(_offset_conf(checkpoint, batch)[SHUFFLE])
    for op in loc.operators():
        for sd in loc.stores(op):
            if sd.partition < n:
                with cr.materialise(sd, batch + 1 if version is None else version) as loaded:
                    yield op.id, sd, loaded


def _all_entries(checkpoint, version=None):
    """{(operator, store, key): (stored value, TTL timestamp)} over every partition in use."""
    return _entries_and_keys_by_partition(checkpoint, version)[0]


def _entries_and_keys_by_partition(checkpoint, version=None):
    """`_all_entries` of the checkpoint and {(operator, store, partition): keys} of the
    partitions in use, from one load of its stores."""
    entries, keys = {}, {}
    for op, sd, loaded in _loaded_stores(checkpoint, version):
        keys[op, sd.name, sd.partition] = loaded.store.num_keys
        entries.update({(op, sd.name, k): (v, ts) for k, v, ts in loaded.entries()})
    return entries, keys


@pytest.mark.slow
@pytest.mark.parametrize("query", list(QUERIES))
def test_rescale_4_8_3_equals_an_undisturbed_run(spark, tmp_path, query):
    build, mode, n_inputs = QUERIES[query]
    files = [_files(seed) for seed in range(n_inputs)]
    inputs = [tmp_path / f"in{i}" for i in range(n_inputs)]
    ck, ref = tmp_path / "ck", tmp_path / "ref"
    got, expected, left = [], [], {}
    for phase, (a, b, n) in enumerate(PHASES):
        for d, fs in zip(inputs, files):
            st.write_files(d, fs, a, b)
        if phase:
            # the state the last phase left: loaded once after it ran (below), the stopped
            # checkpoint unchanged since
            before = left
            r = _cli("repartition", ck, "--partitions", n, "--json")
            assert r.returncode == 0, r.stderr
            doc = json.loads(r.stdout)
            last = doc["readBatch"]
            assert doc["newBatch"] == last + 1 and doc["newPartitions"] == n
            assert _offset_conf(ck, last + 1)[SHUFFLE] == str(n)
            assert (ck / "commits" / str(last + 1)).read_text() == (ck / "commits" / str(last)).read_text()
            # every entry moved, bytes and TTL timestamps as they were
            after = _all_entries(ck)
            assert after == before and len(after) > 0
            # and each where Spark's hash partitioning on n puts it: the query reads them back
        # the query and its undisturbed reference (its own checkpoint) run side by side
        g, e = run_phases_side_by_side(
            spark, (st.TTLSTATE, build, mode, inputs, ck, {SHUFFLE: "4"}, query),
            (st.HDFS, build, mode, inputs, ref, {SHUFFLE: "4"}, query + "-ref"))
        got.append(g)
        expected.append(e)
        last = max(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())
        assert _offset_conf(ck, last)[SHUFFLE] == str(n)  # the restarted query ran on n
        left, keys_by_partition = _entries_and_keys_by_partition(ck)
        parts = {p for (_, _, p), keys in keys_by_partition.items() if keys}
        assert parts <= set(range(n)) and len(parts) >= min(n, 3), parts  # spread over the new count
    for phase, (g, e) in enumerate(zip(got, expected)):
        g_rows = [rows for rows in g.values() if rows]
        e_rows = [rows for rows in e.values() if rows]
        assert g_rows == e_rows, f"{query}: phase {phase} differs"
    assert sum(len(r) for e in expected for r in e.values()) > 20


TTL_MS = 3000
TTL_CONFS = {**tq.ttl_conf(TTL_MS, cleanup_inBackground="false"), SHUFFLE: "4"}
TTL_BATCHES = [[("a", 0), ("b", 0), ("c", 0), ("d", 0), ("e", 0), ("f", 0)], [("a", 1), ("g", 1)],
               [("b", 2), ("h", 2)], [("b", 3), ("c", 3), ("i", 3)], [("a", 4), ("g", 4)],
               [("c", 5), ("j", 5)]]
TTL_PHASES = [(0, 2, 4), (2, 4, 8), (4, 6, 3)]


def _ttl_files():
    t = lambda b: (st.BASE_TS + dt.timedelta(minutes=b)).strftime("%Y-%m-%d %H:%M:%S")  # noqa: E731
    return [[{"key": k, "value": v, "ts": t(b)} for k, v in rows] for b, rows in enumerate(TTL_BATCHES)]


@pytest.mark.slow
def test_rescale_keeps_ttl_timestamps_and_expiry(spark, tmp_path):
    inp, ck = tmp_path / "in", tmp_path / "ck"
    build, mode = tq.QUERIES["count_by_key"]
    out = {}
    data_batches = []
    for phase, (a, b, n) in enumerate(TTL_PHASES):
        st.write_files(inp, _ttl_files(), a, b)
        if phase:
            # what the last phase wrote and the next does not touch expires: the next batch's
            # clock (its start) is past the last batch's clock + TTL (polled, not a fixed sleep)
            expires_ms = max(tq.batch_timestamps(ck).values()) + TTL_MS + 500
            while time.time() * 1000 < expires_ms:
                time.sleep(0.1)
            before = _all_entries(ck)
            assert any(ts is not None for _, ts in before.values())
            r = _cli("repartition", ck, "--partitions", n)
            assert r.returncode == 0, r.stderr
            assert _all_entries(ck) == before  # values and TTL timestamps as they were
        first = max(out, default=-1)
        out.update(run_phase(spark, st.TTLSTATE, build, mode, [inp], ck, TTL_CONFS, "ttl"))
        data_batches += [bid for bid in sorted(out) if bid > first]
    ts = tq.batch_timestamps(ck)
    assert len(data_batches) == len(TTL_BATCHES)
    model, _, _ = tq.model_count_by_key(TTL_BATCHES, {i: ts[b] for i, b in enumerate(data_batches)},
                                        ttl=TTL_MS)
    no_ttl, _, _ = tq.model_count_by_key(TTL_BATCHES, {i: ts[b] for i, b in enumerate(data_batches)})
    assert model != no_ttl  # something expired across a rescale
    assert [out[b] for b in data_batches] == [model[i] for i in range(len(TTL_BATCHES))]


# -- refusals -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def agg_checkpoint(tmp_path_factory, _session_holder):
    spark = _session_holder.get()
    root = tmp_path_factory.mktemp("repart-refusals")
    st.write_files(root / "in", _files(0), 0, 3)

    def limit(df):
        return df.limit(5)

    run_phases_side_by_side(  # three checkpoints of their own: the queries run at once
        spark, (st.TTLSTATE, _agg, "update", [root / "in"], root / "agg", {SHUFFLE: "4"}),
        (st.HDFS, _agg, "update", [root / "in"], root / "hdfs", {SHUFFLE: "4"}),
        (st.TTLSTATE, limit, "append", [root / "in"], root / "limit", {SHUFFLE: "4"}))
    return root


def _copy(src, tmp_path, name="ck"):
    dest = tmp_path / name
    shutil.copytree(src, dest)
    return dest


def _snapshot(path):
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in path.rglob("*")}


def _refused(ck, n, error_class, *texts):
    before = _snapshot(ck) if pathlib.Path(ck).exists() else None
    r = _cli("repartition", ck, "--partitions", n)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"error: [{error_class}]" in r.stderr, r.stderr
    for t in texts:
        assert t in r.stderr, r.stderr
    if before is not None:
        assert _snapshot(ck) == before  # nothing changed
    return r.stderr


def test_refuses_a_bad_partition_count(tmp_path):
    for bad in ("0", "-2", "x", "1.5"):
        _refused(tmp_path, bad, "TTLSTATE_REPARTITION_INVALID_PARTITIONS", "positive integer")
    with pytest.raises(errors.RepartitionInvalidPartitionsError):
        repartition(str(tmp_path), True)


@pytest.mark.slow
def test_refuses_the_count_it_runs_with(agg_checkpoint, tmp_path):
    ck = _copy(agg_checkpoint / "agg", tmp_path)
    _refused(ck, 4, "TTLSTATE_REPARTITION_INVALID_PARTITIONS", "already runs with 4 shuffle partitions")


@pytest.mark.slow
def test_refuses_an_uncommitted_batch(agg_checkpoint, tmp_path):
    ck = _copy(agg_checkpoint / "agg", tmp_path)
    last = max(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())
    (ck / "commits" / str(last)).unlink()
    _refused(ck, 8, "TTLSTATE_REPARTITION_NOT_STOPPED", f"batch {last} started", "did not commit")


@pytest.mark.slow
def test_refuses_no_committed_batch(agg_checkpoint, tmp_path):
    ck = _copy(agg_checkpoint / "agg", tmp_path)
    shutil.rmtree(ck / "commits")
    (ck / "commits").mkdir()
    _refused(ck, 8, "TTLSTATE_REPARTITION_NOT_STOPPED", "no committed batch")


@pytest.mark.slow
def test_refuses_another_providers_checkpoint(agg_checkpoint, tmp_path):
    ck = _copy(agg_checkpoint / "hdfs", tmp_path)
    _refused(ck, 8, "TTLSTATE_REPARTITION_UNSUPPORTED", "another state store provider", ".delta")


@pytest.mark.slow
def test_refuses_an_operator_it_cannot_place(agg_checkpoint, tmp_path):
    ck = _copy(agg_checkpoint / "limit", tmp_path)
    _refused(ck, 8, "TTLSTATE_REPARTITION_UNSUPPORTED", "globalLimit", "one partition")


@pytest.mark.slow
def test_refuses_keys_not_where_spark_puts_them(agg_checkpoint, tmp_path):
    """Partitions 0 and 1 swapped: the self-check finds the keys misplaced, changes nothing."""
    ck = _copy(agg_checkpoint / "agg", tmp_path)
    state = ck / "state" / "0"
    (state / "0").rename(state / "x")
    (state / "1").rename(state / "0")
    (state / "x").rename(state / "1")
    (state / "1" / "_metadata").rename(state / "0" / "_metadata")  # the schema stays in partition 0
    _refused(ck, 8, "TTLSTATE_REPARTITION_UNSUPPORTED", "is in partition", "nothing was changed")


@pytest.mark.slow
def test_refuses_a_checkpoint_format_v2(spark, tmp_path):
    """A query run with checkpointFormatVersion=2: its commits record state checkpoint ids."""
    st.write_files(tmp_path / "in", _files(0), 0, 2)
    ck = tmp_path / "ck"
    run_phase(spark, st.TTLSTATE, _agg, "update", [tmp_path / "in"], ck,
              {SHUFFLE: "4", "spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}, "v2")
    last = max(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())
    assert json.loads((ck / "commits" / str(last)).read_text().splitlines()[1])["stateUniqueIds"]
    _refused(ck, 8, "TTLSTATE_REPARTITION_UNSUPPORTED", "stateStore.checkpointFormatVersion=2",
             "checkpoint format version 1 only")


def _map_key(df):
    """A streaming aggregation grouped by a map column (Spark 4 sorts the map, MapSort)."""
    from pyspark.sql import functions as F
    return (df.groupBy(F.create_map(F.col("key"), F.col("value") % 2).alias("m"))
            .agg(F.count("*").alias("n")))


@pytest.mark.slow
def test_refuses_a_key_type_it_cannot_hash(spark, tmp_path):
    """A map in the state key: Spark's hash of a map is not reproduced, refused by the schema
    before any state is read, naming the column and its type."""
    st.write_files(tmp_path / "in", _files(0), 0, 2)
    ck = tmp_path / "ck"
    run_phase(spark, st.TTLSTATE, _map_key, "update", [tmp_path / "in"], ck, {SHUFFLE: "4"}, "map")
    assert _all_entries(ck)  # the state is there, written by ttlstate
    _refused(ck, 8, "TTLSTATE_REPARTITION_UNSUPPORTED", "operator 0 (stateStoreSave)",
             "key column `_groupingmapsort` has type map<string,bigint>", "not reproduced",
             "nothing was changed")


def _global_agg(df):
    from pyspark.sql import functions as F
    return df.groupBy().agg(F.count("*").alias("n"), F.sum("value").alias("s"))


@pytest.mark.slow
def test_refuses_a_global_aggregation(spark, tmp_path):
    """A global aggregation runs in one partition whatever the count: the empty key's hash
    sent its state to partition 42 % N, where the restarted query never read it, so its count
    started again from 0 (found by an audit). Refused, nothing changed."""
    st.write_files(tmp_path / "in", _files(0), 0, 2)
    ck = tmp_path / "ck"
    run_phase(spark, st.TTLSTATE, _global_agg, "update", [tmp_path / "in"], ck, {SHUFFLE: "2"}, "global")
    assert _all_entries(ck)  # the state is there, written by ttlstate
    _refused(ck, 4, "TTLSTATE_REPARTITION_UNSUPPORTED", "operator 0", "a key of no columns",
             "global aggregation", "one partition")


def test_an_unreachable_file_system_is_named():
    _refused("hdfs://namenode/ck", 8, "TTLSTATE_REMOTE_CHECKPOINT", "download of hdfs://namenode/ck failed",
             "UnknownHostException: namenode")


@pytest.mark.slow
def test_finishes_an_interrupted_rescale(agg_checkpoint, tmp_path):
    """A crash between the offset and the commit entries: the same N again finishes it (as
    Spark's runner retries); another N is refused naming the one to finish first."""
    ck = _copy(agg_checkpoint / "agg", tmp_path)
    before = _all_entries(ck)
    r = _cli("repartition", ck, "--partitions", 8, "--json")
    assert r.returncode == 0, r.stderr
    new_batch = json.loads(r.stdout)["newBatch"]
    (ck / "commits" / str(new_batch)).unlink()
    _refused(ck, 5, "TTLSTATE_REPARTITION_NOT_STOPPED", "is a rescale to 8 partitions",
             "--partitions 8 first")
    r = _cli("repartition", ck, "--partitions", 8, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["retried"] and doc["newBatch"] == new_batch
    assert _all_entries(ck) == before


# -- without Spark: a checkpoint written by ttlstate's own store --------------------------

def _utf(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def _synthetic_checkpoint(root: pathlib.Path, n: int, keys: int = 200, ttl: bool = True):
    """A one-batch checkpoint of an aggregation keyed by (string, long) on `n` partitions, its
    state written by `Store` (TTL layout: timestamp i * 1000 for key i), each key in the
    partition Spark's hash partitioning gives it; Spark's logs, metadata and schema file."""
    from ttlstate.store import Store
    from ttlstate.ttl.config import TtlConfig

    key_types = ["string", "long"]
    schema = _schema(key_types)
    value_schema = _schema(["long"])
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 5000,
            "conf": {SHUFFLE: str(n), "spark.sql.streaming.stateStore.providerClass": "x"}}
    (root / "offsets" / "0").write_text("v1\n" + json.dumps(meta) + '\n{"logOffset":0}')
    (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    op = root / "state" / "0"
    (op / "_metadata").mkdir(parents=True)
    (op / "_metadata" / "metadata").write_text("v1\n" + json.dumps({
        "operatorInfo": {"operatorId": 0, "operatorName": "stateStoreSave"},
        "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0, "numPartitions": n}]}))
    expected = {}
    stores = [Store(f"s{p}", str(root / "tmp" / str(p)), TtlConfig(ttl_ms=60_000) if ttl else TtlConfig())
              for p in range(n)]
    txns = [s.begin(0, False, batch_ts=5000) for s in stores]
    for i in range(keys):
        k = encode_row([f"key-{i}", i * 7], key_types)
        v = encode_row([i], ["long"])
        p = spark_hash.partition_of(k, schema, n)
        txns[p].put(k, v)
        expected[k] = v
    for p, (s, t) in enumerate(zip(stores, txns)):
        (op / str(p)).mkdir()
        s.commit(t, 1, str(op / str(p) / "1.changelog"))
        s.close(delete_files=True)
    (op / "0" / "_metadata").mkdir()
    (op / "0" / "_metadata" / "schema").write_bytes(
        _utf("v2") + struct.pack(">i", 1) + _utf(json.dumps(schema))
        + struct.pack(">i", 1) + _utf(json.dumps(value_schema)))
    shutil.rmtree(root / "tmp")
    return schema, expected


def _check_placed(root, schema, expected, n):
    entries = _all_entries(root)
    assert {k: v for (_, _, k), (v, _) in entries.items()} == expected
    loc = cr.CheckpointLocation(str(root))
    for sd in loc.stores(loc.operator(0)):
        if sd.partition < n:
            with cr.materialise(sd, loc.last_committed_batch() + 1) as loaded:
                for k, _, _ in loaded.entries():
                    assert spark_hash.partition_of(k, schema, n) == sd.partition
    return entries


@pytest.mark.parametrize("ttl", [True, False])
def test_rescales_a_checkpoint_written_by_the_store(tmp_path, ttl):
    schema, expected = _synthetic_checkpoint(tmp_path, 4, ttl=ttl)
    before = _check_placed(tmp_path, schema, expected, 4)
    assert all((ts is not None) == ttl for _, ts in before.values())
    for n, batch in ((8, 1), (3, 2)):
        result = repartition(str(tmp_path), n)
        assert (result.new_batch, result.version, result.new_partitions) == (batch, batch + 1, n)
        assert sum(result.stores[0]["keysPerPartition"]) == len(expected)
        assert _offset_conf(tmp_path, batch)[SHUFFLE] == str(n)
        assert (tmp_path / "commits" / str(batch)).read_text() == (tmp_path / "commits" / "0").read_text()
        offsets = [(tmp_path / "offsets" / str(b)).read_text().splitlines() for b in (0, batch)]
        assert offsets[0][2:] == offsets[1][2:]  # the sources' offsets as they were
        assert _check_placed(tmp_path, schema, expected, n) == before  # TTL timestamps kept
    assert (tmp_path / "state" / "0" / "7" / "2.manifest").exists()  # from the rescale to 8
    assert not (tmp_path / "state" / "0" / "7" / "3.manifest").exists()  # beyond 3: left alone
