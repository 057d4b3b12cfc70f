"""What a cleanup pass keeps and deletes of a store's checkpoint, over a listing of its
directory (`layout` entries), built on `layout.plan`.

The rule (docs/decisions/023-retention.md): the files of every version at or above
`keep_from = latest - max(1, minVersionsToRetain) + 1` (format v2: of every id) and every file
their load plans need are retained. A manifest or changelog of the format no plan needs goes
when its version is below `keep_from`, and a manifest also when it is not newer than the oldest
plan's manifest; a changelog of a retained version stays, as Spark's change feed of that
version reads it (docs/decisions/094-state-rules-audit.md (g)). A plan that cannot be made (a
file missing) keeps everything. Manifests and changelogs of the other format are never
deleted (the SSTs only their manifests name are not kept for them).

Spark's limits on one pass apply on top (docs/decisions/057-cleanup-pass-limits.md, 094 (f)):
a pass that would delete fewer than `minVersionsToDelete` versions deletes nothing; of more
than `maxVersionsToDelete` stale versions (-1 or 0: no limit) it deletes the oldest that many
and retains the rest for the next pass, which is then not `complete`. The JVM's listing gate
(docs/decisions/105-object-store-puts-and-listings.md) lists again only after a pass that was
not complete or that deleted something.

With the answer the JVM also deletes the SSTs no retained manifest references and leftover
temp files, each only if older than every retained file (`oldest_retained_ns`): a younger one
may belong to a snapshot still being written.
"""

from __future__ import annotations

import dataclasses

from . import layout

NO_TIME = -(1 << 63)  # Java's Long.MIN_VALUE: nothing is older, so no SST or temp file goes


@dataclasses.dataclass(frozen=True)
class Retention:
    """One pass's answer. `retained` and `deletable` are listing entries: `retained` in the
    order the plans name them (each head's manifest, then its changelogs; the heads in listing
    order), then the stale files left for the next pass; everything listed when nothing goes."""

    keep_from: int
    retained: tuple
    deletable: tuple
    oldest_retained_ns: int  # NO_TIME if none, or when nothing goes
    complete: bool  # False: stale versions were left for a later pass, or no plan could be made

    @property
    def retained_manifests(self) -> tuple:
        """The retained manifests (either format), in `retained`'s order."""
        return tuple(f for f in self.retained if f.kind == layout.MANIFEST)


def of(files, v2: bool, min_versions_to_retain: int, min_versions_to_delete: int = 0,
       max_versions_to_delete: int = -1) -> Retention:
    """The retention of `files` (listing entries as `layout.plan` takes them) in format `v2`."""
    files = layout.Listing(files)
    keep_from = max((f.version for f in files), default=0) - max(1, min_versions_to_retain) + 1
    everything = Retention(keep_from, tuple(files), (), NO_TIME, False)
    retained: dict = {}  # an ordered set
    heads = set()
    oldest_start = None  # the oldest plan's manifest version; None: no plan
    for f in files:
        if (f.id is not None) != v2 or f.version < keep_from or (f.version, f.id) in heads:
            continue
        heads.add((f.version, f.id))
        try:
            plan = layout.plan(files, f.version, f.id, v2=v2)
        except layout.MissingFile:
            return everything
        for g in ((plan.manifest,) if plan.manifest is not None else ()) + plan.changelogs:
            retained.setdefault(g, None)
        start = plan.manifest.version if plan.manifest is not None else 0
        oldest_start = start if oldest_start is None else min(oldest_start, start)
    deletable = [f for f in files
                 if (f.id is not None) == v2 and f not in retained
                 and (f.version < keep_from
                      or f.kind == layout.MANIFEST and (oldest_start is None or f.version <= oldest_start))]
    versions = sorted({f.version for f in deletable})
    if 0 < len(versions) < min_versions_to_delete:
        return dataclasses.replace(everything, complete=True)
    complete = True
    if 0 < max_versions_to_delete < len(versions):
        complete = False
        last_deleted = versions[max_versions_to_delete - 1]
        for f in deletable:
            if f.version > last_deleted:
                retained.setdefault(f, None)  # for the next pass: its SSTs stay with it
        deletable = [f for f in deletable if f.version <= last_deleted]
    oldest = min((f.mtime_ns for f in retained), default=NO_TIME)
    return Retention(keep_from, tuple(retained), tuple(deletable), oldest, complete)
