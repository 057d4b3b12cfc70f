"""`python -m ttlstate repartition`: rescale the state of a stopped query to N shuffle partitions.

What Spark 4.3's offline state repartition does for its own RocksDB provider (and refuses for
every other one), done offline on a local ttlstate checkpoint (docs/decisions/065-repartition.md):

1. The last committed batch L is the state to rescale; the checkpoint must have no batch
   that started without committing (a running or failed query), except an interrupted
   rescale to the same N, which is finished.
2. For each operator and store, each of the L's `spark.sql.shuffle.partitions` old partitions
   is loaded at version L + 1 by the store's own load path (`checkpoint_reader.materialise`)
   and every entry goes, with its stored value bytes as they are (TTL timestamp included), to
   the new partition Spark's `HashPartitioning` gives its key: `pmod(hash(key columns), N)`
   (`spark_hash`). Every key is checked to sit where that hash puts it among the old
   partitions first, so a placement this module does not reproduce is refused, not guessed.
3. Each new partition's store is written as version L + 2, a ttlstate snapshot (manifest and
   SSTs, `Store.snapshot`) that the normal load path reads.
4. Like Spark's `OfflineStateRepartitionRunner`: batch L + 1 is added to the offset log, a
   copy of L's entry whose conf says `spark.sql.shuffle.partitions` = N, and to the commit
   log, a copy of L's commit. The restarted query runs batch L + 2 with N partitions, loading
   version L + 2.

Local file systems only (a path or a `file:` URI), as `checkpoint_reader`; the CLI rescales a
checkpoint on another Hadoop file system in a local copy and writes back what changed
(`remote_checkpoint.written_back`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
from typing import Callable

from rocksdict import WriteBatch

from . import checkpoint_reader as cr
from . import layout, prefix_key, scratch, spark_hash, statefile
from .checkpoint_logs import CheckpointLogs
from .engine import db_items
from .errors import (RepartitionInvalidPartitionsError, RepartitionNotStoppedError,
                     RepartitionUnsupportedError)
from .store import Store
from .ttl import codec
from .ttl.config import TtlConfig

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
_BATCH = 10_000  # entries per WriteBatch
_ZSTD_FRAME = b"\x28\xb5\x2f\xfd"  # a changelog compressed whole (statefile); the others' are LZ4

# Spark's operator names (operator metadata) whose state keys are placed by hash partitioning
# of the key (of its prefix columns for a session window, of the join key for a join).
SUPPORTED_OPERATORS = {
    "stateStoreSave": "streaming aggregation",
    "dedupe": "dropDuplicates",
    "dedupeWithinWatermark": "dropDuplicatesWithinWatermark",
    "sessionWindowStateStoreSaveExec": "session window aggregation",
    "flatMapGroupsWithState": "mapGroupsWithState / flatMapGroupsWithState",
    "applyInPandasWithState": "applyInPandasWithState",
    "symmetricHashJoin": "stream-stream join",
}
_WHY_NOT = {
    "globalLimit": "a streaming limit keeps its state in one partition, whatever the shuffle "
                   "partitions",
    "transformWithStateExec": "ttlstate does not serve transformWithState",
    "transformWithStateInPySparkExec": "ttlstate does not serve transformWithState",
}

Progress = Callable[[int, int, str], None]


@dataclasses.dataclass
class Result:
    checkpoint: str
    old_partitions: int
    new_partitions: int
    read_batch: int  # the last committed batch whose state was rescaled
    new_batch: int  # the batch recorded for the rescale
    version: int  # the state version written (new_batch + 1)
    stores: list[dict]  # {operator, operatorName, store, keys, keysPerPartition}
    retried: bool  # an interrupted rescale to the same count was finished


def repartition(location: str, num_partitions, progress: Progress | None = None) -> Result:
    """Rescale the state of the stopped query at `location` to `num_partitions` (see the module
    docstring). Raises a `RepartitionError` (or a checkpoint reader error) before it changes
    anything when it cannot."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions <= 0:
        raise RepartitionInvalidPartitionsError(
            f"--partitions {num_partitions!r}: the number of shuffle partitions must be a "
            "positive integer")
    loc = cr.CheckpointLocation(location)
    logs = _Logs(loc.path)
    last_commit, last_offset = logs.last(logs.commits), logs.last(logs.offsets)
    if last_commit is None:
        raise RepartitionNotStoppedError(
            f"{loc.path} has no committed batch (commits/ is empty): run the query until a "
            "batch commits, stop it, then rescale")
    if last_offset is None:
        raise RepartitionNotStoppedError(f"{loc.path} has commits but no offset log (offsets/)")
    committed_meta = logs.metadata(last_commit)
    old_n = _partitions_of(committed_meta, logs.path(logs.offsets, last_commit))
    retried = False
    interrupted = _rescale_to(logs, last_offset, last_commit) if last_offset == last_commit + 1 else None
    if interrupted == num_partitions:
        retried = True  # an interrupted rescale to the same count: finish it
    elif interrupted is not None:
        raise RepartitionNotStoppedError(
            f"{loc.path}: batch {last_offset} is a rescale to {interrupted} partitions that did "
            f"not finish: run it again with --partitions {interrupted} first, then rescale to "
            f"{num_partitions}")
    elif last_offset != last_commit:
        raise RepartitionNotStoppedError(
            f"{loc.path}: batch {last_offset} started (offsets/{last_offset}) and did not commit "
            f"(the last commit is batch {last_commit}): the query is running or failed. Stop "
            "the query, or restart it until its last batch commits, then rescale")
    if old_n == num_partitions and not retried:
        raise RepartitionInvalidPartitionsError(
            f"{loc.path}: the query already runs with {num_partitions} shuffle partitions "
            f"(batch {last_commit}): nothing to rescale")
    commit = logs.commit_doc(last_commit)
    if any(commit.get("stateUniqueIds") or {}):
        raise RepartitionUnsupportedError(
            f"{loc.path}: the commit log records state checkpoint ids (stateStore."
            "checkpointFormatVersion=2); the rescale supports checkpoint format version 1 only")
    new_batch = last_commit + 1
    version = new_batch + 1
    plans = _plan(loc, old_n, last_commit + 1)
    with scratch.directory("repartition") as tmp:
        built: list[_Built] = []
        written: list[str] = []
        try:
            for i, plan in enumerate(plans):
                if progress:
                    progress(i, len(plans), plan.label)
                built.append(_rescale_store(plan, num_partitions, version, os.path.join(tmp, str(i))))
            if progress:
                progress(len(plans), len(plans), "writing")
            try:
                for b in built:
                    _install(b, written)
                if not retried:
                    logs.add_offset(new_batch, last_commit, num_partitions)
                    written.append(logs.path(logs.offsets, new_batch))
                logs.add_commit(new_batch, last_commit)
            except BaseException:
                for path in reversed(written):
                    with contextlib.suppress(OSError):
                        os.remove(path)
                raise
        finally:
            for b in built:
                for t in b.targets:
                    t.close(delete_files=True)
    return Result(loc.path, old_n, num_partitions, last_commit, new_batch, version,
                  [{"operator": b.plan.op.id, "operatorName": b.plan.op.name, "store": b.plan.store,
                    "keys": sum(b.counts), "keysPerPartition": b.counts} for b in built],
                  retried)


# -- the checkpoint's offset and commit logs ------------------------------------------------

class _Logs(CheckpointLogs):
    """The logs, as the rescale reads and extends them."""

    def __init__(self, path: str):
        super().__init__(path, RepartitionUnsupportedError)

    def add_offset(self, batch: int, from_batch: int, num_partitions: int):
        """Batch `batch` in the offset log: `from_batch`'s entry with the new partition count."""
        if os.path.exists(self.path(self.offsets, batch)):
            raise RepartitionNotStoppedError(f"{self.path(self.offsets, batch)} appeared while the "
                                             "state was rescaled: is the query running?")
        self.write(self.offsets, batch, self.with_conf(from_batch, {SHUFFLE_PARTITIONS: str(num_partitions)}),
                   "repartition")

    def add_commit(self, batch: int, from_batch: int):
        """Batch `batch` in the commit log: a copy of `from_batch`'s commit (its watermark)."""
        if os.path.exists(self.path(self.commits, batch)):
            raise RepartitionNotStoppedError(f"{self.path(self.commits, batch)} appeared while the "
                                             "state was rescaled: is the query running?")
        self.write(self.commits, batch, "\n".join(self.lines(self.commits, from_batch)), "repartition")


def _partitions_of(meta: dict, path: str) -> int:
    value = meta["conf"].get(SHUFFLE_PARTITIONS)
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise RepartitionUnsupportedError(
            f"{path}: the offset metadata records no {SHUFFLE_PARTITIONS} ({value!r})") from None
    return n


def _rescale_to(logs: _Logs, batch: int, committed: int) -> int | None:
    """The partition count of offset entry `batch` if it is a rescale of `committed` that did
    not commit (equal to `committed`'s entry but for the partition count), else None."""
    try:
        new, old = logs.lines(logs.offsets, batch), logs.lines(logs.offsets, committed)
        new_meta, old_meta = json.loads(new[1]), json.loads(old[1])
        n = int(new_meta["conf"][SHUFFLE_PARTITIONS])
        if str(n) == old_meta["conf"].get(SHUFFLE_PARTITIONS):
            return None
        new_meta["conf"] = {k: v for k, v in new_meta["conf"].items() if k != SHUFFLE_PARTITIONS}
        old_meta["conf"] = {k: v for k, v in old_meta["conf"].items() if k != SHUFFLE_PARTITIONS}
    except (RepartitionUnsupportedError, IndexError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return n if new_meta == old_meta and new[0] == old[0] and new[2:] == old[2:] else None


# -- planning: which stores, where their keys' columns are -----------------------------------

@dataclasses.dataclass
class _StorePlan:
    op: cr.OperatorInfo
    store: str
    sources: list  # StoreDir of each old partition (None: no directory, an empty store)
    read_version: int
    key_schema: dict
    hash_fields: int  # the key columns Spark's partitioning hashes: the first ones
    prefix_cols: int  # ttlstate's prefix-scan key envelope ([u32 BE len][prefix][key])
    store_path: Callable[[int], str]  # partition -> the store's directory

    @property
    def label(self) -> str:
        return f"operator {self.op.id} ({self.op.name}), store {self.store}"


def _plan(loc: cr.CheckpointLocation, old_n: int, read_version: int) -> list[_StorePlan]:
    plans = []
    for op in loc.operators():
        if op.name not in SUPPORTED_OPERATORS:
            why = _WHY_NOT.get(op.name, "its state is not known to be placed by hash partitioning "
                                        "of its key")
            raise RepartitionUnsupportedError(
                f"operator {op.id} ({op.name or f'no operator metadata in state/{op.id}/_metadata'}): "
                f"cannot be rescaled: {why}. Supported: "
                + ", ".join(f"{v} ({k})" for k, v in SUPPORTED_OPERATORS.items()))
        for info in op.stores:
            schema = loc.schema(op.id, info.name)
            if schema is None:
                raise RepartitionUnsupportedError(
                    f"operator {op.id} ({op.name}), store {info.name}: no state schema recorded "
                    "(state/<op>/0/.../_metadata/schema): the key columns are unknown")
            key_schema = schema[0]
            n_fields = len(key_schema.get("fields", []))
            if not n_fields:  # hashing the empty key moved the state to 42 % N, never read again
                raise RepartitionUnsupportedError(
                    f"operator {op.id} ({op.name}), store {info.name}: a key of no columns, a "
                    "global aggregation (groupBy() without a key): it keeps its state in one "
                    "partition, whatever the shuffle partitions")
            hash_fields = n_fields
            if info.name.endswith("keyWithIndexToValue"):
                if not n_fields or key_schema["fields"][-1]["name"] != "index":
                    raise RepartitionUnsupportedError(
                        f"operator {op.id} ({op.name}), store {info.name}: the key does not end "
                        "with the join state's index column")
                hash_fields = n_fields - 1
            elif info.num_prefix_cols:
                hash_fields = info.num_prefix_cols
            bad = spark_hash.unhashable_column(key_schema, hash_fields)
            if bad is not None:
                raise RepartitionUnsupportedError(
                    f"operator {op.id} ({op.name}), store {info.name}: key column `{bad[0]}` has "
                    f"type {bad[1]}: Spark's hash partitioning of it is not reproduced, so its "
                    "keys cannot be placed; nothing was changed")
            sources = []

            def store_path(p: int, op_id=op.id, name=info.name) -> str:
                return cr.store_path(loc.state_dir, op_id, p, name)

            for p in range(old_n):
                path = store_path(p)
                sd = cr.StoreDir(op.id, p, info.name, path) if os.path.isdir(path) else None
                if sd is not None:
                    _check_ttlstate(sd, read_version)
                sources.append(sd)
            plans.append(_StorePlan(op, info.name, sources, read_version, key_schema, hash_fields,
                                    info.num_prefix_cols, store_path))
    return plans


def _check_ttlstate(sd: cr.StoreDir, version: int):
    """Refuses a store whose files are not ttlstate's (another provider's checkpoint) or
    that lacks the committed version."""
    foreign = sorted(e for e in os.listdir(sd.path)
                     if e.endswith((".delta", ".snapshot", ".zip")))
    if foreign:
        raise RepartitionUnsupportedError(
            f"{sd.path} holds {', '.join(foreign[:3])}: state written by another state store "
            "provider (HDFS-backed or Spark's RocksDB one), not by ttlstate. Rescale it with "
            "Spark's own repartition (RocksDB provider) instead")
    if version not in sd.versions():
        raise RepartitionUnsupportedError(
            f"{sd.label}: no files of version {version}, the state of the last committed batch "
            f"(versions there: {cr.format_ranges(sd.versions()) or 'none'})")
    newest = next((f for f in reversed(sd.files) if f.version == version), None)
    with open(newest.path, "rb") as f:
        magic = f.read(8)
    if magic[:7] not in (statefile.MAGIC[:7], b"TTLMANI") and magic[:4] != _ZSTD_FRAME:
        raise RepartitionUnsupportedError(
            f"{newest.path} is not a ttlstate state file (magic {magic!r}): state written by "
            "another state store provider. Rescale it with Spark's own repartition instead")


# -- rescaling one store ----------------------------------------------------------------------

@dataclasses.dataclass
class _Built:
    plan: _StorePlan
    targets: list[Store]
    snapshots: list[tuple[int, str, list]]  # per new partition: (numKeys, manifest, [(sst, path, size)])
    counts: list[int]


def _rescale_store(plan: _StorePlan, n: int, version: int, tmp: str) -> _Built:
    """Load every old partition of the store, send each entry to its new partition's store,
    and snapshot each new store as `version` into `tmp`."""
    layouts, db_ttls, batch_ts = set(), set(), -1
    targets: list[Store] = []
    batches: list[WriteBatch] = []
    pending = [0] * n
    counts = [0] * n
    try:
        for p, sd in enumerate(plan.sources):
            if sd is None:
                continue
            with cr.materialise(sd, plan.read_version) as loaded:
                store = loaded.store
                layouts.add(store.layout)
                if loaded.db_ttl is not None:
                    db_ttls.add(loaded.db_ttl)
                batch_ts = max(batch_ts, store.batch_ts)
                if not targets:
                    ttl = TtlConfig() if store.layout == statefile.LAYOUT_PLAIN else TtlConfig(
                        ttl_ms=cr._READ_TTL_MS, compaction_filter=bool(loaded.db_ttl))
                    targets = [Store(f"repartition:{plan.label}:{q}", os.path.join(tmp, str(q)), ttl)
                               for q in range(n)]
                    batches = [WriteBatch(raw_mode=True) for _ in range(n)]
                elif len(layouts) > 1:
                    raise RepartitionUnsupportedError(
                        f"{plan.label}: the old partitions' state has different value layouts "
                        "(TTL on in some, off in others); run one batch with the final TTL "
                        "setting, stop the query, then rescale")
                for key, stored in db_items(store.db, b"", set()):
                    q = _placement(plan, key, p, len(plan.sources), n)
                    batches[q].put(key, stored)
                    counts[q] += 1
                    if store.layout == statefile.LAYOUT_TTL:
                        targets[q].hist.add(codec.timestamp(stored))
                    pending[q] += 1
                    if pending[q] >= _BATCH:
                        targets[q].db.write(batches[q])
                        batches[q], pending[q] = WriteBatch(raw_mode=True), 0
        if not targets:  # no old partition has a directory: empty stores
            targets = [Store(f"repartition:{plan.label}:{q}", os.path.join(tmp, str(q)))
                       for q in range(n)]
            batches = [WriteBatch(raw_mode=True) for _ in range(n)]
        snapshots = []
        for q, t in enumerate(targets):
            t.db.write(batches[q])
            t.num_keys, t.version, t.batch_ts, t.cursor = counts[q], version, batch_ts, b""
            v, num_keys, manifest_path, ssts = t.snapshot(os.path.join(tmp, f"snapshot-{q}"))
            snapshots.append((num_keys, manifest_path, ssts))
    except BaseException:
        for t in targets:
            t.close(delete_files=True)
        raise
    return _Built(plan, targets, snapshots, counts)


def _placement(plan: _StorePlan, key: bytes, old_p: int, old_n: int, n: int) -> int:
    """The new partition of a stored key; checks Spark's hash puts it in `old_p` of `old_n`."""
    try:
        row = prefix_key.key_row(key, plan.prefix_cols)
    except ValueError as e:
        raise RepartitionUnsupportedError(f"{plan.label}: {e}") from None
    try:
        h = spark_hash.signed(spark_hash.hash_row(row, plan.key_schema, plan.hash_fields))
    except (spark_hash.UnhashableError, ValueError, IndexError) as e:
        raise RepartitionUnsupportedError(
            f"{plan.label}: cannot compute Spark's hash partitioning of the key "
            f"({plan.key_schema.get('fields', [])[:plan.hash_fields]}): {e}") from None
    if h % old_n != old_p:
        raise RepartitionUnsupportedError(
            f"{plan.label}: key 0x{row.hex()} is in partition {old_p} of {old_n}, Spark's hash "
            f"partitioning of its first {plan.hash_fields} column(s) places it in partition "
            f"{h % old_n}: the placement is not reproduced, so nothing was changed")
    return h % n


def _install(b: _Built, written: list[str]):
    """Copy each new partition's snapshot into the checkpoint. Files of later versions cannot
    be there: nothing after the last commit ran."""
    for q, (num_keys, manifest_path, ssts) in enumerate(b.snapshots):
        install_snapshot(b.plan.store_path(q), b.targets[q].version, manifest_path, ssts, written, "repartition")


def install_snapshot(path: str, version: int, manifest_path: str, ssts: list, written: list[str], tag: str,
                     id: str | None = None):
    """Copy a store's snapshot (`Store.snapshot`: its manifest and SSTs) into the store
    directory `path`: the SSTs, then (atomically) `<version>.manifest` (format v2, checkpoint
    id `id`: `<version>_<id>.manifest`), which replaces one an interrupted run left. Appends
    each file written to `written`; `tag` names the command in the temp file's name."""
    os.makedirs(os.path.join(path, layout.SST_DIR), exist_ok=True)
    for name, local, _ in ssts:
        dest = os.path.join(path, layout.SST_DIR, name)
        shutil.copyfile(local, dest)
        written.append(dest)
    copy_atomically(manifest_path, os.path.join(path, layout.name(version, layout.MANIFEST, id)), written, tag)


def copy_atomically(src: str, dest: str, written: list[str], tag: str):
    """Copy `src` to `dest` through a temp file renamed over it (a reader sees the old file or
    the whole new one); appends both names to `written`."""
    tmp = dest + f".ttlstate-{tag}.tmp"
    shutil.copyfile(src, tmp)
    written.append(tmp)
    os.replace(tmp, dest)
    written.append(dest)
