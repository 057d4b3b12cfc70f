"""The benchmarks' reading of a driver JVM's `-Xlog:gc` file (benchmarks/gc_log.py): the peak
committed heap and the bytes allocated between collections."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))

import gc_log  # noqa: E402

# JDK 17's -Xlog:gc lines: young pauses, a concurrent cycle's remark and cleanup, a full GC
LOG = """\
[0.009s][info][gc] Using G1
[1.201s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 5.120ms
[2.402s][info][gc] GC(1) Pause Young (Concurrent Start) (G1 Humongous Allocation) 60M->20M(256M) 3.002ms
[2.403s][info][gc] GC(2) Concurrent Mark Cycle
[2.500s][info][gc] GC(2) Pause Remark 30M->30M(300M) 1.100ms
[2.510s][info][gc] GC(2) Pause Cleanup 32M->12M(300M) 0.100ms
[2.600s][info][gc] GC(2) Concurrent Mark Cycle 197.000ms
[3.000s][info][gc] GC(3) Pause Full (G1 Compaction Pause) 1G->512M(1536M) 300.000ms
[4.000s][info][gc] GC(4) Pause Young (Normal) (G1 Evacuation Pause) 600M->520M(1536M) 8.000ms
"""

M = 1 << 20


def test_allocated_is_what_each_collection_found_beyond_what_the_last_one_left():
    # 24 + (60-4) + (30-20) + (32-30) + (1024-12) + (600-512)
    assert gc_log.allocated(LOG) == (24 + 56 + 10 + 2 + 1012 + 88) * M


def test_peak_committed_is_the_largest_committed_heap():
    assert gc_log.peak_committed(LOG) == 1536 * M


def test_a_log_without_collections_tells_nothing(tmp_path):
    assert gc_log.allocated("[0.009s][info][gc] Using G1\n") is None
    assert gc_log.peak_committed("") is None
    assert gc_log.read(tmp_path / "missing.log") is None
