"""Checkpoint format v2 (`spark.sql.streaming.stateStore.checkpointFormatVersion=2`, issue
4): the stop/restart equivalence test of `test_e2e_restart.py`, with the candidate's runs
at format v2. The first half runs, the rest of the files are added, a new query resumes
from the checkpoint (Spark then loads each store at the `(version, uniqueId)` its commit log
names); the joined output must equal an uninterrupted v2 run of the candidate and an
uninterrupted run of the HDFS provider (format v1: HDFS refuses v2), for an aggregation,
dropDuplicates and a stream-stream join. For ttlstate, every store directory must hold
only v2 names (`<v>_<id>_<baseId>.changelog`, `<v>_<id>.manifest`, PROTOCOL.md).

`TTLSTATE_E2E_CANDIDATE=rocksdb` runs the same cases with Spark's RocksDB provider (which
supports v2), a check of the test itself.
"""

from __future__ import annotations

import pytest

import checkpoint_queries as cq
import streaming as st
import test_e2e_restart as er

pytestmark = pytest.mark.slow

V2_CASES = ["aggregation_update", "drop_duplicates", "inner_join"]


class V2RestartCase(er.RestartCase):
    """`RestartCase` whose candidate runs use checkpoint format v2 (HDFS stays at v1)."""

    def _v2(self, tag: str) -> dict:
        return {cq.FORMAT_VERSION: "2", cq.CACHE_DIR: str(self.root / f"cache-{tag}")}

    def first_runs(self) -> list[dict]:
        whole, hdfs, first = super().first_runs()
        return [dict(whole, confs=self._v2("whole")), hdfs, dict(first, confs=self._v2("restart"))]

    def second_run(self) -> dict:
        return dict(super().second_run(), confs=self._v2("restart"))

    def check_v2_names(self):
        """Every state file of the candidate's checkpoints has a v2 name (ttlstate only)."""
        for ck in ("ck-whole", "ck-restart"):
            operators = sorted(p.name for p in (self.root / ck / "state").iterdir()
                               if p.name.isdigit())
            assert operators, f"{self.name}: no state in {ck}"
            for op in operators:
                stores = cq.store_dirs(self.root / ck, int(op))
                assert stores, f"{self.name}: no store directories in {ck}/state/{op}"
                for store, d in stores.items():
                    files = [f for f in cq.list_files(d) if not cq.is_crc(f)]
                    v1 = [f for f in files if cq.V1_FILE.match(f)]
                    v2 = [f for f in files if cq.V2_MANIFEST.match(f) or cq.V2_CHANGELOG.match(f)]
                    other = [f for f in files if f not in v1 and f not in v2
                             and not f.startswith("sst/")]
                    assert not v1 and not other, (
                        f"{self.name}: {ck} store {op}/{store} holds non-v2 names "
                        f"{v1 + other} (all: {sorted(files)})")
                    assert v2, f"{self.name}: {ck} store {op}/{store} holds no v2 file: {files}"


def _skip_unless_v2(candidate):
    if candidate == st.HDFS:
        pytest.skip("HDFSBackedStateStoreProvider refuses checkpointFormatVersion 2 "
                    "(STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED): nothing to check")


@pytest.fixture(scope="module")
def v2_outcomes(request, _session_holder, candidate, tmp_path_factory):
    names = [item.callspec.params["case"] for item in request.session.items
             if item.module is request.module and item.originalname == "test_v2_restart"]
    if candidate == st.HDFS or not names:
        return {}
    cases = [V2RestartCase(n, tmp_path_factory.mktemp(f"v2-{n}"), candidate) for n in names]
    return er.run_restart_cases(_session_holder.get(), cases)


@pytest.mark.parametrize("case", V2_CASES)
def test_v2_restart(v2_outcomes, candidate, case):
    _skip_unless_v2(candidate)
    c, whole, hdfs, first, second = v2_outcomes[case]
    c.check(whole, hdfs, first, second)
    if candidate == st.TTLSTATE:
        c.check_v2_names()


def test_v2_restart_in_fresh_spark_session(spark, restart_spark, candidate, tmp_path):
    """spark.stop() between the halves of a v2 join: new provider instances (and a new
    store service) load the lineage the commit log names."""
    _skip_unless_v2(candidate)
    c = V2RestartCase("inner_join", tmp_path, candidate)
    whole, hdfs, first = st.run_many(spark, c.first_runs())
    c.add_rest()
    fresh = restart_spark()
    second = st.run_query(fresh, **c.second_run())
    c.check(whole, hdfs, first, second)
    if candidate == st.TTLSTATE:
        c.check_v2_names()
