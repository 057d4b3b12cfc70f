"""Upgrading Spark under a running query: a checkpoint ttlstate wrote on Spark 4.0, 4.1 or 4.2
continues on 4.3 with the output of a run that never changed line (issue 19,
docs/decisions/055-one-package-for-spark-4-0-to-4-3.md).

Two halves, in two processes on two Spark lines, meeting in `TTLSTATE_UPGRADE_DIR`
(`make test-matrix` sets it and runs both):

- `test_write_a_checkpoint_for_the_next_line` runs on an earlier line (in the matrix's venv of
  that line): for each case of tests/test_e2e_restart.py (aggregation, dropDuplicates,
  stream-stream join, session window) ttlstate runs the first half of the input files into a
  checkpoint under `$TTLSTATE_UPGRADE_DIR/spark-<line>/work/<case>`; a pristine copy of
  `work/` goes to `written/`, the first run's sink rows to `first-runs.pickle`, and
  `written.json` (last) says the line is complete.
- `test_continue_a_checkpoint_of_an_earlier_line` runs on 4.3: for each earlier line found,
  `work/` is restored from `written/` (same paths: the file source's log names its files by
  path), the rest of the input is added and ttlstate on 4.3 resumes from the checkpoint. The
  first run's rows plus the resumed run's must equal an uninterrupted ttlstate run and an
  uninterrupted HDFS run on 4.3, and the resumed batches must need the first half's state
  (`RestartCase.check`, the checks of the restart test).

Without `TTLSTATE_UPGRADE_DIR`, or without a line's checkpoints there, the tests skip saying
so (the normal suite stays self-contained); `TTLSTATE_UPGRADE_REQUIRE=4.0,4.1,4.2` (set by
`make test-matrix`) turns a missing line into a failure.
"""

from __future__ import annotations

import json
import os
import pathlib
import pickle
import shutil

import pytest

import streaming as st
from streaming import TTLSTATE
from test_e2e_restart import CASES, RestartCase

pytestmark = [pytest.mark.slow, pytest.mark.matrix]

NEWEST = "4.3"
EARLIER = ("4.0", "4.1", "4.2")


def spark_line() -> str:
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def upgrade_dir() -> pathlib.Path | None:
    d = os.environ.get("TTLSTATE_UPGRADE_DIR")
    return pathlib.Path(d).resolve() if d else None


def required_lines() -> set[str]:
    return {x.strip() for x in os.environ.get("TTLSTATE_UPGRADE_REQUIRE", "").split(",") if x.strip()}


@pytest.fixture(autouse=True)
def _ttlstate_only(candidate):
    if candidate != TTLSTATE:
        pytest.skip("continues checkpoints written by ttlstate")


def test_write_a_checkpoint_for_the_next_line(_session_holder, candidate):
    root = upgrade_dir()
    if root is None:
        pytest.skip("TTLSTATE_UPGRADE_DIR is not set (make test-matrix sets it)")
    line = spark_line()
    if line not in EARLIER:
        pytest.skip(f"Spark {line} is the newest line: checkpoints of earlier lines are "
                    "continued here, not written")
    base = root / f"spark-{line}"
    shutil.rmtree(base, ignore_errors=True)
    cases = [RestartCase(name, base / "work" / name, candidate) for name in CASES]
    firsts = st.run_many(_session_holder.get(), [c.first_runs()[2] for c in cases])
    for c, r in zip(cases, firsts):
        if isinstance(r, BaseException):
            raise r
        st.assert_provider_served(r, candidate)
        assert r.batches, f"{c.name}: the first half produced no batch"
    shutil.copytree(base / "work", base / "written")
    with open(base / "first-runs.pickle", "wb") as f:
        pickle.dump({c.name: r for c, r in zip(cases, firsts)}, f)
    import pyspark
    (base / "written.json").write_text(json.dumps(
        {"spark": pyspark.__version__, "cases": list(CASES)}))


def _available(root: pathlib.Path | None, line: str) -> dict | None:
    if root is None:
        return None
    marker = root / f"spark-{line}" / "written.json"
    return json.loads(marker.read_text()) if marker.exists() else None


@pytest.fixture(scope="module")
def upgrade_outcomes(request, _session_holder, candidate, tmp_path_factory):
    """{(line, case): (case, whole, hdfs, first, second)} for every selected pair whose line
    left checkpoints; the uninterrupted runs are shared by the lines (same input)."""
    if spark_line() != NEWEST:
        return {}
    root = upgrade_dir()
    pairs = []
    for item in request.session.items:
        if item.module is request.module and hasattr(item, "callspec"):
            line, case = item.callspec.params["line"], item.callspec.params["case"]
            if _available(root, line) and (line, case) not in pairs:
                pairs.append((line, case))
    if not pairs:
        return {}
    firsts: dict[str, dict] = {}
    for line in sorted({line for line, _ in pairs}):
        base = root / f"spark-{line}"
        shutil.rmtree(base / "work", ignore_errors=True)
        shutil.copytree(base / "written", base / "work")
        with open(base / "first-runs.pickle", "rb") as f:
            firsts[line] = pickle.load(f)
    names = sorted({case for _, case in pairs}, key=list(CASES).index)
    refs = [RestartCase(n, tmp_path_factory.mktemp(f"upgrade-ref-{n}"), candidate) for n in names]
    resumed = [RestartCase(case, root / f"spark-{line}" / "work" / case, candidate, write=False)
               for line, case in pairs]
    for c in resumed:
        c.add_rest()
    spark = _session_holder.get()
    whole_hdfs = st.run_many(spark, [kw for r in refs for kw in r.first_runs()[:2]])
    seconds = st.run_many(spark, [c.second_run() for c in resumed])
    ref_of = {n: (whole_hdfs[2 * i], whole_hdfs[2 * i + 1]) for i, n in enumerate(names)}
    return {(line, case): (c, *ref_of[case], firsts[line][case], second)
            for (line, case), c, second in zip(pairs, resumed, seconds)}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("line", EARLIER)
def test_continue_a_checkpoint_of_an_earlier_line(upgrade_outcomes, line, case):
    if spark_line() != NEWEST:
        pytest.skip(f"continues on Spark {NEWEST}; this is {spark_line()}")
    root = upgrade_dir()
    written = _available(root, line)
    if written is None:
        why = ("TTLSTATE_UPGRADE_DIR is not set" if root is None
               else f"{root} holds no checkpoint written on Spark {line}")
        if line in required_lines():
            pytest.fail(f"{why}, but TTLSTATE_UPGRADE_REQUIRE names {line}: the matrix run on "
                        f"Spark {line} did not write its checkpoints", pytrace=False)
        pytest.skip(f"{why} (make test-matrix writes them on Spark {line} and runs this test)")
    assert written["spark"].startswith(line + ".")
    c, whole, hdfs, first, second = upgrade_outcomes[(line, case)]
    c.check(whole, hdfs, first, second)
