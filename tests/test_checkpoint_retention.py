"""Retention (issue 4, acceptance): after 50 batches with minBatchesToRetain=5 every store
directory holds only what the last 5 versions need, and each of those versions loads in a
fresh JVM with the right content.

What a store must hold is computed here from its files (`checkpoint_queries.retention_report`):
the newest manifest at or below `latest - 4` (the base), every manifest and changelog after
it, the changelogs of the last 5 versions (the base's own too), and exactly the SSTs those
manifests reference (read with `ttlstate.manifest.read`).
The test counts the files against that set. Two runs: the default `changelog` mode on
`file:` (snapshots come from maintenance every 3 changelogs, so the base is whatever
maintenance wrote) and `snapshot` mode on the test FileSystem `faulty:` (every commit writes
a manifest: the base is version 46 exactly). Both run at once in one subprocess JVM with a 1 s
maintenance interval; after each run the test waits until maintenance (which Spark also runs
once more when it unloads a stopped query's stores) has converged.

The loads run in a second subprocess (a new JVM, new store service, an empty local cache
directory per read): Spark's `statestore` data source reads the aggregation state of
batches 45..49 (versions 46..50) through the provider, compared with the state computed in
plain Python from the input.
"""

from __future__ import annotations

import pytest

import checkpoint_queries as cq

pytestmark = pytest.mark.slow

N_BATCHES = 50
RETAIN = 5
BATCHES = cq.agg_batches(N_BATCHES, 30, 400, seed=50)

# name -> (checkpoint.mode, scheme of the checkpoint)
CASES = {"changelog_on_file": ("changelog", "file"),
         "snapshot_on_faulty": ("snapshot", "faulty")}


@pytest.fixture(scope="module")
def retention_runs(testfs_jar, tmp_path_factory):
    root = tmp_path_factory.mktemp("retention")
    inputs = root / "in"
    cq.write_batches(inputs, BATCHES)
    runs, reads = [], []
    for name, (mode, scheme) in CASES.items():
        ck_local = root / name / "ck"
        ck = cq.faulty(ck_local) if scheme == "faulty" else str(ck_local)
        runs.append(dict(do="run", name=name, query="sum_by_key", inputs=[str(inputs)],
                         checkpoint=ck, timeout_s=900,
                         confs={cq.MODE: mode, cq.CACHE_DIR: str(root / name / "cache"),
                                cq.MIN_BATCHES: str(RETAIN), cq.MIN_DELTAS: "3",
                                # every stale version goes at once (Spark's default 0.3 would keep
                                # up to round(0.3 x 5) = 2 stale ones: test_maintenance_limits.py)
                                cq.RATIO_EXTRA_SPACE: "0"},
                         count={"store": cq.STORE_FILES_REGEX}, reset_fs=False,
                         settle={"min_batches": RETAIN, "timeout_s": 120}))
        reads.append(dict(do="read_state", checkpoint=ck, cache_root=str(root / name / "reads"),
                          batch_ids=list(range(N_BATCHES - RETAIN, N_BATCHES))))
    # the two runs are independent (own checkpoints, inputs only read): they run at once in
    # the JVM, which fills both cores while each query's driver works on its next batch (the
    # test FileSystem's counters are not reset: the JVM is new, and only the `faulty:` run's
    # store files go through it)
    written = cq.run_subprocess({"tag": "retention-write",
                                 "steps": [dict(do="parallel", steps=runs)],
                                 "session_confs": {cq.MAINTENANCE_INTERVAL: "1s"}},
                                root / "work", timeout_s=2400)
    steps = cq.check_steps(written)[0]["results"]
    # the checkpoints as the writing JVM left them, before anything else touches them
    reports = {name: cq.retention_reports(r["checkpoint"], RETAIN)
               for name, r in zip(CASES, steps)}
    loaded = cq.check_steps(cq.run_subprocess({"tag": "retention-load", "steps": reads},
                                              root / "work", timeout_s=900))
    return {name: (cq.Run(steps[i]), reports[name], loaded[i], root / name)
            for i, name in enumerate(CASES)}


@pytest.mark.parametrize("case", list(CASES))
def test_retention_keeps_only_what_the_last_versions_need(retention_runs, case):
    run, reports, _, _ = retention_runs[case]
    run.check()
    assert run.batch_ids() == list(range(N_BATCHES)), run.batch_ids()
    assert reports, f"{case}: no store directories under {run.checkpoint}"
    assert len(reports) == 4, f"{case}: stores {sorted(reports)}"  # 4 shuffle partitions
    assert run.settle["converged"], (
        f"{case}: the store directories never held exactly what the last {RETAIN} "
        f"versions need (waited after the run):\n{run.settle['summary']}")
    bad = {k: r for k, r in reports.items() if not r["ok"]}
    assert not bad, f"{case}:\n{cq.short_report(bad)}"
    mode = CASES[case][0]
    for store, r in reports.items():
        # the files counted against the expected set
        assert len(r["actual"]) == len(r["expected"]), (store, r["actual"], r["expected"])
        assert r["latest"] == N_BATCHES, (store, r["latest"])
        assert r["base"] > 0, (f"{case}: store {store} has no manifest at or below "
                               f"version {N_BATCHES - RETAIN + 1}: no snapshot was ever "
                               f"retained\n{cq.short_report({store: r})}")
        if mode == "snapshot":
            assert r["base"] == N_BATCHES - RETAIN + 1, cq.short_report({store: r})
            assert r["manifests"] == list(range(N_BATCHES - RETAIN + 1, N_BATCHES + 1)), r
            assert r["changelogs"] == [], r
        else:
            # every version after the base, and each retained version's own
            # (docs/decisions/094-state-rules-audit.md g)
            first = min(r["base"] + 1, N_BATCHES - RETAIN + 1)
            assert r["changelogs"] == list(range(first, N_BATCHES + 1)), r
            assert all(m >= r["base"] for m in r["manifests"]), r
        assert r["ssts"], f"{case}: store {store} holds no SST"
    if CASES[case][1] == "faulty":
        assert run.fs["store"]["deletes"] > 0, run.fs  # retention deleted through the FS


@pytest.mark.parametrize("case", list(CASES))
def test_retained_versions_load_in_a_fresh_jvm(retention_runs, case):
    run, _, loaded, _ = retention_runs[case]
    run.check()
    _, states = cq.model_sum_by_key(BATCHES)
    assert not loaded["errors"], f"{case}: loads failed: {loaded['errors']}"
    for b in range(N_BATCHES - RETAIN, N_BATCHES):
        rows = loaded["rows"].get(str(b))
        assert rows is not None, f"{case}: batch {b} was not read"
        got = {}
        for key, value, _partition in rows:
            assert key[0] not in got, f"{case}: key {key} twice in version {b + 1}"
            got[key[0]] = tuple(value)
        want = states[b]
        if got != want:
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            raise AssertionError(
                f"{case}: version {b + 1} (batch {b}) loaded {len(got)} keys, expected "
                f"{len(want)}; differing keys (first 10): "
                f"{[(k, got.get(k), want.get(k)) for k in diff[:10]]}")
