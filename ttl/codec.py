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


def migrate(stored: bytes, to_ttl: bool, restore_ts: int) -> bytes:
    """Convert a stored value between the plain and the TTL layout (Flink 2.x migration).

    A value gaining a TTL gets `restore_ts`; a value losing it drops its timestamp.
    """
    if to_ttl:
        return encode(restore_ts, stored)
    return decode(stored)[1]
