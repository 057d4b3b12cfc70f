"""A PySpark driver of its own (`python state_rows.py SPEC`): the rows Spark's state data source
reads from each checkpoint of the spec's `checkpoints` (operator 0, its default store or, for a
join, `joinSide` left; the last committed batch, or [path, batch id] for that batch's state, or
[path, batch id or None, confs] with session confs of its own; the session with the spec's
`confs`), sorted, written to `out_file` as JSON {checkpoint path: [row, ...]}. The provider
that reads is the one the checkpoint's offset log names."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import streaming as st  # noqa: E402


def read(work, tag: str, checkpoints: list, confs: dict) -> dict:
    """Runs this driver (in a process of its own, its files in `work` under `tag`) and returns its
    {checkpoint path: rows}."""
    spec = dict(checkpoints=checkpoints, out_file=str(work / f"{tag}.json"), confs=confs)
    proc, log, log_path = st.spawn_spec_process(__file__, spec, work, tag)
    code = st.wait_or_kill(proc, 600)
    log.close()
    assert code == 0, log_path.read_text(errors="replace")[-4000:]
    return json.loads((work / f"{tag}.json").read_text())


def main(spec: dict):
    import ttlstate
    b = st.session_builder("ttlstate-state-rows").config("spark.jars", ttlstate.jar_path())
    for k, v in spec.get("confs", {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out = rows(spark, spec["checkpoints"])
    with open(spec["out_file"], "w") as f:
        json.dump(out, f)
    spark.stop()


def rows(spark, checkpoints: list) -> dict:
    """{checkpoint path: sorted rows} of `checkpoints` (as in the spec), read in `spark`."""
    out = {}
    for ck in checkpoints:
        ck, batch, confs = (([ck] if isinstance(ck, str) else list(ck)) + [None, None])[:3]
        reader = spark.read.format("statestore").option("path", ck).option("operatorId", 0)
        if batch is not None:
            reader = reader.option("batchId", batch)
        if ck.rstrip("/").endswith("join"):
            reader = reader.option("joinSide", "left")
        with st.session_confs(spark, confs or {}):
            out[ck] = sorted(json.dumps(st.to_plain(r), default=str, sort_keys=True) for r in reader.load().collect())
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f))
