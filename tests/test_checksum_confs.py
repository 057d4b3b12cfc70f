"""Spark 4.1+'s checksum confs with ttlstate (issue 16, item 3; docs/decisions/066-checksum-confs.md):
`spark.sql.streaming.stateStore.rowChecksum.enabled` (default false) and
`spark.sql.streaming.checkpoint.fileChecksum.enabled` (default true, in force with checkpoint
format v2 only). Both are implemented inside Spark's own providers (the RocksDB and HDFS ones
write a `<file>.crc` next to each state file through Spark's `ChecksumCheckpointFileManager`,
and store a checksum with each row); Spark does nothing with them for a custom provider.
ttlstate's own checks (a CRC per changelog piece and per manifest, each SST checked against
its manifest, RocksDB's block checksums) are always on, so neither conf changes what it
writes or checks.

An aggregation (update mode, foreachBatch sink, format v2) runs in two parts (a restart after
three of six files) three ways: ttlstate with both confs on, ttlstate with both off, and Spark's
RocksDB provider (changelog checkpointing) with both on. Then a state file of a copy of each
"on" checkpoint is damaged and the query restarted on it: both fail; ttlstate's error names the
checkpoint's file (and the local copy the worker read).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import shutil

import pytest

import streaming as st
from streaming import SPARK_ROCKSDB, TTLSTATE

pytestmark = pytest.mark.slow

ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"
FILE_CHECKSUM = "spark.sql.streaming.checkpoint.fileChecksum.enabled"
V2 = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}
ON = {ROW_CHECKSUM: "true", FILE_CHECKSUM: "true", **V2}
OFF = {ROW_CHECKSUM: "false", FILE_CHECKSUM: "false", **V2}
ROCKSDB_CHANGELOG = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
N_FILES, HALF = 6, 3
VARIANTS = {"ours_on": (TTLSTATE, ON), "ours_off": (TTLSTATE, OFF),
            "rocksdb_on": (SPARK_ROCKSDB, {**ON, **ROCKSDB_CHANGELOG})}


@dataclasses.dataclass
class Runs:
    root: pathlib.Path
    events: pathlib.Path
    files: list
    results: dict  # variant -> RunResult of both parts

    def checkpoint(self, variant: str) -> pathlib.Path:
        return self.root / variant


def _unload_stores(spark) -> None:
    """Unload every loaded provider of this JVM (`streaming.unload_all_stores`), so a restarted
    query loads its state from the checkpoint instead of reusing the stores in memory."""
    st.unload_all_stores(spark)


@pytest.fixture(scope="module")
def runs(_session_holder, candidate, tmp_path_factory) -> Runs:
    if candidate != TTLSTATE:
        pytest.skip("runs ttlstate against Spark's RocksDB provider")
    spark = _session_holder.get()
    root = tmp_path_factory.mktemp("checksum-confs")
    events = root / "events"
    files = st.generate_events(N_FILES + 1, 40, n_keys=10, seed=51)
    parts: dict[str, list] = {v: [] for v in VARIANTS}
    for start, stop in ((0, HALF), (HALF, N_FILES)):
        st.write_files(events, files, start, stop)
        specs = [dict(provider=p, build_df=st.agg_by_key, output_mode="update", input_dir=events,
                      checkpoint_dir=root / v, sink="foreach_batch", confs=c) for v, (p, c) in VARIANTS.items()]
        for v, r in zip(VARIANTS, st.run_side_by_side(spark, specs)):
            st.assert_provider_served(r, VARIANTS[v][0])
            parts[v].append(r)
        _unload_stores(spark)  # the second part loads every store from its checkpoint
    return Runs(root, events, files, {v: st.merge_runs(*p) for v, p in parts.items()})


def _offset_log_conf(checkpoint: pathlib.Path, batch: int, key: str) -> str | None:
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    return json.loads(lines[1]).get("conf", {}).get(key)


def _spark_checksum_files(d: pathlib.Path) -> list[str]:
    """Spark's checksum sidecars (`<file>.crc`; Hadoop's local side files are `.<file>.crc`)."""
    return sorted(str(p.relative_to(d)) for p in d.rglob("*.crc") if not p.name.startswith("."))


def test_a_query_with_the_checksum_confs_on_runs_and_restarts_as_rocksdbs(runs):
    on, off, rocksdb = (runs.results[v] for v in ("ours_on", "ours_off", "rocksdb_on"))
    st.assert_same_rows(rocksdb, on, min_rows=20, what="checksum confs on: ttlstate vs RocksDB")
    st.assert_same_rows(off, on, min_rows=20, what="ttlstate: checksum confs on vs off")
    assert sorted(on.batches) == list(range(N_FILES)), sorted(on.batches)
    # the confs were in force: Spark recorded the row checksum conf in the offset log of both parts
    for batch in (0, N_FILES - 1):
        assert _offset_log_conf(runs.checkpoint("ours_on"), batch, ROW_CHECKSUM) == "true"
        assert _offset_log_conf(runs.checkpoint("ours_off"), batch, ROW_CHECKSUM) == "false"


def test_spark_writes_checksum_files_for_its_provider_and_none_for_ttlstates(runs):
    rocksdb = _spark_checksum_files(runs.checkpoint("rocksdb_on") / "state")
    # Spark's RocksDB provider writes one next to each changelog / zip it uploads (the conf took effect)
    assert any(re.search(r"/\d+_[0-9a-f-]+\.changelog\.crc$", f) for f in rocksdb), rocksdb
    # ... and nothing but a provider writes them: ttlstate's state has none, conf on or off
    assert _spark_checksum_files(runs.checkpoint("ours_on") / "state") == []
    assert _spark_checksum_files(runs.checkpoint("ours_off") / "state") == []
    # ttlstate's stores hold only its own files (and Spark's state schema), conf on as off
    for v in ("ours_on", "ours_off"):
        stores = [d for d in (runs.checkpoint(v) / "state" / "0").iterdir() if d.name.isdigit()]
        assert len(stores) == 4, stores
        for d in stores:
            names = [p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file() and not p.name.startswith(".")]
            assert any(n.endswith(".changelog") for n in names), (v, d, names)
            foreign = [n for n in names if not re.fullmatch(r"\d+_[0-9a-f_-]+\.(changelog|manifest)|sst/[^/]+\.sst|_metadata/schema", n)]
            assert foreign == [], (v, d, foreign)


def _newest_state_file(store: pathlib.Path, snapshot_suffix: str) -> pathlib.Path:
    """The file a load of the store's newest version reads first: its snapshot if it has one,
    else its changelog."""
    by_version: dict[int, dict[str, pathlib.Path]] = {}
    for p in store.iterdir():
        m = re.match(r"^(\d+)_[0-9a-f_-]+(\.changelog|" + re.escape(snapshot_suffix) + ")$", p.name)
        if m:
            by_version.setdefault(int(m.group(1)), {})[m.group(2)] = p
    newest = by_version[max(by_version)]
    return newest.get(snapshot_suffix) or newest[".changelog"]


def _flip_a_bit(path: pathlib.Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    hadoop_crc = path.parent / f".{path.name}.crc"  # as on HDFS or S3: no Hadoop side file to catch it
    if hadoop_crc.exists():
        hadoop_crc.unlink()


def _restart_on_damaged_copy(spark, runs: Runs, variant: str, snapshot_suffix: str, tmp_path) -> tuple[str, pathlib.Path]:
    """Copies the variant's checkpoint, damages partition 0's newest state file and restarts the
    query on one more file; returns the failure's whole text and the damaged file."""
    copy = tmp_path / variant
    shutil.copytree(runs.checkpoint(variant), copy)
    damaged = _newest_state_file(copy / "state" / "0" / "0", snapshot_suffix)
    _flip_a_bit(damaged)
    if not (runs.events / f"part-{N_FILES:03d}.json").exists():
        st.write_files(runs.events, runs.files, N_FILES, N_FILES + 1)  # a batch, so the stores load
    _unload_stores(spark)
    provider, confs = VARIANTS[variant]
    with pytest.raises(Exception) as e:
        r = st.run_query(spark, provider, st.agg_by_key, "update", runs.events, copy, sink="foreach_batch",
                         confs=confs)
        pytest.fail(f"{variant}: the restart on a damaged {damaged.name} succeeded ({len(r.rows)} rows)")
    return str(e.value) + "\n" + str(getattr(e.value, "_stackTrace", "") or ""), damaged


def test_a_damaged_state_file_fails_the_restart_naming_it_with_the_confs_on(runs, spark, tmp_path):
    text, damaged = _restart_on_damaged_copy(spark, runs, "ours_on", ".manifest", tmp_path)
    assert "TTLSTATE_CORRUPT_FILE" in text, text[:4000]
    # the checkpoint's file by its path (the worker read its copy in the local cache)
    assert re.search(rf"State file (file:)?{re.escape(str(damaged))} \(local copy [^)]*\) \(version \d+\) is unreadable",
                     text), text[:4000]
    # Spark's RocksDB provider, with its file checksums on, fails its restart too (measured on
    # 4.3.0: LZ4's "Stream is corrupted" while reading the changelog, which does not name it)
    text, damaged = _restart_on_damaged_copy(spark, runs, "rocksdb_on", ".zip", tmp_path)
    assert "CANNOT_LOAD_STATE_STORE" in text, text[:4000]
    print(f"RocksDB provider, {damaged.name} damaged:",
          [line.strip()[:300] for line in text.splitlines() if "Caused by" in line or "CHECKSUM" in line][:6])
