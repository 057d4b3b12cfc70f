"""The wire protocol between the JVM shim and the store workers (spec: docs/PROTOCOL.md).

Only this module and `replies` (the OK replies' payloads) know the byte layout. `Reader`
decodes fields from one frame body and raises `ProtocolError` on any malformed input; `Writer`
builds a frame body.
"""

from __future__ import annotations

import struct

from .errors import ProtocolError

PROTOCOL_VERSION = 11
MAX_FRAME = 64 * 1024 * 1024
# A MULTI_GET reply answers the keys asked in order until its answers reach about this many
# bytes (at least one answer); the JVM asks again for the rest (docs/decisions/095-multi-get-reply-split.md).
MULTI_GET_REPLY_BYTES = 32 * 1024 * 1024
ANSWER_OVERHEAD = 13  # u8 present, u32 length, i64 expiresAt

# Operations (request op codes).
HELLO = 0x01
OPEN = 0x02
LOAD = 0x03
BEGIN = 0x04
WRITE_BATCH = 0x05
GET = 0x06
MULTI_GET = 0x07
ITER_OPEN = 0x08
ITER_NEXT = 0x09
ITER_CLOSE = 0x0A
STATS = 0x0B
COMMIT = 0x0C
ABORT = 0x0D
SNAPSHOT = 0x0E
CLOSE = 0x0F
PING = 0x10
MAINTAIN = 0x11
MANIFEST_FILES = 0x12
READ_CHANGELOG = 0x13
PLAN = 0x14
WRITE_STAMPED = 0x15

OP_NAMES = {
    HELLO: "HELLO", OPEN: "OPEN", LOAD: "LOAD", BEGIN: "BEGIN",
    WRITE_BATCH: "WRITE_BATCH", GET: "GET", MULTI_GET: "MULTI_GET",
    ITER_OPEN: "ITER_OPEN", ITER_NEXT: "ITER_NEXT", ITER_CLOSE: "ITER_CLOSE",
    STATS: "STATS", COMMIT: "COMMIT", ABORT: "ABORT", SNAPSHOT: "SNAPSHOT",
    CLOSE: "CLOSE", PING: "PING", MAINTAIN: "MAINTAIN", MANIFEST_FILES: "MANIFEST_FILES",
    READ_CHANGELOG: "READ_CHANGELOG", PLAN: "PLAN", WRITE_STAMPED: "WRITE_STAMPED",
}

STATUS_OK = 0
STATUS_ERROR = 1

RECORD_PUT = 1
RECORD_REMOVE = 2
RECORD_ACCESS = 3  # u32 n: reads the JVM answered itself (they count for the TTL cleanup)
# Writes of a store without TTL whose key the JVM knows is absent from (PUT_NEW) or present
# in (PUT_OVER, REMOVE_PRESENT) the transaction's committed version, so the worker does not
# look it up (its key count needs to know).
RECORD_PUT_NEW = 4
RECORD_PUT_OVER = 5
RECORD_REMOVE_PRESENT = 6
# Writes of a TTL store over an entry the JVM knows is stored and live at the transaction's
# clock, with that entry's `i64 expiresAt` after the record's other fields, so the worker needs
# neither its presence nor its timestamp (the timestamp histogram does) from the database.
# PUT_NEW serves both kinds of store: a key stored neither live nor expired.
RECORD_PUT_OVER_LIVE = 7
RECORD_REMOVE_LIVE = 8
_PUTS = frozenset((RECORD_PUT, RECORD_PUT_NEW, RECORD_PUT_OVER))
_REMOVES = frozenset((RECORD_REMOVE, RECORD_REMOVE_PRESENT))
_LIVE_HINTS = frozenset((RECORD_PUT_OVER_LIVE, RECORD_REMOVE_LIVE))
_WRITE_KINDS = _PUTS | _REMOVES | _LIVE_HINTS | {RECORD_ACCESS}
# WRITE_STAMPED's kinds: its kinds 5 and 6 name live entries, whose expiresAt is in its tail
STAMPED_KINDS = _PUTS | _REMOVES
STAMP_BYTES = 8  # a stamped value's timestamp (ttlstate.ttl.codec.TS_BYTES)

BEGIN_WRITE = 0  # BEGIN modes: a write transaction that writes a changelog,
BEGIN_READ_ONLY = 1  # a read-only transaction,
BEGIN_WRITE_NO_CHANGELOG = 2  # a write transaction without changelog (checkpoint.mode=snapshot)

PLAN_LOAD = 1  # PLAN purposes: the load plan of (version, id),
PLAN_FROM_SNAPSHOT = 2  # a replay of (version, id) from the snapshot of version `from`,
PLAN_CHANGELOGS = 3  # the changelogs of versions `from` to (version, id) (a change feed),
PLAN_RETENTION = 4  # what a cleanup pass keeps and deletes
PLAN_PURPOSES = (PLAN_LOAD, PLAN_FROM_SNAPSHOT, PLAN_CHANGELOGS, PLAN_RETENTION)
PLANNED = 0  # PLAN outcomes: a plan (or retention),
PLAN_MISSING = 1  # a file the plan needs is not listed,
PLAN_NO_CHANGELOG = 2  # a version has a snapshot and no changelog

ITER_PAIRS = 0  # ITER_OPEN modes: chunks of pairs,
ITER_PAIRS_WITH_EXPIRY = 1  # or of pairs each followed by i64 expiresAt,
ITER_STORED_WITH_EXPIRY = 2  # or of every stored pair, expired ones too, each with its expiresAt

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_HEADER = struct.Struct("<BI")  # op, handle


class Reader:
    """Decodes the fields of one frame body, checking every length."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0):
        self.buf = buf
        self.pos = pos

    def _take(self, st: struct.Struct):
        end = self.pos + st.size
        if end > len(self.buf):
            raise ProtocolError(f"frame truncated at byte {self.pos}")
        (v,) = st.unpack_from(self.buf, self.pos)
        self.pos = end
        return v

    def u8(self) -> int:
        return self._take(_U8)

    def u16(self) -> int:
        return self._take(_U16)

    def u32(self) -> int:
        return self._take(_U32)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def bool(self) -> bool:
        v = self.u8()
        if v > 1:
            raise ProtocolError(f"boolean byte must be 0 or 1, got {v}")
        return v == 1

    def bytes(self) -> bytes:
        n = self.u32()
        end = self.pos + n
        if end > len(self.buf):
            raise ProtocolError(f"byte string of {n} bytes overruns the frame at byte {self.pos}")
        v = bytes(self.buf[self.pos:end])
        self.pos = end
        return v

    def str(self) -> str:
        raw = self.bytes()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"string is not valid UTF-8: {e}") from None

    def optbytes(self) -> bytes | None:
        return self.bytes() if self.bool() else None

    def count(self, min_item_size: int) -> int:
        """A repeat count, refused if the items could not fit in the rest of the frame."""
        n = self.u32()
        if n * min_item_size > len(self.buf) - self.pos:
            raise ProtocolError(f"count {n} exceeds what the frame can hold")
        return n

    def str_pairs(self) -> list[tuple[str, str]]:
        return [(self.str(), self.str()) for _ in range(self.count(8))]

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise ProtocolError(f"{len(self.buf) - self.pos} trailing bytes in frame")


class Writer:
    """Builds one frame body."""

    __slots__ = ("parts",)

    def __init__(self):
        self.parts: list[bytes] = []

    def u8(self, v: int) -> "Writer":
        self.parts.append(_U8.pack(v))
        return self

    def u16(self, v: int) -> "Writer":
        self.parts.append(_U16.pack(v))
        return self

    def u32(self, v: int) -> "Writer":
        self.parts.append(_U32.pack(v))
        return self

    def i32(self, v: int) -> "Writer":
        self.parts.append(_I32.pack(v))
        return self

    def i64(self, v: int) -> "Writer":
        self.parts.append(_I64.pack(v))
        return self

    def bytes(self, v: bytes) -> "Writer":
        self.parts.append(_U32.pack(len(v)))
        self.parts.append(v)
        return self

    def pairs(self, entries, with_expiry: bool = False) -> "Writer":
        """`bytes key, bytes value` (then `i64 expiresAt` if `with_expiry`) per entry."""
        parts, u32 = self.parts, _U32.pack
        if with_expiry:
            i64 = _I64.pack
            for key, value, expires_at in entries:
                parts += (u32(len(key)), key, u32(len(value)), value, i64(expires_at))
        else:
            for key, value in entries:
                parts += (u32(len(key)), key, u32(len(value)), value)
        return self

    def answers(self, values, expires_at: int) -> "Writer":
        """A GET answer (`optbytes value [i64 expiresAt]`) per value, all with `expires_at`."""
        parts, u32 = self.parts, _U32.pack
        absent, present, expiry = _U8.pack(0), _U8.pack(1), _I64.pack(expires_at)
        for value in values:
            if value is None:
                parts.append(absent)
            else:
                parts += (present, u32(len(value)), value, expiry)
        return self

    def str(self, v: str) -> "Writer":
        return self.bytes(v.encode("utf-8"))

    def optbytes(self, v: bytes | None) -> "Writer":
        if v is None:
            return self.u8(0)
        return self.u8(1).bytes(v)

    def str_pairs(self, pairs) -> "Writer":
        pairs = list(pairs)
        self.u32(len(pairs))
        for k, v in pairs:
            self.str(k).str(v)
        return self

    def body(self) -> bytes:
        return b"".join(self.parts)

    def size(self) -> int:
        """The body's length; joins the parts into one, which `body` and `frame` then reuse
        without a copy."""
        self.parts = [self.body()]
        return len(self.parts[0])

    def frame(self) -> bytes:
        body = self.body()
        return _U32.pack(len(body)) + body


def answer_bytes(value: bytes | None) -> int:
    """What one MULTI_GET answer of `value` (None: absent) counts against MULTI_GET_REPLY_BYTES."""
    return ANSWER_OVERHEAD + (0 if value is None else len(value))


def answerable(values) -> int:
    """How many of `values` (None: absent), from the first, one MULTI_GET reply answers: all
    whose answers fit in MULTI_GET_REPLY_BYTES, and at least one."""
    size = 0
    for i, value in enumerate(values):
        size += answer_bytes(value)
        if size > MULTI_GET_REPLY_BYTES:
            return max(i, 1)
    return len(values)


def request(op: int, handle: int) -> Writer:
    """A request body starting with its op code and handle."""
    return Writer().u8(op).u32(handle)


def ok() -> Writer:
    return Writer().u8(STATUS_OK)


def error_frame(error_class: str, message: str) -> bytes:
    return Writer().u8(STATUS_ERROR).str(error_class).str(message).frame()


def read_header(r: Reader) -> tuple[int, int]:
    op = r.u8()
    handle = r.u32()
    if op not in OP_NAMES:
        raise ProtocolError(f"unknown op code 0x{op:02x}")
    return op, handle


def frame_length(header: bytes) -> int:
    """The body length announced by a 4-byte frame header, checked against MAX_FRAME."""
    (n,) = _U32.unpack(header)
    if n > MAX_FRAME:
        raise ProtocolError(f"frame of {n} bytes exceeds the limit of {MAX_FRAME}")
    if n < 1:
        raise ProtocolError("empty frame")
    return n


# Each request's payload fields, by PROTOCOL.md's names, in its order. The worker's handlers
# read a payload with `read_payload` and `decode_request` (the shared vectors' decoder) too.
REQUEST_FIELDS: dict[int, tuple[str, ...]] = {
    HELLO: ("token", "version"),
    OPEN: ("storeId", "localDir", "operatorId", "storeName", "conf"),
    LOAD: ("version", "batchTimestampMs", "manifestVersion", "manifestPath", "ssts", "changelogs"),
    BEGIN: ("version", "mode", "batchTimestampMs"),
    WRITE_BATCH: ("records",),
    GET: ("key",),
    MULTI_GET: ("keys",),
    ITER_OPEN: ("prefix", "maxEntries", "mode"),
    ITER_NEXT: ("maxEntries",),
    ITER_CLOSE: (),
    STATS: (),
    COMMIT: ("newVersion", "changelogPath", "id", "baseId"),
    ABORT: (),
    SNAPSHOT: ("dir", "id"),
    CLOSE: ("deleteFiles",),
    PING: (),
    MAINTAIN: (),
    MANIFEST_FILES: ("path", "version"),
    READ_CHANGELOG: ("path", "version", "fromRecord", "maxRecords"),
    PLAN: ("purpose", "v2", "version", "id", "from", "minVersionsToRetain", "minVersionsToDelete",
           "maxVersionsToDelete", "files"),
    WRITE_STAMPED: ("stamp", "records", "accesses", "replaced", "expired"),
}

_PAYLOADS = {
    HELLO: lambda r: (r.bytes(), r.u16()),
    OPEN: lambda r: (r.str(), r.str(), r.i64(), r.str(), r.str_pairs()),
    LOAD: lambda r: (r.i64(), r.i64(), r.i64(), r.str(), read_ssts(r), read_changelogs(r)),
    BEGIN: lambda r: (r.i64(), read_begin_mode(r), r.i64()),
    WRITE_BATCH: lambda r: (read_records(r),),
    GET: lambda r: (r.bytes(),),
    MULTI_GET: lambda r: ([r.bytes() for _ in range(r.count(4))],),
    ITER_OPEN: lambda r: (r.bytes(), r.u32(), read_iter_mode(r)),
    ITER_NEXT: lambda r: (r.u32(),),
    COMMIT: lambda r: (r.i64(), r.str(), r.str(), r.str()),
    SNAPSHOT: lambda r: (r.str(), r.str()),
    CLOSE: lambda r: (r.bool(),),
    MANIFEST_FILES: lambda r: (r.str(), r.i64()),
    READ_CHANGELOG: lambda r: (r.str(), r.i64(), r.i64(), r.u32()),
    PLAN: lambda r: (read_plan_purpose(r), r.bool(), r.i64(), r.str(), r.i64(), r.i32(), r.i64(), r.i32(),
                     read_plan_files(r)),
    WRITE_STAMPED: lambda r: _without_encoded(read_write_stamped(r)),
}


def read_payload(r: Reader, op: int) -> tuple:
    """The whole payload of request `op` (`r` after its header): its fields' values in the
    order of `REQUEST_FIELDS[op]`; refuses trailing bytes."""
    reader = _PAYLOADS.get(op)
    values = reader(r) if reader is not None else ()
    r.end()
    return values


def decode_request(body: bytes | memoryview) -> tuple[int, int, dict]:
    """Decode a whole request body into (op, handle, fields), byte strings as hex and a
    WRITE_BATCH's (or WRITE_STAMPED's) records flattened (`_flat_record`); the shared vectors' decoder
    (tests/vectors/make_vectors.py), reading every payload as the worker does (`read_payload`)."""
    r = Reader(body)
    op, handle = read_header(r)
    f = dict(zip(REQUEST_FIELDS[op], read_payload(r, op)))
    if op in (WRITE_BATCH, WRITE_STAMPED):
        f["records"] = [_flat_record(rec) for rec in f["records"]]
    return op, handle, {k: _hexed(v) for k, v in f.items()}


def _hexed(v):
    """`v` with every byte string as hex (a list changed in place), tuples as lists."""
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, tuple):
        v = list(v)
    if isinstance(v, list):
        for i, x in enumerate(v):
            v[i] = _hexed(x)
    return v


def read_ssts(r: Reader) -> list[tuple[str, str]]:
    """`u32 m, (str sstName, str path) * m` of a LOAD payload."""
    return [(r.str(), r.str()) for _ in range(r.count(8))]


def read_changelogs(r: Reader) -> list[tuple[int, str]]:
    """`u32 n, (i64 changelogVersion, str path) * n` of a LOAD payload."""
    return [(r.i64(), r.str()) for _ in range(r.count(12))]


def read_begin_mode(r: Reader) -> int:
    """The `u8 mode` of a BEGIN payload."""
    mode = r.u8()
    if mode not in (BEGIN_WRITE, BEGIN_READ_ONLY, BEGIN_WRITE_NO_CHANGELOG):
        raise ProtocolError(f"unknown transaction mode {mode}")
    return mode


def read_plan_purpose(r: Reader) -> int:
    """The `u8 purpose` of a PLAN payload."""
    purpose = r.u8()
    if purpose not in PLAN_PURPOSES:
        raise ProtocolError(f"unknown plan purpose {purpose}")
    return purpose


def read_plan_files(r: Reader) -> list[tuple[str, int]]:
    """`u32 n, (str name, i64 modifiedMs) * n` of a PLAN payload."""
    return [(r.str(), r.i64()) for _ in range(r.count(12))]


def read_iter_mode(r: Reader) -> int:
    """The `u8 mode` of an ITER_OPEN payload."""
    mode = r.u8()
    if mode not in (ITER_PAIRS, ITER_PAIRS_WITH_EXPIRY, ITER_STORED_WITH_EXPIRY):
        raise ProtocolError(f"unknown iterator mode {mode}")
    return mode


def _flat_record(rec: tuple) -> list:
    """A record of `read_records` as the vectors render it: [kind, key, value] (access:
    [kind, None, count]); a live-entry hint adds its expiresAt: [kind, key, value-or-None, expiresAt]."""
    kind, key, value = rec
    if kind == RECORD_PUT_OVER_LIVE:
        return [kind, key, value[0], value[1]]
    if kind == RECORD_REMOVE_LIVE:
        return [kind, key, None, value]
    return [kind, key, value]


def read_records(r: Reader, kinds: frozenset = _WRITE_KINDS,
                 min_value: int = 0) -> list[tuple[int, bytes | None, bytes | int | tuple | None]]:
    """The (kind, key, value-or-None) records of a WRITE_BATCH payload; an access record
    is (RECORD_ACCESS, None, count); a live-entry hint carries the stored entry's expiresAt:
    (RECORD_PUT_OVER_LIVE, key, (value, expiresAt)) and (RECORD_REMOVE_LIVE, key, expiresAt).

    The hot path of every write: one tight loop over the buffer instead of Reader calls,
    with the same checks (and errors) as `Reader`. Keyed records have the layout of a
    changelog's records (`ttlstate.statefile`), so a frame without access records can be
    copied into a changelog as it is (`encoded_records`). `kinds`: the record kinds allowed;
    `min_value`: the fewest bytes a put's value may have.
    """
    n = r.count(5)
    buf, pos, end = r.buf, r.pos, len(r.buf)
    unpack = _U32.unpack_from
    out = []
    append = out.append
    for _ in range(n):
        if pos + 5 > end:
            raise ProtocolError(f"frame truncated at byte {pos}")
        kind = buf[pos]
        if kind not in kinds:
            if kind in _WRITE_KINDS:
                raise ProtocolError(f"write record kind {kind} is not allowed in this frame")
            raise ProtocolError(f"unknown write record kind {kind}")
        (length,) = unpack(buf, pos + 1)
        pos += 5
        if kind == RECORD_ACCESS:
            append((kind, None, length))
            continue
        key_end = pos + length
        if key_end > end:
            raise ProtocolError(f"byte string of {length} bytes overruns the frame at byte {pos}")
        key = bytes(buf[pos:key_end])
        pos = key_end
        if kind in _REMOVES:
            append((kind, key, None))
            continue
        if kind == RECORD_REMOVE_LIVE:
            if pos + 8 > end:
                raise ProtocolError(f"frame truncated at byte {pos}")
            append((kind, key, _I64.unpack_from(buf, pos)[0]))
            pos += 8
            continue
        if pos + 4 > end:
            raise ProtocolError(f"frame truncated at byte {pos}")
        (length,) = unpack(buf, pos)
        pos += 4
        value_end = pos + length
        if value_end > end:
            raise ProtocolError(f"byte string of {length} bytes overruns the frame at byte {pos}")
        if length < min_value:
            raise ProtocolError(f"a value of {length} bytes at byte {pos}, where each holds at least {min_value}")
        value = bytes(buf[pos:value_end])
        pos = value_end
        if kind == RECORD_PUT_OVER_LIVE:
            if pos + 8 > end:
                raise ProtocolError(f"frame truncated at byte {pos}")
            append((kind, key, (value, _I64.unpack_from(buf, pos)[0])))
            pos += 8
            continue
        append((kind, key, value))
    r.pos = pos
    return out


def read_write_stamped(r: Reader) -> tuple[int, list, bytes, int, list[tuple[int, int]], list[bytes]]:
    """A WRITE_STAMPED payload: (stamp, records as `read_records` gives them, the records'
    bytes, accesses, the tail's (expiresAt, count) pairs, the keys of reads the JVM found
    expired); refuses a record kind a stamped frame cannot carry."""
    stamp = r.i64()
    start = r.pos + 4
    records = read_records(r, STAMPED_KINDS, STAMP_BYTES)
    encoded = bytes(r.buf[start:r.pos])
    accesses = r.u32()
    replaced = [(r.i64(), r.u32()) for _ in range(r.count(12))]
    expired = [r.bytes() for _ in range(r.count(4))]
    return stamp, records, encoded, accesses, replaced, expired


def _without_encoded(payload: tuple) -> tuple:
    stamp, records, _, accesses, replaced, expired = payload
    return stamp, records, accesses, replaced, expired


def encoded_records(body: bytes, records: list) -> bytes | None:
    """The bytes of a WRITE_BATCH body's records (everything after its count), if they are
    all keyed records without a live-entry hint (no ACCESS, PUT_OVER_LIVE or REMOVE_LIVE
    record: a changelog has no such kinds); else None."""
    for kind, _, _ in records:
        if kind == RECORD_ACCESS or kind in _LIVE_HINTS:
            return None
    return body[_HEADER.size + 4:]


def decode_response(body: bytes | memoryview) -> tuple[int, Reader]:
    r = Reader(body)
    status = r.u8()
    if status not in (STATUS_OK, STATUS_ERROR):
        raise ProtocolError(f"unknown response status {status}")
    return status, r
