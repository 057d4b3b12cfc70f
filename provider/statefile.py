"""Changelog files: one zstd frame of records with a count and a CRC32.

Layout (docs/PROTOCOL.md, "State files"): a zstd frame of
    magic "TTLSTAT2", u8 kind, i64 version,
    u8 valueLayout, i64 batchTimestampMs, bytes cleanupCursor   (`FileMeta`),
    records (u8 1 put, bytes key, bytes value | u8 2 remove, bytes key),
    u8 0, u64 recordCount, u32 crc32 of every byte before it,
followed by u32 crc32 of the compressed frame, so any damaged byte is detected, even one
that would still decompress to the same content. Snapshots are manifests plus SST files
(`ttlstate.manifest`); kind 1 (the full-dump snapshot of format 2) is no longer written.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import zlib
from typing import Iterable, Iterator

import zstandard

from .errors import CorruptFileError
from .protocol import FILE_CHANGELOG, RECORD_PUT, RECORD_REMOVE

MAGIC = b"TTLSTAT2"
_HEAD = struct.Struct("<8sBq")
_META = struct.Struct("<BqI")  # valueLayout, batchTimestampMs, cursor length (cursor follows)
_LEN = struct.Struct("<I")
_EMIT_BYTES = 1 << 20  # records are compressed and checksummed in pieces of about this size
_TAIL = struct.Struct("<BQI")
KIND_NAMES = {1: "full-dump snapshot (no longer supported)", FILE_CHANGELOG: "changelog"}

LAYOUT_PLAIN = 0  # values as Spark wrote them
LAYOUT_TTL = 1  # an 8-byte big-endian timestamp before each value (ttlstate.ttl.codec)
LAYOUT_NAMES = {LAYOUT_PLAIN: "plain", LAYOUT_TTL: "ttl"}


@dataclasses.dataclass(frozen=True)
class FileMeta:
    """What a state file says about the version besides its records."""

    layout: int = LAYOUT_PLAIN
    batch_ts: int = -1  # the TTL clock of the version's commit (-1: unknown)
    cursor: bytes = b""  # where the incremental TTL cleanup goes on


def write(path: str, kind: int, version: int, records: Iterable[tuple[bytes, bytes | None]],
          meta: FileMeta = FileMeta(), level: int = 3) -> int:
    """Write a file of `kind` (FILE_CHANGELOG) and `version`: `records` are (key, value),
    or (key, None) for a remove. Returns the file size.

    The file is written to `path` + ".tmp" and renamed, so a reader never sees half a file.
    """
    crc = 0
    count = 0
    tmp = path + ".tmp"
    cctx = zstandard.ZstdCompressor(level=level)
    with open(tmp, "wb") as raw:
        sink = _CrcSink(raw)
        with cctx.stream_writer(sink, closefd=False) as out:
            def emit(b: bytes):
                nonlocal crc
                crc = zlib.crc32(b, crc)
                out.write(b)
            emit(_HEAD.pack(MAGIC, kind, version))
            emit(_META.pack(meta.layout, meta.batch_ts, len(meta.cursor)) + meta.cursor)
            pack_len = _LEN.pack
            parts: list[bytes] = []  # one CRC and one compressor call per _EMIT_BYTES
            size = 0
            for key, value in records:
                if value is None:
                    part = b"\x02" + pack_len(len(key)) + key
                else:
                    part = b"\x01" + pack_len(len(key)) + key + pack_len(len(value)) + value
                parts.append(part)
                size += len(part)
                count += 1
                if size >= _EMIT_BYTES:
                    emit(b"".join(parts))
                    parts, size = [], 0
            if parts:
                emit(b"".join(parts))
            tail_head = struct.pack("<BQ", 0, count)
            crc = zlib.crc32(tail_head, crc)
            out.write(tail_head + _LEN.pack(crc))
        raw.write(_LEN.pack(sink.crc))
    os.replace(tmp, path)
    return os.path.getsize(path)


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
    if len(data) < _HEAD.size + _TAIL.size:
        raise CorruptFileError(path, version, f"truncated ({len(data)} bytes after decompression)")
    magic, fkind, fversion = _HEAD.unpack_from(data, 0)
    if magic != MAGIC:
        what = ("a state file of an older ttlstate format" if magic.startswith(b"TTLSTAT")
                else "not a ttlstate state file")
        raise CorruptFileError(path, version, f"bad magic ({what})")
    if fkind != kind or fversion != version:
        raise CorruptFileError(
            path, version,
            f"holds a {KIND_NAMES.get(fkind, f'file of kind {fkind}')} of version {fversion}, "
            f"expected a {KIND_NAMES.get(kind, kind)} of version {version}")
    body_end = len(data) - _TAIL.size
    marker, count, crc = _TAIL.unpack_from(data, body_end)
    if marker != 0 or zlib.crc32(memoryview(data)[:body_end + 9]) != crc:
        raise CorruptFileError(path, version, "checksum mismatch")
    try:
        layout, batch_ts, cursor_len = _META.unpack_from(data, _HEAD.size)
    except struct.error:
        raise CorruptFileError(path, version, "truncated header") from None
    pos = _HEAD.size + _META.size + cursor_len
    if layout not in LAYOUT_NAMES or pos > body_end:
        raise CorruptFileError(path, version, f"bad header (value layout {layout})")
    meta = FileMeta(layout, batch_ts, bytes(data[_HEAD.size + _META.size:pos]))
    return meta, _records(path, version, data, pos, body_end, count)


def _records(path, version, data, pos, body_end, count):
    n = 0
    unpack_len = _LEN.unpack_from
    try:
        while pos < body_end:
            rkind = data[pos]
            (klen,) = unpack_len(data, pos + 1)
            key = data[pos + 5:pos + 5 + klen]
            pos += 5 + klen
            if rkind == RECORD_PUT:
                (vlen,) = unpack_len(data, pos)
                value = data[pos + 4:pos + 4 + vlen]
                pos += 4 + vlen
                yield key, value
            elif rkind == RECORD_REMOVE:
                yield key, None
            else:
                raise CorruptFileError(path, version, f"unknown record kind {rkind}")
            n += 1
    except struct.error:
        raise CorruptFileError(path, version, "record overruns the file") from None
    if pos != body_end or n != count:
        raise CorruptFileError(path, version, f"{n} records decoded, {count} announced")
