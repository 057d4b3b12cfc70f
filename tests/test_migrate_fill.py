"""The migration's fill (`migrate._fill`): one partition's store open at a time, every
partition installed once (an empty one too), entries TTL-stamped, and a partition whose
entries do not come together refused rather than split over two stores."""

import pytest

from ttlstate import migrate
from ttlstate.errors import MigrateUnsupportedError
from ttlstate.store import Store
from ttlstate.ttl import codec
from ttlstate.ttl.config import TtlConfig


def _fill(tmp_path, entries, n, ts=None, ttl=TtlConfig()):
    open_now, installed, counts, sizes = [], {}, [0] * n, [0] * n

    def open_store(p):
        assert not open_now, f"partition {p} opened while {open_now} is open"
        open_now.append(p)
        return Store(f"t:{p}", str(tmp_path / f"db-{p}"), ttl)

    def install(p, store):
        installed[p] = dict(store.db.items())
        open_now.remove(p)

    migrate._fill(open_store, install, iter(entries), n, "operator 0, store default", ts, counts, sizes)
    return installed, counts, sizes


def test_each_partition_is_filled_alone_and_installed_once_an_empty_one_too(tmp_path):
    entries = [(2, b"k1", b"v1"), (2, b"k2", b"v2"), (0, b"k3", b"v3")]
    installed, counts, sizes = _fill(tmp_path, entries, 4)
    assert installed == {2: {b"k1": b"v1", b"k2": b"v2"}, 0: {b"k3": b"v3"}, 1: {}, 3: {}}
    assert counts == [1, 0, 2, 0] and sizes == [4, 0, 8, 0]


def test_entries_are_stamped_with_the_batchs_ttl_timestamp(tmp_path):
    installed, _, _ = _fill(tmp_path, [(0, b"k", b"value")], 1, ts=1_700_000_000_000, ttl=TtlConfig(ttl_ms=3_600_000))
    stored = installed[0][b"k"]
    assert codec.timestamp(stored) == 1_700_000_000_000 and stored == codec.encode(1_700_000_000_000, b"value")


def test_a_partition_whose_entries_come_apart_is_refused(tmp_path):
    with pytest.raises(MigrateUnsupportedError, match="partition 0 did not come together"):
        _fill(tmp_path, [(0, b"a", b"1"), (1, b"b", b"2"), (0, b"c", b"3")], 2)


def test_a_dry_run_only_counts(tmp_path):
    counts, sizes = [0, 0], [0, 0]
    migrate._fill(None, lambda p, s: pytest.fail("installed"), iter([(1, b"k", b"vv")]), 2, "x", None, counts, sizes)
    assert counts == [0, 1] and sizes == [0, 3]
