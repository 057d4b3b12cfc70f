"""A direct transaction of a store without TTL writes each WRITE_BATCH frame into RocksDB in key
order (DESIGN 77): the database, the key count and the changelog must still be those of the
records applied in the order they came, repeats of a key and records without hints included."""

from __future__ import annotations

import random

from service_client import encode_records
from ttlstate import protocol as p
from ttlstate.store import Store

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
