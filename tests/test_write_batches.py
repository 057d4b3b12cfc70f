"""A direct transaction writes each WRITE_BATCH frame into RocksDB in key order, without TTL
(docs/decisions/077-memtable-bloom-and-sorted-writes.md) and with it
(docs/decisions/097-ttl-write-batches.md): the database, the key count, the TTL histogram and the
changelog must still be those of the records applied in the order they came, repeats of a key
and records without hints included."""

from __future__ import annotations

import random

from service_client import encode_records
from ttlstate import protocol as p
from ttlstate.store import Store
from ttlstate.ttl.config import TtlConfig

KEYS = [b"k%02d" % i for i in range(40)]


def _contents(store: Store, version: int) -> dict[bytes, bytes]:
    t = store.begin(version, read_only=True)
    try:
        return {k: v for k in KEYS if (v := t.get(k)) is not None}
    finally:
        t.end()


def test_frames_out_of_key_order_end_as_their_records_in_order(tmp_path):
    rng = random.Random(7)
    store = Store("s", str(tmp_path / "s"))
    try:
        model: dict[bytes, bytes] = {}
        t = store.begin(0, read_only=False)
        for key in KEYS[::2]:
            t.put(key, b"v0")
            model[key] = b"v0"
        store.commit(t, 1, str(tmp_path / "1.changelog"))

        t = store.begin(1, read_only=False)
        for frame in range(30):
            records = []
            for i in range(40):
                key = rng.choice(KEYS)
                value = b"v%d.%d" % (frame, i)
                if rng.random() < 0.5:  # a hint as the JVM sends it when its view knows the key
                    if rng.random() < 0.7:
                        records.append((p.RECORD_PUT_OVER if key in model else p.RECORD_PUT_NEW, key, value))
                        model[key] = value
                    elif key in model:
                        records.append((p.RECORD_REMOVE_PRESENT, key, None))
                        del model[key]
                elif rng.random() < 0.7:  # no hint: the worker looks the key up
                    records.append((p.RECORD_PUT, key, value))
                    model[key] = value
                else:
                    records.append((p.RECORD_REMOVE, key, None))
                    model.pop(key, None)
            assert [r[1] for r in records] != sorted(r[1] for r in records)
            t.apply(records, encode_records(p.Writer(), records).body())
        num_keys, _ = store.commit(t, 2, str(tmp_path / "2.changelog"))

        assert _contents(store, 2) == model
        assert num_keys == store.num_keys == len(model)
        # the changelog keeps the frames' own order: a store loaded from it agrees
        other = Store("o", str(tmp_path / "o"))
        try:
            assert other.load(2, changelogs=[(1, str(tmp_path / "1.changelog")),
                                             (2, str(tmp_path / "2.changelog"))]) == len(model)
            assert _contents(other, 2) == model
        finally:
            other.close(delete_files=True)
    finally:
        store.close(delete_files=True)


def _ttl_store(tmp_path, name: str) -> Store:
    return Store(name, str(tmp_path / name), TtlConfig(ttl_ms=10_000, compaction_filter=False))


def _commit_both_and_compare(tmp_path, first, second) -> None:
    """Commits version 3 of two (store, transaction) pairs written from the same records and
    checks they agree: key count, timestamp histogram, database; and that a store loaded from
    the first one's changelogs (1-3, as `_ttl_history` and the commit name them) agrees too,
    as the changelog keeps the records' order."""
    (a, _), (b, _) = first, second
    results = [s.commit(t, 3, str(tmp_path / f"{s.store_id}-3.changelog")) for s, t in (first, second)]
    assert results[0][0] == results[1][0] == a.num_keys == b.num_keys
    assert a.hist.counts == b.hist.counts
    assert dict(a.db.items()) == dict(b.db.items())
    loaded = _ttl_store(tmp_path, "l")
    try:
        loaded.load(3, changelogs=[(v, str(tmp_path / f"{a.store_id}-{v}.changelog")) for v in (1, 2, 3)])
        assert dict(loaded.db.items()) == dict(a.db.items())
        assert loaded.hist.counts == a.hist.counts
    finally:
        loaded.close(delete_files=True)


def _ttl_history(store: Store, tmp_path) -> None:
    """Version 1: the even keys written at batch time 0; version 2: every third key rewritten
    at 8,000 (at 12,000 the keys of version 1 it did not rewrite are expired but stored)."""
    for version, (batch_ts, keys) in enumerate([(0, KEYS[::2]), (8_000, KEYS[::3])], start=1):
        t = store.begin(version - 1, read_only=False, batch_ts=batch_ts)
        for key in keys:
            t.put(key, b"v%d" % version)
        store.commit(t, version, str(tmp_path / f"{store.store_id}-{version}.changelog"))


def test_a_ttl_frame_written_at_once_ends_as_its_records_one_by_one(tmp_path):
    """A direct TTL transaction applies a frame at once, its writes in one WriteBatch
    (docs/decisions/097-ttl-write-batches.md):
    the database, key count, timestamp histogram and changelog must be those of `put` and
    `remove` record by record, over live, expired and missing keys, repeats included. (The
    incremental cleanup is owed the same steps, paid after the frame instead of within it; here
    it makes its one pass over the few keys in both.)"""
    rng = random.Random(11)
    frames = []
    for frame in range(20):
        records = []
        for i in range(30):
            key = rng.choice(KEYS)
            roll = rng.random()
            if roll < 0.1:
                records.append((p.RECORD_ACCESS, None, rng.randint(1, 5)))
            elif roll < 0.7:
                records.append((p.RECORD_PUT, key, b"f%d.%d" % (frame, i)))
            else:
                records.append((p.RECORD_REMOVE, key, None))
        frames.append(records)
    at_once, one_by_one = _ttl_store(tmp_path, "a"), _ttl_store(tmp_path, "b")
    try:
        for store in (at_once, one_by_one):
            _ttl_history(store, tmp_path)
        ta = at_once.begin(2, read_only=False, batch_ts=12_000)
        tb = one_by_one.begin(2, read_only=False, batch_ts=12_000)
        assert ta.direct and tb.direct
        for records in frames:
            ta.apply(records, None)
            for kind, key, value in records:
                if kind == p.RECORD_ACCESS:
                    tb.accessed(value)
                elif kind == p.RECORD_PUT:
                    tb.put(key, value)
                else:
                    tb.remove(key)
            assert (ta.key_delta, ta.hist_delta.counts) == (tb.key_delta, tb.hist_delta.counts)
        _commit_both_and_compare(tmp_path, (at_once, ta), (one_by_one, tb))
    finally:
        at_once.close(delete_files=True)
        one_by_one.close(delete_files=True)


TTL_MS = 10_000


def _hinted_ttl_frames(rng: random.Random, stored: dict[bytes, int], now: int, frames: int) -> list[list]:
    """Frames of a direct TTL transaction at batch time `now`, about half their records with the
    presence hint the JVM sends when it knows the key
    (docs/decisions/102-ttl-batch-clock-fast-paths.md): PUT_NEW for a key not stored,
    PUT_OVER_LIVE / REMOVE_LIVE with the expiry time of a stored entry live at `now`; none for
    an expired stored entry (the worker may have cleaned it up) or when it does not know.
    `stored` (key: timestamp of its stored entry) follows the records."""
    out = []
    for frame in range(frames):
        records = []
        for i in range(30):
            key = rng.choice(KEYS)
            ts = stored.get(key)
            live = ts is not None and ts + TTL_MS > now
            knows = rng.random() < 0.6 and (ts is None or live)
            roll = rng.random()
            if roll < 0.1:
                records.append((p.RECORD_ACCESS, None, rng.randint(1, 5)))
                continue
            if roll < 0.7:
                value = b"h%d.%d" % (frame, i)
                if not knows:
                    records.append((p.RECORD_PUT, key, value))
                elif ts is None:
                    records.append((p.RECORD_PUT_NEW, key, value))
                else:
                    records.append((p.RECORD_PUT_OVER_LIVE, key, (value, ts + TTL_MS)))
                stored[key] = now
            else:
                if knows and ts is None:
                    continue  # the JVM sends no REMOVE of a key it knows is not stored
                records.append((p.RECORD_REMOVE_LIVE, key, ts + TTL_MS) if knows else (p.RECORD_REMOVE, key, None))
                stored.pop(key, None)
        out.append(records)
    return out


def test_ttl_presence_hints_give_what_lookups_give(tmp_path):
    """A direct TTL transaction's frames with presence hints (PUT_NEW, PUT_OVER_LIVE,
    REMOVE_LIVE: docs/decisions/102-ttl-batch-clock-fast-paths.md), through the wire encoding, end
    as the same records without hints
    applied one by one: database, key count, timestamp histogram, changelog."""
    rng = random.Random(23)
    hinted, plain = _ttl_store(tmp_path, "h"), _ttl_store(tmp_path, "p")
    try:
        for store in (hinted, plain):
            _ttl_history(store, tmp_path)
        stored = {k: 0 for k in KEYS[::2]}
        stored.update({k: 8_000 for k in KEYS[::3]})
        frames = _hinted_ttl_frames(rng, stored, 12_000, 20)
        kinds = {r[0] for f in frames for r in f}
        assert {p.RECORD_PUT_NEW, p.RECORD_PUT_OVER_LIVE, p.RECORD_REMOVE_LIVE, p.RECORD_PUT} <= kinds
        th = hinted.begin(2, read_only=False, batch_ts=12_000)
        tp = plain.begin(2, read_only=False, batch_ts=12_000)
        assert th.direct and tp.direct
        for records in frames:
            body = encode_records(p.request(p.WRITE_BATCH, 1).u32(len(records)), records).body()
            r = p.Reader(body)
            p.read_header(r)
            decoded = p.read_records(r)
            assert decoded == records and p.encoded_records(body, decoded) is None
            th.apply(decoded, None)
            for kind, key, value in records:
                if kind == p.RECORD_ACCESS:
                    tp.accessed(value)
                elif kind in (p.RECORD_PUT, p.RECORD_PUT_NEW):
                    tp.put(key, value)
                elif kind == p.RECORD_PUT_OVER_LIVE:
                    tp.put(key, value[0])
                else:
                    tp.remove(key)
            assert (th.key_delta, th.hist_delta.counts) == (tp.key_delta, tp.hist_delta.counts)
        _commit_both_and_compare(tmp_path, (hinted, th), (plain, tp))
    finally:
        hinted.close(delete_files=True)
        plain.close(delete_files=True)


def test_a_ttl_store_trusts_its_hints_instead_of_reading(tmp_path):
    """The hints spare the reads: a direct TTL transaction takes PUT_NEW and PUT_OVER_LIVE at
    their word (shown with hints that do not match the database, which the JVM never sends),
    while a plain PUT reads the stored entry; a saturated expiry time tells no timestamp, so
    that hint is looked up."""
    store = _ttl_store(tmp_path, "t")
    try:
        _ttl_history(store, tmp_path)  # k00 written at 8,000 (stored), k01 never
        t = store.begin(2, read_only=False, batch_ts=12_000)
        t.apply([(p.RECORD_PUT_NEW, b"k00", b"x")], None)  # the worker believes "not stored"
        assert t.key_delta == 1 and t.hist_delta.counts == {12_000: 1}
        t.apply([(p.RECORD_PUT_OVER_LIVE, b"k01", (b"y", 5_000 + TTL_MS))], None)  # believes "stored at 5,000"
        assert t.key_delta == 1 and t.hist_delta.counts == {12_000: 2, 5_000: -1}
        t.apply([(p.RECORD_PUT_OVER_LIVE, b"k03", (b"z", (1 << 63) - 1))], None)  # looked up: at 8,000
        assert t.key_delta == 1 and t.hist_delta.counts == {12_000: 3, 5_000: -1, 8_000: -1}
        t.apply([(p.RECORD_PUT, b"k02", b"w")], None)  # looked up: k02 was written at 0
        assert t.key_delta == 1 and t.hist_delta.counts == {12_000: 4, 5_000: -1, 8_000: -1, 0: -1}
        t.end()
    finally:
        store.close(delete_files=True)
