"""The JVM's value cache (slabs and an index, docs/decisions/048-slab-cache.md) against a model:
random writes,
rewrites, removes and reads over several versions, through Spark's provider API (py4j) on
the real provider, service and files. Every read and every full iteration is compared with a
Python dict, with a budget small enough that slabs are freed and values moved all the time,
and with one large enough that the view stays complete and iterations are served from it.
"""

import random

import pytest

from jvm_state import JvmState, new_root

PREFIX = "spark.sql.streaming.stateStore.ttlstate."


def _key(i: int) -> tuple[str, int]:
    return ("k" * (1 + i % 37), i)  # keys of many lengths: entries of many sizes


def _random_ops(js, s, rng, keys: int, model: dict, key=_key, removes: float = 0.15):
    """keys // 2 random puts (45%), removes and reads of keys 0..keys-1, each read checked."""
    for _ in range(keys // 2):
        i = rng.randrange(keys)
        op = rng.random()
        if op < 0.45:
            model[i] = rng.randrange(1 << 31)
            js.put(s, *key(i), model[i])
        elif op < 0.45 + removes:
            model.pop(i, None)
            js.remove(s, *key(i))
        else:
            assert js.get(s, *key(i)) == model.get(i), i


def _run_versions(js, p, rng, versions: int, keys: int, model: dict):
    for version in range(versions):
        s = js.get_store(p, version)
        _random_ops(js, s, rng, keys, model)
        assert s.commit() == version + 1
    return js.get_store(p, versions)


def test_a_small_cache_answers_like_the_model_while_it_frees_slabs(spark, tmp_path):
    js = JvmState(spark, cache_dir=str(tmp_path / "cache"))
    rng = random.Random(15)
    keys = 1000
    p = js.provider(new_root(tmp_path), conf=js.store_conf(**{PREFIX + "cache.maxBytes": "40k"}))
    model: dict = {}
    s = _run_versions(js, p, rng, 5, keys, model)
    assert all(js.get(s, *_key(i)) == model.get(i) for i in range(keys))
    m = js.custom_metrics(s)
    assert m["ttlstateCacheHits"] > 0 and m["ttlstateCacheMisses"] > 0, m  # both paths answered
    assert m["ttlstateCacheBytes"] <= 40 * 1024 + 3 * 2048, m  # within the budget (plus its filter)
    got = {js.decode_key(pair.key())[1]: js.decode_value(pair.value()) for pair in _iterate(s)}
    assert got == model


def test_a_complete_view_iterates_a_snapshot_like_the_model(spark, tmp_path):
    js = JvmState(spark, cache_dir=str(tmp_path / "cache"))
    rng = random.Random(48)
    keys = 2000
    p = js.provider(new_root(tmp_path))
    model: dict = {}
    s = _run_versions(js, p, rng, 3, keys, model)
    # iterate while removing every key seen and writing new ones: the iterator shows the
    # version as it was when first used, and the store ends as the model says
    seen = {}
    it = s.iterator("default")
    while it.hasNext():
        pair = it.next()
        k = js.decode_key(pair.key())
        seen[k[1]] = js.decode_value(pair.value())
        js.remove(s, *k)
        js.put(s, *_key(keys + k[1]), k[1])
    assert seen == model
    assert js.custom_metrics(s)["ttlstateResidentScans"] >= 1  # the JVM served it
    assert s.commit() == 4
    s = js.get_store(p, 4)
    assert js.data(s) == {_key(keys + i): i for i in model}


def _iterate(store):
    it = store.iterator("default")
    while it.hasNext():
        yield it.next()


# keys 0..1399 share one prefix: up to about 800 of them live, more than its runs hold
# (MAX_PREFIX_RUNS of MAX_PREFIX_KEYS: 512); keys 1400..1699 share another, up to about 175
# live, placed in several runs of that prefix
BIG, MEDIUM = 1400, 300


def _grouped_key(i: int, groups: int) -> tuple[str, int]:
    # prefix key1: the keys of a group share one probe run (or a few)
    if i < BIG:
        return ("g", i)
    if i < BIG + MEDIUM:
        return ("gg", i)
    return ("g" * (3 + i % (groups - 2)), i)


def _scan_all(js, s, groups: int) -> dict:
    out = {}
    for g in range(groups):
        it = s.prefixScan(js.prefix("g" * (1 + g)), "default")
        while it.hasNext():
            pair = it.next()
            k1, k2 = js.decode_key(pair.key())
            assert len(k1) == 1 + g and k2 not in out, (g, k1, k2)
            out[k2] = js.decode_value(pair.value())
    return out


@pytest.mark.parametrize("budget", ["40k", "128m"], ids=["freeing-slabs", "complete"])
def test_keys_placed_by_prefix_answer_like_the_model(spark, tmp_path, budget):
    """A prefixed store's cache places keys by their prefix
    (docs/decisions/074-prefix-scans-from-complete-view.md, docs/decisions/080-providerbench-fix-and-prefix-runs.md): random puts,
    removes and reads in groups of up to 50 keys (shared probe runs, removals inside them,
    index growth), one of up to about 175 (several runs of one prefix) and one of up to about
    800 (placed by their own hash past its last run), and every group's prefix scan, version
    after version, against a dict."""
    js = JvmState(spark, cache_dir=str(tmp_path / "cache"))
    rng = random.Random(74)
    keys, groups = 3000, 31
    p = js.provider(new_root(tmp_path), prefix_cols=1, conf=js.store_conf(**{PREFIX + "cache.maxBytes": budget}))
    model: dict = {}
    for version in range(5):
        s = js.get_store(p, version)
        _random_ops(js, s, rng, keys, model, key=lambda i: _grouped_key(i, groups), removes=0.2)
        assert _scan_all(js, s, groups) == model, version  # own writes, before the commit
        assert s.commit() == version + 1
    s = js.get_store(p, 5)
    assert all(js.get(s, *_grouped_key(i, groups)) == model.get(i) for i in range(keys))
    assert _scan_all(js, s, groups) == model
    resident = js.custom_metrics(s)["ttlstateResidentScans"]
    assert resident == (groups - 1 if budget == "128m" else 0), resident  # the big group: the worker
