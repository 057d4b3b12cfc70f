"""Regenerate the frame vectors: `python tests/vectors/make_vectors.py`.

`frames.tsv`, requests: `name <TAB> hex of the body <TAB> canonical decoding`, the canonical
decoding being the JSON of `ttlstate.protocol.decode_request` (which reads each payload as the
worker does) with keys sorted and no spaces. The JVM unit test `FrameVectorsTest` builds every
request the JVM sends from the decoded fields with the shim's own encoders (`Requests`,
`Records`) and compares the bytes. Lines named `bad-*` must be refused by the Python decoder.

`replies.tsv`, the worker's replies: `name <TAB> op <TAB> request context (JSON) <TAB> hex of
the body <TAB> fields (JSON)`, each body encoded by the worker's own encoders
(`ttlstate.replies`, `protocol.error_frame`) from the fields; the JVM unit test
`ReplyVectorsTest` decodes every body with the shim's decoders (`Reply`) and compares the
fields (`"ERROR"`: the JVM must refuse it). The context is what the JVM knows of its request
(`asked` keys of a MULTI_GET, `mode` of an ITER_OPEN, an ITER_NEXT's iterator's mode, a PLAN's
`purpose`: a retention's reply has another shape). Each `plan-*` request has a reply line of
its name: the worker's answer to it (`ttlstate.plans`).
"""

from __future__ import annotations

import json
import pathlib

from ttlstate import conf, plans, replies, worker
from ttlstate import protocol as p
from ttlstate.ttl import MIN_TS, codec
from ttlstate.confkeys import PREFIX

OUT = pathlib.Path(__file__).with_name("frames.tsv")
OUT_REPLIES = OUT.with_name("replies.tsv")
MAX = (1 << 63) - 1
MIN = -(1 << 63)

# PLAN requests (fields in `protocol.REQUEST_FIELDS[PLAN]` order but the listing), by name;
# `_plan_replies` answers each as the worker does.
PLANS = [
    ("plan-load", (p.PLAN_LOAD, False, 12, "", 0, 0, 0, 0), [
        ("10.changelog", 1700000000000), ("10.manifest", 1700000000500), ("11.changelog", 1700000001000),
        ("12.changelog", 1700000002000), ("13.changelog", 1700000003000), ("12.zip", 1700000002000),
        ("notes-é.txt", -1), ("14.manifest", 1700000004500)]),
    ("plan-load-v2", (p.PLAN_LOAD, True, 3, "c-é", 0, 0, 0, 0), [
        ("1_a_0.changelog", 1), ("2_b_a.changelog", 2), ("2_b.manifest", 3), ("3_c-é_b.changelog", 4),
        ("4.changelog", 5)]),
    ("plan-load-newest", (p.PLAN_LOAD, True, 2, "", 0, 0, 0, 0), [
        ("1_a_0.changelog", 1), ("2_x_a.changelog", 3), ("2_b_a.changelog", 3)]),
    ("plan-load-missing", (p.PLAN_LOAD, False, 3, "", 0, 0, 0, 0), [("1.changelog", 1), ("3.changelog", 3)]),
    ("plan-from-snapshot", (p.PLAN_FROM_SNAPSHOT, False, 5, "", 2, 0, 0, 0), [
        ("1.changelog", 1000), ("2.changelog", 2000), ("2.manifest", 2500), ("3.changelog", 3000),
        ("4.changelog", 4000), ("4.manifest", 4500), ("5.changelog", 5000), ("6.changelog", 6000)]),
    ("plan-from-snapshot-missing", (p.PLAN_FROM_SNAPSHOT, False, 3, "", 1, 0, 0, 0), [
        ("1.changelog", 1), ("2.changelog", 2), ("2.manifest", 3), ("3.changelog", 4), ("3_z.manifest", 5)]),
    ("plan-changelogs", (p.PLAN_CHANGELOGS, True, 3, "c", 2, 0, 0, 0), [
        ("1_a_0.changelog", 1), ("2_b_a.changelog", 2), ("2_x_a.changelog", 3), ("3_c_b.changelog", 4)]),
    ("plan-changelogs-empty", (p.PLAN_CHANGELOGS, True, MAX, "", 1, 0, 0, 0), []),
    ("plan-no-changelog", (p.PLAN_CHANGELOGS, False, 3, "", 1, 0, 0, 0), [
        ("1.changelog", 1), ("2.manifest", 2), ("3.manifest", 3)]),
    ("plan-retention", (p.PLAN_RETENTION, False, 0, "", 0, 2, 0, 1), [
        ("1.changelog", 1000), ("2.changelog", 2000), ("2.manifest", 2500), ("1_a_0.changelog", 900),
        ("3.changelog", 3000), ("4.changelog", 4000), ("4.manifest", 4500), ("5.changelog", 5000),
        ("6.changelog", 6000)]),
    ("plan-retention-v2", (p.PLAN_RETENTION, True, 0, "", 0, 1, 0, -1), [
        ("1_a_0.changelog", 1000), ("1_a.manifest", 1500), ("2_b_a.changelog", 2000), ("2_x_a.changelog", 2100),
        ("2.manifest", 2500)]),
    ("plan-retention-too-few", (p.PLAN_RETENTION, False, 0, "", 0, 1, 30, -1), [
        ("1.changelog", 1), ("2.changelog", 2), ("3.changelog", 3), ("3.manifest", 4), ("1_a.manifest", 5),
        ("4.changelog", 6)]),
    ("plan-retention-unplannable", (p.PLAN_RETENTION, True, 0, "", 0, 1, 0, -1), [
        ("2_b_a.changelog", 2), ("3_c_b.changelog", 3)]),
]


def vectors():
    R = p.request
    yield "hello", R(p.HELLO, 0).bytes(bytes.fromhex("00ff10")).u16(p.PROTOCOL_VERSION)
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
    yield "write-batch-every-kind", (R(p.WRITE_BATCH, 9).u32(8)
                                     .u8(p.RECORD_PUT).bytes(b"k1").bytes(b"v1")
                                     .u8(p.RECORD_REMOVE).bytes(b"k2")
                                     .u8(p.RECORD_ACCESS).u32(4294967295)
                                     .u8(p.RECORD_PUT_NEW).bytes(b"k4").bytes(b"")
                                     .u8(p.RECORD_PUT_OVER).bytes(b"").bytes(b"\x00\xff")
                                     .u8(p.RECORD_REMOVE_PRESENT).bytes(b"k6")
                                     .u8(p.RECORD_PUT_OVER_LIVE).bytes(b"k7").bytes(b"v7").i64(MAX - 1)
                                     .u8(p.RECORD_REMOVE_LIVE).bytes(b"k8").i64(-(1 << 63)))
    stamp = 1700000000000
    yield "write-stamped", (R(p.WRITE_STAMPED, 9).i64(stamp).u32(5)
                            .u8(p.RECORD_PUT_NEW).bytes(b"k1").bytes(codec.encode(stamp, b"v1"))
                            .u8(p.RECORD_PUT_OVER).bytes(b"k2").bytes(codec.encode(stamp, b""))
                            .u8(p.RECORD_REMOVE_PRESENT).bytes(b"k3")
                            .u8(p.RECORD_PUT).bytes(b"").bytes(codec.encode(stamp, b"\x00\xff"))
                            .u8(p.RECORD_REMOVE).bytes(b"k5")
                            .u32(4294967295).u32(2).i64(1700003600000).u32(1).i64(-2).u32(1)
                            .u32(2).bytes(b"k6").bytes(b""))
    yield "write-stamped-accesses-only", R(p.WRITE_STAMPED, 9).i64(-(1 << 63)).u32(0).u32(3).u32(0).u32(0)
    yield "write-stamped-expired-only", R(p.WRITE_STAMPED, 9).i64(5).u32(0).u32(1).u32(0).u32(1).bytes(b"\xffk")
    yield "get", R(p.GET, 9).bytes(b"\x00\x01\xfe")
    yield "multi-get", R(p.MULTI_GET, 9).u32(2).bytes(b"a").bytes(b"")
    yield "iter-open", R(p.ITER_OPEN, 9).bytes(b"").u32(1024).u8(0)
    yield "iter-open-expiry", R(p.ITER_OPEN, 9).bytes(b"ab").u32(8192).u8(1)
    yield "iter-open-stored", R(p.ITER_OPEN, 9).bytes(b"").u32(8192).u8(p.ITER_STORED_WITH_EXPIRY)
    yield "iter-next", R(p.ITER_NEXT, 4294967295).u32(1)
    yield "iter-close", R(p.ITER_CLOSE, 3)
    yield "stats", R(p.STATS, 9)
    yield "commit", R(p.COMMIT, 9).i64(5).str("/l/5.changelog").str("").str("")
    yield "commit-v2", R(p.COMMIT, 9).i64(5).str("/l/5.changelog").str("e-é").str("d")
    yield "commit-no-changelog", R(p.COMMIT, 9).i64(1).str("").str("a").str("")
    yield "abort", R(p.ABORT, 9)
    yield "snapshot", R(p.SNAPSHOT, 7).str("/l/snap-5").str("")
    yield "snapshot-v2", R(p.SNAPSHOT, 7).str("/l/snap-5").str("e-é")
    yield "close", R(p.CLOSE, 7).u8(1)
    yield "ping", R(p.PING, 0)
    yield "maintain", R(p.MAINTAIN, 7)
    yield "manifest-files", R(p.MANIFEST_FILES, 0).str("/d/9.manifest").i64(9)
    yield "read-changelog", R(p.READ_CHANGELOG, 0).str("/c/12_é_0.changelog").i64(12).i64(4096).u32(8192)
    for name, fields, files in PLANS:
        yield name, _plan(*fields, files)
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
    yield "bad-stamped-live-kind", (R(p.WRITE_STAMPED, 1).i64(0).u32(1).u8(p.RECORD_PUT_OVER_LIVE).bytes(b"k")
                                    .bytes(codec.encode(0, b"")).i64(5).u32(0).u32(0))
    yield "bad-stamped-access", R(p.WRITE_STAMPED, 1).i64(0).u32(1).u8(p.RECORD_ACCESS).u32(1).u32(0).u32(0)
    yield "bad-stamped-short-value", (R(p.WRITE_STAMPED, 1).i64(0).u32(1).u8(p.RECORD_PUT).bytes(b"k")
                                      .bytes(b"1234567").u32(0).u32(0))
    yield "bad-stamped-no-tail", R(p.WRITE_STAMPED, 1).i64(0).u32(1).u8(p.RECORD_REMOVE).bytes(b"k")
    yield "bad-stamped-no-expired", R(p.WRITE_STAMPED, 1).i64(0).u32(1).u8(p.RECORD_REMOVE).bytes(b"k").u32(0).u32(0)
    yield "bad-stamped-expired-truncated", (R(p.WRITE_STAMPED, 1).i64(0).u32(0).u32(0).u32(0).u32(2)
                                            .bytes(b"k"))
    yield "bad-record-kind-9", R(p.WRITE_BATCH, 1).u32(1).u8(9).bytes(b"k").bytes(b"v")
    yield "bad-utf8", R(p.SNAPSHOT, 1).bytes(b"\xff\xfe")
    yield "bad-manifest-files-truncated", R(p.MANIFEST_FILES, 0).str("/d/9.manifest").u32(9)
    yield "bad-read-changelog-truncated", R(p.READ_CHANGELOG, 0).str("/d/9.changelog").i64(9).i64(0)
    yield "bad-plan-purpose", _plan(5, False, 1, "", 0, 0, 0, 0, [])
    yield "bad-plan-files-truncated", _plan(p.PLAN_LOAD, False, 1, "", 0, 0, 0, 0, []).u32(1).str("1.changelog")


def _plan(purpose, v2, version, id, first, min_retain, min_delete, max_delete, files) -> p.Writer:
    """A PLAN request; `files`: (name, modifiedMs) each."""
    w = (p.request(p.PLAN, 0).u8(purpose).u8(1 if v2 else 0).i64(version).str(id).i64(first).i32(min_retain)
         .i64(min_delete).i32(max_delete).u32(len(files)))
    for name, ms in files:
        w.str(name).i64(ms)
    return w


def canonical(body: bytes) -> str:
    try:
        op, handle, fields = p.decode_request(body)
    except p.ProtocolError:
        return "ERROR"
    return _json({"op": p.OP_NAMES[op], "handle": handle, **fields})


def _json(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _settings(confs: dict[str, str], operator: int, store: str) -> list[tuple[str, object]]:
    """An OPEN reply's settings for `confs`, resolved as the worker resolves them (op_open)."""
    return worker.reply_settings(*worker.resolve_store(confs, operator, store))


def reply_vectors():
    """(name, op, context, body, fields) of each reply vector."""
    def hexed(b):
        return None if b is None else b.hex()

    yield "hello", p.HELLO, {}, replies.hello(4242, 3), \
        {"protocolVersion": p.PROTOCOL_VERSION, "workerPid": 4242, "workerIndex": 3}
    for name, confs, operator, store in [
        ("open-defaults", {conf.SKIP_NULLS_KEY: "false"}, 0, "default"),
        ("open-ttl-overrides", {PREFIX + "ttl": "1h", PREFIX + "writeBatchBytes": "1024",
                                PREFIX + "operator.3.store.left-keyToNumValues.updateType": "OnReadAndWrite",
                                PREFIX + "operator.3.timeCharacteristic": "EventTime",
                                PREFIX + "operator.4.ttl": "0",
                                PREFIX + "checkpoint.localCacheDir": "/tmp/é/cache",
                                PREFIX + "latencyTracking.enabled": "true",
                                conf.SKIP_NULLS_KEY: "true"}, 3, "left-keyToNumValues"),
    ]:
        settings = _settings(confs, operator, store)
        yield name, p.OPEN, {}, replies.opened(4294967295, settings), \
            {"storeHandle": 4294967295, "settings": {k: replies.render(v) for k, v in settings}}
    yield "load", p.LOAD, {}, replies.loaded(1 << 40), {"numKeys": 1 << 40}
    yield "begin-direct", p.BEGIN, {}, replies.begun(9, True), \
        {"txnHandle": 9, "direct": True, "stamped": False, "stamp": 0}
    yield "begin-overlay", p.BEGIN, {}, replies.begun(10, False), \
        {"txnHandle": 10, "direct": False, "stamped": False, "stamp": 0}
    yield "begin-stamped", p.BEGIN, {}, replies.begun(11, True, 1700000000000), \
        {"txnHandle": 11, "direct": True, "stamped": True, "stamp": 1700000000000}
    yield "begin-stamped-unstamped", p.BEGIN, {}, replies.begun(12, True, MAX), \
        {"txnHandle": 12, "direct": True, "stamped": True, "stamp": MAX}
    for name, value, expires_at in [("get", b"v\x00", 1700003600000), ("get-empty", b"", MAX),
                                    ("get-absent", None, 0)]:
        yield name, p.GET, {}, replies.got(value, expires_at), {"value": hexed(value), "expiresAt": expires_at}
    answers = [(b"a", MAX), (None, 0), (b"", -5)]
    body = p.Writer()
    for value, expires_at in answers:
        replies.answer(body, value, expires_at)
    fields = {"answers": [[hexed(v), e] for v, e in answers]}
    yield "multi-get", p.MULTI_GET, {"asked": 3}, replies.multi_got(3, body), fields
    body = p.Writer()
    for value, expires_at in answers[:2]:
        replies.answer(body, value, expires_at)
    yield "multi-get-first-of-more", p.MULTI_GET, {"asked": 5}, replies.multi_got(2, body), \
        {"answers": fields["answers"][:2]}
    plain = [b"x", None, b"yz"]
    yield "multi-get-plain", p.MULTI_GET, {"asked": 3}, replies.multi_got(3, p.Writer().answers(plain, MAX)), \
        {"answers": [[hexed(v), 0 if v is None else MAX] for v in plain]}
    pairs = [(b"k1", b"v1"), (b"\x00", b"")]
    expiring = [(b"k1", b"v1", 1700003600000), (b"k2", b"", MAX)]
    for name, handle, last, entries, mode in [("iter-open", 7, False, pairs, p.ITER_PAIRS),
                                              ("iter-open-last", 0, True, [], p.ITER_PAIRS),
                                              ("iter-open-expiry", 8, False, expiring, p.ITER_PAIRS_WITH_EXPIRY),
                                              ("iter-open-stored", 0, True, expiring, p.ITER_STORED_WITH_EXPIRY)]:
        with_expiry = mode != p.ITER_PAIRS
        yield name, p.ITER_OPEN, {"mode": mode}, replies.iter_opened(handle, last, entries, with_expiry), \
            {"iterHandle": handle, "last": last, "entries": [[hexed(x) if isinstance(x, bytes) else x for x in e]
                                                               for e in entries]}
    for name, last, entries, mode in [("iter-next", True, pairs, p.ITER_PAIRS),
                                      ("iter-next-expiry", False, expiring, p.ITER_PAIRS_WITH_EXPIRY)]:
        with_expiry = mode != p.ITER_PAIRS
        yield name, p.ITER_NEXT, {"mode": mode}, replies.iter_chunk(last, entries, with_expiry), \
            {"last": last, "entries": [[hexed(x) if isinstance(x, bytes) else x for x in e] for e in entries]}
    metrics = [("ttlstateOpenTransactions", 1), ("ttlstateExpiredOnRead", -3)]
    yield "stats", p.STATS, {}, replies.stats(10, 2048, metrics), \
        {"numKeys": 10, "memoryUsedBytes": 2048, "metrics": dict(metrics)}
    yield "commit", p.COMMIT, {}, replies.committed(10, 512, 4096, True, "5_e-é_d.changelog", 1700000005000,
                                                    metrics), \
        {"numKeys": 10, "fileBytes": 512, "memoryUsedBytes": 4096, "snapshotWanted": True,
         "changelogName": "5_e-é_d.changelog", "storedFrom": 1700000005000, "metrics": dict(metrics)}
    yield "commit-no-metrics", p.COMMIT, {}, replies.committed(0, 0, 0, False, "", MIN_TS, []), \
        {"numKeys": 0, "fileBytes": 0, "memoryUsedBytes": 0, "snapshotWanted": False, "changelogName": "",
         "storedFrom": MIN_TS, "metrics": {}}
    ssts = [("000009-3fa2b4c5d6e7f801.sst", "/l/snap-5/000009.sst", 1234), ("000010-00ff00ff00ff00ff.sst", "/l/é.sst", 0)]
    yield "snapshot", p.SNAPSHOT, {}, replies.snapshot(5, 10, "/l/snap-5/5.manifest", "5_e-é.manifest", ssts), \
        {"version": 5, "numKeys": 10, "manifestPath": "/l/snap-5/5.manifest", "manifestName": "5_e-é.manifest",
         "ssts": [list(s) for s in ssts]}
    listed = [(name, size) for name, _, size in ssts]
    yield "manifest-files", p.MANIFEST_FILES, {}, replies.manifest_files(listed), \
        {"ssts": [list(s) for s in listed]}
    records = [(b"k", b"v"), (b"k2", None), (b"", b"")]
    body = p.Writer()
    for key, value in records:
        replies.changelog_record(body, key, value)
    yield "read-changelog", p.READ_CHANGELOG, {}, replies.changelog_records(3, body, 4096), \
        {"records": [[hexed(k), hexed(v)] for k, v in records], "next": 4096}
    yield "read-changelog-end", p.READ_CHANGELOG, {}, replies.changelog_records(0, p.Writer(), -1), \
        {"records": [], "next": -1}
    yield from _plan_replies()
    for op in (p.ITER_CLOSE, p.ABORT, p.CLOSE, p.PING, p.MAINTAIN):
        yield p.OP_NAMES[op].lower().replace("_", "-"), op, {}, replies.empty(), {}
    error = p.error_frame("TTLSTATE_VERSION_MISMATCH", "version 5 is not é")
    yield "error", p.BEGIN, {}, error[4:], {"errorClass": "TTLSTATE_VERSION_MISMATCH", "message": "version 5 is not é"}
    # malformed replies the JVM must refuse
    W = p.Writer
    yield "bad-status", p.PING, {}, W().u8(2), "ERROR"
    yield "bad-trailing", p.LOAD, {}, replies.loaded(1).u8(0), "ERROR"
    yield "bad-truncated", p.LOAD, {}, p.ok().u32(1), "ERROR"
    yield "bad-bool", p.BEGIN, {}, p.ok().u32(9).u8(2), "ERROR"
    yield "bad-optbytes", p.GET, {}, p.ok().u8(2), "ERROR"
    yield "bad-bytes-overrun", p.GET, {}, p.ok().u8(1).u32(10).u8(1), "ERROR"
    yield "bad-multi-get-none", p.MULTI_GET, {"asked": 2}, p.ok().u32(0), "ERROR"
    yield "bad-multi-get-more", p.MULTI_GET, {"asked": 1}, replies.multi_got(2, W().answers([b"a", b"b"], MAX)), "ERROR"
    yield "bad-count-overrun", p.MANIFEST_FILES, {}, p.ok().u32(1000000), "ERROR"
    yield "bad-chunk-without-expiry", p.ITER_NEXT, {"mode": p.ITER_PAIRS_WITH_EXPIRY}, \
        replies.iter_chunk(True, [(b"k", b"v")], False), "ERROR"
    yield "bad-utf8", p.SNAPSHOT, {}, p.ok().i64(5).i64(1).bytes(b"\xff\xfe").u32(0), "ERROR"
    yield "bad-changelog-kind", p.READ_CHANGELOG, {}, p.ok().u32(1).u8(p.RECORD_PUT_NEW).bytes(b"k").bytes(b"v").i64(-1), \
        "ERROR"
    yield "bad-metrics-truncated", p.STATS, {}, p.ok().i64(1).i64(2).u32(1).str("ttlstateX"), "ERROR"
    load, retain = {"purpose": p.PLAN_LOAD}, {"purpose": p.PLAN_RETENTION}
    yield "bad-plan-outcome", p.PLAN, load, p.ok().u8(3).i64(1), "ERROR"
    yield "bad-plan-later-bool", p.PLAN, load, \
        p.ok().u8(p.PLANNED).str("").i64(0).i32(-1).u32(0).u32(1).i32(0).i64(2).u8(2), "ERROR"
    yield "bad-retention-missing", p.PLAN, retain, replies.plan_missing("7.changelog", "x"), "ERROR"
    yield "bad-retention-truncated", p.PLAN, retain, p.ok().u8(p.PLANNED).i64(5).u8(1).i64(0).u32(2).i32(0), \
        "ERROR"


def _plan_replies():
    """The worker's answer to each PLAN request of `PLANS`, with its fields."""
    for name, fields, files in PLANS:
        a = plans.answer(*fields, files)
        yield name, p.PLAN, {"purpose": fields[0]}, plans.reply(a), plan_fields(a)


def plan_fields(a) -> dict:
    """A PLAN answer's fields as replies.tsv gives them."""
    if isinstance(a, plans.Kept):
        return {"outcome": p.PLANNED, "keepFrom": a.keep_from, "complete": a.complete,
                "oldestRetainedMs": a.oldest_retained_ms, "deletable": list(a.deletable),
                "retainedManifests": [list(m) for m in a.retained_manifests]}
    if isinstance(a, plans.Missing):
        return {"outcome": p.PLAN_MISSING, "pattern": a.pattern, "message": a.message}
    if isinstance(a, plans.NoChangelog):
        return {"outcome": p.PLAN_NO_CHANGELOG, "version": a.version}
    return {"outcome": p.PLANNED, "id": a.id or "", "manifestVersion": a.manifest_version, "manifest": a.manifest,
            "changelogs": [list(c) for c in a.changelogs], "later": [list(f) for f in a.later]}


def _body(w) -> bytes:
    return w if isinstance(w, bytes) else w.body()


def main():
    lines = []
    for name, w in vectors():
        body = w.body()
        lines.append(f"{name}\t{body.hex()}\t{canonical(body)}")
    OUT.write_text("\n".join(lines) + "\n")
    reply_lines = [f"{name}\t{p.OP_NAMES[op]}\t{_json(context)}\t{_body(w).hex()}\t"
                   f"{fields if fields == 'ERROR' else _json(fields)}"
                   for name, op, context, w, fields in reply_vectors()]
    OUT_REPLIES.write_text("\n".join(reply_lines) + "\n")
    print(f"wrote {len(lines)} vectors to {OUT}, {len(reply_lines)} to {OUT_REPLIES}")


if __name__ == "__main__":
    main()
