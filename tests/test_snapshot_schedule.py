"""A large batch is snapshotted by the next maintenance, before `minDeltasForSnapshot`
versions (docs/decisions/103-large-changelog-snapshots.md), as Spark's RocksDB provider snapshots a
version with over 10,000
changes: a query restarted after it replays no changelog of it. Real Spark, real stores.
"""

from __future__ import annotations

import glob
import json
import os
import time

import pytest

import streaming as st
import ttl_queries as tq
from streaming import TTLSTATE

pytestmark = pytest.mark.slow

KEYS = 60_000  # about 15,000 per store of 4 partitions: over 10,000 records each, in 1 batch


def test_maintenance_snapshots_a_batch_of_many_records_before_min_deltas(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    # integer keys and counts: about 1.3 changelog bytes a record, far below the byte threshold
    (source / "part-000.json").write_text("".join(json.dumps({"key": f"k{i}", "value": 1}) + "\n"
                                                for i in range(KEYS)))
    checkpoint = tmp_path / "ck"
    seen = {}

    def wait_for_snapshots(batch_id: int):
        # maintenance runs every 200 ms while the query's stores are loaded
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen[batch_id] = sorted(glob.glob(str(checkpoint / "state" / "0" / "*" / "1.manifest")))
            if len(seen[batch_id]) == 4:
                return
            time.sleep(0.2)

    result = st.run_query(spark, TTLSTATE, lambda df: df.groupBy("key").count(), "update", source, checkpoint,
                          sink="foreach_batch", on_batch=wait_for_snapshots,
                          confs={tq.MIN_DELTAS_FOR_SNAPSHOT: "10", tq.MAINTENANCE_INTERVAL: "200ms"})
    assert len(result.rows) == KEYS
    assert len(seen[0]) == 4, seen  # every store's version 1 has a snapshot
    changelogs = [os.path.getsize(p) for p in glob.glob(str(checkpoint / "state" / "0" / "*" / "1.changelog"))]
    assert changelogs and max(changelogs) < 1 << 20, changelogs  # the records rule, not the bytes rule
