"""A PySpark driver of its own (run by tests/test_kafka.py as `python kafka_pipeline.py SPEC`):
Spark's Kafka connector and ttlstate's jar on `spark.jars`, as a user would run it. In one
session, each step the spec has, in this order (one driver does several: every driver start
costs some 13 CPU-seconds of a 2-core machine's test run):

- `rows` (topic -> JSON strings): writes them to their topics, one batch write each;
- `out`: runs the aggregation, dropDuplicatesWithinWatermark and the stream-stream join from
  topics `events`, `left` and `right` to `<out>-agg`, `<out>-dedup` and `<out>-join`, each until
  the input available at its start is processed (Trigger.AvailableNow), on the spec's provider and
  checkpoints, on the spec's `master` (default `local[2,4]`: failed tasks are retried); with
  `kill_after_batches` = n, once each query has run n batches in this run, while its next one
  runs or starts, SIGKILLs what `kill` names for it (query -> `worker`: a store worker of the
  store service, this driver's or an executor's; `executor`: an executor's JVM);
- `topics`: reads every record of them and writes them to `out_file` as JSON.

Prints one `RESULT <json>` line per query (with its name under `query`) and one per write or read.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

import cluster
import kafka_broker
import streaming as st

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
QUERIES = {
    "agg": (st.agg_by_key, "update", ("events",)),
    "dedup": (st.dedup_within_watermark, "append", ("events",)),
    "join": (st.inner_join, "append", ("left", "right")),
}


def session(spec: dict):
    import ttlstate
    jars = [ttlstate.jar_path(), *kafka_broker.connector_jars()]
    master = spec.get("master", "local[2,4]")
    b = (st.session_builder("ttlstate-kafka").master(master)
         .config("spark.jars", ",".join(jars)).config("spark.sql.shuffle.partitions", "2"))
    if master.startswith("local-cluster"):
        b = b.config("spark.executor.memory", "1g")
    for k, v in spec.get("confs", {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def events_from(spark, bootstrap: str, topic: str):
    from pyspark.sql import functions as F
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", "150").load())
    parsed = F.from_json(F.col("value").cast("string"), st.EVENT_SCHEMA, {"timestampFormat": st.TS_FORMAT})
    return raw.select(parsed.alias("e")).select("e.*")


class Killer:
    """SIGKILLs `what` (`worker`: a store worker; `executor`: an executor JVM) once `query` has
    run `batches` batches."""

    def __init__(self, spark, query, batches: int, what: str):
        self.spark, self.query, self.batches, self.what = spark, query, batches, what
        self.killed: list[int] = []
        self.done = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _targets(self) -> list[int]:
        executors = cluster.executors(self.spark.sparkContext.applicationId)
        if self.what == "executor":
            return [e.pid for e in executors]
        if not executors:  # local mode: the driver's own service
            return cluster.session_worker_pids(self.spark)
        return [w for e in executors for w in cluster.store_services(e.pid)[1:]]

    def _watch(self):
        while not self.done.wait(0.05):
            if len(self.query.recentProgress) >= self.batches:
                targets = self._targets()
                if targets:
                    os.kill(targets[0], signal.SIGKILL)
                    self.killed.append(targets[0])
                    return


def run(spark, spec: dict):
    from pyspark.sql import functions as F
    bootstrap = spec["bootstrap"]
    for name, (build, mode, topics) in QUERIES.items():
        df = build(*[events_from(spark, bootstrap, t) for t in topics])
        query = (df.select(F.to_json(F.struct(*df.columns)).alias("value")).writeStream
                 .format("kafka").outputMode(mode)
                 .option("kafka.bootstrap.servers", bootstrap).option("topic", f"{spec['out']}-{name}")
                 .option("checkpointLocation", os.path.join(spec["checkpoint"], name))
                 .trigger(availableNow=True).start())
        kill_after, what = spec.get("kill_after_batches"), spec.get("kill", {}).get(name)
        killer = Killer(spark, query, kill_after, what) if kill_after and what else None
        query.awaitTermination(600)
        if killer is not None:
            killer.done.set()
        progress = [json.loads(p.json) for p in query.recentProgress]
        print("RESULT " + json.dumps({"query": name, "batches": [p["batchId"] for p in progress],
                                      "ttlstate_metrics": st.served_by(progress, st.TTLSTATE),
                                      "killed": killer.killed if killer else []}), flush=True)


def produce(spark, spec: dict):
    for topic, rows in spec["rows"].items():
        (spark.createDataFrame([(r,) for r in rows], "value string").write.format("kafka")
         .option("kafka.bootstrap.servers", spec["bootstrap"]).option("topic", topic).save())
    print("RESULT " + json.dumps({"written": {t: len(r) for t, r in spec["rows"].items()}}), flush=True)


def read(spark, spec: dict):
    out = {}
    for topic in spec["topics"]:
        df = (spark.read.format("kafka").option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("subscribe", topic).option("startingOffsets", "earliest").load())
        out[topic] = [r.value for r in df.selectExpr("CAST(value AS STRING) AS value").collect()]
    with open(spec["out_file"], "w") as f:
        json.dump(out, f)
    print("RESULT " + json.dumps({"read": {t: len(v) for t, v in out.items()}}), flush=True)


def main(spec: dict):
    spark = session(spec)
    for key, step in (("rows", produce), ("out", run), ("topics", read)):
        if key in spec:
            step(spark, spec)
    cluster.stop_session(spark)  # and what a local cluster's workers wrote


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f))
