"""`python -m ttlstate migrate`: move a stopped query's state between Spark's HDFS-backed
provider, its RocksDB provider and ttlstate, so the query goes on where it stopped
(docs/decisions/107-migrate-between-providers.md).
The steps below are those to ttlstate; to one of Spark's providers, step 3 is that provider's
own code (`io.ttlstate.spark.migrate.ProviderStores`) writing version 1 of each store in a
scratch directory, moved into the checkpoint as version L + 1 (no TTL timestamps).

1. The last committed batch L is the state to move; no batch may have started after it (the
   query is stopped). The source provider is the one offset log entry L names.
2. Each store of each stateful operator is read at L's state (version L + 1) by Spark's state
   data source, so through the source provider's own code (its file formats, compression,
   changelogs), in a local Spark session; the JVM writes each entry out as ttlstate stores its
   key, and the value row's bytes (`io.ttlstate.spark.migrate.StateRows`).
3. Each partition's store becomes a ttlstate snapshot of version L + 1 (a manifest and SSTs)
   written beside the source's files, under names the source provider never uses. With TTL
   on (the TTL settings the query will run with, `--conf`), every entry gets the TTL timestamp
   of batch L: its batch timestamp, or under EventTime its watermark.
4. Last, in one atomic step, offset log entry L is rewritten with ttlstate's provider class:
   the restarted query takes its provider from there and runs batch L + 1 on ttlstate, loading
   version L + 1. Until that step the checkpoint runs on its source provider as before (the
   files written beside are not read by it), and the same command, run again, starts over.

Local file systems only, as `checkpoint_reader`; the CLI migrates a checkpoint on another
Hadoop file system in a local copy and writes back what changed (`remote_checkpoint`), once
it has seen that the checkpoint's logs are still those copied.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import struct
from typing import Callable, Iterator

from rocksdict import WriteBatch

from . import PROVIDER_CLASS, layout, scratch
from . import checkpoint_reader as cr
from .checkpoint_logs import CheckpointLogs
from .errors import (MigrateNotStoppedError, MigrateNotWritableError, MigrateRunningError,
                     MigrateSameProviderError, MigrateUnknownProviderError, MigrateUnsupportedError)
from .repartition import SHUFFLE_PARTITIONS, copy_atomically, install_snapshot
from .store import Store
from .ttl import codec
from .ttl import config as ttl_config

PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
JOIN_FORMAT_KEY = "spark.sql.streaming.join.stateFormatVersion"
FORMAT_VERSION_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "ttlstate": PROVIDER_CLASS,
}
TARGETS = ("ttlstate", "hdfs", "rocksdb")
_BATCH = 10_000  # entries per WriteBatch
_FRAME = struct.Struct(">ii")  # partition, key length

Progress = Callable[[int, int, str], None]


@dataclasses.dataclass
class Result:
    checkpoint: str
    source: str  # provider name (PROVIDERS)
    target: str
    batch: int  # the last committed batch, whose state was moved
    version: int  # the state version written (batch + 1)
    partitions: int
    ttl_timestamp: int | None  # what entries were stamped with (None: TTL off in every store)
    stores: list[dict]  # {operator, operatorName, store, keys, keysPerPartition, bytes}
    dry_run: bool


def provider_name(cls: str) -> str | None:
    return next((name for name, c in PROVIDERS.items() if c == cls), None)


@dataclasses.dataclass
class Plan:
    """A migration checked and ready to run (`prepare`)."""
    loc: cr.CheckpointLocation
    logs: CheckpointLogs
    to: str
    confs: dict[str, str]
    batch: int
    source_cls: str
    source: str
    ops: list[cr.OperatorInfo]
    ids: dict[tuple[int, int, str], str]
    partitions: int
    batch_ts: int
    event_time_ts: int
    before: tuple  # `_log_state` when checked


def migrate(location: str, to: str, confs: dict[str, str] | None = None, dry_run: bool = False,
            progress: Progress | None = None) -> Result:
    """Move the state of the stopped query at `location` to provider `to` (see the module
    docstring); `confs` holds the query's TTL settings. Raises a `MigrateError` (or a checkpoint
    reader error) before the switch when it cannot, leaving the checkpoint as it was."""
    with Sessions() as sessions:
        return run(prepare(location, to, confs), sessions, dry_run, progress)


def prepare(location: str, to: str, confs: dict[str, str] | None = None) -> Plan:
    """Every check of a migration of `location` to `to`, before anything is read or written: a
    refusal (`MigrateError`) changes nothing. Checking all of several checkpoints first is
    how the CLI refuses a set without migrating part of it."""
    confs = confs or {}
    if to not in TARGETS:
        raise MigrateUnsupportedError(f"--to {to!r}: the migration writes {', '.join(TARGETS)} state")
    loc = cr.CheckpointLocation(location)
    logs = CheckpointLogs(loc.path, MigrateUnsupportedError)
    batch = _stopped_batch(loc.path, logs)
    meta = logs.metadata(batch)
    source_cls = meta["conf"].get(PROVIDER_KEY, PROVIDERS["hdfs"])
    source = provider_name(source_cls)
    if source is None:
        raise MigrateUnknownProviderError(
            f"{logs.path(logs.offsets, batch)}: the query runs on state store provider {source_cls}; "
            f"the migration reads {', '.join(PROVIDERS.values())}")
    if source == to:
        raise MigrateSameProviderError(
            f"{loc.path}: the query already runs on {to} ({source_cls}, offsets/{batch}): nothing to migrate")
    _check_writable(loc.path, logs)
    ops = _operators(loc, meta)
    ids = _checkpoint_ids(loc, logs, batch, ops)
    if ids and to != "ttlstate":
        raise MigrateUnsupportedError(
            f"{logs.path(logs.commits, batch)} records state checkpoint ids (checkpointFormatVersion=2): "
            f"the migration writes {to}'s state in checkpoint format version 1 only")
    return Plan(loc, logs, to, confs, batch, source_cls, source, ops, ids, _partitions(meta, logs.path(logs.offsets, batch)),
                int(meta.get("batchTimestampMs", 0)), int(meta.get("batchWatermarkMs", 0)), _log_state(logs))


def run(plan: Plan, sessions: "Sessions", dry_run: bool = False, progress: Progress | None = None) -> Result:
    """Runs a prepared migration in a session of `sessions`; raises before the switch when it
    cannot, leaving the checkpoint as it was."""
    loc, logs, to, confs, batch, ops, ids, n = (plan.loc, plan.logs, plan.to, plan.confs, plan.batch, plan.ops,
                                                plan.ids, plan.partitions)
    event_time_ts, batch_ts, before = plan.event_time_ts, plan.batch_ts, plan.before
    version = batch + 1
    stamped: set[int] = set()
    stores: list[dict] = []
    written: list[str] = []
    spark = sessions.session(plan.source_cls, bool(ids), to)
    with scratch.directory("migrate") as tmp:
        try:
            plans = [(op, info) for op in ops for info in op.stores]
            for i, (op, info) in enumerate(plans):
                label = f"operator {op.id} ({op.name}), store {info.name}"
                if progress:
                    progress(i, len(plans), label)
                if to != "ttlstate" and not dry_run:
                    counts, size = _write_through_provider(spark, loc, op, info, batch, n, to,
                                                           os.path.join(tmp, f"provider-{i}"), written)
                    stores.append({"operator": op.id, "operatorName": op.name, "store": info.name,
                                   "keys": sum(counts), "keysPerPartition": counts, "bytes": size})
                    continue
                ttl = ttl_config.resolve(confs, op.id, info.name)
                stamp = ttl.enabled and to == "ttlstate"  # a dry run to another provider comes here too
                ts = (event_time_ts if ttl.event_time else batch_ts) if stamp else None
                if ts is not None:
                    stamped.add(ts)
                rows_dir = os.path.join(tmp, f"rows-{i}")
                _read_store(spark, loc, op, info, batch, rows_dir)
                counts, sizes = [0] * n, [0] * n

                def install(p: int, t: Store, i=i, op=op, info=info, ts=ts):
                    t.num_keys, t.version, t.cursor = counts[p], version, b""
                    t.batch_ts = ts if ts is not None else batch_ts
                    _, _, manifest_path, ssts = t.snapshot(os.path.join(tmp, f"snapshot-{i}-{p}"))
                    install_snapshot(cr.store_path(loc.state_dir, op.id, p, info.name), version, manifest_path,
                                     ssts, written, "migrate", ids.get((op.id, p, info.name)))

                _fill(None if dry_run else (lambda p, i=i, label=label, ttl=ttl: Store(
                          f"migrate:{label}:{p}", os.path.join(tmp, f"db-{i}-{p}"), ttl)),
                      install, _frames(rows_dir, n, label), n, label, ts, counts, sizes)
                stores.append({"operator": op.id, "operatorName": op.name, "store": info.name,
                               "keys": sum(counts), "keysPerPartition": counts, "bytes": sum(sizes)})
            if progress:
                progress(len(plans), len(plans), "switching")
            if not dry_run:
                if _log_state(logs) != before:
                    raise MigrateRunningError(
                        f"{loc.path}: the offset or commit log changed while the state was migrated "
                        f"(last batch {before[0]} -> {_log_state(logs)[0]}): is the query running? "
                        "Stop it, then migrate again")
                # the switch: one atomic rename; the restarted query takes its provider from here
                logs.write(logs.offsets, batch, logs.with_conf(batch, {PROVIDER_KEY: PROVIDERS[to]}), "migrate")
        except BaseException:
            for path in reversed(written):
                with contextlib.suppress(OSError):
                    os.remove(path)
            raise
    return Result(loc.path, plan.source, to, batch, version, n, stamped.pop() if len(stamped) == 1 else None,
                  stores, dry_run)


# -- checks ------------------------------------------------------------------------------------

def _stopped_batch(path: str, logs: CheckpointLogs) -> int:
    last_commit, last_offset = logs.last(logs.commits), logs.last(logs.offsets)
    if last_commit is None or last_offset is None:
        raise MigrateNotStoppedError(
            f"{path} has no committed batch (commits/ or offsets/ is empty): run the query until a "
            "batch commits, stop it, then migrate")
    if last_offset != last_commit:
        raise MigrateNotStoppedError(
            f"{path}: batch {last_offset} started (offsets/{last_offset}) and did not commit (the last "
            f"commit is batch {last_commit}): the query is running or failed. Stop the query, or "
            "restart it until its last batch commits, then migrate")
    return last_commit


def _operators(loc: cr.CheckpointLocation, meta: dict) -> list[cr.OperatorInfo]:
    ops = loc.operators()
    for op in ops:
        if (op.name or "").startswith("transformWithState"):
            raise MigrateUnsupportedError(
                f"operator {op.id} ({op.name}): transformWithState state cannot be migrated "
                "(ttlstate does not serve transformWithState)")
        if op.name == "symmetricHashJoin":
            fmt = meta["conf"].get(JOIN_FORMAT_KEY, "2")
            if fmt not in ("1", "2"):
                raise MigrateUnsupportedError(
                    f"operator {op.id} ({op.name}): join state format {fmt} ({JOIN_FORMAT_KEY}); "
                    "the migration carries formats 1 and 2")
        if not op.stores:
            raise MigrateUnsupportedError(
                f"operator {op.id} ({op.name}): no operator metadata (state/{op.id}/_metadata): its stores "
                "are unknown")
        for info in op.stores:
            if loc.schema(op.id, info.name) is None:
                raise MigrateUnsupportedError(
                    f"operator {op.id} ({op.name}), store {info.name}: no state schema recorded")
    return ops


def _checkpoint_ids(loc: cr.CheckpointLocation, logs: CheckpointLogs, batch: int,
                    ops: list[cr.OperatorInfo]) -> dict[tuple[int, int, str], str]:
    """Checkpoint format v2: the checkpoint id of each store's version `batch` + 1, which commit
    `batch` records (`stateUniqueIds`) and the restarted query loads; {} in format v1. A
    store's snapshot is written under its id (`<v>_<id>.manifest`)."""
    if not any((logs.commit_doc(batch).get("stateUniqueIds") or {}).values()):
        return {}
    out = {}
    for op in ops:
        for p in op.partitions:
            for info in op.stores:
                committed = loc._committed_id(op, p, info.name)
                if committed is None or committed[0] != batch + 1:
                    raise MigrateUnsupportedError(
                        f"{logs.path(logs.commits, batch)}: no state checkpoint id of operator {op.id}, "
                        f"partition {p}, store {info.name} (checkpoint format v2)")
                out[op.id, p, info.name] = committed[1]
    return out


def _partitions(meta: dict, path: str) -> int:
    try:
        return int(meta["conf"][SHUFFLE_PARTITIONS])
    except (KeyError, TypeError, ValueError):
        raise MigrateUnsupportedError(f"{path}: the offset metadata records no {SHUFFLE_PARTITIONS}") from None


def _check_writable(path: str, logs: CheckpointLogs):
    for d in (logs.offsets, os.path.join(path, "state")):
        if not os.access(d, os.W_OK | os.X_OK):
            raise MigrateNotWritableError(f"{d} cannot be written (permissions): nothing was changed")


def _log_state(logs: CheckpointLogs) -> tuple:
    """What a running query would change: the last offset and commit and their files."""
    out = []
    for d in (logs.offsets, logs.commits):
        last = logs.last(d)
        st = os.stat(logs.path(d, last)) if last is not None else None
        out.append((last, st.st_mtime_ns if st else None, st.st_size if st else None))
    return tuple(out)


# -- reading through Spark ---------------------------------------------------------------------

class Sessions:
    """The local Spark session migrations read and write state in: one for every checkpoint of a
    command, started at the first that needs it, its confs set for each (the source provider,
    checkpoint format v2 when the commit log has ids, as the offset log does not record the
    format); stopped on exit. For a target of Spark's, its provider writes a snapshot at the
    first maintenance (HDFS) or at commit (RocksDB, changelog checkpointing off)."""

    def __init__(self):
        self._spark = None

    def session(self, provider_cls: str, v2: bool, to: str):
        if self._spark is None:
            from pyspark.sql import SparkSession

            from . import jar_path
            self._spark = (SparkSession.builder.master("local[2]").appName("ttlstate-migrate")
                           .config("spark.jars", jar_path()).config("spark.ui.enabled", "false")
                           .config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "1")
                           .getOrCreate())
            self._spark.sparkContext.setLogLevel("ERROR")
        for key, value in {PROVIDER_KEY: provider_cls, FORMAT_VERSION_KEY: "2" if v2 else "1",
                           # a RocksDB checkpoint's changelogs are replayed whichever way it was written
                           "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled":
                               "false" if to == "rocksdb" else "true"}.items():
            self._spark.conf.set(key, value)
        return self._spark

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._spark is not None:
            self._spark.stop()
            self._spark = None


def _read_store(spark, loc: cr.CheckpointLocation, op: cr.OperatorInfo, info: cr.StoreInfo, batch: int,
                out_dir: str):
    """Writes the store's entries at batch `batch`'s state to `out_dir` (`StateRows`)."""
    with _jvm_errors(op, info, "Spark's state data source could not read it"):
        spark.sparkContext._jvm.io.ttlstate.spark.migrate.StateRows.write(
            _reader(spark, loc, op, info, batch)._jdf, out_dir, *_struct_types(spark, loc, op, info),
            info.num_prefix_cols)


def _write_through_provider(spark, loc: cr.CheckpointLocation, op: cr.OperatorInfo, info: cr.StoreInfo,
                            batch: int, n: int, to: str, scratch: str, written: list[str]) -> tuple[list[int], int]:
    """The store's entries at batch `batch`'s state written by Spark's provider `to` as version 1
    of a scratch checkpoint (`ProviderStores`), then moved into the query's store directories as
    version `batch` + 1: the RocksDB provider's SSTs, then its `<v>.zip`; the HDFS-backed
    provider's `<v>.snapshot`. Returns (rows per partition, bytes installed)."""
    with _jvm_errors(op, info, f"could not be read or written as {to}'s state"):
        spark.sparkContext._jvm.io.ttlstate.spark.migrate.ProviderStores.write(
            _reader(spark, loc, op, info, batch)._jdf, scratch, op.id, info.name, PROVIDERS[to],
            *_struct_types(spark, loc, op, info), info.num_prefix_cols, n)
    counts, size, version = [], 0, batch + 1
    for p in range(n):
        with open(os.path.join(scratch, f"count-{op.id}-{info.name}-{p}")) as f:
            counts.append(int(f.read()))
        made = cr.store_path(scratch, op.id, p, info.name)
        dest = cr.store_path(loc.state_dir, op.id, p, info.name)
        os.makedirs(dest, exist_ok=True)
        moves = []  # (from, to), data first, the file that makes the version visible last
        if to == "rocksdb":
            sst_dir = os.path.join(made, layout.ROCKSDB_PROVIDER_SST_DIR)
            for name in sorted(os.listdir(sst_dir)) if os.path.isdir(sst_dir) else []:
                if not name.startswith("."):
                    moves.append((os.path.join(sst_dir, name), os.path.join(dest, layout.ROCKSDB_PROVIDER_SST_DIR, name)))
            moves.append((os.path.join(made, "1.zip"), os.path.join(dest, f"{version}.zip")))
        else:
            moves.append((os.path.join(made, "1.snapshot"), os.path.join(dest, f"{version}.snapshot")))
        for src, dst in moves:
            if not os.path.isfile(src):
                raise MigrateUnsupportedError(f"{op.id}/{p}/{info.name}: {to}'s provider wrote no "
                                              f"{os.path.basename(src)} (files: {sorted(os.listdir(made))})")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            copy_atomically(src, dst, written, "migrate")
            size += os.path.getsize(dst)
    return counts, size


def _struct_types(spark, loc: cr.CheckpointLocation, op: cr.OperatorInfo, info: cr.StoreInfo) -> tuple:
    """The store's key and value schemas as Spark's StructTypes (JVM objects)."""
    from_json = spark.sparkContext._jvm.org.apache.spark.sql.types.DataType.fromJson
    return tuple(from_json(json.dumps(schema)) for schema in loc.schema(op.id, info.name))


@contextlib.contextmanager
def _jvm_errors(op: cr.OperatorInfo, info: cr.StoreInfo, what: str):
    """A JVM failure while moving a store becomes a MigrateUnsupportedError naming the store."""
    from py4j.protocol import Py4JJavaError
    try:
        yield
    except Py4JJavaError as e:
        raise MigrateUnsupportedError(
            f"operator {op.id} ({op.name}), store {info.name}: {what}: {str(e.java_exception)[:1500]}") from None


def _reader(spark, loc: cr.CheckpointLocation, op: cr.OperatorInfo, info: cr.StoreInfo, batch: int):
    """The store's rows at batch `batch`'s state, as Spark's state data source reads them."""
    reader = (spark.read.format("statestore").option("path", loc.path).option("operatorId", op.id)
              .option("batchId", batch))
    if info.name != cr.DEFAULT_STORE:
        reader = reader.option("storeName", info.name)
    return reader.load().select("key", "value", "partition_id")


def _frames(rows_dir: str, n: int, label: str) -> Iterator[tuple[int, bytes, bytes]]:
    """(partition, stored key, value row) of every entry `StateRows` wrote."""
    for path in sorted(glob.glob(os.path.join(rows_dir, "task-*.rows"))):
        with open(path, "rb") as f:
            while head := f.read(_FRAME.size):
                partition, klen = _FRAME.unpack(head)
                key = f.read(klen)
                (vlen,) = struct.unpack(">i", f.read(4))
                value = f.read(vlen)
                if len(key) != klen or len(value) != vlen or not 0 <= partition < n:
                    raise MigrateUnsupportedError(f"{label}: a cut-short or out-of-range entry in {path}")
                yield partition, key, value


def _fill(open_store: Callable[[int], Store] | None, install: Callable[[int, Store], None], entries, n: int,
          label: str, ts: int | None, counts: list[int], sizes: list[int]):
    """Puts the entries into their partition's store, TTL-stamped with `ts`, one partition's store
    open at a time (Spark's state data source reads each partition in a task of its own, so its
    entries come together), then `install`s it; every partition gets a store, an empty one too.
    Memory is one store's, whatever the number of partitions and keys. `open_store` None (a dry
    run): only counts."""
    done: set[int] = set()
    current, store, batch, pending = None, None, None, 0

    def finish():
        if store is not None:
            store.db.write(batch)
            install(current, store)
            store.close(delete_files=True)

    try:
        for p, key, value in entries:
            if p != current:
                finish()
                store = None
                if p in done:
                    raise MigrateUnsupportedError(f"{label}: the entries of partition {p} did not come together")
                done.add(p)
                current, pending = p, 0
                if open_store is not None:
                    store, batch = open_store(p), WriteBatch(raw_mode=True)
            counts[p] += 1
            sizes[p] += len(key) + len(value)
            if store is None:
                continue
            if ts is not None:
                store.hist.add(ts)
            batch.put(key, value if ts is None else codec.encode(ts, value))
            pending += 1
            if pending >= _BATCH:
                store.db.write(batch)
                batch, pending = WriteBatch(raw_mode=True), 0
        finish()
        store = None
        for p in range(n) if open_store is not None else ():
            if p not in done:
                current, store, batch = p, open_store(p), WriteBatch(raw_mode=True)
                finish()
                store = None
    finally:
        if store is not None:
            store.close(delete_files=True)
