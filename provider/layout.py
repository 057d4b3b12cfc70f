"""The checkpoint layout of a store: what its file names say and which files rebuild a version.
The one owner of the rule: the JVM lists a store's directory and asks a worker (`PLAN`,
`ttlstate.plans`), which plans with these functions; `tests/vectors/layout_*.tsv` pin them.

File names (docs/PROTOCOL.md, "Checkpoint layout of a store"): format v1 `<v>.changelog`,
`<v>.manifest`; format v2 `<v>_<id>_<baseId>.changelog`, `<v>_<id>.manifest`, where `baseId`
is the id of version `v - 1` (`0` for the empty version 0).

Load plans: the files that rebuild version `v`. Format v1: the newest manifest at or below
`v`, then every changelog after it. Format v2: the changelog names walked back (`baseId`)
from `(v, id)` to a manifest of that lineage or to version 0; without an id, the most
recently written file of `v` names it.
"""

from __future__ import annotations

import bisect
import dataclasses
import re

CHANGELOG, MANIFEST = "changelog", "manifest"
EMPTY_BASE_ID = "0"
SST_DIR = "sst"  # a store's SSTs: `<store dir>/sst/<number>-<16 hex>.sst`, shared by its manifests
# Spark's RocksDB provider's SSTs in a store directory (`<v>.zip` lists those of version v): a
# checkpoint migrated between it and ttlstate holds both providers' files
ROCKSDB_PROVIDER_SST_DIR = "SSTs"
# whole names, ASCII digits only (`5.changelog\n` or Arabic-Indic digits name no state file)
_V1 = re.compile(r"(\d+)\.(changelog|manifest)", re.ASCII)
_V2_CHANGELOG = re.compile(r"(\d+)_([^_./]+)_([^_./]+)\.changelog", re.ASCII)
_V2_MANIFEST = re.compile(r"(\d+)_([^_./]+)\.manifest", re.ASCII)


@dataclasses.dataclass(frozen=True)
class FileName:
    """What a state file's name says."""

    version: int
    kind: str  # CHANGELOG or MANIFEST
    id: str | None  # format v2: the version's checkpoint id
    base_id: str | None  # format v2 changelogs: the id of version - 1


def parse(name: str) -> FileName | None:
    """What `name` says, or None if it names no state file."""
    m = _V1.fullmatch(name)
    if m:
        return FileName(int(m.group(1)), m.group(2), None, None)
    m = _V2_CHANGELOG.fullmatch(name)
    if m:
        return FileName(int(m.group(1)), CHANGELOG, m.group(2), m.group(3))
    m = _V2_MANIFEST.fullmatch(name)
    if m:
        return FileName(int(m.group(1)), MANIFEST, m.group(2), None)
    return None


def name(version: int, kind: str, id: str | None = None, base_id: str | None = None) -> str:
    """The name of a state file; `id` None means format v1."""
    if id is None:
        return f"{version}.{kind}"
    if kind == MANIFEST:
        return f"{version}_{id}.{kind}"
    return f"{version}_{id}_{base_id or EMPTY_BASE_ID}.{kind}"


class MissingFile(Exception):
    """A file the plan needs does not exist; `pattern` names it (`*` for an unknown part)."""

    def __init__(self, pattern: str, version: int, needed_for: int):
        self.pattern, self.version, self.needed_for = pattern, version, needed_for
        self.reason = f"file does not exist (needed to load version {needed_for})"
        super().__init__(f"{pattern}: {self.reason}")


class MissingSnapshot(MissingFile):
    """A replay's snapshot version has no manifest (of the lineage replayed); `pattern` names it."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """The files (their listing entries) that rebuild `version`, oldest first: a manifest
    (None: from the empty version 0) and the changelogs after it; `id` the version's checkpoint
    id (format v2; None in v1 and for version 0)."""

    version: int
    manifest: object | None
    changelogs: tuple
    id: str | None = None


class Listing(list):
    """Listing entries with the lookups a plan makes, built once: many plans over one listing
    (a cleanup pass plans every retained version) each cost their own files only."""

    def __init__(self, files=()):
        super().__init__(files)
        self.v1 = {(f.kind, f.version): f for f in self if f.id is None}
        self.v2 = {(f.kind, f.version, f.id): f for f in self if f.id is not None}
        self.v1_manifests = sorted(v for k, v in self.v1 if k == MANIFEST)

    def get(self, kind: str, version: int, id: str | None = None):
        """The listed file of `kind` and `version`: format v1 if `id` is None, else the v2 one of
        that id; None if not listed."""
        return self.v1.get((kind, version)) if id is None else self.v2.get((kind, version, id))


def _listing(files) -> Listing:
    return files if isinstance(files, Listing) else Listing(files)


def plan(files, version: int, id: str | None = None, v2: bool | None = None) -> Plan:
    """The plan of `version` over `files` (objects with `version`, `kind`, `id`, `base_id`,
    `mtime_ns` and `name`; a `Listing` of them for many plans); `v2` the format (None: v2 if
    a file of `version` has an id). Raises MissingFile."""
    files = _listing(files)
    if version == 0:
        return Plan(0, None, ())
    if v2 is None:
        v2 = id is not None or any(f.id is not None and f.version == version for f in files)
    if not v2:
        return _plan_v1(files, version)
    if id is None:
        newest = newest_v2(files, version)
        if newest is None:
            raise MissingFile(f"{version}_*", version, version)
        id = newest.id
    return _plan_v2(files, version, id)


def newest_v2(files, version: int):
    """The most recently written v2 file of `version` (on equal times the greatest name), or None."""
    return max((f for f in files if f.id is not None and f.version == version),
               key=lambda f: (f.mtime_ns, f.name), default=None)


def _plan_v1(files: Listing, version: int) -> Plan:
    below = bisect.bisect_right(files.v1_manifests, version)
    base = files.v1_manifests[below - 1] if below else 0
    logs, _, _ = changelogs(files, base + 1, version, v2=False)
    return Plan(version, files.get(MANIFEST, base) if below else None, logs)


def _plan_v2(files: Listing, version: int, id: str) -> Plan:
    changelogs = []
    v, vid = version, id
    while v > 0:
        m = files.get(MANIFEST, v, vid)
        if m is not None:
            return Plan(version, m, tuple(reversed(changelogs)), id)
        c = files.get(CHANGELOG, v, vid)
        if c is None:
            raise MissingFile(f"{v}_{vid}_*.changelog", v, version)
        changelogs.append(c)
        v, vid = v - 1, c.base_id
    return Plan(version, None, tuple(reversed(changelogs)), id)


def changelogs(files, first: int, version: int, id: str | None = None,
               v2: bool | None = None) -> tuple[tuple, str | None, str | None]:
    """The changelogs of versions `first` to `version` (a change feed's range), oldest first:
    format v1 each version's, format v2 those of the lineage of `(version, id)` (None: the
    most recently written file of `version`); with the id of `version` and of `first - 1`
    (None in v1). Raises MissingFile naming the first one missing."""
    files = _listing(files)
    if v2 is None:
        v2 = id is not None or any(f.id is not None and f.version == version for f in files)
    if not v2:
        out = []
        for v in range(max(first, 1), version + 1):
            f = files.get(CHANGELOG, v)
            if f is None:
                raise MissingFile(name(v, CHANGELOG), v, version)
            out.append(f)
        return tuple(out), None, None
    if id is None and version > 0:
        newest = newest_v2(files, version)
        if newest is None:
            raise MissingFile(f"{version}_*", version, version)
        id = newest.id
    out = []
    vid = id
    for v in range(version, max(first, 1) - 1, -1):
        c = files.get(CHANGELOG, v, vid)
        if c is None:
            raise MissingFile(f"{v}_{vid}_*.changelog", v, version)
        out.append(c)
        vid = c.base_id
    return tuple(reversed(out)), id, vid


def plan_from_snapshot(files, snapshot_version: int, version: int, id: str | None = None,
                       v2: bool | None = None) -> Plan:
    """The plan of `(version, id)` from the manifest of `snapshot_version`, whatever newer
    manifests there are (Spark's `snapshotStartBatchId`): that manifest (format v2: of the
    lineage of `(version, id)`) and the changelogs after it; version 0 is the empty version.
    Raises MissingSnapshot naming the manifest if the version has none (MissingFile for a
    changelog)."""
    if not 0 <= snapshot_version <= version:
        raise ValueError(f"cannot replay version {version} from the snapshot of version {snapshot_version}")
    files = _listing(files)
    logs, id, base_id = changelogs(files, snapshot_version + 1, version, id, v2)
    if v2 is None:
        v2 = id is not None
    if snapshot_version == 0:
        return Plan(version, None, logs, id)
    snapshot_id = base_id if v2 else None
    m = files.get(MANIFEST, snapshot_version, snapshot_id)
    if m is None:
        raise MissingSnapshot(name(snapshot_version, MANIFEST, snapshot_id), snapshot_version, version)
    return Plan(version, m, logs, id)
