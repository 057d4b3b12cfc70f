"""Spark's limits on one cleanup pass hold for ttlstate (issue 16, item 3), as they do for
Spark's own RocksDB provider on the same input and confs:
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

The same steps run on Spark's RocksDB provider in its default snapshot-only mode (changelog
checkpointing off): its commit uploads a snapshot `<v>.zip` of every version (plus shared
SSTs under `SSTs/`), so a version is present exactly when its `.zip` is, and its cleanup
(`RocksDBFileManager.deleteOldVersions`) counts from the newest snapshot, which here is the
newest version. Measured: after the first run both providers hold versions 1..10 in every
store, and after the pass RocksDB keeps exactly the versions ttlstate keeps, store by store,
in all three cases (the sets above), so the test asserts equality, not a relation. With
changelog checkpointing on (measured once, not part of the test), RocksDB writes only
`<v>.changelog` files in the first run (maintenance never runs), and the one pass of the
second run uploads `11.zip` and deletes nothing in all three cases: its cleanup keeps
everything after the newest snapshot at or below `newest snapshot - minBatchesToRetain + 1`,
and there is none, so limits have nothing to act on there
(docs/decisions/057-cleanup-pass-limits.md). Rows are equal across the two
providers and the model, and RocksDB's last version loads through the state reader too.
"""

from __future__ import annotations

import re

import pytest

import checkpoint_queries as cq
from streaming import METRIC_PREFIX, SPARK_ROCKSDB, TTLSTATE

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
# name -> provider class; RocksDB in Spark's default snapshot-only mode (a `<v>.zip` per version)
PROVIDERS = {"ttlstate": TTLSTATE, "rocksdb": SPARK_ROCKSDB}
# a RocksDB store's version files: `<v>.zip` / `<v>.changelog`, with a unique id in format v2
ROCKSDB_VERSION_FILE = re.compile(r"^(\d+)(?:_[0-9A-Za-z-]+)?\.(zip|changelog)$")


def _versions(files: dict[str, int], provider: str = "ttlstate") -> set[int]:
    names = [f for f in files if not cq.is_crc(f)]
    if provider == "rocksdb":
        return {int(m.group(1)) for m in map(ROCKSDB_VERSION_FILE.match, names) if m}
    manifests, changelogs = cq.versions_v1(names)
    return set(manifests) | set(changelogs)


def _by_name(runs) -> dict[str, dict]:
    return {r["name"]: r for r in runs if r.get("name")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import pyspark
    if tuple(int(x) for x in pyspark.__version__.split(".")[:2]) < (4, 1):
        pytest.skip("maxVersionsToDeletePerMaintenance and unloadOnCommit came with Spark 4.1")
    root = tmp_path_factory.mktemp("maintenance-limits")
    inputs = root / "in"
    cq.write_batches(inputs, BATCHES, 0, FIRST)
    steps = []
    # The first run is the same for every case (input, confs, provider): it runs once per
    # provider, and the other cases start from copies of its checkpoint (the provider's local
    # files are kept per checkpoint location, so each copy is a checkpoint of its own); each
    # copy's store files are listed, so every case's checkpoint is checked to hold every
    # version before its pass. Saves 4 of the 6 ten-batch runs.
    first_case, *copied = list(CASES)
    for prov, cls in PROVIDERS.items():
        src = root / prov / first_case / "ck"
        steps.append(dict(do="run", name=f"{prov}_{first_case}_1", query="sum_by_key",
                          provider=cls, inputs=[str(inputs)], checkpoint=str(src),
                          confs=KEEP_ALL))
        for name in copied:
            dst = root / prov / name / "ck"
            steps.append(dict(do="copytree", src=str(src), dst=str(dst)))
            steps.append(dict(do="list_stores", checkpoint=str(dst), copy_of=f"{prov}_{first_case}_1",
                              name=f"{prov}_{name}_1"))
    steps.append(dict(do="write_batches", dir=str(inputs), batches=BATCHES,
                      start=FIRST, stop=FIRST + MORE))
    for prov, cls in PROVIDERS.items():
        for name, confs in CASES.items():
            steps.append(dict(do="run", name=f"{prov}_{name}_2", query="sum_by_key", provider=cls,
                              inputs=[str(inputs)], checkpoint=str(root / prov / name / "ck"),
                              confs={**KEEP_ALL, cq.MIN_BATCHES: "2",
                                     "spark.sql.streaming.stateStore.unloadOnCommit": "true",
                                     **confs}))
    for prov in PROVIDERS:
        for name in CASES:
            steps.append(dict(do="read_state", checkpoint=str(root / prov / name / "ck"),
                              cache_root=str(root / prov / name / "reads"),
                              batch_ids=[FIRST + MORE - 1], name=f"{prov}_{name}_read"))
    result = cq.run_subprocess({"tag": "maintenance-limits", "steps": steps,
                                "session_confs": {cq.MAINTENANCE_INTERVAL: "10min"}},
                               root / "work", timeout_s=1800)
    steps_out = cq.check_steps(result)
    by = _by_name(steps_out)
    for step, out in zip(steps, steps_out):  # read_state results carry no name of their own
        if step["do"] == "read_state":
            out["name"] = step["name"]
        elif step["do"] == "list_stores":  # a copied checkpoint: the first run, its own files
            out.update({**by[step["copy_of"]], "name": step["name"],
                        "checkpoint": step["checkpoint"], "store_files": out["store_files"]})
    return steps_out


@pytest.mark.parametrize("prov", list(PROVIDERS))
def test_each_run_gives_the_model_output(runs, prov):
    rows, _ = cq.model_sum_by_key(BATCHES)
    by = _by_name(runs)
    for name in CASES:
        first, second = cq.Run(by[f"{prov}_{name}_1"]).check(), cq.Run(by[f"{prov}_{name}_2"]).check()
        got = cq.merged_rows(first, second)
        assert got == {b: [tuple(r) for r in rows[b]] for b in range(FIRST + MORE)}, first.name


@pytest.mark.parametrize("prov", list(PROVIDERS))
def test_each_run_is_served_by_its_provider(runs, prov):
    by = _by_name(runs)
    for name in CASES:
        for n in (1, 2):
            metrics = cq.Run(by[f"{prov}_{name}_{n}"]).check().metric_names()
            for other, prefix in METRIC_PREFIX.items():
                served = any(m.startswith(prefix) for m in metrics)
                assert served == (other == PROVIDERS[prov]), (prov, name, n, other, sorted(metrics))


def test_rows_equal_across_providers(runs):
    by = _by_name(runs)
    for name in CASES:
        ttl, rdb = ([cq.Run(by[f"{p}_{name}_{n}"]).check() for n in (1, 2)] for p in PROVIDERS)
        got_ttl, got_rdb = cq.merged_rows(*ttl), cq.merged_rows(*rdb)
        assert sum(len(r) for r in got_ttl.values()) > 100, name
        assert got_ttl == got_rdb, name


@pytest.mark.parametrize("prov", list(PROVIDERS))
def test_the_first_run_keeps_every_version(runs, prov):
    by = _by_name(runs)
    for name in CASES:
        stores = by[f"{prov}_{name}_1"]["store_files"]
        assert stores, (prov, name, "no store directories")
        for store, files in stores.items():
            assert _versions(files, prov) == set(range(1, FIRST + 1)), (prov, name, store, sorted(files))


@pytest.mark.parametrize("prov", list(PROVIDERS))
@pytest.mark.parametrize("case", list(CASES))
def test_one_pass_deletes_what_the_limits_allow(runs, case, prov):
    second = _by_name(runs)[f"{prov}_{case}_2"]
    stores = second["store_files"]
    assert stores, "no store directories"
    for store, files in stores.items():
        assert _versions(files, prov) == EXPECTED_VERSIONS[case], (prov, case, store, sorted(files))


@pytest.mark.parametrize("case", list(CASES))
def test_the_pass_keeps_the_versions_rocksdb_keeps(runs, case):
    by = _by_name(runs)
    ttl = {s: _versions(f, "ttlstate") for s, f in by[f"ttlstate_{case}_2"]["store_files"].items()}
    rdb = {s: _versions(f, "rocksdb") for s, f in by[f"rocksdb_{case}_2"]["store_files"].items()}
    assert ttl and ttl == rdb, (case, ttl, rdb)


@pytest.mark.parametrize("prov", list(PROVIDERS))
def test_the_last_version_loads_after_each_pass(runs, prov):
    _, states = cq.model_sum_by_key(BATCHES)
    by = _by_name(runs)
    for name in CASES:
        read = by[f"{prov}_{name}_read"]
        assert not read["errors"], (prov, name, read["errors"])
        rows = read["rows"][str(FIRST + MORE - 1)]
        assert {key[0]: tuple(value) for key, value, _part in rows} == states[FIRST + MORE - 1]
