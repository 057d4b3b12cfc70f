"""Stopping a query halfway and restarting it from its checkpoint gives the same rows.

For each operator: the candidate provider runs the first half of the input files
(Trigger.AvailableNow ends by itself), the rest of the files are added, and a new query
resumes from the same checkpoint. Its sink output, joined with the first run's, must equal
an uninterrupted candidate run on all files and an uninterrupted HDFS run. A foreachBatch
sink is used: Spark refuses to resume a memory sink in append/update mode.

Each case also checks on the data that the second half really depends on the state of
the first (otherwise a provider that lost its state on restart could pass).

Out-of-order rows here are at most 50 s late, never behind a watermark. Rows that are
behind the watermark of one run and not of the other make Spark itself give different
rows: the first run ends with a no-data batch that advances the watermark, which a
single run does not have at that point (seen with HDFS and Spark's RocksDB provider).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

import streaming as st
from streaming import HDFS

pytestmark = pytest.mark.slow

N_FILES = 6
HALF = N_FILES // 2


def _events():
    return [st.generate_events(N_FILES, 48, n_keys=10, seed=31, late_by_s=(1, 50))]


def _join_events():
    return [st.generate_events(N_FILES, 20, n_keys=4, seed=41, active_fraction=0.8,
                               late_by_s=(1, 50)),
            st.generate_events(N_FILES, 20, n_keys=4, seed=42, active_fraction=0.8,
                               late_by_s=(1, 50))]


def _ts(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S")


def _events_in(files, lo, hi):
    return [(r["key"], r["value"], _ts(r["ts"])) for f in files[lo:hi] for r in f]


# --- "the second run needs the first run's state", per operator, from data and output ---

def _agg_needs_state(files, second_rows):
    """A (key, bucket) row of the second run counts more events than the second half has."""
    later = Counter((k, v % 3) for k, v, _ in _events_in(files[0], HALF, N_FILES))
    assert any(n > later[(key, bucket)] for key, bucket, n, *_ in second_rows), \
        "no aggregate of the second run includes events of the first half"


def _dedup_needs_state(files, second_rows):
    """Pairs of the first half come again in the second half, and are not emitted again."""
    first = {(k, v) for k, v, _ in _events_in(files[0], 0, HALF)}
    again = first & {(k, v) for k, v, _ in _events_in(files[0], HALF, N_FILES)}
    assert again, "no (key, value) of the first half repeats in the second half"
    assert not again & {(r[0], r[1]) for r in second_rows}


def _join_needs_state(files, second_rows):
    """A joined pair whose left row exists only in the first half, its right only after."""
    left_early = set(_events_in(files[0], 0, HALF)) - set(_events_in(files[0], HALF, N_FILES))
    right_late = set(_events_in(files[1], HALF, N_FILES)) - set(_events_in(files[1], 0, HALF))
    assert any((r[0], r[1], r[2]) in left_early and (r[3], r[4], r[5]) in right_late
               for r in second_rows), "no join result pairs a pre-restart row with a later one"


def _session_needs_state(files, second_rows):
    """A session emitted after the restart holds events of both halves."""
    early = _events_in(files[0], 0, HALF)
    late = _events_in(files[0], HALF, N_FILES)

    def covers(events, key, start, end):
        return any(k == key and start <= ts < end for k, _, ts in events)

    assert any(covers(early, key, s, e) and covers(late, key, s, e)
               for (s, e), key, *_ in second_rows), "no session spans the restart"


CASES = {
    "aggregation_update": (st.agg_by_key_bucket, "update", _events, _agg_needs_state, 80),
    "drop_duplicates": (st.dedup, "append", _events, _dedup_needs_state, 40),
    "inner_join": (st.inner_join, "append", _join_events, _join_needs_state, 100),
    "session_window": (st.session_agg, "append", _events, _session_needs_state, 40),
}

# The cases of the smoke subset `make test-matrix` runs on every Spark line.
MATRIX_CASES = ("aggregation_update", "inner_join")


class RestartCase:
    """Inputs, checkpoints and runs of one case."""

    def __init__(self, name, root, candidate, write=True):
        """`write=False`: the inputs are already under `root` (a case written earlier, e.g.
        by another Spark line: tests/test_spark_upgrade.py)."""
        self.name, self.candidate = name, candidate
        self.build_df, self.mode, make_files, self.needs_state, self.min_rows = CASES[name]
        self.file_sets = make_files()
        self.root = root
        self.full = self._write("full", N_FILES, write)
        self.part = self._write("part", HALF, write)
        self.common = dict(build_df=self.build_df, output_mode=self.mode, sink="foreach_batch")

    def _write(self, tag, stop, write=True):
        dirs = []
        for i, files in enumerate(self.file_sets):
            d = self.root / f"{tag}-{i}"
            if write:
                st.write_files(d, files, 0, stop)
            dirs.append(d)
        return dirs

    def first_runs(self) -> list[dict]:
        """Uninterrupted candidate, uninterrupted HDFS, first half of the candidate."""
        return [
            dict(provider=self.candidate, input_dir=self.full,
                 checkpoint_dir=self.root / "ck-whole", **self.common),
            dict(provider=HDFS, input_dir=self.full,
                 checkpoint_dir=self.root / "ck-hdfs", **self.common),
            dict(provider=self.candidate, input_dir=self.part,
                 checkpoint_dir=self.root / "ck-restart", **self.common)]

    def add_rest(self):
        for files, d in zip(self.file_sets, self.part):
            st.write_files(d, files, HALF, N_FILES)

    def second_run(self) -> dict:
        return dict(provider=self.candidate, input_dir=self.part,
                    checkpoint_dir=self.root / "ck-restart", **self.common)

    def check(self, whole, hdfs, first, second):
        for r in (whole, hdfs, first, second):
            if isinstance(r, BaseException):
                raise r
        st.assert_provider_served(whole, self.candidate)
        st.assert_provider_served(hdfs, HDFS)
        st.assert_provider_served(first, self.candidate)
        st.assert_provider_served(second, self.candidate)
        fs = self.file_sets
        assert sum(first.input_rows_per_batch().values()) == \
            sum(len(f) for files in fs for f in files[:HALF]), "the first run did not read half"
        assert min(second.batches) > max(first.batches), "the second run did not resume"
        assert sum(second.input_rows_per_batch().values()) == \
            sum(len(f) for files in fs for f in files[HALF:]), "the second run did not read the rest"
        # The two uninterrupted runs agree batch by batch.
        assert whole.batches == hdfs.batches, "uninterrupted: candidate and HDFS batches differ"
        resumed = st.merge_runs(first, second)
        st.assert_same_rows(whole, resumed, self.min_rows,
                            what=f"{self.name}: restarted vs uninterrupted")
        st.assert_same_rows(hdfs, resumed, self.min_rows, what=f"{self.name}: restarted vs HDFS")
        self.needs_state(fs, [r for b in sorted(second.batches) for r in second.batches[b]])


@pytest.fixture(scope="module")
def restart_outcomes(request, _session_holder, candidate, tmp_path_factory):
    """All selected cases of test_restart_from_checkpoint, run together (several at a time)."""
    names = []
    for item in request.session.items:
        if item.module is request.module and item.originalname == "test_restart_from_checkpoint":
            names.append(item.callspec.params["case"])
    cases = [RestartCase(n, tmp_path_factory.mktemp(f"restart-{n}"), candidate) for n in names]
    return run_restart_cases(_session_holder.get(), cases)


def run_restart_cases(spark, cases) -> dict:
    """Runs every case's first runs, adds the rest of its input, runs its second run;
    returns {name: (case, first runs..., second run)} (several cases at a time)."""
    firsts = st.run_many(spark, [kw for c in cases for kw in c.first_runs()], max_parallel=6)
    for c in cases:
        c.add_rest()
    seconds = st.run_many(spark, [c.second_run() for c in cases], max_parallel=6)
    return {c.name: (c, *firsts[3 * i:3 * i + 3], seconds[i]) for i, c in enumerate(cases)}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.matrix) if c in MATRIX_CASES
                                  else c for c in CASES])
def test_restart_from_checkpoint(restart_outcomes, case):
    c, whole, hdfs, first, second = restart_outcomes[case]
    c.check(whole, hdfs, first, second)


@pytest.mark.parametrize("case", ["inner_join"])
def test_restart_in_fresh_spark_session(spark, restart_spark, candidate, tmp_path, case):
    """spark.stop() between the halves: a new SparkContext/SparkEnv and new provider
    instances (and, for ttlstate, a new store service) load the state from the checkpoint."""
    c = RestartCase(case, tmp_path, candidate)
    whole, hdfs, first = st.run_many(spark, c.first_runs())
    c.add_rest()
    fresh = restart_spark()
    assert fresh is not spark and fresh.sparkContext is not spark.sparkContext
    second = st.run_query(fresh, **c.second_run())
    c.check(whole, hdfs, first, second)
