"""Answers a `PLAN` request (docs/PROTOCOL.md): a load plan, a replay from a snapshot, a change
feed's changelogs or a cleanup pass's retention of one store, over the listing of its checkpoint
directory the JVM sent, as indices into that listing. The rules are `layout`'s and
`retention`'s; the JVM only moves and deletes the files.
"""

from __future__ import annotations

import dataclasses

from . import layout, replies, retention
from . import protocol as p
from .errors import TtlstateError

PATH = "{path}"  # a MISSING message's placeholder, which the JVM replaces with the full path


@dataclasses.dataclass(eq=False)  # compared by identity, as the JVM's listing entries were
class Listed:
    """A state file of the listing: what its name says, its index and modification time."""

    index: int
    name: str
    version: int
    kind: str
    id: str | None
    base_id: str | None
    mtime_ns: int


@dataclasses.dataclass(frozen=True)
class Planned:
    """A plan: `manifest` an index (-1: from the empty version 0), `changelogs` (index, version)
    oldest first, `later` the format-v1 files above the version as (index, version, manifest)."""

    id: str | None
    manifest_version: int
    manifest: int
    changelogs: tuple
    later: tuple


@dataclasses.dataclass(frozen=True)
class Missing:
    """A file the plan needs is not listed: `pattern` names it relative to the store directory;
    `message` reads with PATH replaced by its full path."""

    pattern: str
    message: str


@dataclasses.dataclass(frozen=True)
class NoChangelog:
    """`version` has a manifest and no changelog (written with checkpoint.mode=snapshot)."""

    version: int


@dataclasses.dataclass(frozen=True)
class Kept:
    """A cleanup pass's retention (`retention.Retention`), by index."""

    keep_from: int
    complete: bool
    oldest_retained_ms: int
    deletable: tuple
    retained_manifests: tuple


def listing(files) -> list[Listed]:
    """The state files of `files`, (name, modifiedMs) pairs; other names are left out."""
    out = []
    for index, (name, ms) in enumerate(files):
        f = layout.parse(name)
        if f is not None:
            out.append(Listed(index, name, f.version, f.kind, f.id, f.base_id, ms * 1_000_000))
    return out


def answer(purpose: int, v2: bool, version: int, id: str, first: int, min_versions_to_retain: int,
           min_versions_to_delete: int, max_versions_to_delete: int, files):
    """The answer to a PLAN of these fields (`protocol.REQUEST_FIELDS[PLAN]`, `first` being
    `from`): Planned, Missing or NoChangelog, Kept for PLAN_RETENTION."""
    entries = listing(files)
    if purpose == p.PLAN_RETENTION:
        r = retention.of(entries, v2, min_versions_to_retain, min_versions_to_delete, max_versions_to_delete)
        ns = r.oldest_retained_ns
        return Kept(r.keep_from, r.complete, ns if ns == retention.NO_TIME else ns // 1_000_000,
                    tuple(f.index for f in r.deletable),
                    tuple((f.index, f.version) for f in r.retained_manifests))
    id = id or None
    if purpose in (p.PLAN_FROM_SNAPSHOT, p.PLAN_CHANGELOGS):
        v = _without_changelog(entries, first + 1 if purpose == p.PLAN_FROM_SNAPSHOT else first, version)
        if v is not None:
            return NoChangelog(v)
    try:
        if purpose == p.PLAN_LOAD:
            plan = layout.plan(entries, version, id, v2=v2)
        elif purpose == p.PLAN_FROM_SNAPSHOT:
            if not 0 <= first <= version:
                raise TtlstateError(f"cannot replay version {version} from the snapshot of version {first}")
            plan = layout.plan_from_snapshot(entries, first, version, id, v2=v2)
        else:
            logs, id, _ = layout.changelogs(entries, first, version, id, v2=v2)
            return Planned(id, 0, -1, tuple((f.index, f.version) for f in logs), ())
    except layout.MissingSnapshot as e:
        versions = ", ".join(str(v) for v in sorted({f.version for f in entries if f.kind == layout.MANIFEST}))
        return Missing(e.pattern, f"There is no snapshot of version {e.version} ({PATH} does not exist; needed to"
                                  f" replay version {e.needed_for} from it): snapshots of this store are at"
                                  f" versions [{versions}]")
    except layout.MissingFile as e:
        return Missing(e.pattern, f"State file {PATH} of version {e.version} does not exist (needed to load"
                                  f" version {e.needed_for})")
    later = tuple((f.index, f.version, f.kind == layout.MANIFEST) for f in entries
                  if f.id is None and f.version > version)
    m = plan.manifest
    return Planned(plan.id, 0 if m is None else m.version, -1 if m is None else m.index,
                   tuple((f.index, f.version) for f in plan.changelogs), later)


def _without_changelog(entries, first: int, version: int) -> int | None:
    """The first version from `first` to `version` that has a manifest and no changelog
    (either format), or None."""
    changelogs = {f.version for f in entries if f.kind == layout.CHANGELOG}
    return min((f.version for f in entries if f.kind == layout.MANIFEST and max(first, 1) <= f.version <= version
                and f.version not in changelogs), default=None)


def reply(a) -> p.Writer:
    """The PLAN reply of answer `a`."""
    if isinstance(a, Kept):
        return replies.retention(a.keep_from, a.complete, a.oldest_retained_ms, a.deletable, a.retained_manifests)
    if isinstance(a, Missing):
        return replies.plan_missing(a.pattern, a.message)
    if isinstance(a, NoChangelog):
        return replies.plan_no_changelog(a.version)
    return replies.planned(a.id, a.manifest_version, a.manifest, a.changelogs, a.later)
