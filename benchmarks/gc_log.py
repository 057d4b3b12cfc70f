"""What a driver JVM's `-Xlog:gc` file tells about its Java heap: the largest heap G1 committed,
and the bytes allocated (each collection's heap in use before it, less what the one before left
in use; allocation after the last collection is not seen)."""

from __future__ import annotations

import pathlib
import re

# "25M->3M(256M)": in use before -> after (committed)
_SIZES = re.compile(r"(\d+)([KMG])->(\d+)([KMG])\((\d+)([KMG])\)")
_UNIT = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _collections(text: str) -> list[tuple[int, int, int]]:
    return [(int(a) * _UNIT[ua], int(b) * _UNIT[ub], int(c) * _UNIT[uc])
            for a, ua, b, ub, c, uc in _SIZES.findall(text)]


def peak_committed(text: str) -> int | None:
    """The largest Java heap G1 had committed after any collection, bytes."""
    return max((committed for _, _, committed in _collections(text)), default=None)


def allocated(text: str) -> int | None:
    """Bytes allocated on the Java heap up to the last collection (None: no collection)."""
    total, left = 0, 0
    seen = False
    for before, after, _ in _collections(text):
        total += max(0, before - left)
        left, seen = after, True
    return total if seen else None


def read(gc_log: pathlib.Path) -> str | None:
    try:
        return gc_log.read_text()
    except OSError:
        return None
