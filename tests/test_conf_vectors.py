"""The conf names shared with the JVM, pinned by vectors both sides check: the grammar of
ttlstate keys (`tests/vectors/conf_keys.tsv`: Python's `ttl.config.split_key`, the JVM's
`ConfKeys.split`) and the per-store resolution of overrides (`tests/vectors/conf_overrides.tsv`:
the worker's `resolve_store`, the JVM's check of event-time TTL,
`TtlStateExtensions.eventTimeSetting`); the JVM side is `ConfVectorsTest` (`make test-java`).
The names of the settings an OPEN reply gives the JVM are pinned by the OPEN replies of
`tests/vectors/replies.tsv` (`StoreSettingsVectorsTest`)."""

import json
import pathlib

import pytest

from ttlstate import worker
from ttlstate.confkeys import PREFIX
from ttlstate.errors import InvalidConfError
from ttlstate.ttl import config as ttl_config

VECTORS = pathlib.Path(__file__).parent / "vectors"


def _lines(name):
    for line in (VECTORS / name).read_text().splitlines():
        if line and not line.startswith("#"):
            yield line.split("\t")


def _opt(s):
    return None if s == "-" else s


KEYS = list(_lines("conf_keys.tsv"))
OVERRIDES = list(_lines("conf_overrides.tsv"))


@pytest.mark.parametrize("key,operator,store,name", KEYS, ids=[k[0] for k in KEYS])
def test_python_splits_keys_as_the_vectors_say(key, operator, store, name):
    op = _opt(operator)
    assert ttl_config.split_key(key) == (None if op is None else int(op), _opt(store), name)


@pytest.mark.parametrize("name,confs,operator,store,expected,jvm_key", OVERRIDES, ids=[o[0] for o in OVERRIDES])
def test_the_worker_resolves_overrides_as_the_vectors_say(name, confs, operator, store, expected, jvm_key):
    confs = {PREFIX + k: v for k, v in json.loads(confs).items()}
    if expected == "INVALID":
        with pytest.raises(InvalidConfError):
            worker.resolve_store(confs, int(operator), store)
        return
    _, ttl = worker.resolve_store(confs, int(operator), store)
    assert {"ttlMs": ttl.ttl_ms, "updateType": ttl.update_type.value,
            "timeCharacteristic": ttl.time_characteristic.value} == json.loads(expected)


def test_a_store_the_worker_puts_on_event_time_is_one_the_jvm_checks():
    """The JVM refuses a query without a watermark when any store may run TTL on event time:
    wherever a vector's store resolves to EventTime, the JVM names a key, the same for every
    store of those confs."""
    named = {}
    for name, confs, _, _, expected, jvm_key in OVERRIDES:
        assert named.setdefault(confs, jvm_key) == jvm_key, name
        if expected != "INVALID" and json.loads(expected)["timeCharacteristic"] == "EventTime":
            assert jvm_key != "-", name
            assert ttl_config.split_key(jvm_key)[2] == "timeCharacteristic"


def test_the_vectors_cover_each_scope_and_refusals():
    assert {(_opt(op) is not None, _opt(st) is not None) for _, op, st, _ in KEYS} == {
        (False, False), (True, False), (True, True)}
    assert sum(e == "INVALID" for *_, e, _ in OVERRIDES) >= 3
    assert sum(k != "-" for *_, k in OVERRIDES) >= 3
