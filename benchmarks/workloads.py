"""The query-level workloads of the provider comparison (issue 5): deterministic input files,
one per micro-batch, and the queries that read them.

Every workload writes its input once (seeded), under `root`, and `start(spark, ...)` starts
its query with `maxFilesPerTrigger=1` and `Trigger.AvailableNow`, so every provider
processes exactly the same batches. `SCALE` (env `BENCH_SCALE`, default 1.0) scales the
rows per batch (and the aggregation's keys) for quicker runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import random
from typing import Callable

SCALE = float(os.environ.get("BENCH_SCALE", "1.0"))
BATCHES = int(os.environ.get("BENCH_BATCHES", "20"))
T0 = 1_700_000_000  # seconds: event time of batch 0


def _scaled(n: int) -> int:
    return max(1, int(n * SCALE))


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    description: str
    rows_per_batch: int  # input rows per batch, all inputs together
    write_input: Callable[[pathlib.Path], None]
    start: Callable  # (spark, input root, checkpoint) -> StreamingQuery
    batches: int | None = None  # its own number of batches (None: BENCH_BATCHES)
    first_batch_rows: int | None = None  # batch 0 differs (it loads the state), else rows_per_batch

    def total_rows(self) -> int:
        n = self.batches or BATCHES
        first = self.rows_per_batch if self.first_batch_rows is None else self.first_batch_rows
        return first + (n - 1) * self.rows_per_batch


# json.dumps with separators builds an encoder per call; one encoder writes the same bytes 2.4x faster
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _write_lines(path: pathlib.Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as out:
        for r in rows:
            out.write(_ENCODE(r))
            out.write("\n")
    os.replace(tmp, path)


def _stream(spark, directory: pathlib.Path, schema: str):
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(directory))


def _sink(df, checkpoint: str, mode: str):
    return (df.writeStream.outputMode(mode).format("noop").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start())


# -- aggregation: 1,000,000 keys, 200,000 rows per batch ------------------------------

AGG_KEYS = _scaled(1_000_000)
AGG_ROWS = _scaled(200_000)


def _agg_input(root: pathlib.Path) -> None:
    rng = random.Random(1)
    for b in range(BATCHES):
        _write_lines(root / "in" / f"part-{b:03d}.json",
                     ({"k": rng.randrange(AGG_KEYS), "v": rng.randrange(100)} for _ in range(AGG_ROWS)))


def _agg_start(spark, root: pathlib.Path, checkpoint: str):
    from pyspark.sql import functions as F
    df = _stream(spark, root / "in", "k LONG, v LONG").groupBy("k").agg(
        F.sum("v").alias("s"), F.count("*").alias("c"))
    return _sink(df, checkpoint, "update")


# -- dropDuplicates: mostly new ids, event time one minute per batch ------------------

DEDUP_ROWS = _scaled(200_000)


def _dedup_input(root: pathlib.Path) -> None:
    rng = random.Random(2)
    next_id = 0
    recent: list[int] = []
    for b in range(BATCHES):
        rows = []
        for _ in range(DEDUP_ROWS):
            if recent and rng.random() < 0.1:  # 10% repeat an id of the last two batches
                i = rng.choice(recent)
            else:
                i = next_id
                next_id += 1
            rows.append({"id": i, "ts": T0 + 60 * b + rng.randrange(60)})
        recent = recent[-DEDUP_ROWS:] + [r["id"] for r in rows]
        _write_lines(root / "in" / f"part-{b:03d}.json", rows)


def _dedup_start(spark, root: pathlib.Path, checkpoint: str):
    from pyspark.sql import functions as F
    df = (_stream(spark, root / "in", "id LONG, ts LONG")
          .withColumn("ts", F.col("ts").cast("timestamp"))
          .withWatermark("ts", "2 minutes").dropDuplicatesWithinWatermark(["id"]))
    return _sink(df, checkpoint, "append")


# -- stream-stream join with watermarks ------------------------------------------------

JOIN_ROWS = _scaled(50_000)  # per side and batch
JOIN_LARGE_ROWS = _scaled(200_000)  # the join whose state outgrows the JVM's cache (issue 15)


def _join_input(rows: int):
    def write(root: pathlib.Path) -> None:
        rng = random.Random(3)
        pending: list[tuple[int, int]] = []  # impressions whose click comes in the next batch
        for b in range(BATCHES):
            imps, clicks, later = [], [], []
            for j in range(rows):
                i = b * rows + j
                ts = T0 + 60 * b + rng.randrange(60)
                imps.append({"imp": i, "its": ts})
                r = rng.random()
                if r < 0.3:
                    clicks.append({"clk": i, "cts": ts + rng.randrange(30)})
                elif r < 0.5:
                    later.append((i, ts))
            clicks += [{"clk": i, "cts": ts + 60} for i, ts in pending]
            clicks += [{"clk": -1 - rng.randrange(10**9), "cts": T0 + 60 * b} for _ in range(rows - len(clicks))]
            pending = later
            _write_lines(root / "left" / f"part-{b:03d}.json", imps)
            _write_lines(root / "right" / f"part-{b:03d}.json", clicks)
    return write


def _join_start(spark, root: pathlib.Path, checkpoint: str):
    from pyspark.sql import functions as F
    imps = (_stream(spark, root / "left", "imp LONG, its LONG").withColumn("its", F.col("its").cast("timestamp"))
            .withWatermark("its", "1 minute"))
    clicks = (_stream(spark, root / "right", "clk LONG, cts LONG").withColumn("cts", F.col("cts").cast("timestamp"))
              .withWatermark("cts", "1 minute"))
    df = imps.join(clicks, F.expr("clk = imp AND cts >= its AND cts <= its + interval 2 minutes"))
    return _sink(df, checkpoint, "append")


# -- windowed counts, append mode: tumbling windows, and session windows (whose operator
# scans each key's sessions by prefix twice a batch) -------------------------------------

WINDOW_ROWS = _scaled(200_000)
WINDOW_KEYS = 10_000
SESSION_ROWS = _scaled(100_000)
SESSION_KEYS = 20_000


def _timed_keys_input(seed: int, rows: int, keys: int):
    """Per batch `rows` rows {k, ts} over `keys` keys, in that batch's minute of event time."""
    def write(root: pathlib.Path) -> None:
        rng = random.Random(seed)
        for b in range(BATCHES):
            _write_lines(root / "in" / f"part-{b:03d}.json",
                         ({"k": rng.randrange(keys), "ts": T0 + 60 * b + rng.randrange(60)} for _ in range(rows)))
    return write


def _windowed_count_start(window: Callable):
    """groupBy(window(F), k).count() with a one-minute watermark, append mode."""
    def start(spark, root: pathlib.Path, checkpoint: str):
        from pyspark.sql import functions as F
        df = (_stream(spark, root / "in", "k LONG, ts LONG").withColumn("ts", F.col("ts").cast("timestamp"))
              .withWatermark("ts", "1 minute")
              .groupBy(window(F), "k").count())
        return _sink(df, checkpoint, "append")
    return start


# -- scale: state far larger than the JVM's cache (issue 15) ------------------------------

SCALE_DEDUP_BATCHES = 16
SCALE_DEDUP_ROWS = _scaled(1_000_000)


def _scale_dedup_input(root: pathlib.Path) -> None:
    for b in range(SCALE_DEDUP_BATCHES):  # every id new: the state grows by a million per batch
        _write_lines(root / "in" / f"part-{b:03d}.json",
                     ({"id": b * SCALE_DEDUP_ROWS + i} for i in range(SCALE_DEDUP_ROWS)))


def _scale_dedup_start(spark, root: pathlib.Path, checkpoint: str):
    df = _stream(spark, root / "in", "id LONG").dropDuplicates(["id"])
    return _sink(df, checkpoint, "append")


STATE_UPDATE_ROWS = _scaled(200_000)
STATE_BATCHES = 11  # batch 0 loads the state, batches 1..10 update it


def _state_agg_input(keys: int):
    def write(root: pathlib.Path) -> None:
        rng = random.Random(5)
        _write_lines(root / "in" / "part-000.json", ({"k": k, "v": 1} for k in range(keys)))
        for b in range(1, STATE_BATCHES):
            _write_lines(root / "in" / f"part-{b:03d}.json",
                         ({"k": rng.randrange(keys), "v": rng.randrange(100)} for _ in range(STATE_UPDATE_ROWS)))
    return write


def _state_agg(name: str, keys: int) -> "Workload":
    return Workload(
        name,
        f"groupBy(k).agg(sum, count), update mode: batch 0 writes {keys:,} keys, batches 1..{STATE_BATCHES - 1} "
        f"update {STATE_UPDATE_ROWS:,} random keys each (cost against state size)",
        STATE_UPDATE_ROWS, _state_agg_input(keys), _agg_start, batches=STATE_BATCHES, first_batch_rows=keys)


SCALE_WORKLOADS = {w.name: w for w in (
    Workload("dropDuplicates-scale", f"dropDuplicates(id) without a watermark: {SCALE_DEDUP_BATCHES} batches of "
             f"{SCALE_DEDUP_ROWS:,} new ids (the state ends at {SCALE_DEDUP_BATCHES * SCALE_DEDUP_ROWS:,} keys)",
             SCALE_DEDUP_ROWS, _scale_dedup_input, _scale_dedup_start, batches=SCALE_DEDUP_BATCHES),
    _state_agg("aggregation-state-1m", _scaled(1_000_000)),
    _state_agg("aggregation-state-10m", _scaled(10_000_000)),
)}

WORKLOADS = {w.name: w for w in (
    Workload("aggregation", f"groupBy(k).agg(sum, count), update mode: {AGG_KEYS:,} keys, "
             f"{AGG_ROWS:,} rows per batch", AGG_ROWS, _agg_input, _agg_start),
    Workload("dropDuplicates", f"withWatermark(2 min).dropDuplicatesWithinWatermark(id), append: {DEDUP_ROWS:,} rows "
             "per batch, 90% new ids, one minute of event time per batch", DEDUP_ROWS, _dedup_input, _dedup_start),
    Workload("join", f"impressions x clicks inner join, watermarks 1 min, clicks within 2 min: "
             f"{JOIN_ROWS:,} rows per side and batch", 2 * JOIN_ROWS, _join_input(JOIN_ROWS), _join_start),
    Workload("join-large", f"the join at {JOIN_LARGE_ROWS:,} rows per side and batch (state of about "
             f"{6 * JOIN_LARGE_ROWS:,} keys, beyond the JVM's cache)", 2 * JOIN_LARGE_ROWS,
             _join_input(JOIN_LARGE_ROWS), _join_start),
    Workload("window", f"groupBy(window(ts, 1 min), k).count(), watermark 1 min, append: "
             f"{WINDOW_ROWS:,} rows per batch over {WINDOW_KEYS:,} keys", WINDOW_ROWS,
             _timed_keys_input(4, WINDOW_ROWS, WINDOW_KEYS), _windowed_count_start(lambda F: F.window("ts", "1 minute"))),
    Workload("session", f"groupBy(session_window(ts, 20 s), k).count(), watermark 1 min, append: "
             f"{SESSION_ROWS:,} rows per batch over {SESSION_KEYS:,} keys (a prefix scan of each key's "
             "sessions to restore them and another to save them)", SESSION_ROWS,
             _timed_keys_input(6, SESSION_ROWS, SESSION_KEYS),
             _windowed_count_start(lambda F: F.session_window("ts", "20 seconds"))),
)}


def workload(name: str) -> Workload:
    return WORKLOADS.get(name) or SCALE_WORKLOADS[name]


def ensure_input(name: str, root: pathlib.Path) -> pathlib.Path:
    """The workload's input under `root/<name>` (written once; a marker says it is complete)."""
    w = workload(name)
    d = root / f"{name}-s{SCALE:g}-b{w.batches or BATCHES}"
    marker = d / ".complete"
    if not marker.exists():
        w.write_input(d)
        marker.write_text("ok\n")
    return d
