"""Spark's limits on one cleanup pass hold for ttlstate (issue 16, item 3):
`spark.sql.streaming.stateStore.maxVersionsToDeletePerMaintenance` (4.1+) and
`minVersionsToDelete` (`minBatchesToRetain` x `spark.sql.streaming.ratioExtraSpaceAllowedInCheckpoint`).

A cleanup pass runs at a time Spark chooses, so the test makes passes countable: a first run
keeps every version (`minBatchesToRetain=100`, maintenance every 10 minutes: no pass deletes
anything), then one more batch runs with `stateStore.unloadOnCommit=true` (Spark runs
maintenance synchronously once per store after the commit and unloads the store) and
`minBatchesToRetain=2`. So each store gets exactly one pass with versions 1..11 present and
versions 1..9 stale (snapshot mode: every version is a manifest of its own):
- no limits: versions 1..9 go, 10 and 11 stay;
- `maxVersionsToDeletePerMaintenance=1`: only version 1 goes;
- `minVersionsToDelete=10` (ratio 5.0): 9 stale versions are too few, nothing goes.
Every run's output equals the model of the aggregation, and the last version of every
checkpoint loads through Spark's state reader in a fresh provider.
"""

from __future__ import annotations

import pytest

import checkpoint_queries as cq

pytestmark = pytest.mark.slow

FIRST, MORE = 10, 1
BATCHES = cq.agg_batches(FIRST + MORE, 40, 200, seed=16)
KEEP_ALL = {cq.MODE: "snapshot", cq.MIN_BATCHES: "100"}
CASES = {  # name -> confs of the second run
    "unlimited": {},
    "max_one": {"spark.sql.streaming.stateStore.maxVersionsToDeletePerMaintenance": "1"},
    "min_ten": {cq.RATIO_EXTRA_SPACE: "5.0"},
}
EXPECTED_VERSIONS = {"unlimited": {10, 11}, "max_one": set(range(2, 12)), "min_ten": set(range(1, 12))}


def _versions(files: dict[str, int]) -> set[int]:
    manifests, changelogs = cq.versions_v1(f for f in files if not cq.is_crc(f))
    return set(manifests) | set(changelogs)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import pyspark
    if tuple(int(x) for x in pyspark.__version__.split(".")[:2]) < (4, 1):
        pytest.skip("maxVersionsToDeletePerMaintenance and unloadOnCommit came with Spark 4.1")
    root = tmp_path_factory.mktemp("maintenance-limits")
    inputs = root / "in"
    cq.write_batches(inputs, BATCHES, 0, FIRST)
    steps = []
    for name in CASES:
        steps.append(dict(do="run", name=f"{name}_1", query="sum_by_key", inputs=[str(inputs)],
                          checkpoint=str(root / name / "ck"), confs=KEEP_ALL))
    steps.append(dict(do="write_batches", dir=str(inputs), batches=BATCHES,
                      start=FIRST, stop=FIRST + MORE))
    for name, confs in CASES.items():
        steps.append(dict(do="run", name=f"{name}_2", query="sum_by_key", inputs=[str(inputs)],
                          checkpoint=str(root / name / "ck"),
                          confs={**KEEP_ALL, cq.MIN_BATCHES: "2",
                                 "spark.sql.streaming.stateStore.unloadOnCommit": "true", **confs}))
    for name in CASES:
        steps.append(dict(do="read_state", checkpoint=str(root / name / "ck"),
                          cache_root=str(root / name / "reads"), batch_ids=[FIRST + MORE - 1]))
    result = cq.run_subprocess({"tag": "maintenance-limits", "steps": steps,
                                "session_confs": {cq.MAINTENANCE_INTERVAL: "10min"}},
                               root / "work", timeout_s=1200)
    return cq.check_steps(result)


def test_each_run_gives_the_model_output(runs):
    rows, _ = cq.model_sum_by_key(BATCHES)
    for first, second in zip(runs[:3], runs[4:7]):
        first, second = cq.Run(first).check(), cq.Run(second).check()
        got = cq.merged_rows(first, second)
        assert got == {b: [tuple(r) for r in rows[b]] for b in range(FIRST + MORE)}, first.name


@pytest.mark.parametrize("case", list(CASES))
def test_one_pass_deletes_what_the_limits_allow(runs, case):
    second = next(r for r in runs if r.get("name") == f"{case}_2")
    stores = second["store_files"]
    assert stores, "no store directories"
    for store, files in stores.items():
        assert _versions(files) == EXPECTED_VERSIONS[case], (case, store, sorted(files))


def test_the_last_version_loads_after_each_pass(runs):
    _, states = cq.model_sum_by_key(BATCHES)
    for read in runs[7:]:
        assert not read["errors"], read["errors"]
        rows = read["rows"][str(FIRST + MORE - 1)]
        assert {key[0]: tuple(value) for key, value, _part in rows} == states[FIRST + MORE - 1]
