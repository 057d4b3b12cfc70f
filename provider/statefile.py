"""Changelog files: one zstd frame of records with a count and a CRC32.

Layout (docs/PROTOCOL.md, "State files"), format 3: a zstd frame of
    magic "TTLSTAT3", u8 kind, i64 version, u8 valueLayout,
    records (u8 1 put, bytes key, bytes value | u8 2 remove, bytes key),
    u8 0, u64 recordCount, i64 batchTimestampMs, cleanupCursor, u32 cursorLength,
    u32 crc32 of every byte before it,
followed by u32 crc32 of the compressed frame, so any damaged byte is detected, even one
that would still decompress to the same content. The TTL clock of the version and the
cursor (where the incremental TTL cleanup goes on) come last because they are known only at
commit: a `ChangelogWriter` streams a transaction's records into the file while it runs. Format 2 (magic
"TTLSTAT2", the cursor after the batch timestamp) is still read. Snapshots are manifests
plus SST files (`ttlstate.manifest`); kind 1 (the full-dump snapshot) is no longer written.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import zlib
from typing import Iterable, Iterator

import zstandard

from . import writer
from .errors import CorruptFileError
from . import protocol as wire
from .ttl import codec

MAGIC = b"TTLSTAT3"
MAGIC_2 = b"TTLSTAT2"
_HEAD = struct.Struct("<8sBq")
_META = struct.Struct("<B")  # valueLayout
_META_2 = struct.Struct("<BqI")  # format 2: valueLayout, batchTimestampMs, cursor length (cursor follows)
_LEN = struct.Struct("<I")
_EMIT_BYTES = 1 << 20  # records are compressed and checksummed in pieces of about this size
_COUNT = struct.Struct("<BQq")  # the end marker 0, the record count, batchTimestampMs
_TAIL_2 = struct.Struct("<BQI")
FILE_CHANGELOG = 2  # file kind byte (1 was the full-dump snapshot, no longer written)
KIND_NAMES = {1: "full-dump snapshot (no longer supported)", FILE_CHANGELOG: "changelog"}

# Record kinds of the file format, declared here and versioned with it (the magic), not with
# the wire protocol: put (1) and remove (2), and put-new (4), put-over (5) and
# remove-present (6), which a reader takes as put and remove.
PUT = 1
REMOVE = 2
PUT_NEW = 4
PUT_OVER = 5
REMOVE_PRESENT = 6
_PUT_KINDS = frozenset((PUT, PUT_NEW, PUT_OVER))
_REMOVE_KINDS = frozenset((REMOVE, REMOVE_PRESENT))
# A direct transaction copies a WRITE_BATCH's keyed records into its changelog as they are
# (`ChangelogWriter.add_encoded`), which is right only while the wire encodes them as this
# file does: same kind bytes, `u32 length` + bytes for key and value. If a protocol change
# breaks that, this is False and the records are re-encoded one by one instead.
WIRE_RECORDS_ARE_FILE_RECORDS = (
    (wire.RECORD_PUT, wire.RECORD_REMOVE, wire.RECORD_PUT_NEW, wire.RECORD_PUT_OVER, wire.RECORD_REMOVE_PRESENT)
    == (PUT, REMOVE, PUT_NEW, PUT_OVER, REMOVE_PRESENT))

LAYOUT_PLAIN = 0  # values as Spark wrote them
LAYOUT_TTL = 1  # an 8-byte big-endian timestamp before each value (ttlstate.ttl.codec)
LAYOUT_NAMES = {LAYOUT_PLAIN: "plain", LAYOUT_TTL: "ttl"}


_PUT_BYTE = bytes([PUT])
_REMOVE_BYTE = bytes([REMOVE])


@dataclasses.dataclass(frozen=True)
class FileMeta:
    """What a state file says about the version besides its records."""

    layout: int = LAYOUT_PLAIN
    batch_ts: int = -1  # the TTL clock of the version's commit (-1: unknown)
    cursor: bytes = b""  # where the incremental TTL cleanup goes on


class ChangelogWriter:
    """Streams the changelog of `version` to `<path>.tmp` while its transaction runs: records
    are added as they are written, and `finish` adds the cursor, checksums and renames the
    file, so a reader never sees half a file. Records may repeat a key (the last one wins).
    """

    def __init__(self, path_tmp: str, kind: int, version: int, layout: int, level: int = 3):
        self.tmp = path_tmp
        self.version = version
        self.count = 0
        self.crc = 0
        self._parts: list[bytes] = []
        self._size = 0
        self._raw = open(path_tmp, "wb")
        try:
            self._sink = _CrcSink(self._raw)
            self._out = zstandard.ZstdCompressor(level=level).stream_writer(self._sink, closefd=False)
            self._emit(_HEAD.pack(MAGIC, kind, version) + _META.pack(layout))
        except BaseException:
            self._raw.close()
            raise

    def _emit(self, b: bytes):
        self.crc = zlib.crc32(b, self.crc)
        self._out.write(b)

    def add(self, key: bytes, value: bytes | None):
        if value is None:
            part = _REMOVE_BYTE + _LEN.pack(len(key)) + key
        else:
            part = _PUT_BYTE + _LEN.pack(len(key)) + key + _LEN.pack(len(value)) + value
        self._parts.append(part)
        self._size += len(part)
        self.count += 1
        if self._size >= _EMIT_BYTES:  # one CRC and one compressor call per piece
            self._emit(b"".join(self._parts))
            self._parts, self._size = [], 0

    def add_removals(self, keys):
        """`add` of a removal of each of `keys`, encoded in one piece."""
        pack = _LEN.pack
        parts = [piece for key in keys for piece in (_REMOVE_BYTE, pack(len(key)), key)]
        if parts:
            self.add_encoded(b"".join(parts), len(parts) // 3)

    def add_encoded(self, records: bytes, count: int):
        """Adds `count` records already encoded as this file encodes them (a WRITE_BATCH's
        keyed records, while `WIRE_RECORDS_ARE_FILE_RECORDS`)."""
        self._parts.append(records)
        self._size += len(records)
        self.count += count
        if self._size >= _EMIT_BYTES:
            self._emit(b"".join(self._parts))
            self._parts, self._size = [], 0

    def finish(self, path: str, batch_ts: int = -1, cursor: bytes = b"") -> int:
        """Ends the file with the version's TTL clock and cleanup cursor and the checksums, and
        moves it to `path`; returns its size."""
        if self._parts:
            self._emit(b"".join(self._parts))
            self._parts = []
        tail = _COUNT.pack(0, self.count, batch_ts) + cursor + _LEN.pack(len(cursor))
        self.crc = zlib.crc32(tail, self.crc)
        self._out.write(tail + _LEN.pack(self.crc))
        self._out.close()
        self._raw.write(_LEN.pack(self._sink.crc))
        self._raw.close()
        shutil.move(self.tmp, path)  # a rename on one file system
        return os.path.getsize(path)

    def discard(self):
        """Drops the file (the transaction aborted, or wrote no changelog)."""
        try:
            self._out.close()
        except zstandard.ZstdError:
            pass
        self._raw.close()
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


def write(path: str, kind: int, version: int, records: Iterable[tuple[bytes, bytes | None]],
          meta: FileMeta = FileMeta(), level: int = 3) -> int:
    """Write a file of `kind` (FILE_CHANGELOG) and `version`: `records` are (key, value),
    or (key, None) for a remove. Returns the file size."""
    w = ChangelogWriter(path + ".tmp", kind, version, meta.layout, level)
    try:
        for key, value in records:
            w.add(key, value)
        return w.finish(path, meta.batch_ts, meta.cursor)
    except BaseException:
        w.discard()
        raise


class _CrcSink:
    """A file wrapper that keeps the CRC32 of what is written through it."""

    def __init__(self, raw):
        self.raw = raw
        self.crc = 0

    def write(self, b) -> int:
        self.crc = zlib.crc32(b, self.crc)
        return self.raw.write(b)

    def flush(self):
        self.raw.flush()


def read(path: str, kind: int, version: int) -> tuple[FileMeta, Iterator[tuple[bytes, bytes | None]]]:
    """The meta and the records of a file, checking magic, kind, version, count and CRC.

    The whole file is checked (CRC, then record count) before the caller applies it:
    a damaged file raises `CorruptFileError` and never yields a wrong record silently.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise CorruptFileError(path, version, "file does not exist") from None
    if len(raw) < 4 or zlib.crc32(memoryview(raw)[:-4]) != _LEN.unpack_from(raw, len(raw) - 4)[0]:
        raise CorruptFileError(path, version, f"file checksum mismatch ({len(raw)} bytes)")
    try:
        data = zstandard.ZstdDecompressor().stream_reader(memoryview(raw)[:-4]).read()
    except zstandard.ZstdError as e:
        raise CorruptFileError(path, version, f"not a valid zstd stream ({e})") from None
    if len(data) < _HEAD.size:
        raise CorruptFileError(path, version, f"truncated ({len(data)} bytes after decompression)")
    magic, fkind, fversion = _HEAD.unpack_from(data, 0)
    if magic not in (MAGIC, MAGIC_2):
        if magic[:7] == MAGIC[:7] and magic[7:].isdigit() and magic[7:] > MAGIC[7:]:
            raise writer.too_new(path, version, f"a changelog of format {magic[7:].decode()}",
                                 f"changelog formats {MAGIC_2[7:].decode()}-{MAGIC[7:].decode()}")
        what = ("a state file of an older ttlstate format" if magic.startswith(b"TTLSTAT")
                else "not a ttlstate state file")
        raise CorruptFileError(path, version, f"bad magic ({what})")
    if fkind != kind or fversion != version:
        raise CorruptFileError(
            path, version,
            f"holds a {KIND_NAMES.get(fkind, f'file of kind {fkind}')} of version {fversion}, "
            f"expected a {KIND_NAMES.get(kind, kind)} of version {version}")
    try:
        if magic == MAGIC:
            meta, pos, body_end, count = _frame_3(data)
        else:
            meta, pos, body_end, count = _frame_2(data)
    except (struct.error, ValueError) as e:
        raise CorruptFileError(path, version, str(e) or "truncated") from None
    if meta.layout not in LAYOUT_NAMES or pos > body_end:
        raise CorruptFileError(path, version, f"bad header (value layout {meta.layout})")
    return meta, _records(path, version, data, pos, body_end, count)


def _frame_3(data) -> tuple[FileMeta, int, int, int]:
    """(meta, first record, end of records, record count) of a format-3 body, CRC checked."""
    end = len(data) - 4
    (crc,) = _LEN.unpack_from(data, end)
    if zlib.crc32(memoryview(data)[:end]) != crc:
        raise ValueError("checksum mismatch")
    (cursor_len,) = _LEN.unpack_from(data, end - 4)
    cursor_at = end - 4 - cursor_len
    body_end = cursor_at - _COUNT.size
    if body_end < _HEAD.size + _META.size:
        raise ValueError("truncated")
    marker, count, batch_ts = _COUNT.unpack_from(data, body_end)
    if marker != 0:
        raise ValueError("checksum mismatch")
    (layout,) = _META.unpack_from(data, _HEAD.size)
    return FileMeta(layout, batch_ts, bytes(data[cursor_at:end - 4])), _HEAD.size + _META.size, body_end, count


def _frame_2(data) -> tuple[FileMeta, int, int, int]:
    """The same for format 2 (the cursor after the batch timestamp)."""
    if len(data) < _HEAD.size + _TAIL_2.size:
        raise ValueError(f"truncated ({len(data)} bytes after decompression)")
    body_end = len(data) - _TAIL_2.size
    marker, count, crc = _TAIL_2.unpack_from(data, body_end)
    if marker != 0 or zlib.crc32(memoryview(data)[:body_end + 9]) != crc:
        raise ValueError("checksum mismatch")
    layout, batch_ts, cursor_len = _META_2.unpack_from(data, _HEAD.size)
    pos = _HEAD.size + _META_2.size + cursor_len
    return FileMeta(layout, batch_ts, bytes(data[_HEAD.size + _META_2.size:pos])), pos, body_end, count


def _records(path, version, data, pos, body_end, count):
    n = 0
    unpack_len = _LEN.unpack_from
    try:
        while pos < body_end:
            rkind = data[pos]
            (klen,) = unpack_len(data, pos + 1)
            key = data[pos + 5:pos + 5 + klen]
            pos += 5 + klen
            if rkind in _PUT_KINDS:
                (vlen,) = unpack_len(data, pos)
                value = data[pos + 4:pos + 4 + vlen]
                pos += 4 + vlen
                yield key, value
            elif rkind in _REMOVE_KINDS:
                yield key, None
            else:
                raise CorruptFileError(path, version, f"unknown record kind {rkind}")
            n += 1
    except struct.error:
        raise CorruptFileError(path, version, "record overruns the file") from None
    if pos != body_end or n != count:
        raise CorruptFileError(path, version, f"{n} records decoded, {count} announced")


def user_records(path: str, version: int) -> Iterator[tuple[bytes, bytes | None]]:
    """The records of the changelog of `version` at `path` as Spark wrote them: (key, value),
    or (key, None) for a remove, values without the TTL layout's timestamp (Spark's state
    reader's change feed, `READ_CHANGELOG`); checked as `read` checks them."""
    meta, records = read(path, FILE_CHANGELOG, version)
    if meta.layout != LAYOUT_TTL:
        yield from records
        return
    for key, value in records:
        if value is None:
            yield key, None
            continue
        try:
            yield key, codec.decode(value)[1]
        except ValueError as e:
            raise CorruptFileError(path, version, f"bad TTL value: {e}") from None
