"""A PySpark driver of its own (`python state_rows.py SPEC`): the rows Spark's state data source
reads from each checkpoint of the spec's `checkpoints` (operator 0, its default store or, for a
join, `joinSide` left; the last committed batch, or [path, batch id] for that batch's state; the
session with the spec's `confs`), sorted, written to `out_file` as JSON {checkpoint path:
[row, ...]}. The provider that reads is the one the checkpoint's offset log names."""

from __future__ import annotations

import json
import sys

import streaming as st


def main(spec: dict):
    import ttlstate
    b = st.session_builder("ttlstate-state-rows").config("spark.jars", ttlstate.jar_path())
    for k, v in spec.get("confs", {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out = {}
    for ck in spec["checkpoints"]:
        ck, batch = (ck, None) if isinstance(ck, str) else ck
        reader = spark.read.format("statestore").option("path", ck).option("operatorId", 0)
        if batch is not None:
            reader = reader.option("batchId", batch)
        if ck.rstrip("/").endswith("join"):
            reader = reader.option("joinSide", "left")
        out[ck] = sorted(json.dumps(st.to_plain(r), default=str, sort_keys=True) for r in reader.load().collect())
    with open(spec["out_file"], "w") as f:
        json.dump(out, f)
    spark.stop()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f))
