"""Regenerate tests/vectors/frames.tsv: `python tests/vectors/make_vectors.py`.

Each line is `name <TAB> hex of the frame body <TAB> canonical decoding`. The canonical
decoding is the JSON of `ttlstate.protocol.decode_request` for requests, with keys sorted
and no spaces; the JVM unit test `FrameVectorsTest` renders its own decoding the same way and
compares.
Lines named `bad-*` must be refused by both decoders.
"""

from __future__ import annotations

import json
import pathlib

from ttlstate import protocol as p

OUT = pathlib.Path(__file__).with_name("frames.tsv")


def vectors():
    R = p.request
    yield "hello", R(p.HELLO, 0).bytes(bytes.fromhex("00ff10")).u16(4)
    yield "open", R(p.OPEN, 0).str("op=0,part=3,name=default").str("/tmp/é/x").i64(3).str("left-keyToNumValues").str_pairs(
        [("spark.sql.streaming.stateStore.ttlstate.writeBatchBytes", "1024")])
    yield "load", (R(p.LOAD, 7).i64(12).i64(1700000000123).i64(9).str("/d/9.manifest")
                   .u32(1).str("000009-3fa2b4c5d6e7f801.sst").str("/c/sst/000009-3fa2b4c5d6e7f801.sst")
                   .u32(2).i64(10).str("/d/10.changelog").i64(11).str("/d/11_é.changelog"))
    yield "load-empty", R(p.LOAD, 7).i64(1).i64(-1).i64(0).str("").u32(0).u32(1).i64(1).str("/d/1.changelog")
    yield "begin", R(p.BEGIN, 7).i64(-1 & 0x7FFFFFFFFFFFFFFF).u8(1).i64(-1)
    yield "begin-no-changelog", R(p.BEGIN, 7).i64(3).u8(2).i64(1700000000000)
    yield "write-batch", R(p.WRITE_BATCH, 9).u32(2).u8(1).bytes(b"k1").bytes(b"").u8(2).bytes(b"k2")
    yield "write-batch-access", R(p.WRITE_BATCH, 9).u32(2).u8(3).u32(7).u8(2).bytes(b"k2")
    yield "write-batch-hints", (R(p.WRITE_BATCH, 9).u32(4).u8(p.RECORD_PUT_NEW).bytes(b"k1").bytes(b"v")
                                .u8(p.RECORD_PUT_OVER).bytes(b"k2").bytes(b"").u8(p.RECORD_REMOVE_PRESENT).bytes(b"k3")
                                .u8(p.RECORD_PUT).bytes(b"k4").bytes(b"w"))
    yield "write-batch-live", (R(p.WRITE_BATCH, 9).u32(3).u8(p.RECORD_PUT_OVER_LIVE).bytes(b"k1").bytes(b"v")
                               .i64(1700003600000).u8(p.RECORD_REMOVE_LIVE).bytes(b"k2").i64(-2)
                               .u8(p.RECORD_PUT_NEW).bytes(b"k3").bytes(b""))
    yield "get", R(p.GET, 9).bytes(b"\x00\x01\xfe")
    yield "multi-get", R(p.MULTI_GET, 9).u32(2).bytes(b"a").bytes(b"")
    yield "iter-open", R(p.ITER_OPEN, 9).bytes(b"").u32(1024).u8(0)
    yield "iter-open-expiry", R(p.ITER_OPEN, 9).bytes(b"ab").u32(8192).u8(1)
    yield "iter-open-stored", R(p.ITER_OPEN, 9).bytes(b"").u32(8192).u8(p.ITER_STORED_WITH_EXPIRY)
    yield "iter-next", R(p.ITER_NEXT, 4294967295).u32(1)
    yield "iter-close", R(p.ITER_CLOSE, 3)
    yield "stats", R(p.STATS, 9)
    yield "commit", R(p.COMMIT, 9).i64(5).str("/l/5.changelog")
    yield "abort", R(p.ABORT, 9)
    yield "snapshot", R(p.SNAPSHOT, 7).str("/l/snap-5")
    yield "close", R(p.CLOSE, 7).u8(1)
    yield "ping", R(p.PING, 0)
    yield "maintain", R(p.MAINTAIN, 7)
    yield "manifest-files", R(p.MANIFEST_FILES, 0).str("/d/9.manifest").i64(9)
    yield "read-changelog", R(p.READ_CHANGELOG, 0).str("/c/12_é_0.changelog").i64(12).i64(4096).u32(8192)
    yield "bad-unknown-op", p.Writer().u8(0x7F).u32(0)
    yield "bad-truncated-bytes", R(p.GET, 1).u32(10).u8(1)
    yield "bad-trailing", R(p.PING, 0).u8(0)
    yield "bad-count-overrun", R(p.MULTI_GET, 1).u32(1000000)
    yield "bad-begin-mode", R(p.BEGIN, 1).i64(1).u8(3).i64(0)
    yield "bad-bool", R(p.CLOSE, 1).u8(2)
    yield "bad-record-kind", R(p.WRITE_BATCH, 1).u32(1).u8(4).bytes(b"k")
    yield "bad-iter-mode", R(p.ITER_OPEN, 1).bytes(b"").u32(1).u8(3)
    yield "bad-live-truncated", R(p.WRITE_BATCH, 1).u32(1).u8(p.RECORD_REMOVE_LIVE).bytes(b"k").u32(0)
    yield "bad-put-live-truncated", R(p.WRITE_BATCH, 1).u32(1).u8(p.RECORD_PUT_OVER_LIVE).bytes(b"k").bytes(b"v")
    yield "bad-record-kind-9", R(p.WRITE_BATCH, 1).u32(1).u8(9).bytes(b"k").bytes(b"v")
    yield "bad-utf8", R(p.SNAPSHOT, 1).bytes(b"\xff\xfe")
    yield "bad-manifest-files-truncated", R(p.MANIFEST_FILES, 0).str("/d/9.manifest").u32(9)
    yield "bad-read-changelog-truncated", R(p.READ_CHANGELOG, 0).str("/d/9.changelog").i64(9).i64(0)


def canonical(body: bytes) -> str:
    try:
        op, handle, fields = p.decode_request(body)
    except p.ProtocolError:
        return "ERROR"
    fields = {k: _jsonable(v) for k, v in fields.items()}
    return json.dumps({"op": p.OP_NAMES[op], "handle": handle, **fields},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _jsonable(v):
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, bytes):
        return v.hex()
    return v


def main():
    lines = []
    for name, w in vectors():
        body = w.body()
        lines.append(f"{name}\t{body.hex()}\t{canonical(body)}")
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} vectors to {OUT}")


if __name__ == "__main__":
    main()
