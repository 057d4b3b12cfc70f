"""Flink's TTL value layout: an 8-byte big-endian timestamp (ms) before the value bytes."""

from __future__ import annotations

import struct

_TS = struct.Struct(">q")
TS_BYTES = _TS.size


def encode(ts: int, value: bytes) -> bytes:
    """Prefix `value` with its last-access timestamp."""
    return _TS.pack(ts) + value


def decode(stored: bytes) -> tuple[int, bytes]:
    """(timestamp, value) of a stored entry; ValueError if it is too short to hold one."""
    if len(stored) < TS_BYTES:
        raise ValueError(f"a TTL value needs {TS_BYTES} bytes of timestamp, got {len(stored)} bytes")
    return _TS.unpack_from(stored)[0], stored[TS_BYTES:]


def timestamp(stored: bytes) -> int:
    """Only the timestamp of a stored entry (no copy of the value)."""
    if len(stored) < TS_BYTES:
        raise ValueError(f"a TTL value needs {TS_BYTES} bytes of timestamp, got {len(stored)} bytes")
    return _TS.unpack_from(stored)[0]
