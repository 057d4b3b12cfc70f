"""The RocksDB engine under a store: opening a database of the store's kind, the one place
that turns rocksdict and OS errors into ours, file CRCs, and the few bulk operations the
store, its transactions and the offline reader share. Options live in `rocksdb_options`.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
import re
import shutil
import zlib
from typing import Iterator

from rocksdict import AccessType, Rdict, ReadOptions, WriteBatch

from . import rocksdb_options
from .errors import CorruptFileError, StorageError, TtlstateError
from .manifest import SstFile
from .protocol import RECORD_PUT, RECORD_PUT_NEW, RECORD_PUT_OVER, RECORD_REMOVE_PRESENT
from .ttl import codec
from .ttl import MAX_TS

_CRC_CHUNK = 1 << 20
_DB_TTL_SUFFIX = 4  # RocksDB's TTL database appends a 4-byte write time to every value
_DROPPED_BY_FILTER = re.compile(r"rocksdb\.compaction\.key\.drop\.user COUNT : (\d+)")
_MEMORY_PROPERTIES = ("rocksdb.cur-size-all-mem-tables", "rocksdb.estimate-table-readers-mem")
_BLOCK_CACHE_USAGE = "rocksdb.block-cache-usage"
DEFAULT_COLUMN_FAMILY = "default"  # RocksDB's; ttlstate's databases have no other


def engine_errors(fn):
    """Decorator: the one place that turns rocksdict/OS errors into `StorageError`."""
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TtlstateError:
            raise
        except Exception as e:  # OSError, and rocksdict's plain Exception subclasses
            where = getattr(args[0], "local_dir", None) if args else None
            at = f" (store {args[0].store_id}, local dir {where})" if where else ""
            raise StorageError(f"{fn.__qualname__}{at}: {type(e).__name__}: {e}") from e
    wrapped.__name__ = fn.__name__
    wrapped.__qualname__ = fn.__qualname__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def open_database(path: str, settings: rocksdb_options.RocksDbSettings, db_ttl_ms: int | None = None):
    """Open (or create) a database at `path`: a plain one, or with `db_ttl_ms` RocksDB's
    TTL database (whose compaction filter drops entries written longer ago than that, in
    whole seconds rounded up). Returns (database, its options: they hold the statistics of
    a TTL database)."""
    # The column family's options named, not left to rocksdict: opening an existing directory it
    # takes them from the directory's newest OPTIONS file, and a load restores the snapshot's.
    # The database then ran with the options of whoever wrote that snapshot, and a TTL database
    # wrapped the file's TTL compaction filter in its own: the inner one read a value's last
    # bytes as its write time and dropped live entries at compaction
    # (docs/decisions/093-store-options-not-snapshot-options.md).
    if db_ttl_ms is None:
        opts = rocksdb_options.options(settings, statistics=False)
        db = Rdict(path, opts, column_families={DEFAULT_COLUMN_FAMILY: opts})
    else:
        secs = math.ceil(min(MAX_TS, db_ttl_ms) / 1000)
        opts = rocksdb_options.options(settings, statistics=True)
        db = Rdict(path, opts, column_families={DEFAULT_COLUMN_FAMILY: opts},
                   access_type=AccessType.with_ttl(min(max(secs, 1), 2**31 - 1)))
    db.set_write_options(rocksdb_options.write_options())
    return db, opts


def compaction_drops(opts) -> int:
    """Entries the TTL compaction filter dropped so far, from the database's statistics."""
    m = _DROPPED_BY_FILTER.search(opts.get_statistics() or "")
    return int(m.group(1)) if m else 0


def memory_used(db: Rdict, with_block_cache: bool) -> int:
    """Memtables and table readers of `db`, and its block cache if it has its own."""
    props = _MEMORY_PROPERTIES + (_BLOCK_CACHE_USAGE,) if with_block_cache else _MEMORY_PROPERTIES
    return sum(db.property_int_value(prop) or 0 for prop in props)


def file_crc32(path: str) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CRC_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def link_checked(f: SstFile, given: str, dest: str, version: int):
    """Hard-link (else copy) the SST `given` to `dest`, checking its size and CRC32
    against the manifest; a mismatch names the SST's checkpoint name and the path."""
    def bad(reason: str):
        return CorruptFileError(given, version, f"SST {f.name}: {reason}")

    try:
        size = os.path.getsize(given)
    except OSError:
        raise bad("file does not exist") from None
    if size != f.size:
        raise bad(f"{size} bytes, the manifest says {f.size}")
    try:
        os.link(given, dest)
    except OSError:  # another file system (EXDEV), or links not allowed
        shutil.copyfile(given, dest)
    crc = file_crc32(dest)
    if crc != f.crc32:
        os.unlink(dest)
        raise bad(f"CRC32 {crc:08x}, the manifest says {f.crc32:08x}")


def without_write_time(key: bytes, value: bytes) -> bytes:
    """A value of RocksDB's TTL database without the 4-byte write time it appends."""
    if len(value) < _DB_TTL_SUFFIX:
        raise StorageError(f"value of key {key.hex()} is too short to hold RocksDB's TTL write time")
    return value[:-_DB_TTL_SUFFIX]


_RECORD_KEY = operator.itemgetter(1)
_FIRST = operator.itemgetter(0)


def write_keyed_records(db: Rdict, records) -> int:
    """Write keyed records into `db` in one WriteBatch; returns the change in the key count.
    A record without a presence hint (the JVM did not know) looks the key up: in the
    records before it, else in the database.

    The batch is built in key order: RocksDB inserts each entry into the memtable's skip
    list starting from where it put the previous one, so sorted entries are found near each
    other (docs/decisions/077-memtable-bloom-and-sorted-writes.md). The sort is stable: a key's
    records keep their order, so its last one
    still wins and each lookup sees the records before it."""
    delta = 0
    batch = WriteBatch(raw_mode=True)
    written: dict[bytes, bool] = {}  # key: present after the records so far
    for kind, key, value in sorted(records, key=_RECORD_KEY):
        if kind == RECORD_PUT_NEW:
            delta += 1
            batch.put(key, value)
            written[key] = True
        elif kind == RECORD_PUT_OVER:
            batch.put(key, value)
            written[key] = True
        elif kind == RECORD_REMOVE_PRESENT:
            delta -= 1
            batch.delete(key)
            written[key] = False
        else:  # RECORD_PUT or RECORD_REMOVE: is the key there?
            present = written.get(key)
            if present is None:
                present = db.get(key) is not None
            if kind == RECORD_PUT:
                delta += not present
                batch.put(key, value)
                written[key] = True
            elif present:
                delta -= 1
                batch.delete(key)
                written[key] = False
    db.write(batch)
    return delta


def write_prestamped_records(db: Rdict, records, stamp: int):
    """Write a WRITE_STAMPED frame's records into a TTL store's `db` in one WriteBatch in key
    order, as `write_keyed_records` does: the puts' values are already stored entries (stamped
    with `stamp`). PUT_NEW names a key not stored, PUT_OVER and REMOVE_PRESENT a live one; a PUT
    or REMOVE without a hint reads the key's stored entry (or takes the records before it in the
    frame: those are stamped `stamp`). docs/decisions/111-pre-stamped-ttl-writes.md.

    Returns (change in the key count, how many puts, how many records of kinds 5 and 6, the
    timestamps of the stored entries the unhinted records replaced or removed)."""
    delta = puts = hinted = 0
    unhinted: list[int] = []
    batch = WriteBatch(raw_mode=True)
    written: dict[bytes, bool] = {}  # key: present after the records so far
    get = db.get
    for kind, key, value in sorted(records, key=_RECORD_KEY):
        if kind == RECORD_PUT_NEW:
            delta += 1
            puts += 1
            batch.put(key, value)
            written[key] = True
        elif kind == RECORD_PUT_OVER:
            hinted += 1
            puts += 1
            batch.put(key, value)
            written[key] = True
        elif kind == RECORD_REMOVE_PRESENT:
            hinted += 1
            delta -= 1
            batch.delete(key)
            written[key] = False
        else:  # RECORD_PUT or RECORD_REMOVE: what is stored?
            present = written.get(key)
            if present is None:
                stored = get(key)
                present = stored is not None
                old = codec.timestamp(stored) if present else 0
            else:
                old = stamp
            if kind == RECORD_PUT:
                puts += 1
                if present:
                    unhinted.append(old)
                else:
                    delta += 1
                batch.put(key, value)
                written[key] = True
            elif present:
                delta -= 1
                unhinted.append(old)
                batch.delete(key)
                written[key] = False
    db.write(batch)
    return delta, puts, hinted, unhinted


_NEGATIVE_TS = b"\x80"  # a stored entry whose 8-byte big-endian timestamp is below 0 starts at or above this


_WALK_SLICE = 4096  # entries the walk takes from the iterator at once (a list of them: bounded memory)


def expired_after(db: Rdict, after: bytes, budget: int, bound: int) -> tuple[dict[bytes, int], int, bytes | None]:
    """Check up to `budget` entries of a TTL store's `db` after the key `after` (from the first
    if empty), in key order: ({key: timestamp} of those whose timestamp is at or below `bound`,
    `ttl.expired_through`), how many were checked, and the last key checked, or None if the
    entries ran out first. rocksdict's own iterator, read in slices, and one comparison of each
    stored entry with the bytes just past the bound (big-endian timestamps first: their order is
    the numbers' for timestamps at or above 0; a negative one starts with a set top bit and is
    decoded), so only the expired are decoded: the incremental TTL cleanup's walk
    (docs/decisions/112-expired-reads-in-the-frame-tail.md)."""
    items = db.items(from_key=after) if after else db.items()
    if after:  # `after` itself, if stored, is not checked (an empty key is a key too)
        first = next(items, None)
        if first is None:
            return {}, 0, None
        if first[0] != after:
            items = itertools.chain((first,), items)
    # an entry is at or below the bound iff it sorts before the bound's successor (an 8-byte
    # prefix equal to the successor's makes the longer entry sort after it); none if bound < 0
    below = (bound + 1).to_bytes(8, "big") if bound >= 0 else b""
    timestamp = codec.timestamp
    gone: dict[bytes, int] = {}
    checked = 0
    while checked < budget:
        want = min(_WALK_SLICE, budget - checked)
        chunk = list(itertools.islice(items, want))
        gone.update({key: timestamp(stored) for key, stored in chunk
                     if stored < below or (stored >= _NEGATIVE_TS and timestamp(stored) <= bound)})
        checked += len(chunk)
        if len(chunk) < want:
            return gone, checked, None
        last = chunk[-1][0]
    return gone, checked, last if checked else None


_PUT_SLICE = 8192  # entries per WriteBatch of `put_all`


def put_all(db: Rdict, entries: list[tuple[bytes, bytes]]) -> None:
    """Write `entries` (key, value) into `db` in WriteBatches of `_PUT_SLICE` entries."""
    for start in range(0, len(entries), _PUT_SLICE):
        batch = WriteBatch(raw_mode=True)
        for key, value in entries[start:start + _PUT_SLICE]:
            batch.put(key, value)
        db.write(batch)


def delete_keys(db: Rdict, keys) -> None:
    """Delete `keys` from `db` in one WriteBatch."""
    batch = WriteBatch(raw_mode=True)
    for key in keys:
        batch.delete(key)
    db.write(batch)


# Keys per RocksDB MultiGet: it holds each key's data block (decompressed, when the block cache
# does not) until it returns, some 1 KiB a key; slices of keys in key order still share blocks
# (docs/decisions/086-sorted-read-ahead-blocks.md).
MULTI_GET_SLICE = 8192


def multi_get(db: Rdict, keys: list[bytes]) -> list[bytes | None]:
    """The values of `keys` (None where absent), read in slices of `MULTI_GET_SLICE` keys.
    Keys in key order (the JVM sorts a read-ahead's) read fastest: those of one data block
    fall into one slice, which decompresses the block once."""
    if len(keys) <= MULTI_GET_SLICE:
        return db.get(keys)
    values: list[bytes | None] = []
    for start in range(0, len(keys), MULTI_GET_SLICE):
        values += db.get(keys[start:start + MULTI_GET_SLICE])
    return values


def db_items(db: Rdict, prefix: bytes, skip: set[bytes]) -> Iterator[tuple[bytes, bytes]]:
    """The database's (key, value) pairs under `prefix`, without the keys in `skip`; the
    RocksDB iterator is created at the call. Without keys to skip, rocksdict's own iterator
    (no Python step per entry), bounded by RocksDB at the prefix's end
    (docs/decisions/079-first-write-consumes-answer.md)."""
    if not skip:
        if not prefix:
            return db.items()
        end = prefix_end(prefix)
        if end is not None:
            bounds = ReadOptions()
            bounds.set_iterate_upper_bound(end)
            return _holding(db.items(from_key=prefix, read_opt=bounds), bounds)
    it = db.iter()
    return _db_items_of(it, prefix, skip)


def _holding(items, bounds: ReadOptions) -> Iterator[tuple[bytes, bytes]]:
    """`items`, with `bounds` kept alive while they are read: rocksdict hands RocksDB a pointer
    into the bound's bytes, which `bounds` holds (freed, the iteration ends at random). zip
    holds it without a Python step per entry."""
    return map(_FIRST, zip(items, itertools.repeat(bounds)))


def prefix_end(prefix: bytes) -> bytes | None:
    """The least key above every key that starts with `prefix` (None if there is none: the
    prefix is all 0xff bytes)."""
    end = prefix.rstrip(b"\xff")
    if not end:
        return None
    return end[:-1] + bytes((end[-1] + 1,))


def _db_items_of(it, prefix: bytes, skip: set[bytes]) -> Iterator[tuple[bytes, bytes]]:
    if prefix:
        it.seek(prefix)
    else:
        it.seek_to_first()
    while it.valid():
        key = it.key()
        if prefix and not key.startswith(prefix):
            return
        if key not in skip:
            yield key, it.value()
        it.next()
