"""Manifests: what one incremental snapshot of a store holds (docs/PROTOCOL.md, "Manifests").

    magic "TTLMANI1", one zstd frame of UTF-8 JSON, u32 crc32 (little-endian) of every
    byte before it.

The JSON names the version's SST files (checkpoint name, RocksDB name, size, CRC32), the
small RocksDB files of the checkpoint inline (base64), and what a load needs besides the
entries: key count, value layout, whether the SSTs carry RocksDB's TTL write times, the
TTL clock, the incremental-cleanup cursor and the live-count histogram.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import struct
import zlib

import zstandard

from . import writer
from .errors import CorruptFileError

MAGIC = b"TTLMANI1"
FORMAT = 1
_CRC = struct.Struct("<I")


@dataclasses.dataclass(frozen=True)
class SstFile:
    name: str  # checkpoint name, unique: `<rocksdbFileNumber>-<16 hex random>.sst`
    local: str  # RocksDB's file name in the database directory (`000009.sst`)
    size: int
    crc32: int


@dataclasses.dataclass(frozen=True)
class Manifest:
    version: int
    num_keys: int  # entries in the database (expired ones not cleaned up yet included)
    layout: int  # statefile.LAYOUT_PLAIN or LAYOUT_TTL
    db_ttl: bool  # the SSTs' values end with RocksDB's 4-byte TTL write time
    batch_ts: int = -1
    cursor: bytes = b""
    histogram: tuple[tuple[int, int], ...] = ()  # (timestampMs, count), TTL stores
    ssts: tuple[SstFile, ...] = ()
    inline: dict[str, bytes] = dataclasses.field(default_factory=dict)  # file name -> bytes


def write(path: str, m: Manifest, level: int = 3) -> int:
    """Write `m` to `path` atomically (temp file, then rename); returns the file size."""
    doc = {
        "format": FORMAT, "writer": writer.stamp(), "version": m.version, "numKeys": m.num_keys, "layout": m.layout,
        "dbTtl": m.db_ttl, "batchTimestampMs": m.batch_ts, "cursor": m.cursor.hex(),
        "histogram": [[ts, n] for ts, n in m.histogram],
        "ssts": [{"name": f.name, "local": f.local, "size": f.size, "crc32": f.crc32}
                 for f in m.ssts],
        "inline": {name: base64.b64encode(data).decode("ascii")
                   for name, data in sorted(m.inline.items())},
    }
    text = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    body = MAGIC + zstandard.ZstdCompressor(level=level).compress(text)
    data = body + _CRC.pack(zlib.crc32(body))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return len(data)


def read(path: str, version: int | None = None) -> Manifest:
    """The manifest at `path`, checked: magic, checksum, JSON fields and (if given) version.

    Raises `CorruptFileError` naming the file and the version.
    """
    def bad(reason: str):
        return CorruptFileError(path, version, reason)

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise bad("file does not exist") from None
    except OSError as e:
        raise bad(f"cannot be read ({e})") from None
    if len(raw) < len(MAGIC) + _CRC.size or zlib.crc32(memoryview(raw)[:-4]) != _CRC.unpack_from(raw, len(raw) - 4)[0]:
        raise bad(f"file checksum mismatch ({len(raw)} bytes)")
    if raw[:len(MAGIC)] != MAGIC:
        raise bad("bad magic (not a ttlstate manifest)")
    try:
        # streamed, as state files are: memory follows the real output, not the content
        # size the frame header claims (a bogus one made decompress() raise MemoryError)
        text = zstandard.ZstdDecompressor().stream_reader(memoryview(raw)[len(MAGIC):-4]).read()
        doc = json.loads(text.decode("utf-8"))
    except (zstandard.ZstdError, UnicodeDecodeError, ValueError) as e:
        raise bad(f"not a valid manifest body ({e})") from None
    if isinstance(doc, dict) and type(doc.get("format")) is int and doc["format"] > FORMAT:
        raise writer.too_new(path, version, f"a manifest of format {doc['format']}",
                             f"manifest format {FORMAT}", doc.get("writer"))
    try:
        m = _from_json(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"malformed manifest ({type(e).__name__}: {e})") from None
    if version is not None and m.version != version:
        raise bad(f"holds the manifest of version {m.version}, expected version {version}")
    return m


def _from_json(doc) -> Manifest:
    if not isinstance(doc, dict):
        raise TypeError("the manifest is not a JSON object")
    if doc["format"] != FORMAT:
        raise ValueError(f"manifest format {doc['format']} is not supported (expected {FORMAT})")
    ssts = tuple(SstFile(_file_name(f["name"]), _file_name(f["local"]), _int(f["size"]), _int(f["crc32"]))
                 for f in doc["ssts"])
    inline = {_file_name(name): base64.b64decode(data, validate=True)
              for name, data in doc["inline"].items()}
    return Manifest(
        version=_int(doc["version"]), num_keys=_int(doc["numKeys"]), layout=_int(doc["layout"]),
        db_ttl=_bool(doc["dbTtl"]), batch_ts=_int(doc["batchTimestampMs"]),
        cursor=bytes.fromhex(_str(doc["cursor"])),
        histogram=tuple((_int(ts), _int(n)) for ts, n in doc["histogram"]),
        ssts=ssts, inline=inline)


def _int(v) -> int:
    if type(v) is not int:
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _bool(v) -> bool:
    if type(v) is not bool:
        raise TypeError(f"expected true or false, got {v!r}")
    return v


def _str(v) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {v!r}")
    return v


def _file_name(v) -> str:
    """A plain file name: a manifest never places a file outside the database directory."""
    name = _str(v)
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(f"bad file name {name!r}")
    return name
