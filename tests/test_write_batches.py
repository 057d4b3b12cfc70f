"""A direct transaction writes each WRITE_BATCH frame into RocksDB in key order, without TTL
(DESIGN 77) and with it (DESIGN 97): the database, the key count, the TTL histogram and the
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


def _ttl_history(store: Store, tmp_path) -> None:
    """Version 1: the even keys written at batch time 0; version 2: every third key rewritten
    at 8,000 (at 12,000 the keys of version 1 it did not rewrite are expired but stored)."""
    for version, (batch_ts, keys) in enumerate([(0, KEYS[::2]), (8_000, KEYS[::3])], start=1):
        t = store.begin(version - 1, read_only=False, batch_ts=batch_ts)
        for key in keys:
            t.put(key, b"v%d" % version)
        store.commit(t, version, str(tmp_path / f"{store.store_id}-{version}.changelog"))


def test_a_ttl_frame_written_at_once_ends_as_its_records_one_by_one(tmp_path):
    """A direct TTL transaction applies a frame at once, its writes in one WriteBatch (DESIGN 97):
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
        results = [s.commit(t, 3, str(tmp_path / f"{s.store_id}-3.changelog"))
                   for s, t in ((at_once, ta), (one_by_one, tb))]
        assert results[0][0] == results[1][0] == at_once.num_keys == one_by_one.num_keys
        assert at_once.hist.counts == one_by_one.hist.counts
        assert dict(at_once.db.items()) == dict(one_by_one.db.items())
        # the changelog keeps the records' order: a store loaded from it agrees
        loaded = _ttl_store(tmp_path, "l")
        try:
            loaded.load(3, changelogs=[(v, str(tmp_path / f"a-{v}.changelog")) for v in (1, 2, 3)])
            assert dict(loaded.db.items()) == dict(at_once.db.items())
            assert loaded.hist.counts == at_once.hist.counts
        finally:
            loaded.close(delete_files=True)
    finally:
        at_once.close(delete_files=True)
        one_by_one.close(delete_files=True)
