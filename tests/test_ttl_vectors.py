"""The TTL rule's shared vectors (`tests/vectors/ttl.tsv`): Python's `ttlstate.ttl` and the
JVM's `TtlRule` must both give every line's expiry time, verdict and whether a read at `now`
refreshes the entry (OnReadAndWrite), so neither side can change the rule alone
(docs/decisions/049-one-owner-per-rule.md, docs/decisions/067-last-repeats-of-a-rule.md)."""

import pathlib

import pytest

from ttlstate.ttl import event_time, expiration_ts, expired, expired_at, refreshes

VECTORS = pathlib.Path(__file__).parent / "vectors" / "ttl.tsv"
EVENT_TIME_VECTORS = VECTORS.with_name("ttl_event_time.tsv")


def _vectors():
    for line in VECTORS.read_text().splitlines():
        if line and not line.startswith("#"):
            ts, ttl, now, expires_at, verdict, refresh = line.split("\t")
            yield int(ts), int(ttl), int(now), int(expires_at), verdict == "true", refresh == "true"


def test_the_vectors_cover_the_boundary_and_saturation():
    vs = list(_vectors())
    assert len(vs) > 50
    assert any(now == e and x for _, _, now, e, x, _ in vs)  # expired exactly at expires_at
    assert any(e == (1 << 63) - 1 and ttl > 0 for _, ttl, _, e, _, _ in vs)  # saturated
    assert any(ttl <= 0 for _, ttl, _, _, _, _ in vs)  # no TTL: never expires
    assert any(r for *_, r in vs) and any(not r and ts != now and ttl > 0 for ts, ttl, now, *_, r in vs)


def test_python_follows_the_ttl_vectors():
    for ts, ttl, now, expires_at, verdict, refresh in _vectors():
        assert expiration_ts(ts, ttl) == expires_at, (ts, ttl)
        assert expired_at(expires_at, now) is verdict, (expires_at, now)
        assert expired(ts, ttl, now) is verdict, (ts, ttl, now)
        assert refreshes(ts, ttl, now) is refresh, (ts, ttl, now)


def test_the_jvm_follows_the_ttl_vectors(spark):
    rule = spark._jvm.io.ttlstate.spark.ttl.TtlRule
    long_ = spark._jvm.java.lang.Long.parseLong
    for ts, ttl, now, expires_at, verdict, refresh in _vectors():
        assert rule.expiresAt(long_(str(ts)), long_(str(ttl))) == expires_at, (ts, ttl)
        assert rule.expired(long_(str(expires_at)), long_(str(now))) is verdict, (expires_at, now)
        assert rule.refreshes(long_(str(expires_at)), long_(str(now)), long_(str(ttl))) is refresh, (expires_at, now, ttl)


def _event_time_vectors():
    for line in EVENT_TIME_VECTORS.read_text().splitlines():
        if line and not line.startswith("#"):
            *numbers, refresh = line.split("\t")
            yield (*(int(x) for x in numbers), refresh == "true")


def test_the_event_time_vectors_cover_watermark_zero_stamping_and_saturation():
    vs = list(_event_time_vectors())
    assert len(vs) > 50
    unstamped = event_time.UNSTAMPED
    assert any(clock == 0 and ttl > 0 and write == unstamped for _, ttl, clock, write, *_ in vs)
    assert any(ts == unstamped and clock > 0 and ttl > 0 and stamped < unstamped for ts, ttl, clock, _, _, stamped, _ in vs)
    # a saturated expiry that is not UNSTAMPED keeps it (the JVM cannot tell the two apart)
    assert any(ts != unstamped and entry == unstamped and clock > 0 for ts, _, clock, _, entry, *_ in vs)
    # at watermark 0 a read of an UNSTAMPED entry refreshes nothing; past it, a stamped one refreshes later
    assert any(ts == unstamped and clock == 0 and ttl > 0 and not r for ts, ttl, clock, *_, r in vs)
    assert any(r and ts != unstamped for ts, *_, r in vs)


def test_python_follows_the_event_time_vectors():
    """The worker's rules: a write at watermark `clock` carries `event_time.stamp(clock)`;
    `Txn.stamp_unstamped` gives an UNSTAMPED entry the clock when `needs_stamping`."""
    for ts, ttl, clock, write, entry, stamped, refresh in _event_time_vectors():
        assert expiration_ts(event_time.stamp(clock), ttl) == write, (ttl, clock)
        assert expiration_ts(ts, ttl) == entry, (ts, ttl)
        new_ts = clock if ts == event_time.UNSTAMPED and event_time.needs_stamping(clock, 1) else ts
        assert expiration_ts(new_ts, ttl) == stamped, (ts, ttl, clock)
        assert refreshes(new_ts, ttl, event_time.stamp(clock)) is refresh, (ts, ttl, clock)


def test_the_jvm_follows_the_event_time_vectors(spark):
    rule = spark._jvm.io.ttlstate.spark.ttl.TtlRule
    long_ = spark._jvm.java.lang.Long.parseLong
    for ts, ttl, clock, write, entry, stamped, refresh in _event_time_vectors():
        assert rule.eventTimeWriteExpiresAt(long_(str(clock)), long_(str(ttl))) == write, (clock, ttl)
        assert rule.eventTimeStamped(long_(str(entry)), long_(str(clock)), long_(str(ttl))) == stamped, (entry, clock, ttl)
        assert rule.eventTimeRefreshes(long_(str(stamped)), long_(str(clock)), long_(str(ttl))) is refresh, (stamped, clock, ttl)


@pytest.mark.parametrize("path", ["ttl.tsv", "ttl_event_time.tsv"])
def test_the_vectors_are_generated(path):
    """The file is what make_ttl_vectors.py writes (nobody edited an expectation by hand)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_ttl_vectors", VECTORS.with_name("make_ttl_vectors.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if path == "ttl.tsv":
        assert list(_vectors()) == list(mod.cases())
    else:
        assert list(_event_time_vectors()) == list(mod.event_time_cases())
