"""A direct transaction writes each frame into RocksDB at once, in key order: a WRITE_BATCH of a
store without TTL (docs/decisions/077-memtable-bloom-and-sorted-writes.md) and a TTL store's
WRITE_STAMPED, its values stamped by the JVM (docs/decisions/111-pre-stamped-ttl-writes.md, after
docs/decisions/097-ttl-write-batches.md): the database, the key count, the TTL histogram and the
changelog must still be those of the records applied one by one in the order they came, repeats
of a key and records without hints included."""

from __future__ import annotations

import random

import pytest

from service_client import encode_records, encode_stamped
from ttlstate import protocol as p
from ttlstate.errors import ProtocolError
from ttlstate.ttl import codec
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


TTL_MS = 10_000


def _hinted_ttl_frames(rng: random.Random, stored: dict[bytes, int], now: int, frames: int) -> list[list]:
    """Frames of a direct TTL transaction at batch time `now`, about half their records with the
    presence hint the JVM sends when it knows the key
    (docs/decisions/102-ttl-batch-clock-fast-paths.md): PUT_NEW for a key not stored,
    PUT_OVER_LIVE / REMOVE_LIVE with the expiry time of a stored entry live at `now`; none for
    an expired stored entry (the worker may have cleaned it up) or when it does not know.
    A read the JVM answers because the key's cached value expired is `(READ_EXPIRED, key, None)`
    (only of a key the frame has not written: such a read is answered by the write), after
    which the key counts as not stored. `stored` (key: timestamp of its stored entry) follows
    the records."""
    out = []
    for frame in range(frames):
        records = []
        written = set()
        for i in range(30):
            key = rng.choice(KEYS)
            ts = stored.get(key)
            live = ts is not None and ts + TTL_MS > now
            knows = rng.random() < 0.6 and (ts is None or live)
            roll = rng.random()
            if ts is not None and not live and key not in written and roll < 0.6:
                records.append((READ_EXPIRED, key, None))
                stored.pop(key)
                continue
            written.add(key)
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


READ_EXPIRED = "read-expired"  # not a record: a read the JVM answered, its key in the frame's tail


def _apply_wire_stamped(t, records, stamp: int) -> None:
    """`records` through the JVM's WRITE_STAMPED encoding and the worker's decoder, applied; the
    reads of expired values (READ_EXPIRED) into the tail, each an access as the JVM counts it."""
    expired = [key for kind, key, _ in records if kind == READ_EXPIRED]
    records = [(p.RECORD_ACCESS, None, 1) if kind == READ_EXPIRED else (kind, key, value)
               for kind, key, value in records]
    r = p.Reader(encode_stamped(1, stamp, records, expired).body())
    p.read_header(r)
    stamp_read, decoded, encoded, accesses, replaced, expired_read = p.read_write_stamped(r)
    r.end()
    assert expired_read == expired
    t.apply_prestamped(stamp_read, decoded, encoded, accesses, replaced, expired_read)


def _apply_one_by_one(t, records) -> None:
    for kind, key, value in records:
        if kind == READ_EXPIRED:
            assert t.get(key) is None  # the worker's read: cleanup on read
        elif kind == p.RECORD_ACCESS:
            t.accessed(value)
        elif kind in (p.RECORD_PUT, p.RECORD_PUT_NEW):
            t.put(key, value)
        elif kind == p.RECORD_PUT_OVER_LIVE:
            t.put(key, value[0])
        else:
            t.remove(key)


@pytest.mark.parametrize("iterator_open", [False, True], ids=["at-once", "iterator-open"])
def test_stamped_frames_give_what_their_records_one_by_one_give(tmp_path, iterator_open):
    """WRITE_STAMPED (docs/decisions/111-pre-stamped-ttl-writes.md): frames with the JVM's
    stamps, hints and tail, through the wire encoding, end as the same records without hints
    applied one by one, the reads the JVM answered of expired values as the worker's reads
    (docs/decisions/112-expired-reads-in-the-frame-tail.md): database, key count, timestamp
    histogram, entries expired on read, changelog. At once (the
    records into one WriteBatch, their bytes into the changelog as they are) and, with an
    iterator open on the transaction, one by one."""
    rng = random.Random(29)
    stamped, plain = _ttl_store(tmp_path, "st"), _ttl_store(tmp_path, "pl")
    try:
        for store in (stamped, plain):
            _ttl_history(store, tmp_path)
        stored = {k: 0 for k in KEYS[::2]}
        stored.update({k: 8_000 for k in KEYS[::3]})
        frames = _hinted_ttl_frames(rng, stored, 12_000, 20)
        ts = stamped.begin(2, read_only=False, batch_ts=12_000)
        tp = plain.begin(2, read_only=False, batch_ts=12_000)
        assert ts.write_stamp() == 12_000 and tp.write_stamp() == 12_000
        if iterator_open:
            it = ts.iterate(b"")
            next(it)
            assert ts.written_since
        for records in frames:
            _apply_wire_stamped(ts, records, 12_000)
            _apply_one_by_one(tp, records)
            assert (ts.key_delta, ts.hist_delta.counts) == (tp.key_delta, tp.hist_delta.counts)
            assert ts.expired_on_read == tp.expired_on_read
        assert ts.expired_on_read >= 5  # most of the entries expired at 12,000 were read
        _commit_both_and_compare(tmp_path, (stamped, ts), (plain, tp))
    finally:
        stamped.close(delete_files=True)
        plain.close(delete_files=True)


def test_a_stamped_frame_is_refused_unless_it_matches_its_transaction(tmp_path):
    """The worker refuses a WRITE_STAMPED whose stamp is not the one BEGIN answered, whose tail
    does not count its live records, or that names a saturated expiry time; and a transaction
    that cannot take one (read-only, or a store without TTL) answers no stamp."""
    store = _ttl_store(tmp_path, "t")
    try:
        _ttl_history(store, tmp_path)
        r = store.begin(2, read_only=True, batch_ts=12_000)
        assert r.write_stamp() is None
        r.end()
        t = store.begin(2, read_only=False, batch_ts=12_000)
        with pytest.raises(ProtocolError, match="stamp 11999"):
            _apply_wire_stamped(t, [(p.RECORD_PUT_NEW, b"k01", b"x")], 11_999)
        with pytest.raises(ProtocolError, match="names 2 live entries in its tail and has 1"):
            t.apply_prestamped(12_000, [(p.RECORD_PUT_OVER, b"k00", codec.encode(12_000, b"y"))], b"", 0,
                               [(18_000, 2)])
        with pytest.raises(ProtocolError, match="tells no timestamp"):
            _apply_wire_stamped(t, [(p.RECORD_REMOVE_LIVE, b"k03", (1 << 63) - 1)], 12_000)
        t.end()  # it wrote before the tail was refused: the store is at no version until a load
    finally:
        store.close(delete_files=True)
    plain = Store("p", str(tmp_path / "p"))
    try:
        t = plain.begin(0, read_only=False)
        assert t.direct and t.write_stamp() is None
        t.end()
    finally:
        plain.close(delete_files=True)


def test_a_stamped_frame_trusts_its_hints_instead_of_reading(tmp_path):
    """The hints spare the reads: a stamped frame's PUT_NEW and PUT_OVER (with its tail) are taken
    at their word (shown with hints that do not match the database, which the JVM never sends),
    while a plain PUT reads the stored entry."""
    store = _ttl_store(tmp_path, "t")
    try:
        _ttl_history(store, tmp_path)  # k00 written at 8,000 (stored), k01 never, k02 at 0
        t = store.begin(2, read_only=False, batch_ts=12_000)
        _apply_wire_stamped(t, [(p.RECORD_PUT_NEW, b"k00", b"x")], 12_000)  # believed "not stored"
        assert t.key_delta == 1 and t.hist_delta.counts == {12_000: 1}
        _apply_wire_stamped(t, [(p.RECORD_PUT_OVER_LIVE, b"k01", (b"y", 5_000 + TTL_MS))], 12_000)  # "stored at 5,000"
        assert t.key_delta == 1 and t.hist_delta.counts == {12_000: 2, 5_000: -1}
        _apply_wire_stamped(t, [(p.RECORD_PUT, b"k02", b"w")], 12_000)  # looked up: k02 was written at 0
        assert t.key_delta == 1 and t.hist_delta.counts == {12_000: 3, 5_000: -1, 0: -1}
        t.end()
    finally:
        store.close(delete_files=True)
