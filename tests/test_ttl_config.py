"""Unit tests of ttlstate.ttl's value codec and settings (pure: no Spark, no RocksDB)."""

import pytest

from ttlstate.errors import InvalidConfError
from ttlstate.ttl import MAX_TS, codec, expired
from ttlstate.ttl.config import (PREFIX, SETTINGS, StateVisibility, TimeCharacteristic, TtlConfig,
                                 UpdateType, load_profiles, parse_duration, resolve)


@pytest.mark.parametrize("ts", [0, 1, -1, 1_700_000_000_000, MAX_TS, -(1 << 63)])
@pytest.mark.parametrize("value", [b"", b"\x00", b"row bytes" * 50])
def test_codec_round_trip(ts, value):
    stored = codec.encode(ts, value)
    assert len(stored) == 8 + len(value)
    assert codec.decode(stored) == (ts, value) and codec.timestamp(stored) == ts


def test_codec_is_big_endian_like_flink():
    assert codec.encode(1, b"v") == b"\x00" * 7 + b"\x01v"


def test_codec_refuses_short_values():
    with pytest.raises(ValueError, match="8 bytes"):
        codec.decode(b"1234567")


@pytest.mark.parametrize("now,is_expired", [(9_999, False), (10_000, True), (10_001, True)])
def test_expiry_around_the_boundary(now, is_expired):
    assert expired(ts=4_000, ttl=6_000, now=now) is is_expired


@pytest.mark.parametrize("text,ms", [
    ("0", 0), ("250", 250), ("250ms", 250), ("30s", 30_000), ("30 seconds", 30_000),
    ("10 minutes", 600_000), ("10min", 600_000), ("1h", 3_600_000), ("2d", 172_800_000),
    (" 3 Hours ", 10_800_000), ("1day", 86_400_000)])
def test_durations(text, ms):
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "-1s", "1.5h", "10 fortnights", "s", "1 h 2", str(1 << 63)])
def test_bad_durations(text):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


BAD_VALUES = {
    "ttl": ("ten minutes", "duration"),
    "updateType": ("OnRead", "OnCreateAndWrite, OnReadAndWrite, Disabled"),
    "stateVisibility": ("Always", "NeverReturnExpired, ReturnExpiredIfNotCleanedUp"),
    "timeCharacteristic": ("IngestionTime", "BatchTimestamp, ProcessingTime, EventTime"),
    "cleanup.inBackground": ("yes", "true or false"),
    "cleanup.incremental.size": ("0", "1 to 1000000"),
    "cleanup.incremental.everyRecord": ("1", "true or false"),
    "cleanup.compactionFilter.enabled": ("on", "true or false"),
    "cleanup.compactionFilter.periodicCompaction": ("monthly", "duration"),
    "cleanup.compactionFilter.safetyMargin": ("-1s", "duration"),
    "cleanup.fullSnapshot": ("maybe", "true or false"),
}


def test_every_setting_has_a_bad_value_case():
    assert set(BAD_VALUES) == {s.name for s in SETTINGS}


@pytest.mark.parametrize("name", list(BAD_VALUES))
@pytest.mark.parametrize("scope", ["", "operator.3.", "operator.3.store.left-keyToNumValues."])
def test_every_config_error_names_key_value_and_allowed(name, scope):
    bad, allowed = BAD_VALUES[name]
    key = PREFIX + scope + name
    with pytest.raises(InvalidConfError) as e:
        resolve({key: bad}, operator=0)  # validated even when it is another operator's key
    assert e.value.key == key and e.value.value == bad
    assert key in str(e.value) and f"'{bad}'" in str(e.value) and allowed in str(e.value)


def test_unknown_override_setting_is_refused():
    with pytest.raises(InvalidConfError, match="unknown TTL setting"):
        resolve({PREFIX + "operator.1.tll": "1h"}, operator=1)


def test_defaults_and_enabled():
    c = resolve({}, operator=0)
    assert c == TtlConfig() and not c.enabled
    assert c.update_type is UpdateType.ON_CREATE_AND_WRITE
    assert c.state_visibility is StateVisibility.NEVER_RETURN_EXPIRED
    assert c.time_characteristic is TimeCharacteristic.BATCH_TIMESTAMP
    assert resolve({PREFIX + "ttl": "1s"}, operator=0).enabled
    assert not resolve({PREFIX + "ttl": "1s", PREFIX + "updateType": "Disabled"}, operator=0).enabled


def test_store_beats_operator_beats_global():
    confs = {
        PREFIX + "ttl": "1h",
        PREFIX + "operator.2.ttl": "10 minutes",
        PREFIX + "operator.2.store.left-keyToNumValues.ttl": "30s",
        PREFIX + "operator.2.updateType": "OnReadAndWrite",
        PREFIX + "writeBatchBytes": "1024",  # not a TTL key: ignored here
    }
    assert resolve(confs, operator=1).ttl_ms == 3_600_000
    op2 = resolve(confs, operator=2, store="right-keyToNumValues")
    assert op2.ttl_ms == 600_000 and op2.update_type is UpdateType.ON_READ_AND_WRITE
    left = resolve(confs, operator=2, store="left-keyToNumValues")
    assert left.ttl_ms == 30_000 and left.update_type is UpdateType.ON_READ_AND_WRITE


def test_builder_mirrors_flink_and_round_trips_through_conf():
    c = (TtlConfig.new_builder("10 minutes")
         .set_update_type(UpdateType.ON_READ_AND_WRITE)
         .set_state_visibility("ReturnExpiredIfNotCleanedUp")
         .cleanup_incrementally(10, True)
         .cleanup_in_rocksdb_compact_filter("1d")
         .cleanup_full_snapshot()
         .build())
    assert (c.ttl_ms, c.incremental_size, c.incremental_every_record, c.periodic_compaction_ms,
            c.full_snapshot) == (600_000, 10, True, 86_400_000, True)
    assert resolve(c.to_conf(), operator=7) == c
    scoped = c.to_conf(operator=4, store="right-keyWithIndexToValue")
    assert all(k.startswith(PREFIX + "operator.4.store.right-keyWithIndexToValue.") for k in scoped)
    assert resolve(scoped, operator=4, store="right-keyWithIndexToValue") == c
    assert resolve(scoped, operator=4, store="other") == TtlConfig()
    with pytest.raises(ValueError):
        c.to_conf(store="x")


def test_builder_refuses_bad_values_with_the_key():
    with pytest.raises(InvalidConfError) as e:
        TtlConfig.new_builder("soon")
    assert e.value.key == PREFIX + "ttl"
    with pytest.raises(InvalidConfError) as e:
        TtlConfig.new_builder("1h").cleanup_incrementally(0)
    assert e.value.key == PREFIX + "cleanup.incremental.size"


def test_toml_profiles(tmp_path):
    f = tmp_path / "profiles.toml"
    f.write_text('''
[profiles.short]
ttl = "30s"
"cleanup.incremental.size" = 20
[profiles.short.operator.2]
ttl = "1h"
[profiles.short.operator.2.store.left-keyToNumValues]
updateType = "OnReadAndWrite"

[profiles.none]
ttl = 0
''')
    profiles = load_profiles(str(f))
    assert set(profiles) == {"short", "none"}
    short = profiles["short"]
    assert resolve(short, operator=0).ttl_ms == 30_000
    assert resolve(short, operator=0).incremental_size == 20
    left = resolve(short, operator=2, store="left-keyToNumValues")
    assert left.ttl_ms == 3_600_000 and left.update_type is UpdateType.ON_READ_AND_WRITE
    assert not resolve(profiles["none"], operator=0).enabled


def test_toml_profile_errors_name_the_key(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('[profiles.p.operator.1]\nupdateType = "Sometimes"\n')
    with pytest.raises(InvalidConfError) as e:
        load_profiles(str(f))
    assert e.value.key == PREFIX + "operator.1.updateType" and "Sometimes" in str(e.value)
    empty = tmp_path / "empty.toml"
    empty.write_text("[other]\n")
    with pytest.raises(InvalidConfError, match="profiles"):
        load_profiles(str(empty))


def test_ttl_on_join_state_needs_spark_to_skip_expired_rows():
    from ttlstate import conf
    ttl = {PREFIX + "operator.2.ttl": "1s"}
    with pytest.raises(InvalidConfError) as e:
        conf.ttl_settings(ttl, 2, "left-keyWithIndexToValue")
    assert PREFIX + "operator.2.ttl" in str(e.value) and conf.SKIP_NULLS_KEY + "=true" in str(e.value)
    assert conf.ttl_settings({**ttl, conf.SKIP_NULLS_KEY: "true"}, 2, "left-keyWithIndexToValue").ttl_ms == 1000
    assert conf.ttl_settings(ttl, 2, "default").ttl_ms == 1000  # not a join store
    assert conf.ttl_settings(ttl, 1, "left-keyWithIndexToValue").ttl_ms == 0  # no TTL there


def test_event_time_from_the_builder_a_profile_and_overrides(tmp_path):
    c = TtlConfig.new_builder("7d").use_event_time().build()
    assert c.time_characteristic is TimeCharacteristic.EVENT_TIME and c.event_time
    assert c == TtlConfig.new_builder("7d").set_time_characteristic("eventtime").build()
    assert c.to_conf()[PREFIX + "timeCharacteristic"] == "EventTime"
    assert resolve(c.to_conf(), operator=3) == c
    # the compaction filter (wall-clock write time) is never on under EventTime
    assert c.compaction_filter and c.cleanup_in_background and not c.compaction_cleanup
    assert TtlConfig.new_builder("7d").build().compaction_cleanup
    f = tmp_path / "profiles.toml"
    f.write_text('[profiles.backfill]\nttl = "7d"\n'
                 '[profiles.backfill.operator.1]\ntimeCharacteristic = "EventTime"\n')
    profile = load_profiles(str(f))["backfill"]
    assert resolve(profile, operator=1).event_time
    assert not resolve(profile, operator=0).event_time
    store = {PREFIX + "ttl": "1h", PREFIX + "timeCharacteristic": "EventTime",
             PREFIX + "operator.0.store.right-keyToNumValues.timeCharacteristic": "BatchTimestamp"}
    assert resolve(store, operator=0, store="left-keyToNumValues").event_time
    assert not resolve(store, operator=0, store="right-keyToNumValues").event_time


def test_the_worker_tells_the_jvm_which_clock_to_send():
    from ttlstate.worker import _view_settings
    on = _view_settings(TtlConfig.new_builder("1h").use_event_time().build())
    assert on["ttl.eventTime"] and not on["ttl.batchClock"]
    assert not _view_settings(TtlConfig.new_builder("1h").build())["ttl.eventTime"]
    assert not _view_settings(TtlConfig(time_characteristic=TimeCharacteristic.EVENT_TIME))["ttl.eventTime"]
