"""Where the test suite's time goes, from a run's JUnit XML or its `--durations=0` output.

    python buildsys/test_times.py REPORT [--top 30] [--write-schedule tests/file_times.json]

REPORT is a pytest JUnit XML file (`--junitxml`, each test's setup + call + teardown) or the
text of a run with `--durations=0` (its "slowest durations" lines, summed per test). Prints the
`--top` slowest tests and every file's total, slowest first. `--write-schedule` writes the
per-file totals that tests/conftest.py reads to start the slowest files first, so that
pytest-xdist's workers end together instead of one running a long file alone at the end.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import re
import sys
import xml.etree.ElementTree as ET

_DURATION_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*)$")


def _from_junit(path: pathlib.Path) -> dict[str, float]:
    times: dict[str, float] = collections.defaultdict(float)
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname "tests.test_x" or "tests.test_x.TestClass": the file is the test_ part
        parts = []
        for part in module:
            parts.append(part)
            if part.startswith("test_"):
                break
        nodeid = "/".join(parts) + ".py::" + case.get("name", "")
        times[nodeid] += float(case.get("time") or 0)
    return dict(times)


def _from_durations(text: str) -> dict[str, float]:
    times: dict[str, float] = collections.defaultdict(float)
    for line in text.splitlines():
        m = _DURATION_LINE.match(line.strip())
        if m:
            times[m.group(3).strip()] += float(m.group(1))
    return dict(times)


def read_times(path: pathlib.Path) -> dict[str, float]:
    """Seconds per test node id (setup + call + teardown)."""
    head = path.read_bytes()[:200].lstrip()
    return _from_junit(path) if head.startswith(b"<?xml") or head.startswith(b"<testsuite") \
        else _from_durations(path.read_text(errors="replace"))


def per_file(times: dict[str, float]) -> dict[str, float]:
    files: dict[str, float] = collections.defaultdict(float)
    for nodeid, seconds in times.items():
        files[nodeid.split("::", 1)[0]] += seconds
    return dict(sorted(files.items(), key=lambda kv: -kv[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=pathlib.Path)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--write-schedule", type=pathlib.Path)
    args = ap.parse_args(argv)
    times = read_times(args.report)
    if not times:
        print(f"test_times: no test durations in {args.report}", file=sys.stderr)
        return 1
    total = sum(times.values())
    print(f"{len(times)} tests, {total:.0f} s of test time (both workers' together)")
    print(f"\nThe {args.top} slowest tests (setup + call + teardown):")
    for nodeid, seconds in sorted(times.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{seconds:8.1f} s  {nodeid}")
    files = per_file(times)
    print("\nFiles, slowest first:")
    for name, seconds in files.items():
        print(f"{seconds:8.1f} s  {name}")
    if args.write_schedule:
        args.write_schedule.write_text(json.dumps({k: round(v, 1) for k, v in files.items()},
                                                  indent=1) + "\n")
        print(f"\nwrote {args.write_schedule}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
