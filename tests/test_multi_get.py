"""A MULTI_GET larger than one RocksDB MultiGet is read in slices
(docs/decisions/086-sorted-read-ahead-blocks.md): the answers are
the values of the keys asked, in the order asked, whatever that order and however many."""

from __future__ import annotations

import random

import pytest

from local_store import reading
from ttlstate import engine


def test_values_come_back_in_request_order_across_slices(tmp_path):
    n = 2 * engine.MULTI_GET_SLICE + 123
    with reading(tmp_path, (b"k%07d" % i for i in range(0, 2 * n, 2))) as t:  # every other key
        asked = [b"k%07d" % i for i in range(2 * n)]  # half of them absent
        random.Random(7).shuffle(asked)
        for keys in (asked, sorted(asked), asked[:engine.MULTI_GET_SLICE], asked[:1]):
            assert t.plain_values(keys) == [t.get(k) for k in keys]
        assert sum(v is not None for v in t.plain_values(asked)) == n


def test_a_reply_answers_the_first_keys_whose_values_fit_and_at_least_one():
    from ttlstate import protocol as p
    budget, per = p.MULTI_GET_REPLY_BYTES, p.ANSWER_OVERHEAD
    assert p.answerable([]) == 0
    assert p.answerable([b"x" * 100, None, b""] * 1000) == 3000
    half = b"x" * (budget // 2)
    assert p.answerable([half, half, None]) == 1  # two halves and their overhead pass it
    assert p.answerable([half[:-per], half[:-per], b"y"]) == 2  # exactly the budget, then one more
    assert p.answerable([b"x" * (budget + 1), b"y"]) == 1  # one value past it still goes alone
    assert p.answerable([None] * (budget // per + 5)) == budget // per


# A TTL store answers a MULTI_GET from one batched read (`Txn.stored_many`) and then looks each
# key up in order, as the worker does; that must leave exactly what looking each key up alone
# leaves: the answers, the entries, the key count, the cleanup's work, the changelog.
TTL_CASES = {
    "incremental-cleanup": dict(incremental_size=3),
    "return-expired": dict(incremental_size=3, state_visibility="ReturnExpiredIfNotCleanedUp"),
    "refresh-on-read": dict(incremental_size=2, update_type="OnReadAndWrite"),
    "no-background-cleanup": dict(cleanup_in_background=False),
}
# enough keys that the incremental cleanup runs (every INCREMENTAL_BATCH entries owed) between
# the lookups, removing expired entries read in the batch but not looked up yet
N_TTL_KEYS = 1500


def _ttl_config(case: dict):
    from ttlstate.ttl.config import StateVisibility, TtlConfig, UpdateType
    kw = dict(case, compaction_filter=False)
    if "state_visibility" in kw:
        kw["state_visibility"] = StateVisibility(kw["state_visibility"])
    if "update_type" in kw:
        kw["update_type"] = UpdateType(kw["update_type"])
    return TtlConfig(ttl_ms=1000, **kw)


def _lookups_after(tmp_path, name: str, config, batched: bool, overlay: bool):
    """The answers of one MULTI_GET's keys at t=2500 over entries written at 0, 1000 and 1900
    (so expired, expiring and live ones), with this transaction's own earlier writes, and
    what the store holds after the commit."""
    from ttlstate.store import Store
    store = Store(name, str(tmp_path / name), config)
    rng = random.Random(11)
    try:
        for version, ts in enumerate((0, 1000, 1900), start=1):
            t = store.begin(version - 1, read_only=False, batch_ts=ts)
            for i in rng.sample(range(N_TTL_KEYS), N_TTL_KEYS * 2 // 5):
                t.put(b"k%04d" % i, b"v%d-%d" % (ts, i))
            store.commit(t, version, str(tmp_path / f"{name}-{version}.changelog"))
        reader = store.begin(3, read_only=True, batch_ts=2500) if overlay else None  # writes go to an overlay
        t = store.begin(3, read_only=False, batch_ts=2500)
        for i in range(0, N_TTL_KEYS, 17):  # the transaction's own writes and removes, before the read
            t.put(b"k%04d" % i, b"own-%d" % i) if i % 2 else t.remove(b"k%04d" % i)
        keys = [b"k%04d" % i for i in range(N_TTL_KEYS)] + [b"absent"]
        random.Random(5).shuffle(keys)
        stored = t.stored_many(keys) if batched else None
        answers = [t.lookup(k) if stored is None else t.lookup(k, stored[i]) for i, k in enumerate(keys)]
        expired_on_read = t.expired_on_read
        if reader is not None:
            reader.end()
        changelog = str(tmp_path / f"{name}-4.changelog")
        store.commit(t, 4, changelog)
        with open(changelog, "rb") as f:
            changelog_bytes = f.read()
        return answers, expired_on_read, store.num_keys, list(store.db.items()), changelog_bytes
    finally:
        store.close(delete_files=True)



@pytest.mark.parametrize("overlay", [False, True], ids=["direct", "overlay"])
@pytest.mark.parametrize("case", list(TTL_CASES), ids=list(TTL_CASES))
def test_a_ttl_multi_get_read_in_one_batch_leaves_what_key_by_key_lookups_leave(tmp_path, case, overlay):
    config = _ttl_config(TTL_CASES[case])
    one_by_one = _lookups_after(tmp_path, "one", config, batched=False, overlay=overlay)
    batched = _lookups_after(tmp_path, "batch", config, batched=True, overlay=overlay)
    assert sum(v is not None for v, _ in one_by_one[0]) > 200 and one_by_one[1] > 0  # live and expired keys asked
    assert batched == one_by_one


def test_a_multi_get_that_asks_a_key_twice_is_looked_up_key_by_key(tmp_path):
    with reading(tmp_path, [b"a", b"b"]) as t:
        assert t.stored_many([b"a", b"b", b"a"]) is None
        assert t.stored_many([b"b", b"a", b"c"]) == [b"vb", b"va", None]
