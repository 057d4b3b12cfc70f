"""Turning TTL on and off across restarts of one checkpoint: migrated, never misread.

A count per key runs without TTL, then resumes with a TTL of an hour (the stored values
gain a timestamp: the restore batch's), then resumes without TTL again (timestamps are
stripped). If any run misread the other layout's bytes, the counts would be garbage or
the query would fail; they must equal the counts over all files. The version a layout
change produced is also written as a snapshot at once, so no later load replays files of
the old layout.
"""

from __future__ import annotations

import pathlib
from collections import Counter

import pytest

import streaming as st
from streaming import TTLSTATE

pytestmark = pytest.mark.slow

TTL_KEY = "spark.sql.streaming.stateStore.ttlstate.ttl"


def _snapshots(checkpoint: pathlib.Path) -> set[int]:
    return {int(p.name.split(".")[0]) for p in (checkpoint / "state" / "0").rglob("*.manifest")}


def test_ttl_on_then_off_across_restarts_keeps_every_count(spark, tmp_path):
    files = st.generate_events(3, 40, n_keys=6, seed=5)
    checkpoint = tmp_path / "cp"
    final: dict[str, int] = {}
    expected: Counter = Counter()
    for batch, ttl in enumerate([None, "1h", None]):
        st.write_files(tmp_path / "in", files, batch, batch + 1)
        expected.update(r["key"] for r in files[batch])
        run = st.run_query(spark, TTLSTATE, st.agg_by_key, "update", tmp_path / "in", checkpoint,
                           sink="foreach_batch", confs={TTL_KEY: ttl} if ttl else {})
        st.assert_provider_served(run, TTLSTATE)
        for row in run.rows:
            final[row[0]] = row[1]
        custom = run.progress[-1]["stateOperators"][0]["customMetrics"]
        assert custom.get("ttlstateTtlMs", 0) == (3_600_000 if ttl else 0)
        if batch:  # the version this run wrote migrated the layout: a snapshot exists
            assert batch + 1 in _snapshots(checkpoint), sorted(_snapshots(checkpoint))
    assert final == dict(expected)
