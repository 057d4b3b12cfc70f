"""The TTL rule's shared vectors (`tests/vectors/ttl.tsv`): Python's `ttlstate.ttl` and the
JVM's `TtlRule` must both give every line's expiry time, verdict and whether a read at `now`
refreshes the entry (OnReadAndWrite), so neither side can change the rule alone (docs/DESIGN.md
49, 67)."""

import pathlib

import pytest

from ttlstate.ttl import expiration_ts, expired, expired_at, refreshes

VECTORS = pathlib.Path(__file__).parent / "vectors" / "ttl.tsv"


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


@pytest.mark.parametrize("path", ["ttl.tsv"])
def test_the_vectors_are_generated(path):
    """The file is what make_ttl_vectors.py writes (nobody edited an expectation by hand)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_ttl_vectors", VECTORS.with_name("make_ttl_vectors.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    expected = list(mod.cases())
    assert list(_vectors()) == expected
