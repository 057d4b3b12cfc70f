"""A PySpark driver of its own for checkpoints on a Hadoop file system (run by tests/test_s3.py,
tests/test_hdfs.py and the S3 requests benchmark as `python checkpoint_pipeline.py SPEC`): the
spec's `driver_classpath` (S3A's jars; none for HDFS, whose client is pyspark's) and, for
ttlstate, its jar on `spark.jars` and `providerClass`, as a user would set them. Runs each query
of the spec over the JSON files of its input directory (one file per batch,
Trigger.AvailableNow) with its checkpoint at `<checkpoint>/<query>` (an `s3a://` or `hdfs://`
URI or a local path), collecting every batch's rows by batch id (foreachBatch), and writes them
to `out_file` as JSON. `run_parts`, `run_each` and `run_cases` do in one driver what would take
several (`run_cases` sets each case's provider on the session as its queries start)."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import streaming as st

HERE = pathlib.Path(__file__).resolve().parent
PREFIX = "spark.sql.streaming.stateStore.ttlstate."
# TTL on and reached by nothing in the run; maintenance often and a snapshot after every second
# changelog, so that snapshots (manifests and their SSTs) are uploaded as well as changelogs
TTLSTATE_CONFS = {PREFIX + "ttl": "1h", "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
                  "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2"}
QUERIES = {"agg": (st.agg_by_key, "update"), "dedup": (st.dedup_within_watermark, "append"),
           "dropdup": (st.dedup_with_watermark, "append"),
           "session": (st.session_agg, "append"), "pandas": (st.pandas_running_count, "update"),
           "join": (st.inner_join, "append")}  # the join: the events joined with themselves


def main(spec: dict):
    import ttlstate
    if spec.get("submitted"):  # by spark-submit, with its master and jars
        b = st.session_builder("ttlstate-checkpoint", master=None)
    else:
        b = st.session_builder("ttlstate-checkpoint").config("spark.jars", ttlstate.jar_path())
    b = b.config("spark.sql.shuffle.partitions", "2")
    if spec.get("driver_classpath"):
        b = b.config("spark.driver.extraClassPath", ":".join(spec["driver_classpath"]))
    for k, v in spec["confs"].items():
        b = b.config(k, v)
    # with the tests' class-data archive of its classpath; spark-submit ships only streaming.py
    spark = b.getOrCreate() if spec.get("submitted") else st.get_or_create(b)
    spark.sparkContext.setLogLevel(spec.get("log_level", "ERROR"))
    if "later_parts" in spec:  # run_parts: the queries again after each later part is moved in
        out = {"1": _run_queries(spark, spec, spec["checkpoint"], spec["queries"])}
        for part, staged in enumerate(spec["later_parts"], start=2):
            for path in staged:
                os.replace(path, os.path.join(spec["input"], os.path.basename(path)))
            out[str(part)] = _run_queries(spark, spec, spec["checkpoint"], spec["queries"])
    elif "runs" in spec:  # run_each: the rows first, then each checkpoint's queries
        import state_rows
        out = {"rows": state_rows.rows(spark, spec["rows"]),
               "runs": {label: _run_queries(spark, spec, root, queries) for label, (root, queries) in spec["runs"].items()}}
    elif "cases" in spec:  # run_cases: each case's queries with its confs, and only those, set
        out, previous = {}, set()
        for label, (root, queries, confs) in spec["cases"].items():
            for k in previous - confs.keys():
                spark.conf.unset(k)
            for k, v in confs.items():
                spark.conf.set(k, v)
            previous = set(confs)
            out[label] = _run_queries(spark, spec, root, queries)
    else:
        out = _run_queries(spark, spec, spec["checkpoint"], spec["queries"])
    with open(spec["out_file"], "w") as f:
        json.dump(out, f)
    spark.stop()


def _run_queries(spark, spec: dict, checkpoint: str, queries: list) -> dict:
    out = {}
    for name in queries:
        build, mode = QUERIES[name]
        batches = {}

        def collect(df, batch_id, batches=batches, name=name):
            batches[batch_id] = sorted(json.dumps(st.to_plain(r), default=str) for r in df.collect())
            with open(spec["out_file"] + ".batches", "a") as f:  # kept if the driver is killed
                f.write(json.dumps({"query": name, "batch": batch_id, "rows": batches[batch_id]}) + "\n")

        inputs = [st.read_events(spark, spec["input"]) for _ in range(2 if name == "join" else 1)]
        q = (build(*inputs).writeStream.outputMode(mode).foreachBatch(collect)
             .option("checkpointLocation", f"{checkpoint}/{name}").trigger(availableNow=True).start())
        q.awaitTermination(600)
        progress = [json.loads(p.json) for p in q.recentProgress]
        out[name] = {"batches": batches, "ttlstate_metrics": st.served_by(progress, st.TTLSTATE)}
    return out


def run(work: pathlib.Path, tag: str, provider: str, checkpoint: str, confs: dict, **kw) -> dict:
    """Runs this driver on the JSON files of `work/events` (or `input_dir`) and returns its
    output; asserts it exited 0. `while_running(proc)`, if given, is called once the driver has
    started."""
    code, log = _drive(work, tag, provider, checkpoint, confs, **kw)
    assert code == 0, f"{tag} exited {code}:\n{log[-4000:]}"
    return json.loads((work / f"{tag}.json").read_text())


def run_parts(work: pathlib.Path, tag: str, provider: str, checkpoint: str, confs: dict, files, parts,
              **kw) -> dict:
    """`run` of each part ((start, stop) of `files`) in turn in one driver, where one driver a
    part would each start a JVM: the first part is written to `work/events`, each later one is
    staged beside it and moved in once the queries have processed the part before (as a query
    restarted then would find it). Returns {part number: output as `run` gives}."""
    st.write_files(work / "events", files, *parts[0])
    staged = [[str(p) for p in st.write_files(work / f"staged-{n}", files, *part)]
              for n, part in enumerate(parts[1:], start=2)]
    return {int(k): v for k, v in run(work, tag, provider, checkpoint, confs, later_parts=staged, **kw).items()}


def run_each(work: pathlib.Path, tag: str, provider: str, runs: dict, confs: dict, rows: list,
             **kw) -> tuple[dict, dict]:
    """One driver where `run` would take several (each a JVM started): Spark's state data source
    first reads `rows` (as `state_rows.read` does), then the queries of each of `runs` ({label:
    (checkpoint, queries)}) run in turn; returns ({label: output as `run` gives}, rows)."""
    out = run(work, tag, provider, "", confs, runs={k: [ck, list(q)] for k, (ck, q) in runs.items()}, rows=rows,
              **kw)
    return out["runs"], out["rows"]


def run_cases(work: pathlib.Path, tag: str, cases: dict, **kw) -> dict:
    """One driver where `run` would take one per case: {label: (provider, checkpoint, queries,
    confs)}, each case's queries run with its provider and confs set on the session (a query
    takes the session's SQL confs as it starts) and the confs of the case before unset (back to
    Spark's default, not to the builder's: cases should not set the builder's keys). What the
    JVM reads once is the first case's: the store service's confs as it starts, the maintenance
    interval. Returns {label: output as `run` gives}."""
    kw.setdefault("timeout_s", max(900, 300 * len(cases)))  # the cases one after another
    return run(work, tag, st.HDFS, "", {}, cases={
        label: [ck, list(queries), {**confs, st.PROVIDER_CLASS_KEY: provider}]
        for label, (provider, ck, queries, confs) in cases.items()}, **kw)


def batches_written(work: pathlib.Path, tag: str) -> dict:
    """query -> batch id (str) -> rows of the batches a driver run finished, killed or not."""
    out: dict = {}
    path = work / f"{tag}.json.batches"
    for line in path.read_text().splitlines() if path.exists() else []:
        b = json.loads(line)
        out.setdefault(b["query"], {})[str(b["batch"])] = b["rows"]
    return out


def run_failing(work: pathlib.Path, tag: str, provider: str, checkpoint: str, confs: dict, **kw) -> str:
    """As `run`, for a driver that must fail: asserts it exited non-zero, returns its output."""
    code, log = _drive(work, tag, provider, checkpoint, confs, **kw)
    assert code not in (0, None), f"{tag} exited {code}:\n{log[-4000:]}"
    return log


def _drive(work: pathlib.Path, tag: str, provider: str, checkpoint: str, confs: dict, *, queries=("agg", "dedup"),
           driver_classpath=(), while_running=None, timeout_s: float = 900, input_dir: pathlib.Path | None = None,
           log_level: str = "ERROR", **each) -> tuple[int | None, str]:
    spec = dict(queries=list(queries), input=str(input_dir or work / "events"), checkpoint=checkpoint,
                out_file=str(work / f"{tag}.json"), driver_classpath=list(driver_classpath),
                confs={**confs, st.PROVIDER_CLASS_KEY: provider}, log_level=log_level, **each)
    proc, log, log_path = st.spawn_spec_process(str(HERE / "checkpoint_pipeline.py"), spec, work, tag)
    try:
        if while_running is not None:
            while_running(proc)
        code = st.wait_or_kill(proc, timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    return code, log_path.read_text(errors="replace")


def assert_same_batches(expected_runs: dict, runs: dict, queries=("agg", "dedup"), min_batches: int = 1,
                        min_rows: int = 1) -> None:
    """Each part's batches (part -> query -> output) are the expected ones batch for batch, the
    actual ones served by ttlstate and the expected ones not."""
    for q in queries:
        for part in expected_runs:
            expected, actual = expected_runs[part][q], runs[part][q]
            assert actual["ttlstate_metrics"] and not expected["ttlstate_metrics"], q
            assert len(expected["batches"]) >= min_batches, (q, part, sorted(expected["batches"]))
            assert actual["batches"] == expected["batches"], (q, part)
        assert sum(len(rows) for part in expected_runs for rows in expected_runs[part][q]["batches"].values()) >= min_rows, q


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f))
