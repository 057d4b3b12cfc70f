"""Read a ttlstate checkpoint location offline: operators, stores, versions, files, schemas.

Local file systems only (a path or a `file:` URI; the CLI copies a checkpoint on another Hadoop
file system to one first, `remote_checkpoint`). Nothing in the checkpoint is changed:
a version is materialised by the store's own load path (`Store.load`, the manifest's SSTs
checked and hard-linked or copied, the changelogs replayed) into a temporary directory that
is always deleted. The layout is README "Checkpoints" and docs/PROTOCOL.md ("Checkpoint
layout of a store"): `<location>/state/<operator>/<partition>[/<storeName>]/` holds
`<v>.changelog`, `<v>.manifest` (format v2: `<v>_<id>_<baseId>.changelog`,
`<v>_<id>.manifest`) and `sst/<sstName>`; Spark writes the operator's metadata to
`state/<operator>/_metadata/metadata` and the state schema of each store to
`state/<operator>/0[/<storeName>]/_metadata/schema` (schema format v2; format v3 lives in
`state/<operator>/_stateSchema/<storeName>/`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import struct
from typing import Callable, Iterator
from urllib.parse import unquote

from . import layout, manifest, scratch, statefile
from .engine import db_items, file_crc32
from .errors import (CorruptFileError, NoStateError, NotACheckpointError,
                     UnknownStateError)
from .statefile import FILE_CHANGELOG
from .store import Store
from .ttl import codec
from .ttl.config import TtlConfig

Progress = Callable[[int, int, str], None]  # (done, total, what)

DEFAULT_STORE = "default"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_META_DIR = "_metadata"
# A store whose files carry TTL timestamps is loaded with a TTL nothing reaches, so the
# load keeps every entry; with RocksDB's TTL database (`dbTtl`) its TTL is capped at 68 years.
_READ_TTL_MS = 1 << 62



def store_path(state_dir: str, op: int, partition: int, store: str) -> str:
    """The directory of a store under a `state/` directory: `<op>/<partition>[/<store>]`
    (the default store has no directory of its own)."""
    part = os.path.join(state_dir, str(op), str(partition))
    return part if store == DEFAULT_STORE else os.path.join(part, store)


def local_path(location: str) -> str:
    """The local path of `location` (a path or a `file:` URI); other schemes are refused."""
    m = _SCHEME.match(location)
    if m and len(m.group(1)) > 1:  # one letter would be a Windows drive
        if m.group(1).lower() != "file":
            raise NotACheckpointError(
                f"{location}: only local file system paths and file: URIs can be read "
                f"(not {m.group(1)}:); `python -m ttlstate` copies it to a local disk first")
        rest = location[len(m.group(0)):]
        if rest.startswith("//"):
            host, _, rest = rest[2:].partition("/")
            if host not in ("", "localhost"):
                raise NotACheckpointError(f"{location}: a file: URI of another host ({host})")
            rest = "/" + rest
        location = rest
    return os.path.abspath(unquote(location) if m else location)


@dataclasses.dataclass(frozen=True)
class StateFileName:
    """A changelog or manifest of a store, named as PROTOCOL.md says."""

    version: int
    kind: str  # "changelog" or "manifest"
    id: str | None  # format v2: the version's checkpoint id
    base_id: str | None  # format v2 changelogs: the id of version - 1
    path: str
    size: int
    mtime_ns: int

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


def parse_state_file(name: str) -> tuple[int, str, str | None, str | None] | None:
    """(version, kind, id, baseId) of a state file name, or None (`layout.parse`)."""
    f = layout.parse(name)
    return None if f is None else dataclasses.astuple(f)


LoadPlan = layout.Plan


class StoreDir:
    """One store of one partition: its directory, state files and SSTs."""

    def __init__(self, operator: int, partition: int, name: str, path: str,
                 committed: tuple[int, str] | None = None):
        self.operator, self.partition, self.name, self.path = operator, partition, name, path
        self.committed = committed  # format v2: (version, checkpoint id) of the last commit log entry
        self.files: list[StateFileName] = []
        self.ssts: dict[str, tuple[str, int]] = {}  # sstName -> (path, size)
        self.sizes = {"changelogs": 0, "manifests": 0, "ssts": 0, "other": 0}
        for entry in _scandir(path):
            if entry.is_dir(follow_symlinks=False):
                if entry.name == layout.SST_DIR:
                    for f in _scandir(entry.path):
                        if f.is_file(follow_symlinks=False):
                            size = f.stat().st_size
                            self.sizes["ssts"] += size
                            if f.name.endswith(".sst"):
                                self.ssts[f.name] = (f.path, size)
                elif entry.name == _META_DIR:
                    self.sizes["other"] += _tree_size(entry.path)
                continue  # another store's directory (a join partition holds four)
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat()
            parsed = parse_state_file(entry.name)
            if parsed:
                self.files.append(StateFileName(*parsed, entry.path, st.st_size, st.st_mtime_ns))
            bare = entry.name[1:-4] if entry.name.startswith(".") and entry.name.endswith(".crc") else entry.name
            kind = bare.rsplit(".", 1)[-1] + "s"
            self.sizes[kind if kind in ("changelogs", "manifests") else "other"] += st.st_size
        self.files.sort(key=lambda f: (f.version, f.kind, f.id or "", f.mtime_ns))

    def __repr__(self):
        return f"StoreDir(op={self.operator}, part={self.partition}, store={self.name})"

    @property
    def label(self) -> str:
        return f"operator {self.operator}, partition {self.partition}, store {self.name}"

    @property
    def size(self) -> int:
        return sum(self.sizes.values())

    def versions(self) -> list[int]:
        return sorted({f.version for f in self.files})

    def latest(self) -> int:
        return max((f.version for f in self.files), default=0)

    def of_kind(self, kind: str) -> list[StateFileName]:
        return [f for f in self.files if f.kind == kind]

    def plan(self, version: int, id: str | None = None) -> LoadPlan:
        """The load plan of `version` (`layout.plan`); CorruptFileError names a missing file.
        Format v2 without `id`: the id Spark's commit log records for the version if a file
        has it, else the most recently written file's."""
        if id is None and self.committed and self.committed[0] == version and any(
                f.id == self.committed[1] and f.version == version for f in self.files):
            id = self.committed[1]
        try:
            return layout.plan(self.files, version, id)
        except layout.MissingFile as e:
            raise CorruptFileError(os.path.join(self.path, e.pattern), e.version, e.reason) from None


@dataclasses.dataclass
class StoreInfo:
    name: str
    num_prefix_cols: int = 0


@dataclasses.dataclass
class OperatorInfo:
    id: int
    name: str | None  # Spark's operator name (`stateStoreSave`, `symmetricHashJoin`, ...)
    num_partitions: int | None
    stores: list[StoreInfo]  # from Spark's operator metadata, else from the directories
    partitions: list[int]  # partition directories present


class CheckpointLocation:
    """A checkpoint location on a local file system, checked to be one."""

    def __init__(self, location: str):
        self.location = location
        self.path = local_path(location)
        if not os.path.isdir(self.path):
            what = "does not exist" if not os.path.exists(self.path) else "is not a directory"
            raise NotACheckpointError(f"{self.path} {what}: not a checkpoint location")
        markers = [m for m in ("metadata", "offsets", "commits", "state")
                   if os.path.exists(os.path.join(self.path, m))]
        if not markers:
            raise NotACheckpointError(
                f"{self.path} is not a checkpoint location: it has no metadata, offsets/, "
                f"commits/ or state/ (give the query's checkpointLocation)")
        self.state_dir = os.path.join(self.path, "state")

    def last_committed_batch(self) -> int | None:
        return max(_int_names(os.path.join(self.path, "commits"), files=True), default=None)

    def _committed_id(self, op: OperatorInfo, partition: int, store: str) -> tuple[int, str] | None:
        """(version, checkpoint id) of a store in the last commit log entry (format v2 only:
        `stateUniqueIds` = {operator: [[id per store] per partition]})."""
        batch = self.last_committed_batch()
        if batch is None:
            return None
        try:
            with open(os.path.join(self.path, "commits", str(batch)), encoding="utf-8") as f:
                ids = json.loads(f.read().splitlines()[1]).get("stateUniqueIds") or {}
            per_store = ids[str(op.id)][partition]
            names = [s.name for s in op.stores]
            return batch + 1, per_store[names.index(store) if len(per_store) > 1 else 0]
        except (OSError, IndexError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def operators(self) -> list[OperatorInfo]:
        """The stateful operators with state under `state/`; NoStateError if there are none."""
        ops = []
        for op in sorted(_int_names(self.state_dir, files=False)):
            op_dir = os.path.join(self.state_dir, str(op))
            partitions = sorted(_int_names(op_dir, files=False))
            meta = _operator_metadata(op_dir)
            if meta is not None:
                name, num_parts, stores = meta
            else:
                name, num_parts, stores = None, None, []
            found = set()
            for p in partitions:
                found.update(_store_names(os.path.join(op_dir, str(p))))
            known = {s.name for s in stores}
            stores += [StoreInfo(n) for n in sorted(found - known)]
            if partitions or stores:
                ops.append(OperatorInfo(op, name, num_parts, stores, partitions))
        if not ops:
            why = ("it has no state/ directory" if not os.path.isdir(self.state_dir)
                   else f"{self.state_dir} holds no operator's state")
            raise NoStateError(f"{self.path} has no state: {why} (the query has no stateful "
                               "operator, or no batch committed yet)")
        return ops

    def operator(self, op: int) -> OperatorInfo:
        ops = self.operators()
        for o in ops:
            if o.id == op:
                return o
        raise UnknownStateError("operator", op, self.state_dir, [o.id for o in ops])

    def stores(self, op: OperatorInfo) -> list[StoreDir]:
        """Every store directory of the operator, by partition, then store name."""
        out = []
        for p in op.partitions:
            for s in op.stores:
                path = store_path(self.state_dir, op.id, p, s.name)
                if os.path.isdir(path):
                    out.append(StoreDir(op.id, p, s.name, path, self._committed_id(op, p, s.name)))
        return out

    def store(self, op: OperatorInfo, partition: int, name: str | None = None) -> StoreDir:
        """One store; `name` may be omitted when the operator has one store."""
        if partition not in op.partitions:
            raise UnknownStateError("partition", partition, os.path.join(self.state_dir, str(op.id)),
                                    op.partitions)
        names = [s.name for s in op.stores]
        if name is None:
            if len(names) != 1:
                raise UnknownStateError(
                    "store", None, f"operator {op.id}", names,
                    f"operator {op.id} has {len(names)} stores: choose one (--store)")
            name = names[0]
        if name not in names:
            raise UnknownStateError("store", name, f"operator {op.id}", names)
        path = store_path(self.state_dir, op.id, partition, name)
        if not os.path.isdir(path):
            raise UnknownStateError("store", name, f"operator {op.id}, partition {partition}",
                                    sorted(_store_names(os.path.join(self.state_dir, str(op.id), str(partition)))))
        return StoreDir(op.id, partition, name, path, self._committed_id(op, partition, name))

    def schema(self, op: int, store: str) -> tuple[dict, dict] | None:
        """(key schema, value schema) Spark recorded for a store, or None."""
        part0 = os.path.join(self.state_dir, str(op), "0")
        path = os.path.join(part0 if store == DEFAULT_STORE else os.path.join(part0, store),
                            _META_DIR, "schema")
        if os.path.isfile(path):
            return read_schema_file(path, store)
        v3_dir = os.path.join(self.state_dir, str(op), "_stateSchema", store)
        files = sorted(_scandir(v3_dir), key=lambda e: _leading_int(e.name))
        for entry in reversed(files):
            if entry.is_file() and not entry.name.startswith("."):
                return read_schema_file(entry.path, store)
        return None


def read_schema_file(path: str, store: str = DEFAULT_STORE) -> tuple[dict, dict]:
    """(key schema, value schema) of Spark's state schema file, formats v1 to v3 (Spark's
    `SchemaHelper`: Java `writeUTF` strings; v2 and v3 split JSON into chunks)."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def utf() -> str:
        nonlocal pos
        (n,) = struct.unpack_from(">H", data, pos)
        raw = data[pos + 2:pos + 2 + n]
        if len(raw) != n:
            raise ValueError("truncated string")
        pos += 2 + n
        return _java_utf8(raw)

    def chunks() -> str:
        nonlocal pos
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        return "".join(utf() for _ in range(n))

    def short():
        nonlocal pos
        pos += 2

    try:
        version = utf()
        if version == "v1":
            return json.loads(utf()), json.loads(utf())
        if version == "v2":
            return json.loads(chunks()), json.loads(chunks())
        if version == "v3":
            (families,) = struct.unpack_from(">i", data, pos)
            pos += 4
            found = []
            for _ in range(families):
                name = utf()
                short()
                key = chunks()
                short()
                value = chunks()
                chunks()  # key state encoder spec
                chunks()  # user key encoder schema
                found.append((name, json.loads(key), json.loads(value)))
            for name, key, value in found:
                if name in (store, DEFAULT_STORE):
                    return key, value
            if found:
                return found[0][1], found[0][2]
            raise ValueError("no column family")
    except (struct.error, ValueError) as e:
        raise CorruptFileError(path, None, f"not a Spark state schema file ({e})") from None
    raise CorruptFileError(path, None, f"state schema format {version!r} is not supported")


def _java_utf8(raw: bytes) -> str:
    """Java's modified UTF-8: NUL as C0 80, supplementary characters as surrogate pairs."""
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", errors="surrogatepass")
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


# -- materialising a version -------------------------------------------------------------

@dataclasses.dataclass
class Loaded:
    """A version of a store, loaded by `Store.load` into a temporary directory."""

    store_dir: StoreDir
    plan: LoadPlan
    store: Store
    db_ttl: bool | None  # None: no manifest in the plan records it

    @property
    def ttl_layout(self) -> bool:
        return self.store.layout == statefile.LAYOUT_TTL

    def entries(self) -> Iterator[tuple[bytes, bytes, int | None]]:
        """(key, value, TTL timestamp or None) of every stored entry, in key order
        (expired entries that are not cleaned up yet included)."""
        ttl = self.ttl_layout
        for key, stored in db_items(self.store.db, b"", set()):
            if ttl:
                ts, value = codec.decode(stored)
                yield key, value, ts
            else:
                yield key, stored, None


@contextlib.contextmanager
def materialise(store_dir: StoreDir, version: int | None = None) -> Iterator[Loaded]:
    """Load `version` (default: the latest) of a store with the store's own load path,
    in a temporary directory deleted on exit. The store is opened with the value layout of
    the version's newest file, so the load migrates nothing that the version does not.
    """
    versions = store_dir.versions()
    if version is None:
        version = store_dir.latest()
    elif version not in versions and version != 0:
        raise UnknownStateError("version", version, store_dir.label, versions)
    plan = store_dir.plan(version)
    m = manifest.read(plan.manifest.path, plan.manifest.version) if plan.manifest else None
    if plan.changelogs:
        last = plan.changelogs[-1]
        value_layout = statefile.read(last.path, FILE_CHANGELOG, last.version)[0].layout
    else:
        value_layout = m.layout if m else statefile.LAYOUT_PLAIN
    db_ttl = m.db_ttl if m else None
    if value_layout == statefile.LAYOUT_PLAIN:
        ttl = TtlConfig()
    else:
        ttl = TtlConfig(ttl_ms=_READ_TTL_MS, compaction_filter=bool(db_ttl))
    tmp = scratch.mkdtemp("read")
    store = None
    try:
        store = Store(f"op={store_dir.operator},part={store_dir.partition},name={store_dir.name}",
                      os.path.join(tmp, "store"), ttl)
        ssts = {f.name: os.path.join(store_dir.path, layout.SST_DIR, f.name) for f in (m.ssts if m else ())}
        store.load(version, -1, plan.manifest.version if plan.manifest else 0,
                   plan.manifest.path if plan.manifest else "", ssts,
                   [(c.version, c.path) for c in plan.changelogs])
        yield Loaded(store_dir, plan, store, db_ttl)
    finally:
        if store is not None:
            store.close(delete_files=True)
        shutil.rmtree(tmp, ignore_errors=True)


# -- verifying ------------------------------------------------------------------------------

def verify(location: CheckpointLocation, progress: Progress | None = None) -> tuple[int, list[CorruptFileError]]:
    """Check every retained version's files of every store: each manifest (`manifest.read`),
    every SST it lists (size and CRC32, as a load checks them), each changelog (read to the
    end) and that every version's load plan finds its files.

    Returns (files checked, problems), each problem naming the file and the version.
    """
    stores = [s for op in location.operators() for s in location.stores(op)]
    problems: list[CorruptFileError] = []
    checked = 0
    for i, sd in enumerate(stores):
        if progress:
            progress(i, len(stores), sd.label)
        sst_users: dict[str, list[tuple[int, manifest.SstFile]]] = {}
        for f in sd.files:
            checked += 1
            try:
                if f.kind == "manifest":
                    m = manifest.read(f.path, f.version)
                    for sst in m.ssts:
                        sst_users.setdefault(sst.name, []).append((f.version, sst))
                else:
                    for _ in statefile.read(f.path, FILE_CHANGELOG, f.version)[1]:
                        pass
            except CorruptFileError as e:
                problems.append(e)
        for name, users in sorted(sst_users.items()):
            checked += 1
            problem = _check_sst(os.path.join(sd.path, layout.SST_DIR, name), users)
            if problem:
                problems.append(problem)
        missing: dict[str, tuple[CorruptFileError, list[int]]] = {}
        for v in sd.versions():
            heads = {f.id for f in sd.files if f.version == v}
            for head in sorted(heads, key=lambda x: x or ""):
                try:
                    sd.plan(v, head)
                except CorruptFileError as e:
                    missing.setdefault(e.path, (e, []))[1].append(v)
        for e, needed_by in missing.values():
            problems.append(CorruptFileError(
                e.path, e.version, f"file does not exist; the load of version"
                f"{'s' if len(needed_by) > 1 else ''} {format_ranges(needed_by)} needs it"))
    if progress:
        progress(len(stores), len(stores), "done")
    return checked, problems


def _check_sst(path: str, users: list[tuple[int, manifest.SstFile]]) -> CorruptFileError | None:
    """Size and CRC32 of an SST against the manifests that list it (as `Store` checks them)."""
    version, f = users[0]
    also = sorted({v for v, _ in users[1:]})
    tail = f" (also listed by the manifests of versions {format_ranges(also)})" if also else ""
    try:
        size = os.path.getsize(path)
    except OSError:
        return CorruptFileError(path, version, f"SST {f.name}: file does not exist{tail}")
    if size != f.size:
        return CorruptFileError(path, version, f"SST {f.name}: {size} bytes, the manifest says {f.size}{tail}")
    crc = file_crc32(path)
    if crc != f.crc32:
        return CorruptFileError(path, version, f"SST {f.name}: CRC32 {crc:08x}, the manifest says {f.crc32:08x}{tail}")
    for v, other in users[1:]:
        if (other.size, other.crc32) != (f.size, f.crc32):
            return CorruptFileError(path, v, f"SST {f.name}: the manifests of versions {version} and {v} "
                                    "disagree on its size or CRC32")
    return None


def format_ranges(values) -> str:
    """`1-3, 5` for [1, 2, 3, 5]."""
    values = sorted(set(values))
    out = []
    start = prev = None
    for v in values + [None]:
        if start is not None and (v is None or v != prev + 1):
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if v is not None and start is None:
            start = v
        prev = v
    return ", ".join(out)


# -- directory helpers ---------------------------------------------------------------------

def _scandir(path: str) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _tree_size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _int_names(path: str, files: bool) -> list[int]:
    return [int(e.name) for e in _scandir(path)
            if e.name.isdigit() and (e.is_file() if files else e.is_dir())]


def _leading_int(name: str) -> int:
    m = re.match(r"\d+", name)
    return int(m.group(0)) if m else -1


def _store_names(part_dir: str) -> set[str]:
    """Store names of a partition directory: `default` if state files lie in it, plus the
    names of its store subdirectories (a join's four stores)."""
    names = set()
    for e in _scandir(part_dir):
        if e.is_dir():
            if e.name not in (layout.SST_DIR, layout.ROCKSDB_PROVIDER_SST_DIR, _META_DIR) and not e.name.startswith("."):
                names.add(e.name)
        elif parse_state_file(e.name):
            names.add(DEFAULT_STORE)
    return names


def _operator_metadata(op_dir: str) -> tuple[str | None, int | None, list[StoreInfo]] | None:
    """(operator name, partitions, stores) from Spark's `_metadata/metadata` (format v1)."""
    path = os.path.join(op_dir, _META_DIR, "metadata")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        doc = json.loads(lines[1])
        info = doc.get("operatorInfo", {})
        stores = [StoreInfo(s["storeName"], int(s.get("numColsPrefixKey", 0)))
                  for s in doc.get("stateStoreInfo", [])]
        parts = {int(s["numPartitions"]) for s in doc.get("stateStoreInfo", []) if "numPartitions" in s}
        return info.get("operatorName"), (parts.pop() if len(parts) == 1 else None), stores
    except (OSError, IndexError, ValueError, KeyError, TypeError, AttributeError):
        return None
