"""Reads past one frame (64 MiB): a MULTI_GET of values larger in sum than the frame limit
comes back in parts, each reply answering the first keys it asked (PROTOCOL.md,
docs/decisions/095-multi-get-reply-split.md),
and the JVM asks again for the rest; keys larger in sum go in several requests
(docs/decisions/099-multi-get-request-limit.md).
Real provider, service, worker and RocksDB, through Spark's provider API (py4j); values or
keys of (almost) 1 MiB each.

Before docs/decisions/095-multi-get-reply-split.md the worker put every answer in one reply, the
JVM refused the oversized frame
and the task failed, and failed again on every retry: a read-ahead sized by the mean value in
the cache asked for thousands of keys whose values were far larger.
"""

from __future__ import annotations

import pytest

from jvm_state import new_root

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
MIB = 1 << 20
N_BIG = 80  # 80 MiB of values: more than one frame
# A key's length: just under 1 MiB, so that each copy of it in the test's 1g heap (the row, the
# store's key bytes) fills one G1 region (1 MiB) instead of two. 1 MiB and its header took two:
# the keys' test then needed more than 512 MiB of heap by itself, and ran out of the shared
# test JVM's heap in CI. 80 of them are still almost 80 MiB, more than one frame.
KEY_LEN = MIB - 1024


def _value(i: int, length: int = MIB) -> str:
    return f"{i:04d}" + chr(ord("a") + i % 26) * (length - 4)


@pytest.mark.parametrize("ttl", ["", "1h"], ids=["no-ttl", "ttl"])
def test_a_multi_get_past_the_frame_limit_is_answered_in_parts(js, tmp_path, ttl):
    value_schema = js.jvm.org.apache.spark.sql.types.StructType.fromDDL("value STRING")
    proj = js._projection(value_schema)
    confs = {PREFIX + "cache.maxBytes": str(2 * MIB)}  # holds 2 of the 80 values
    if ttl:
        confs[PREFIX + "ttl"] = ttl
    p = js.provider(new_root(tmp_path), conf=js.store_conf(**confs), value_schema=value_schema)
    try:
        s = js.get_store(p, 0)
        for i in range(N_BIG):
            s.put(js.key("k", i), js._row(proj, _value(i)), "default")
        assert s.commit() == 1
        s = js.get_store(p, 1)
        asked = [*range(N_BIG), N_BIG + 5]  # and one absent key, last
        keys = js.gw.new_array(js.jvm.org.apache.spark.sql.catalyst.expressions.UnsafeRow, len(asked))
        for j, i in enumerate(asked):
            keys[j] = js.key("k", i)
        it = s.multiGet(keys, "default")
        got = []
        while it.hasNext():
            row = it.next()
            got.append(None if row is None else
                       (row.getUTF8String(0).substring(0, 4).toString(), row.getUTF8String(0).numBytes()))
        assert got == [(f"{i:04d}", MIB) for i in range(N_BIG)] + [None]
        assert js.custom_metrics(s)["ttlstateRoundTrips"] >= 3  # BEGIN and at least two parts
        s.abort()
    finally:
        p.close()


def test_a_multi_get_of_keys_past_the_frame_limit_goes_in_parts(js, tmp_path):
    """80 keys of (almost) 1 MiB in one `multiGet`: before
    docs/decisions/099-multi-get-request-limit.md the request itself passed the frame
    limit and the read failed ("request of ... bytes exceeds the frame limit")."""
    value_schema = js.jvm.org.apache.spark.sql.types.StructType.fromDDL("value STRING")
    proj = js._projection(value_schema)
    p = js.provider(new_root(tmp_path), conf=js.store_conf(**{PREFIX + "cache.maxBytes": str(2 * MIB)}),
                    value_schema=value_schema)
    try:
        s = js.get_store(p, 0)
        for i in range(N_BIG):
            s.put(js.key(_value(i, KEY_LEN), i), js._row(proj, f"v{i}"), "default")
        assert s.commit() == 1
        s = js.get_store(p, 1)
        asked = [*range(N_BIG), N_BIG + 5]  # and one absent key, last
        keys = js.gw.new_array(js.jvm.org.apache.spark.sql.catalyst.expressions.UnsafeRow, len(asked))
        for j, i in enumerate(asked):
            keys[j] = js.key(_value(i, KEY_LEN), i)
        it = s.multiGet(keys, "default")
        got = []
        while it.hasNext():
            row = it.next()
            got.append(None if row is None else row.getUTF8String(0).toString())
        assert got == [f"v{i}" for i in range(N_BIG)] + [None]
        assert js.custom_metrics(s)["ttlstateRoundTrips"] >= 3  # BEGIN and at least two requests
        s.abort()
    finally:
        p.close()
