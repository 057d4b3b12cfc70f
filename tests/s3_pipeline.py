"""A PySpark driver of its own (run by tests/test_s3.py as `python s3_pipeline.py SPEC`): S3A
(hadoop-aws and the AWS SDK on the driver's classpath) and, for ttlstate, its jar on
`spark.jars` and `providerClass`, as a user would set them. Runs each query of the spec over the
JSON files of its input directory (one file per batch, Trigger.AvailableNow) with its
checkpoint at `<checkpoint>/<query>` (an `s3a://` URI or a local path), collecting every
batch's rows by batch id (foreachBatch), and writes them to `out_file` as JSON."""

from __future__ import annotations

import json
import sys

import s3_server
import streaming as st

QUERIES = {"agg": (st.agg_by_key, "update"), "dedup": (st.dedup_within_watermark, "append")}


def main(spec: dict):
    import ttlstate
    b = (st.session_builder("ttlstate-s3")
         .config("spark.driver.extraClassPath", ":".join(s3_server.s3a_jars()))
         .config("spark.jars", ttlstate.jar_path()).config("spark.sql.shuffle.partitions", "2"))
    for k, v in spec["confs"].items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out = {}
    for name in spec["queries"]:
        build, mode = QUERIES[name]
        batches = {}

        def collect(df, batch_id, batches=batches):
            batches[batch_id] = sorted(json.dumps(st.to_plain(r), default=str) for r in df.collect())

        q = (build(st.read_events(spark, spec["input"])).writeStream.outputMode(mode).foreachBatch(collect)
             .option("checkpointLocation", f"{spec['checkpoint']}/{name}").trigger(availableNow=True).start())
        q.awaitTermination(600)
        progress = [json.loads(p.json) for p in q.recentProgress]
        out[name] = {"batches": batches, "ttlstate_metrics": st.served_by(progress, st.TTLSTATE)}
    with open(spec["out_file"], "w") as f:
        json.dump(out, f)
    spark.stop()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f))
