"""A MULTI_GET larger than one RocksDB MultiGet is read in slices (DESIGN 86): the answers are
the values of the keys asked, in the order asked, whatever that order and however many."""

from __future__ import annotations

import random

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
