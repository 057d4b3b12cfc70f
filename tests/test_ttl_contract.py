"""TTL through Spark's provider API (py4j): the batch clock comes from the offset log,
overrides pick the store, metrics reach Spark. Real provider, service and files."""

import json
import os

from jvm_state import JvmState, new_root

import pytest

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
SKIP_NULLS = "spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled"


@pytest.fixture
def js(spark):
    return JvmState(spark)


def offsets(root: str, batch: int, ts: int):
    """Write `<checkpoint>/offsets/<batch>` as Spark's offset log does (root = .../state)."""
    d = os.path.join(os.path.dirname(root), "offsets")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, str(batch)), "w") as f:
        f.write("v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": ts,
                                     "conf": {}}) + "\n")


def metrics(js, store) -> dict:
    m = store.metrics()
    out = {"numKeys": m.numKeys()}
    it = m.customMetrics().iterator()
    while it.hasNext():
        kv = it.next()
        out[kv._1().name()] = kv._2()
    return out


def test_batch_clock_expires_hides_and_cleans(js, tmp_path):
    root = new_root(tmp_path / "ckpt")
    p = js.provider(root, conf=js.store_conf(**{PREFIX + "ttl": "1s",
                                                PREFIX + "cleanup.inBackground": "false"}))
    offsets(root, 0, 10_000)
    s = js.get_store(p, 0)
    js.put(s, "a", 1, 10)
    js.put(s, "b", 2, 20)
    assert s.commit() == 1
    offsets(root, 1, 10_999)
    s = js.get_store(p, 1)
    assert js.get(s, "a", 1) == 10  # 10_000 + 1_000 > 10_999: live
    js.put(s, "c", 3, 30)
    s.commit()
    offsets(root, 2, 11_000)
    s = js.get_store(p, 2)
    assert js.get(s, "a", 1) is None  # expired at exactly ts + ttl
    assert js.data(s) == {("c", 3): 30}
    assert not s.keyExists(js.key("b", 2), "default")
    s.commit()
    m = metrics(js, s)
    assert m["numKeys"] == 1 and m["ttlstateTtlMs"] == 1000
    assert m["ttlstateExpiredOnRead"] == 2  # a by get, b by the iterator
    p.close()
    # a fresh provider loads version 3 from the files: a and b are gone for good
    fresh = js.provider(root, conf=js.store_conf(**{PREFIX + "ttl": "1s"}))
    offsets(root, 3, 11_000)
    s = js.get_store(fresh, 3)
    assert js.data(s) == {("c", 3): 30} and metrics(js, s)["numKeys"] == 1
    fresh.close()


def test_store_override_beats_operator_and_global(js, tmp_path):
    root = new_root(tmp_path / "ckpt")
    confs = {PREFIX + "ttl": "1h", PREFIX + "operator.3.ttl": "2s",
             PREFIX + "operator.3.store.left-keyToNumValues.ttl": "1s"}
    refused = js.provider(root, op=3, store_name="left-keyToNumValues", conf=js.store_conf(**confs))
    with pytest.raises(Exception) as e:  # join state with TTL needs Spark to skip expired rows
        js.get_store(refused, 0)
    assert "skipNullsForStreamStreamJoins.enabled=true" in str(e.value)
    refused.close()
    conf = js.store_conf(**confs, **{SKIP_NULLS: "true"})
    offsets(root, 0, 0)
    offsets(root, 1, 1_500)
    seen = {}
    for name in ("left-keyToNumValues", "right-keyToNumValues"):
        p = js.provider(root, op=3, store_name=name, conf=conf)
        s = js.get_store(p, 0)
        js.put(s, "k", 1, 1)
        s.commit()
        s = js.get_store(p, 1)
        seen[name] = (js.get(s, "k", 1), metrics(js, s)["ttlstateTtlMs"])
        s.abort()
        p.close()
    assert seen == {"left-keyToNumValues": (None, 1000), "right-keyToNumValues": (1, 2000)}


def test_no_offset_log_falls_back_to_the_wall_clock(js, tmp_path):
    root = new_root(tmp_path / "ckpt")
    p = js.provider(root, conf=js.store_conf(**{PREFIX + "ttl": "1h"}))
    offsets(root, 0, 0)  # written at the epoch: expired by now
    s = js.get_store(p, 0)
    js.put(s, "old", 1, 1)
    s.commit()
    s = js.get_store(p, 1)  # no offsets/1: now = wall clock
    assert js.get(s, "old", 1) is None
    js.put(s, "new", 1, 2)
    assert js.get(s, "new", 1) == 2
    s.commit()
    p.close()
