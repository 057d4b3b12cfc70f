"""TTL settings: Flink's `StateTtlConfig`, as Spark conf keys and as a Python builder.

Every setting is declared once in `SETTINGS` (short name, parser, default, doc, scope `ttl`;
`conf.REGISTRY` lists them with the store's and service's keys). Keys are
`spark.sql.streaming.stateStore.ttlstate.<name>`, overridable per operator
(`...ttlstate.operator.<operatorId>.<name>`) and per store
(`...ttlstate.operator.<operatorId>.store.<storeName>.<name>`); store beats operator beats
global. Invalid values raise `InvalidConfError` with the key, the value and what is allowed.

`provider/conf.py` accepts these keys next to its own; the store applies the resolved
`TtlConfig` (`ttlstate.ttl.state`).
"""

from __future__ import annotations

import dataclasses
import enum
import re
import tomllib
from typing import Any, Mapping

from .. import values
from ..confkeys import PREFIX
from ..errors import InvalidConfError


class UpdateType(enum.Enum):
    ON_CREATE_AND_WRITE = "OnCreateAndWrite"
    ON_READ_AND_WRITE = "OnReadAndWrite"
    DISABLED = "Disabled"


class StateVisibility(enum.Enum):
    NEVER_RETURN_EXPIRED = "NeverReturnExpired"
    RETURN_EXPIRED_IF_NOT_CLEANED_UP = "ReturnExpiredIfNotCleanedUp"


class TimeCharacteristic(enum.Enum):
    BATCH_TIMESTAMP = "BatchTimestamp"
    PROCESSING_TIME = "ProcessingTime"
    EVENT_TIME = "EventTime"


# The value parsers and the Setting type are ttlstate's own (`ttlstate.values`), shared with
# the store's settings; `conf.REGISTRY` lists these with those.
parse_duration = values.duration_ms
Setting = values.Setting


def _ttl(name: str, field: str, parse, default: str, doc: str) -> Setting:
    """A TTL setting: scope "ttl" (overridable per operator and store), filling `field`."""
    return Setting(name, parse, default, doc, "ttl", field)


SETTINGS: tuple[Setting, ...] = (
    _ttl("ttl", "ttl_ms", parse_duration, "0",
            "Time-to-live of a state entry; unset or 0 means no TTL."),
    _ttl("updateType", "update_type", values.enum_of(UpdateType), "OnCreateAndWrite",
            "When an entry's timestamp is refreshed: on put only, on every read too, or never."),
    _ttl("stateVisibility", "state_visibility", values.enum_of(StateVisibility), "NeverReturnExpired",
            "Whether expired entries that are not cleaned up yet may still be returned."),
    _ttl("timeCharacteristic", "time_characteristic", values.enum_of(TimeCharacteristic), "BatchTimestamp",
            "The clock: the micro-batch's logical timestamp (replay-safe), the wall clock, or "
            "the query's event-time watermark of the micro-batch (replay-safe; the query needs "
            "a watermark, and RocksDB's TTL compaction filter, a wall-clock cleanup, is off)."),
    _ttl("cleanup.inBackground", "cleanup_in_background", values.boolean, "true",
            "Turn on the default background cleanup strategies."),
    _ttl("cleanup.incremental.size", "incremental_size", values.int_between(1, 1_000_000), "5",
            "Entries checked by the incremental cleanup per state access."),
    _ttl("cleanup.incremental.everyRecord", "incremental_every_record", values.boolean, "false",
            "Also run the incremental cleanup once per processed record."),
    _ttl("cleanup.compactionFilter.enabled", "compaction_filter", values.boolean, "true",
            "Drop expired entries during RocksDB compaction."),
    _ttl("cleanup.compactionFilter.periodicCompaction", "periodic_compaction_ms",
            parse_duration, "30d", "Compact files older than this so cold data is cleaned too."),
    _ttl("cleanup.compactionFilter.safetyMargin", "compaction_margin_ms", parse_duration, "1h",
            "RocksDB's TTL compaction drops an entry only when it is older than ttl + this margin "
            "by the wall clock, so it never drops an entry the batch clock still sees as live "
            "(the margin must exceed the longest batch, retries included)."),
    _ttl("cleanup.fullSnapshot", "full_snapshot", values.boolean, "false",
            "Leave expired entries out whenever a full copy of the state is written."),
)
BY_NAME = {s.name: s for s in SETTINGS}
_DEFAULTS = {s.field: s.parse(s.default) for s in SETTINGS}
_OVERRIDE = re.compile(r"^operator\.(\d+)\.(?:store\.([^.]+)\.)?(.+)$")


def split_key(rest: str) -> tuple[int | None, str | None, str]:
    """(operator id, store name, setting name) of a key with the prefix removed."""
    m = _OVERRIDE.match(rest)
    if m is None:
        return None, None, rest
    return int(m.group(1)), m.group(2), m.group(3)


@dataclasses.dataclass(frozen=True)
class TtlConfig:
    """Resolved TTL settings of one store (Flink's StateTtlConfig)."""

    # Each default is the registry's (SETTINGS above), parsed: declared once.
    ttl_ms: int = _DEFAULTS["ttl_ms"]
    update_type: UpdateType = _DEFAULTS["update_type"]
    state_visibility: StateVisibility = _DEFAULTS["state_visibility"]
    time_characteristic: TimeCharacteristic = _DEFAULTS["time_characteristic"]
    cleanup_in_background: bool = _DEFAULTS["cleanup_in_background"]
    incremental_size: int = _DEFAULTS["incremental_size"]
    incremental_every_record: bool = _DEFAULTS["incremental_every_record"]
    compaction_filter: bool = _DEFAULTS["compaction_filter"]
    periodic_compaction_ms: int = _DEFAULTS["periodic_compaction_ms"]
    compaction_margin_ms: int = _DEFAULTS["compaction_margin_ms"]
    full_snapshot: bool = _DEFAULTS["full_snapshot"]

    @property
    def enabled(self) -> bool:
        return self.ttl_ms > 0 and self.update_type is not UpdateType.DISABLED

    @property
    def incremental_cleanup(self) -> bool:
        return self.enabled and self.cleanup_in_background

    @property
    def event_time(self) -> bool:
        """The clock is the query's event-time watermark (`ttlstate.ttl.event_time`)."""
        return self.time_characteristic is TimeCharacteristic.EVENT_TIME

    @property
    def compaction_cleanup(self) -> bool:
        """RocksDB's TTL compaction filter is on. Never under EventTime: the filter ages
        entries by the wall clock, which says nothing about the watermark (a stalled stream,
        or a backfill, keeps event time still while the wall clock runs)."""
        return (self.enabled and self.cleanup_in_background and self.compaction_filter
                and not self.event_time)

    @staticmethod
    def new_builder(ttl: str | int) -> "TtlConfigBuilder":
        return TtlConfigBuilder(ttl)

    def to_conf(self, operator: int | None = None, store: str | None = None) -> dict[str, str]:
        """Spark conf keys for these settings, global or scoped to an operator / store."""
        if store is not None and operator is None:
            raise ValueError("a store override needs its operator id")
        scope = PREFIX
        if operator is not None:
            scope += f"operator.{int(operator)}."
            if store is not None:
                scope += f"store.{store}."
        return {scope + s.name: _render(getattr(self, s.field)) for s in SETTINGS}


def _render(v) -> str:
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class TtlConfigBuilder:
    """Mirrors Flink's `StateTtlConfig.newBuilder(...)...build()`."""

    def __init__(self, ttl: str | int):
        self._values: dict[str, Any] = {"ttl_ms": _parse_value(BY_NAME["ttl"], ttl, "ttl")}

    def _set(self, name: str, value) -> "TtlConfigBuilder":
        s = BY_NAME[name]
        self._values[s.field] = _parse_value(s, value.value if isinstance(value, enum.Enum) else value, name)
        return self

    def set_update_type(self, update_type) -> "TtlConfigBuilder":
        return self._set("updateType", update_type)

    def set_state_visibility(self, visibility) -> "TtlConfigBuilder":
        return self._set("stateVisibility", visibility)

    def set_time_characteristic(self, characteristic) -> "TtlConfigBuilder":
        return self._set("timeCharacteristic", characteristic)

    def use_event_time(self) -> "TtlConfigBuilder":
        """The clock is the query's event-time watermark (`timeCharacteristic=EventTime`)."""
        return self._set("timeCharacteristic", TimeCharacteristic.EVENT_TIME)

    def cleanup_incrementally(self, size: int, every_record: bool = False) -> "TtlConfigBuilder":
        self._set("cleanup.incremental.size", str(size))
        return self._set("cleanup.incremental.everyRecord", _render(bool(every_record)))

    def cleanup_in_rocksdb_compact_filter(self, periodic_compaction: str | int = "30d",
                                          safety_margin: str | int = "1h") -> "TtlConfigBuilder":
        self._set("cleanup.compactionFilter.enabled", "true")
        self._set("cleanup.compactionFilter.safetyMargin", safety_margin)
        return self._set("cleanup.compactionFilter.periodicCompaction", periodic_compaction)

    def cleanup_full_snapshot(self) -> "TtlConfigBuilder":
        return self._set("cleanup.fullSnapshot", "true")

    def disable_cleanup_in_background(self) -> "TtlConfigBuilder":
        return self._set("cleanup.inBackground", "false")

    def build(self) -> TtlConfig:
        return TtlConfig(**self._values)


def _parse_value(setting: Setting, value, key: str):
    text = _render(value)
    try:
        return setting.parse(text)
    except ValueError as e:
        raise InvalidConfError(key if key.startswith(PREFIX) else PREFIX + key, text, str(e)) from None


def resolve(confs: Mapping[str, str], operator: int, store: str = "default") -> TtlConfig:
    """The TTL settings of one store: store override > operator override > global > default.

    Every TTL key in `confs` is validated, also those of other operators and stores.
    """
    layers: list[dict[str, Any]] = [{}, {}, {}]  # global, operator, store
    for key, text in confs.items():
        if not key.startswith(PREFIX):
            continue
        op, st, name = split_key(key[len(PREFIX):])
        layer = 0
        if op is not None:
            mine = op == operator and (st is None or st == store)
            layer = (2 if st is not None else 1) if mine else -1
        setting = BY_NAME.get(name)
        if setting is None:
            if op is not None:  # only TTL settings can be overridden per operator or store
                raise InvalidConfError(key, text, "unknown TTL setting; known settings are "
                                       + ", ".join(s.name for s in SETTINGS))
            continue  # a global key of another part of ttlstate (see provider/conf.py)
        value = _parse_value(setting, text, key)
        if layer >= 0:
            layers[layer][setting.field] = value
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    return TtlConfig(**merged)


def load_profiles(path: str) -> dict[str, dict[str, str]]:
    """Conf dicts of the TTL profiles in a TOML file, by profile name.

    ```toml
    [profiles.short]
    ttl = "10 minutes"
    [profiles.short.operator.2]          # overrides for operator 2
    ttl = "1h"
    [profiles.short.operator.2.store.left-keyToNumValues]
    ttl = "30s"
    ```
    Every value is validated; an error names the file, the profile and the key.
    """
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    profiles = doc.get("profiles")
    if not isinstance(profiles, dict) or not profiles:
        raise InvalidConfError(path, "", "a TOML file with at least one [profiles.<name>] table")
    out: dict[str, dict[str, str]] = {}
    for name, table in profiles.items():
        conf: dict[str, str] = {}
        _flatten(table, PREFIX, conf)
        for key, value in conf.items():
            setting = BY_NAME.get(split_key(key[len(PREFIX):])[2])
            if setting is None:
                raise InvalidConfError(key, value, f"unknown TTL setting in {path} profile '{name}'")
            _parse_value(setting, value, key)
        out[name] = conf
    return out


def _flatten(table: dict, prefix: str, out: dict[str, str]):
    for k, v in table.items():
        if isinstance(v, dict):
            _flatten(v, f"{prefix}{k}.", out)
        else:
            out[prefix + str(k)] = _render(v)
