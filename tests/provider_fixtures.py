"""Checkpoints written by Spark's own providers, kept in `tests/data/provider-checkpoints/`: the
sources of `migrate` (issue 45) as a Spark release wrote them, so every later ttlstate (and every
later Spark it runs on) proves it still migrates them.

Each fixture is one stopped query of `checkpoint_pipeline.QUERIES` (its seeded input, two files)
run on one provider and its settings; the directory holds the checkpoint (`ck/<query>`), the
rows Spark's state data source read from it right after the run (`rows.json`) and how it was
made (`made.json`: provider, confs, Spark version). `python tests/provider_fixtures.py [out dir]`
makes them with the pyspark that is installed.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checkpoint_pipeline as pipeline  # noqa: E402
import state_rows  # noqa: E402
import streaming as st  # noqa: E402

DATA = pathlib.Path(__file__).parent / "data" / "provider-checkpoints"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
V2 = {**CHANGELOG, "spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}

# name: (provider, its confs, query): each source format with a different operator family
FIXTURES = {
    "hdfs-agg": (st.HDFS, {}, "agg"),
    "rocksdb-changelog-session": (ROCKSDB, CHANGELOG, "session"),
    "rocksdb-snapshot-join": (ROCKSDB, {}, "join"),
    "rocksdb-v2-dedup": (ROCKSDB, V2, "dedup"),
}


def rows(name: str) -> list[str]:
    """The state rows Spark's state data source read from fixture `name` when it was made."""
    return json.loads((DATA / name / "rows.json").read_text())


def make(out: pathlib.Path) -> None:
    import pyspark

    files = st.generate_events(2, 60, n_keys=12, n_values=6, seed=95)
    for name, (provider, confs, query) in FIXTURES.items():
        d = out / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        with tempfile.TemporaryDirectory(prefix="provider-fixture-") as tmp:
            work = pathlib.Path(tmp)
            st.write_files(work / "events", files)
            pipeline.run(work, name, provider, str(d / "ck"), confs, queries=[query])
            ck = str(d / "ck" / query)
            read = state_rows.read(work, "rows", [ck], confs)[ck]
        assert read, f"{name}: no state rows"
        (d / "rows.json").write_text(json.dumps(read, indent=0))
        (d / "made.json").write_text(json.dumps(
            {"provider": provider, "confs": confs, "query": query, "spark": pyspark.__version__}, indent=1))
        print("made", d, len(read), "rows", flush=True)


if __name__ == "__main__":
    make(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DATA)
