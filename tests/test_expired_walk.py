"""The incremental TTL cleanup's walk over a database (`engine.expired_after`) against the TTL
rule applied entry by entry: every timestamp's sign, the empty key, budgets and wrap points."""

import random

import pytest
from rocksdict import Options, Rdict

from ttlstate import engine
from ttlstate.engine import expired_after
from ttlstate.ttl import MAX_TS, codec, expired, expired_through

TTL = 1000


@pytest.fixture
def db(tmp_path):
    d = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    rng = random.Random(7)
    stamps = [-MAX_TS - 1, -5000, -1, 0, 1, 999, 1000, 4000, 5000, MAX_TS - 1, MAX_TS]
    d[b""] = codec.encode(0, b"empty key")
    for i in range(400):
        d[rng.randbytes(rng.randint(1, 6))] = codec.encode(rng.choice(stamps), b"v%d" % i)
    yield d
    d.close()
    Rdict.destroy(str(tmp_path / "db"))


@pytest.mark.parametrize("now", [-4000, 0, 1000, 5999, 6000, MAX_TS])
def test_a_walk_finds_what_the_rule_says_is_expired(db, now):
    entries = list(db.items())
    bound = expired_through(TTL, now)
    want = {k: codec.timestamp(v) for k, v in entries if expired(codec.timestamp(v), TTL, now)}
    gone, checked, last = expired_after(db, b"", len(entries) + 5, bound)
    assert (gone, checked, last) == (want, len(entries), None)
    # in steps after a cursor, each step's entries are the next in key order
    found, cursor, seen = {}, b"", 0
    while True:
        step, n, cursor = expired_after(db, cursor, 37, bound)
        found.update(step)
        seen += n
        if cursor is None:
            break
        assert n == 37 and cursor == entries[seen - 1][0]
    assert (found, seen) == (want, len(entries))  # b"" as the cursor: from the first (the empty key too)


@pytest.mark.parametrize("budget", [2, 15, 16, 17, 50, 1000])
def test_a_walk_read_in_slices_checks_the_same_entries(db, monkeypatch, budget):
    """Budgets above, at and below the slice the walk reads from the iterator at once (from 2: a
    step of 1 that ends at the empty key leaves the cursor b"", which means "from the first")."""
    monkeypatch.setattr(engine, "_WALK_SLICE", 16)
    entries = list(db.items())
    bound = expired_through(TTL, 5000)
    found, cursor, seen = {}, b"", 0
    while True:
        step, n, cursor = expired_after(db, cursor, budget, bound)
        found.update(step)
        seen += n
        want = {k: codec.timestamp(v) for k, v in entries[seen - n:seen]
                if expired(codec.timestamp(v), TTL, 5000)}
        assert step == want
        if cursor is None:
            assert n < budget or seen == len(entries)
            break
        assert n == budget and cursor == entries[seen - 1][0]
    assert seen == len(entries)
