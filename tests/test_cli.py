"""`python -m ttlstate inspect|dump|verify` on checkpoints of real queries, and Spark's own
state reader (`spark.read.format("statestore")`) on ttlstate checkpoints.

The Spark queries run once per module (fixture `ck`), several at a time: a streaming
aggregation (complete mode) whose first three batches commit incremental snapshots
(`checkpoint.mode=snapshot`) and whose last three, after a restart, commit changelogs, so
its latest version loads from a manifest plus changelogs; the same aggregation and a
stream-stream join with HDFSBackedStateStoreProvider and with ttlstate (for the state
reader); a count per key with a 1-hour TTL; and an aggregation whose keys and values hold
many column types (for the UnsafeRow decoder). The CLI always runs as a real subprocess.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import pathlib
import re
import shutil
import struct

import pytest

import streaming as st
from offline_tools import cli, cli_json
import ttl_queries as tq
from streaming import HDFS, TTLSTATE

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
N_FILES = 6
HALF = 3  # the aggregation's batches 0-2 commit snapshots, 3-5 changelogs
PARTITIONS = [0, 1, 2, 3]
TTL_BATCHES = [[("a", 0), ("b", 0), ("c", 0)], [("a", 1), ("d", 1)], [("e", 2), ("a", 2)]]
TTL_LAST_BATCH = {"a": 2, "b": 0, "c": 0, "d": 1, "e": 2}  # the batch that last wrote each key
TTL_COUNTS = {"a": 3, "b": 1, "c": 1, "d": 1, "e": 1}
HOUR = 3_600_000


def iso(ts: dt.datetime) -> str:
    return ts.isoformat() + "Z"  # Spark gives naive datetimes in the session time zone (UTC)


# ---------------------------------------------------------------------------------------
# Without Spark

def test_help_names_the_file_systems():
    for args in ([], ["inspect"], ["dump"], ["verify"], ["repartition"]):
        out = " ".join(cli(*args, "--help").stdout.split())
        assert "hdfs:, s3a:, ...)" in out, out
        if args and args[0] != "repartition":
            assert "Never changes the checkpoint" in out, out


def test_clear_errors_for_locations_that_are_not_checkpoints(tmp_path):
    missing = tmp_path / "nope"
    p = cli("inspect", missing, rc=2)
    assert f"[TTLSTATE_NOT_A_CHECKPOINT] {missing} does not exist" in p.stderr
    (tmp_path / "empty").mkdir()
    p = cli("verify", tmp_path / "empty", rc=2)
    assert f"[TTLSTATE_NOT_A_CHECKPOINT] {tmp_path / 'empty'} is not a checkpoint location" in p.stderr
    # a Hadoop file system that cannot be reached: the location and the cause
    p = cli("dump", "hdfs://namenode/ck", "--operator", "0", "--partition", "0", rc=2)
    assert "[TTLSTATE_REMOTE_CHECKPOINT] download of hdfs://namenode/ck failed" in p.stderr, p.stderr
    assert "java.net.UnknownHostException: namenode" in p.stderr, p.stderr
    stateless = tmp_path / "stateless"
    (stateless / "offsets").mkdir(parents=True)
    (stateless / "commits").mkdir()
    p = cli("inspect", stateless.as_uri(), rc=2)
    assert f"[TTLSTATE_NO_STATE] {stateless} has no state: it has no state/ directory" in p.stderr
    assert p.stdout == ""


def test_unsaferow_refuses_bytes_that_do_not_fit_the_schema():
    from ttlstate import unsaferow

    schema = unsaferow.parse_schema({"type": "struct", "fields": [
        {"name": "s", "type": "string", "nullable": True, "metadata": {}}]})
    row = bytes(8) + struct.pack("<Q", (16 << 32) | 2) + b"hi" + bytes(6)
    assert unsaferow.decode_row(row, schema) == {"s": "hi"}
    for bad in (row[:12],  # shorter than the fixed part
                bytes(8) + struct.pack("<Q", (16 << 32) | 40) + bytes(8),  # data past the end
                struct.pack("<Q", 2) + bytes(16)):  # a null bit beyond the one field
        with pytest.raises(unsaferow.UnsafeRowError):
            unsaferow.decode_row(bad, schema)


def test_reads_state_schema_format_v3(tmp_path):
    """Spark 4.3's SchemaV3Writer: writeUTF("v3"), int families, then per family its name,
    short key schema id, key JSON in chunks, short value schema id, value JSON, the key
    encoder spec and the user key encoder schema (chunks: int count, writeUTF each)."""
    from ttlstate import checkpoint_reader

    def utf(s):
        b = s.encode()
        return struct.pack(">H", len(b)) + b

    def chunks(s):
        return struct.pack(">i", 1) + utf(s)

    key = {"type": "struct", "fields": [{"name": "k", "type": "string", "nullable": True, "metadata": {}}]}
    value = {"type": "struct", "fields": [{"name": "v", "type": "long", "nullable": True, "metadata": {}}]}
    data = (utf("v3") + struct.pack(">i", 1) + utf("default") + struct.pack(">h", 0)
            + chunks(json.dumps(key)) + struct.pack(">h", 0) + chunks(json.dumps(value))
            + chunks('{"keyStateEncoderType":"NoPrefixKeyStateEncoderSpec"}') + chunks("{}"))
    (tmp_path / "schema").write_bytes(data)
    assert checkpoint_reader.read_schema_file(str(tmp_path / "schema")) == (key, value)


# ---------------------------------------------------------------------------------------
# The queries

def rich_types(df):
    """An aggregation whose key and value rows hold many column types."""
    from pyspark.sql import functions as F

    v = F.col("value")
    return (df.groupBy(
        "key", v.cast("int").alias("i"), v.cast("short").alias("sh"), v.cast("byte").alias("by"),
        (v / 4).cast("float").alias("f"), (v / 3).cast("double").alias("d"),
        (v % 2 == 0).alias("even"), F.to_date("ts").alias("day"),
        (v / 8).cast("decimal(10,3)").alias("dec"), (v * 1000003).cast("decimal(30,4)").alias("bigdec"),
        F.encode("key", "UTF-8").alias("bin"),
        F.struct(F.col("key").alias("k"), (-v).alias("neg")).alias("st"),
        F.array(v, v + 1).alias("arr"),
        F.when(v % 3 == 0, F.lit(None)).otherwise(F.col("key")).alias("opt"))
        .agg(F.count("*").alias("n"), F.max("ts").alias("last_ts"),
             F.first(F.create_map("key", "value")).alias("m")))


@dataclasses.dataclass
class Checkpoints:
    root: pathlib.Path
    agg: pathlib.Path
    agg_hdfs: pathlib.Path
    join: pathlib.Path
    join_hdfs: pathlib.Path
    ttl: pathlib.Path
    rich: pathlib.Path
    v2: pathlib.Path
    agg_run: st.RunResult
    agg_half: st.RunResult  # the first three batches of `agg`
    join_run: st.RunResult
    ttl_run: st.RunResult
    rich_run: st.RunResult
    v2_run: st.RunResult


@pytest.fixture(scope="module")
def ck(_session_holder, candidate, tmp_path_factory) -> Checkpoints:
    if candidate != TTLSTATE:
        pytest.skip("the CLI reads ttlstate checkpoints")
    root = tmp_path_factory.mktemp("cli")
    events = st.generate_events(N_FILES, 40, n_keys=10, seed=17)
    st.write_files(root / "events", events, 0, HALF)
    join_in = [root / "join-left", root / "join-right"]
    st.write_files(join_in[0], st.generate_events(4, 20, n_keys=4, seed=21, active_fraction=0.8))
    st.write_files(join_in[1], st.generate_events(4, 20, n_keys=4, seed=22, active_fraction=0.8))
    tq.write_batches(root / "ttl-in", TTL_BATCHES)
    st.write_files(root / "rich-in", st.generate_events(2, 30, n_keys=5, seed=3))
    snapshot_mode = {PREFIX + "checkpoint.mode": "snapshot"}

    def agg(provider, name, confs):
        return dict(provider=provider, build_df=st.agg_by_key, output_mode="complete",
                    input_dir=root / "events", checkpoint_dir=root / name, sink="foreach_batch",
                    confs=confs)

    runs = [
        agg(TTLSTATE, "ck-agg", snapshot_mode), agg(HDFS, "ck-agg-hdfs", {}),
        dict(provider=TTLSTATE, build_df=st.inner_join, output_mode="append", input_dir=join_in,
             checkpoint_dir=root / "ck-join"),
        dict(provider=HDFS, build_df=st.inner_join, output_mode="append", input_dir=join_in,
             checkpoint_dir=root / "ck-join-hdfs"),
        dict(provider=TTLSTATE, build_df=tq.count_by_key, output_mode="update",
             input_dir=root / "ttl-in", checkpoint_dir=root / "ck-ttl", sink="foreach_batch",
             confs={PREFIX + "ttl": "1h", **snapshot_mode}),
        dict(provider=TTLSTATE, build_df=rich_types, output_mode="complete",
             input_dir=root / "rich-in", checkpoint_dir=root / "ck-rich", sink="foreach_batch"),
        dict(provider=TTLSTATE, build_df=st.agg_by_key, output_mode="update",
             input_dir=root / "events", checkpoint_dir=root / "ck-v2",
             confs={"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}),
    ]
    spark = _session_holder.get()
    first = st.run_many(spark, runs, max_parallel=len(runs))
    for r in first:
        if isinstance(r, BaseException):
            raise r
    st.write_files(root / "events", events, HALF, N_FILES)
    second = st.run_many(spark, [agg(TTLSTATE, "ck-agg", {}), agg(HDFS, "ck-agg-hdfs", {})])
    for r in second:
        if isinstance(r, BaseException):
            raise r
    agg_run = st.merge_runs(first[0], second[0])
    st.assert_same_rows(st.merge_runs(first[1], second[1]), agg_run, min_rows=5, what="aggregation")
    return Checkpoints(root, root / "ck-agg", root / "ck-agg-hdfs", root / "ck-join",
                       root / "ck-join-hdfs", root / "ck-ttl", root / "ck-rich", root / "ck-v2",
                       agg_run, first[0], first[2], first[4], first[5], first[6])


def tree_fingerprint(path: pathlib.Path) -> dict:
    """Every file under `path`: size, modification time and SHA-256."""
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns,
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(path.rglob("*")) if p.is_file()}


def last_rows_total(run: st.RunResult) -> int:
    return sum(op["numRowsTotal"] for op in run.last_progress["stateOperators"])


def dump_all(checkpoint, *extra) -> dict[int, dict]:
    """Every partition's dump from one command (without --partition: a list, in partition order)."""
    docs = cli_json("dump", checkpoint, "--operator", 0, *extra)
    assert [d["partition"] for d in docs] == PARTITIONS, [d["partition"] for d in docs]
    return {d["partition"]: d for d in docs}


# ---------------------------------------------------------------------------------------
# inspect

@pytest.mark.slow
@pytest.mark.matrix  # the smoke subset of `make test-matrix`
def test_inspect_aggregation(ck):
    before = tree_fingerprint(ck.agg)
    doc = cli_json("inspect", ck.agg)
    assert doc["checkpoint"] == str(ck.agg)
    assert doc["lastCommittedBatch"] == N_FILES - 1
    [op] = doc["operators"]
    assert (op["id"], op["name"], op["partitions"], op["storeNames"]) == (
        0, "stateStoreSave", PARTITIONS, ["default"])
    # key counts of the latest version: the query's numRowsTotal, and the final table
    assert doc["keys"] == op["keys"] == last_rows_total(ck.agg_run) == len(ck.agg_run.rows) > 5
    assert op["ttl"]["valueLayouts"] == ["plain"] and op["ttlHistogram"] is None
    for s in op["stores"]:
        where = f"partition {s['partition']}"
        assert s["store"] == "default", where
        assert s["versions"] == list(range(1, N_FILES + 1)), where
        assert s["manifests"] == [1, 2, 3] and s["changelogs"] == [4, 5, 6], where
        assert s["latestVersion"] == N_FILES and "error" not in s, where
        assert s["ttl"] == {"valueLayout": "plain", "dbTtl": False, "batchTimestampMs": s["ttl"]["batchTimestampMs"],
                            "cursor": ""}, where
        part_dir = ck.agg / "state" / "0" / str(s["partition"])
        on_disk = sum(p.stat().st_size for p in part_dir.rglob("*") if p.is_file())
        assert s["sizeBytes"]["total"] == on_disk, where
        sst_bytes = sum(p.stat().st_size for p in (part_dir / "sst").iterdir())
        assert s["sizeBytes"]["ssts"] == sst_bytes, where
        assert s["sizeBytes"]["changelogs"] > 0 and s["sizeBytes"]["manifests"] > 0, where
    assert sum(s["keys"] for s in op["stores"]) == op["keys"]
    assert doc["sizeBytes"] == sum(s["sizeBytes"]["total"] for s in op["stores"])

    text = cli("inspect", ck.agg).stdout
    assert f"Checkpoint {ck.agg}\n" in text
    assert f"Last committed batch: {N_FILES - 1} (state version {N_FILES})" in text
    assert "Operator 0: stateStoreSave, 4 partitions, store default" in text
    assert "TTL: off (plain value layout" in text
    for s in op["stores"]:
        assert re.search(rf"^  {s['partition']}\s+default\s+1-6\s+1-3\s+4-6\s+6\s+{s['keys']}\s", text, re.M), text
    assert re.search(rf"^  total\s+{op['keys']}\s", text, re.M), text
    # the same through a file: URI; nothing in the checkpoint changed
    uri_doc = cli_json("inspect", ck.agg.as_uri())
    assert {**uri_doc, "now": 0} == {**doc, "now": 0}
    assert tree_fingerprint(ck.agg) == before


# ---------------------------------------------------------------------------------------
# dump

@pytest.mark.slow
@pytest.mark.matrix
def test_dump_decodes_the_aggregation_state_as_the_sink_shows_it(ck):
    before = tree_fingerprint(ck.agg)
    keys = {s["partition"]: s["keys"] for s in cli_json("inspect", ck.agg)["operators"][0]["stores"]}

    def state(dumps) -> dict:
        out = {}
        for p, d in dumps.items():
            assert [f["name"] for f in d["keySchema"]["fields"]] == ["key"]
            assert [f["name"] for f in d["valueSchema"]["fields"]] == ["count", "sum", "max"]
            assert d["numEntries"] == len(d["entries"])
            for e in d["entries"]:
                assert "ttlTimestampMs" not in e and "keyHex" not in e and "valueHex" not in e
                out[e["key"]["key"]] = e["value"]
        return out

    def table(rows) -> dict:
        return {k: {"count": n, "sum": total, "max": iso(last)} for k, n, total, last in rows}

    # each dump runs once (the checkpoint is stopped: the same command gives the same output)
    # (every partition, then each named: --partition repeated)
    latest = dump_all(ck.agg)
    version_3 = dump_all(ck.agg, "--version", 3, *[a for p in PARTITIONS for a in ("--partition", p)])
    assert state(latest) == table(ck.agg_run.rows)
    assert {p: d["numEntries"] for p, d in latest.items()} == keys
    # an earlier version: version 3 is the snapshot batch 2 committed
    assert state(version_3) == table(ck.agg_half.batches[HALF - 1])
    assert state(version_3) != state(latest)

    p = max(keys, key=keys.get)
    text = cli("dump", ck.agg, "--operator", 0, "--partition", p, "--limit", 1).stdout.splitlines()
    assert text[0] == (f"# operator 0 (stateStoreSave), partition {p}, store default, version 6 "
                       f"(retained: 1-6): {keys[p]} entries, value layout plain")
    assert text[1] == "# key struct<key:string>  value struct<count:long,sum:long,max:timestamp>"
    m = re.fullmatch(r'key=\{"key": "(k\d+)"\}  value=(\{.*\})', text[2])
    assert m and json.loads(m.group(2)) == table(ck.agg_run.rows)[m.group(1)], text
    assert text[3:] == [f"# ... {keys[p] - 1} more (--limit 1)"]
    limited = cli_json("dump", ck.agg, "--operator", 0, "--partition", p, "--limit", 1)
    assert len(limited["entries"]) == 1 and limited["truncated"] is True
    assert tree_fingerprint(ck.agg) == before


@pytest.mark.slow
def test_dump_of_join_stores(ck):
    left_input = {(r["key"], r["value"], r["ts"].replace(" ", "T") + "Z")
                  for f in st.generate_events(4, 20, n_keys=4, seed=21, active_fraction=0.8) for r in f}
    rows = 0
    for side in ("left", "right"):
        all_counts = dump_all(ck.join, "--store", f"{side}-keyToNumValues")
        all_values = dump_all(ck.join, "--store", f"{side}-keyWithIndexToValue")
        for p in PARTITIONS:
            counts, values = all_counts[p], all_values[p]
            assert counts["store"] == f"{side}-keyToNumValues" and counts["operatorName"] == "symmetricHashJoin"
            assert [f["name"] for f in values["keySchema"]["fields"]] == ["field0", "index"]
            indexes: dict[str, list[int]] = {}
            for e in values["entries"]:
                indexes.setdefault(e["key"]["field0"], []).append(e["key"]["index"])
                assert e["value"][f"{side[0]}key"] == e["key"]["field0"]
                if side == "left":
                    row = e["value"]
                    assert (row["lkey"], row["lvalue"], row["lts"]) in left_input, row
                    assert isinstance(row["matched"], bool)
            # keyToNumValues holds, per join key, the number of rows kept at indexes 0..n-1
            assert {e["key"]["field0"]: e["value"]["value"] for e in counts["entries"]} == {
                k: len(v) for k, v in indexes.items()}
            assert all(sorted(v) == list(range(len(v))) for v in indexes.values())
            rows += values["numEntries"]
    assert rows == last_rows_total(ck.join_run) > 0


@pytest.mark.slow
def test_dump_decodes_many_column_types(ck):
    expected = {}
    for (key, i, sh, by, f, d, even, day, dec, bigdec, binary, stc, arr, opt, n, last, m) in ck.rich_run.rows:
        expected[json.dumps([
            key, i, sh, by, f, d, even, day.isoformat(), str(dec), str(bigdec), bytes(binary).hex(),
            {"k": stc[0], "neg": stc[1]}, list(arr), opt])] = (n, iso(last), dict(m))
    assert any(k.endswith("null]") for k in expected) and any(k.endswith('"]') for k in expected)
    got = {}
    for d in dump_all(ck.rich).values():
        # Spark names each computed grouping column `_groupingexpression`: told apart by position
        assert [unsaferow_names(d["keySchema"])[j] for j in (0, 1, 13)] == [
            "key", "_groupingexpression#1", "_groupingexpression#13"]
        for e in d["entries"]:
            assert list(e["value"]) == ["count", "max", "first", "valueSet"]
            assert e["value"]["valueSet"] is True
            got[json.dumps(list(e["key"].values()))] = (
                e["value"]["count"], e["value"]["max"], dict(e["value"]["first"]))
    assert got == expected


def unsaferow_names(schema: dict) -> list[str]:
    from ttlstate import unsaferow

    return unsaferow.field_names(schema)


@pytest.mark.slow
def test_checkpoint_format_v2(ck):
    """File names carry checkpoint ids; the latest version follows the commit log's ids."""
    expected = {}
    for rows in st.generate_events(N_FILES, 40, n_keys=10, seed=17)[:HALF]:
        for r in rows:
            n, total, last = expected.get(r["key"], (0, 0, ""))
            expected[r["key"]] = (n + 1, total + r["value"], max(last, r["ts"].replace(" ", "T") + "Z"))
    doc = cli_json("inspect", ck.v2)
    assert doc["keys"] == last_rows_total(ck.v2_run) == len(expected)
    for s in doc["operators"][0]["stores"]:
        assert s["versions"] == s["changelogs"] == [1, 2, 3] and s["latestVersion"] == HALF
        names = sorted(p.name for p in pathlib.Path(s["path"]).glob("*.changelog"))
        assert all(re.fullmatch(r"\d_[0-9a-f-]{36}_([0-9a-f-]{36}|0)\.changelog", n) for n in names), names
    state = {e["key"]["key"]: (e["value"]["count"], e["value"]["sum"], e["value"]["max"])
             for d in dump_all(ck.v2).values() for e in d["entries"]}
    assert state == expected
    assert cli("verify", ck.v2).stdout.strip().endswith("all good")


# ---------------------------------------------------------------------------------------
# TTL

@pytest.mark.slow
@pytest.mark.matrix
def test_inspect_ttl_histogram_and_dump_timestamps(ck):
    ts = tq.batch_timestamps(ck.ttl)
    assert sorted(ts) == [0, 1, 2] and ts[0] < ts[1] < ts[2]
    stamps, counts = {}, {}
    for d in dump_all(ck.ttl).values():
        assert d["valueLayout"] == "ttl"
        for e in d["entries"]:
            stamps[e["key"]["key"]] = e["ttlTimestampMs"]
            counts[e["key"]["key"]] = e["value"]["count"]
            assert e["ttlTimestamp"].endswith(" UTC")
    assert stamps == {k: ts[b] for k, b in TTL_LAST_BATCH.items()}
    assert counts == TTL_COUNTS

    now = ts[2] + HOUR - 1  # the last batch's entries have 1 ms left, the others are expired
    doc = cli_json("inspect", ck.ttl, "--ttl", "1h", "--now", now)
    [op] = doc["operators"]
    assert doc["keys"] == op["keys"] == last_rows_total(ck.ttl_run) == len(TTL_COUNTS)
    assert op["ttl"] == {"valueLayouts": ["ttl"], "dbTtl": [True], "ttlMs": [HOUR],
                         "batchTimestampMs": ts[2], "clocks": ["BatchTimestamp"]}
    assert sum(s.get("liveKeysAtVersionClock", 0) for s in op["stores"]) == len(TTL_COUNTS)
    assert sum(s.get("liveKeysNow", 0) for s in op["stores"]) == 2
    for s in op["stores"]:
        assert s["manifests"] == [1, 2, 3] and s["changelogs"] == []
        assert sum(n for _, n in s["ttl"]["timestamps"]) == s["keys"]
    h = op["ttlHistogram"]
    assert h["basis"] == "remainingTtl" and h["now"] == now
    buckets = {b["label"]: b["entries"] for b in h["buckets"]}
    assert buckets == {"expired": 3, "<= 1s": 2, "<= 10s": 0, "<= 1m": 0, "<= 10m": 0, "<= 1h": 0,
                       "<= 6h": 0, "<= 1d": 0, "<= 7d": 0, "<= 30d": 0, "> 30d": 0}

    text = cli("inspect", ck.ttl, "--ttl", "1h", "--now", now).stdout
    assert "RocksDB TTL compaction filter: on" in text and "duration: 1h (given)" in text
    assert re.search(r"^\s+expired\s+3\s+#{40}$", text, re.M), text
    assert re.search(r"^\s+<= 1s\s+2\s+#{27}$", text, re.M), text
    # without the TTL (the checkpoint does not record it): the entries' age
    age = cli_json("inspect", ck.ttl, "--now", ts[2] + 30_000)["operators"][0]
    assert age["ttlHistogram"]["basis"] == "age"
    assert sum(b["entries"] for b in age["ttlHistogram"]["buckets"]) == len(TTL_COUNTS)
    assert {b["label"]: b["entries"] for b in age["ttlHistogram"]["buckets"]}["<= 1m"] >= 2
    text = cli("inspect", ck.ttl, "--now", ts[2] + 30_000).stdout
    assert "duration: not recorded in the checkpoint (give --ttl)" in text
    assert "Age (time since last write; give --ttl for the remaining time-to-live)" in text


# ---------------------------------------------------------------------------------------
# verify

@pytest.mark.slow
@pytest.mark.matrix
def test_verify_passes_on_good_checkpoints(ck):
    for path in (ck.agg, ck.join, ck.ttl):
        out = cli("verify", path).stdout
        assert out.strip().endswith("files checked, all good"), out
    doc = cli_json("verify", ck.agg)
    # 4 partitions x (3 manifests + 3 changelogs) and their SSTs
    assert doc["ok"] is True and doc["problems"] == [] and doc["filesChecked"] > 24


@pytest.mark.slow
def test_verify_names_the_file_and_version_of_each_damage(ck, tmp_path):
    from ttlstate import manifest

    keys = {s["partition"]: s["keys"] for s in cli_json("inspect", ck.agg)["operators"][0]["stores"]}
    part = max(keys, key=keys.get)
    rel = pathlib.Path("state") / "0" / str(part)
    sst_name = manifest.read(str(ck.agg / rel / "3.manifest"), 3).ssts[0].name
    first = min(v for v in (1, 2, 3)
                if sst_name in {f.name for f in manifest.read(str(ck.agg / rel / f"{v}.manifest"), v).ssts})

    def damaged(case: str, damage) -> tuple[pathlib.Path, list[str]]:
        copy = tmp_path / case
        shutil.copytree(ck.agg, copy)
        damage(copy / rel)
        p = cli("verify", copy, rc=1)
        problems = [line for line in p.stdout.splitlines() if line.startswith("PROBLEM ")]
        assert p.stdout.strip().endswith("files checked, 1 problem"), p.stdout
        return copy, problems

    def flip(path: pathlib.Path, at: int | None = None):
        data = bytearray(path.read_bytes())
        at = len(data) // 2 if at is None else at
        data[at] ^= 0x10
        path.write_bytes(bytes(data))

    # (a) a bit flipped in an SST
    copy, [line] = damaged("sst-flip", lambda d: flip(d / "sst" / sst_name))
    sst = copy / rel / "sst" / sst_name
    assert line.startswith(f"PROBLEM State file {sst} (version {first}) is unreadable: SST {sst_name}: CRC32 "), line

    # (b) a truncated changelog
    def truncate(d):
        f = d / "5.changelog"
        f.write_bytes(f.read_bytes()[:f.stat().st_size // 2])
    copy, [line] = damaged("changelog-truncated", truncate)
    assert line.startswith(f"PROBLEM State file {copy / rel / '5.changelog'} (version 5) is unreadable: "), line

    # (c) a missing SST
    copy, [line] = damaged("sst-missing", lambda d: (d / "sst" / sst_name).unlink())
    sst = copy / rel / "sst" / sst_name
    assert line.startswith(f"PROBLEM State file {sst} (version {first}) is unreadable: "
                           f"SST {sst_name}: file does not exist"), line
    # ... which also makes the latest version unloadable: inspect and dump say so
    p = cli("inspect", copy, rc=1)
    assert f"partition {part} store default: cannot load version 6: [TTLSTATE_CORRUPT_FILE]" in p.stdout
    p = cli("dump", copy, "--operator", 0, "--partition", part, rc=2)
    assert f"error: [TTLSTATE_CORRUPT_FILE] State file {sst} (version 3) is unreadable" in p.stderr

    # (d) a corrupted manifest
    copy, [line] = damaged("manifest-corrupt", lambda d: flip(d / "2.manifest"))
    assert line.startswith(f"PROBLEM State file {copy / rel / '2.manifest'} (version 2) is unreadable: "
                           "file checksum mismatch"), line
    doc = json.loads(cli("verify", copy, "--json", rc=1).stdout)
    assert doc["ok"] is False and [(p["path"], p["version"]) for p in doc["problems"]] == [
        (str(copy / rel / "2.manifest"), 2)]
    # a changelog missing from the middle: the versions that need it are named
    copy = tmp_path / "changelog-missing"
    shutil.copytree(ck.agg, copy)
    (copy / rel / "5.changelog").unlink()
    p = cli("verify", copy, rc=1)
    assert (f"PROBLEM State file {copy / rel / '5.changelog'} (version 5) is unreadable: file does not "
            "exist; the load of version 6 needs it") in p.stdout


@pytest.mark.slow
def test_unknown_operator_partition_store_or_version(ck):
    cases = [
        (["--operator", 7, "--partition", 0], f"unknown operator 7 in {ck.join / 'state'}; it has: 0"),
        (["--operator", 0, "--partition", 9, "--store", "left-keyToNumValues"],
         f"unknown partition 9 in {ck.join / 'state' / '0'}; it has: 0, 1, 2, 3"),
        (["--operator", 0, "--partition", 1, "--store", "middle"],
         "unknown store middle in operator 0; it has: left-keyToNumValues, left-keyWithIndexToValue, "
         "right-keyToNumValues, right-keyWithIndexToValue"),
        (["--operator", 0, "--partition", 1], "operator 0 has 4 stores: choose one (--store)"),
        (["--operator", 0, "--partition", 1, "--store", "left-keyToNumValues", "--version", 40],
         "unknown version 40 in operator 0, partition 1, store left-keyToNumValues; it has: 1, 2, 3, 4, 5"),
    ]
    for args, message in cases:
        p = cli("dump", ck.join, *args, rc=2)
        assert p.stderr.startswith("error: [TTLSTATE_UNKNOWN_STATE] " + message), p.stderr


# ---------------------------------------------------------------------------------------
# Spark's state reader on ttlstate checkpoints

def read_state(spark, checkpoint, **options) -> list[tuple]:
    reader = spark.read.format("statestore")
    for k, v in options.items():
        reader = reader.option(k, v)
    return st.sort_rows(st.to_plain(r) for r in reader.load(str(checkpoint)).collect())


@pytest.mark.slow
def test_spark_state_reader_gives_the_hdfs_providers_rows(ck, spark):
    reads = {}
    for options in ({}, {"batchId": HALF - 1}, {"batchId": 4}):
        hdfs = read_state(spark, ck.agg_hdfs, **options)
        ours = reads[tuple(options.items())] = read_state(spark, ck.agg, **options)
        assert len(hdfs) > 5, options
        assert ours == hdfs, options
    # ... and our offline dump of the latest version agrees with it
    latest = reads[()]  # the read of the latest version above: read_state(spark, ck.agg)
    dumped = st.sort_rows(
        ((e["key"]["key"],), (e["value"]["count"], e["value"]["sum"],
                              dt.datetime.fromisoformat(e["value"]["max"][:-1])), p)
        for p, d in dump_all(ck.agg).items() for e in d["entries"])
    assert dumped == latest


@pytest.mark.slow
def test_spark_state_reader_on_a_join_side(ck, spark):
    for side in ("left", "right"):
        hdfs = read_state(spark, ck.join_hdfs, joinSide=side)
        ours = read_state(spark, ck.join, joinSide=side)
        assert len(hdfs) > 3, side
        assert ours == hdfs, side
    earlier_hdfs = read_state(spark, ck.join_hdfs, joinSide="left", batchId=1)
    assert read_state(spark, ck.join, joinSide="left", batchId=1) == earlier_hdfs
