"""The TTL clock (`tests/vectors/ttl_clock.tsv`, written by hand): the worker runs a transaction
at the clock the vector says from what the JVM sent (`txn.transaction_clock`), tells the JVM in
its OPEN reply which clock the store has (`ttl.batchClock`, `ttl.eventTime`), and whenever the JVM
may use its view (it knows the clock) that clock is the one the JVM sent. The JVM's side
(`BatchClock`'s reading of the offset log, `StoreSettings.viewUsable`) is `TtlClockVectorsTest`
(`make test-java`)."""

import pathlib

import pytest

from ttlstate import worker
from ttlstate.ttl.config import TimeCharacteristic, TtlConfig
from ttlstate.txn import transaction_clock

VECTORS = pathlib.Path(__file__).parent / "vectors" / "ttl_clock.tsv"


def _rows():
    for line in VECTORS.read_text().splitlines():
        if line and not line.startswith("#"):
            yield line.split("\t")


@pytest.mark.parametrize("name,metadata,characteristic,committed,sent,clock,jvm_knows", list(_rows()),
                         ids=[r[0] for r in _rows()])
def test_the_worker_runs_at_the_vectors_clock(name, metadata, characteristic, committed, sent, clock, jvm_knows):
    ttl = TtlConfig(ttl_ms=1000, time_characteristic=TimeCharacteristic(characteristic))
    got = transaction_clock(ttl, int(sent), int(committed))
    assert got == (None if clock == "wall" else int(clock))
    view = worker._view_settings(ttl)
    knows = int(sent) >= 0 and (view["ttl.batchClock"] or view["ttl.eventTime"])  # what the JVM decides on
    assert knows == (jvm_knows == "true")
    if knows:
        assert got == int(sent), "the JVM answers reads at the clock it sent"


def test_the_vectors_cover_every_clock_and_unknown_ones():
    rows = list(_rows())
    assert {r[2] for r in rows} == {c.value for c in TimeCharacteristic}
    assert any(r[1] == "-" for r in rows) and any(r[5] == "wall" for r in rows)
