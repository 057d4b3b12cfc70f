"""The `Setting` every ttlstate conf key is declared as, and the parsers of conf values, one
per kind of value, shared by every setting (the store's `conf.py` and the TTL's
`ttl/config.py`; `conf.REGISTRY` lists them all). Each takes the text of a conf value and returns the
value, or raises ValueError with what is allowed ("expected ..."), which `InvalidConfError`
shows beside the key and the offending value.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

from .confkeys import PREFIX

Parser = Callable[[str], Any]
SCOPES = ("service", "store", "ttl")  # what `Setting.scope` may be


@dataclasses.dataclass(frozen=True)
class Setting:
    """One ttlstate conf key, declared once: its short name (after the prefix), parser,
    default (as a user would write it; None: derived, see the doc), doc and scope:
    "service" (read once when the store service starts), "store" (per store) or "ttl"
    (per store, overridable per operator and per store: `operator.<id>.[store.<name>.]`).
    `field` is the `TtlConfig` field a TTL setting fills."""

    name: str
    parse: Parser
    default: str | None
    doc: str
    scope: str
    field: str | None = None

    @property
    def key(self) -> str:
        return PREFIX + self.name


_UNITS_MS = {
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_DURATION = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")
DURATION_ALLOWED = ("expected a non-negative duration such as 30s, 10 minutes, 1h, 2d "
                    "(a bare number is milliseconds)")
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30}


def duration_ms(text: str) -> int:
    """Milliseconds of `30s`, `10 minutes`, `1h`, `2d`, or a bare number of milliseconds."""
    m = _DURATION.match(str(text))
    unit = m and m.group(2).lower()
    if not m or unit not in _UNITS_MS and unit != "":
        raise ValueError(DURATION_ALLOWED)
    ms = int(m.group(1)) * (_UNITS_MS[unit] if unit else 1)
    if ms >= 1 << 63:
        raise ValueError(DURATION_ALLOWED + ", below 2^63 ms")
    return ms


def duration_between(low_ms: int, high_ms: int, shown: str) -> Parser:
    """A duration from `low_ms` to `high_ms`; `shown` says the range as users write it."""
    def parse(text: str) -> int:
        v = duration_ms(str(text).strip())
        if not low_ms <= v <= high_ms:
            raise ValueError(f"expected a duration from {shown} (e.g. 30s, 10min)")
        return v
    return parse


def int_between(low: int, high: int) -> Parser:
    def parse(text: str) -> int:
        try:
            v = int(str(text).strip())
        except ValueError:
            v = low - 1
        if not low <= v <= high:
            raise ValueError(f"expected an integer from {low} to {high}")
        return v
    return parse


def boolean(text: str) -> bool:
    v = str(text).strip().lower()
    if v not in ("true", "false"):
        raise ValueError("expected true or false")
    return v == "true"


def one_of(*allowed: str, case: Callable[[str], str] = str.lower) -> Parser:
    """One of `allowed`, compared after `case` (the value is returned in that case)."""
    def parse(text: str) -> str:
        v = case(str(text).strip())
        if v not in allowed:
            raise ValueError("expected one of " + ", ".join(allowed))
        return v
    return parse


def enum_of(cls) -> Parser:
    """A member of the str-valued enum `cls`, by its value in any case."""
    names = {e.value.lower(): e for e in cls}

    def parse(text: str):
        e = names.get(str(text).strip().lower())
        if e is None:
            raise ValueError("expected one of " + ", ".join(e.value for e in cls))
        return e
    return parse


def byte_size(upper: int) -> Parser:
    """A size in bytes: `134217728`, `512k`, `128m`, `1g` (binary units)."""
    def parse(text: str) -> int:
        t = str(text).strip().lower()
        digits = t.rstrip("bkmg")
        unit = t[len(digits):]
        try:
            v = int(digits) * _SIZE_UNITS[unit]
        except (ValueError, KeyError):
            v = -1
        if not 0 <= v <= upper:
            raise ValueError(f"expected a size from 0 to {upper} bytes, such as 64m or 1g")
        return v
    return parse


def ratio(text: str) -> float:
    try:
        v = float(str(text).strip())
    except ValueError:
        v = -1.0
    if not 0.0 < v < 1.0:
        raise ValueError("expected a number between 0 and 1 (exclusive), such as 0.5")
    return v


def absolute_path(text: str) -> str:
    v = str(text).strip()
    if not v.startswith("/"):
        raise ValueError("expected an absolute local directory path")
    return v
