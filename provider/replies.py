"""The worker's OK replies (docs/PROTOCOL.md, "Operations"), each encoded here.

The worker answers with these; `tests/vectors/make_vectors.py` writes the shared reply vectors
(`tests/vectors/replies.tsv`) with them, which the JVM's decoders (`Reply`) must read back.
"""

from __future__ import annotations

from . import protocol as p


def hello(pid: int, index: int) -> p.Writer:
    return p.ok().u16(p.PROTOCOL_VERSION).i32(pid).u32(index)


def opened(handle: int, settings) -> p.Writer:
    """`settings`: (short name, value) pairs, rendered as text (booleans `true`/`false`)."""
    return p.ok().u32(handle).str_pairs((k, render(v)) for k, v in settings)


def loaded(num_keys: int) -> p.Writer:
    return p.ok().i64(num_keys)


def begun(handle: int, direct: bool, stamp: int | None = None) -> p.Writer:
    """`stamp`: the TTL timestamp the transaction's writes carry if it takes WRITE_STAMPED."""
    return p.ok().u32(handle).u8(1 if direct else 0).u8(0 if stamp is None else 1).i64(stamp or 0)


def answer(w: p.Writer, value: bytes | None, expires_at: int) -> p.Writer:
    """Append one `optbytes value [i64 expiresAt]` (a GET answer) to `w`."""
    w.optbytes(value)
    return w if value is None else w.i64(expires_at)


def got(value: bytes | None, expires_at: int) -> p.Writer:
    return answer(p.ok(), value, expires_at)


def multi_got(n: int, answers: p.Writer) -> p.Writer:
    """A MULTI_GET reply of the `n` answers in `answers` (appended with `answer`, or
    `Writer.answers`)."""
    w = p.ok().u32(n)
    w.parts += answers.parts
    return w


def iter_opened(handle: int, last: bool, entries, with_expiry: bool) -> p.Writer:
    """ITER_OPEN's reply: the iterator's handle (0 if its first chunk is the last), then that
    chunk (`iter_chunk`)."""
    return _chunk(p.ok().u32(handle), last, entries, with_expiry)


def iter_chunk(last: bool, entries, with_expiry: bool) -> p.Writer:
    """ITER_NEXT's reply: `u8 last, u32 n, entry * n`; `entries` a list of (key, value) or,
    `with_expiry`, of (key, value, expiresAt)."""
    return _chunk(p.ok(), last, entries, with_expiry)


def _chunk(w: p.Writer, last: bool, entries, with_expiry: bool) -> p.Writer:
    return w.u8(1 if last else 0).u32(len(entries)).pairs(entries, with_expiry)


def stats(num_keys: int, memory_used: int, metrics) -> p.Writer:
    return _metrics(p.ok().i64(num_keys).i64(memory_used), metrics)


def committed(num_keys: int, file_bytes: int, memory_used: int, snapshot_wanted: bool, changelog_name: str,
              stored_from: int, metrics) -> p.Writer:
    """`changelog_name`: the changelog's name in the checkpoint ("" without changelog);
    `stored_from`: `Store.stored_from`."""
    return _metrics(p.ok().i64(num_keys).i64(file_bytes).i64(memory_used).u8(1 if snapshot_wanted else 0)
                    .str(changelog_name).i64(stored_from), metrics)


def snapshot(version: int, num_keys: int, manifest_path: str, manifest_name: str, ssts) -> p.Writer:
    """`manifest_name`: the manifest's name in the checkpoint; `ssts`: (checkpoint name, local
    path, size) each."""
    w = p.ok().i64(version).i64(num_keys).str(manifest_path).str(manifest_name).u32(len(ssts))
    for name, path, size in ssts:
        w.str(name).str(path).i64(size)
    return w


def manifest_files(ssts) -> p.Writer:
    """`ssts`: (checkpoint name, size) each."""
    w = p.ok().u32(len(ssts))
    for name, size in ssts:
        w.str(name).i64(size)
    return w


def planned(id: str | None, manifest_version: int, manifest_index: int, changelogs, later) -> p.Writer:
    """PLAN's reply of a plan (purposes 1-3): its checkpoint id (None: none), manifest (index
    -1: none), `changelogs` (index, version) oldest first, `later` (index, version, manifest)."""
    w = p.ok().u8(p.PLANNED).str(id or "").i64(manifest_version).i32(manifest_index).u32(len(changelogs))
    for index, version in changelogs:
        w.i32(index).i64(version)
    w.u32(len(later))
    for index, version, manifest in later:
        w.i32(index).i64(version).u8(1 if manifest else 0)
    return w


def plan_missing(pattern: str, message: str) -> p.Writer:
    """PLAN's reply when a file the plan needs is not listed (`message` with `{path}`)."""
    return p.ok().u8(p.PLAN_MISSING).str(pattern).str(message)


def plan_no_changelog(version: int) -> p.Writer:
    """PLAN's reply when `version` has a manifest and no changelog."""
    return p.ok().u8(p.PLAN_NO_CHANGELOG).i64(version)


def retention(keep_from: int, complete: bool, oldest_ms: int, deletable, retained_manifests) -> p.Writer:
    """PLAN_RETENTION's reply: `deletable` listing indices, `retained_manifests` (index,
    version) pairs (the JVM asks each one's SSTs with its version: MANIFEST_FILES)."""
    w = p.ok().u8(p.PLANNED).i64(keep_from).u8(1 if complete else 0).i64(oldest_ms).u32(len(deletable))
    for index in deletable:
        w.i32(index)
    w.u32(len(retained_manifests))
    for index, version in retained_manifests:
        w.i32(index).i64(version)
    return w


def changelog_record(w: p.Writer, key: bytes, value: bytes | None) -> p.Writer:
    """Append one READ_CHANGELOG record to `w`: a PUT, or a REMOVE if `value` is None."""
    if value is None:
        return w.u8(p.RECORD_REMOVE).bytes(key)
    return w.u8(p.RECORD_PUT).bytes(key).bytes(value)


def changelog_records(n: int, records: p.Writer, following: int) -> p.Writer:
    """READ_CHANGELOG's reply: the `n` records in `records` (`changelog_record`), then the
    index of the record to ask for next (-1: none)."""
    w = p.ok().u32(n)
    w.parts += records.parts
    return w.i64(following)


def empty() -> p.Writer:
    """The reply of ITER_CLOSE, ABORT, CLOSE, PING and MAINTAIN."""
    return p.ok()


def _metrics(w: p.Writer, metrics) -> p.Writer:
    """Append `u32 n, (str name, i64 value) * n`; `metrics` a list of (name, value)."""
    w.u32(len(metrics))
    for name, value in metrics:
        w.str(name).i64(value)
    return w


def render(v) -> str:
    """A setting's value as an OPEN reply gives it: booleans as `true`/`false`, others as text."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)
