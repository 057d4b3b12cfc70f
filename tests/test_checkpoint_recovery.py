"""Local recovery and mode switches (issue 4, acceptance).

Local recovery: a query restarted on the same machine downloads nothing when its local
files are intact, in the same JVM and in a fresh one: the first batch after the restart
reports `ttlstateDownloadedBytes` 0 and `ttlstateReusedFiles` > 0 (summed over the state
operators of the batch), and the test FileSystem saw no byte read from the store
directories during the whole run. Deleting the local cache directory forces a full
download: the first batch downloads exactly the bytes of the files loading its version
needs (newest manifest at or below it, its SSTs, the changelogs after it), and the rows
still equal the exact model. (`ttlstateReusedFiles` also counts the SSTs a snapshot did not
upload, so it is not 0 in a snapshot-mode batch even with an empty cache.) Four runs on one `faulty:` checkpoint and one cache directory, four batches each:
A and B in one subprocess JVM, C in a second one, D later in the second one, once it holds
no store of the checkpoint any more and the cache is deleted (see `recovery_runs`); once in `changelog` mode
(snapshots from maintenance every 2 changelogs), once in `snapshot`.

Mode switch: `changelog` -> `snapshot` -> `changelog` across restarts of one checkpoint
(`file:`, the shared session; each run with an empty cache directory, so each restart
loads what the other mode wrote from the checkpoint) gives the model's rows, and each run
wrote the files of its mode.
"""

from __future__ import annotations

import re

import pytest

import checkpoint_queries as cq
import streaming as st

pytestmark = pytest.mark.slow

PER_RUN = 4
BATCHES = cq.agg_batches(4 * PER_RUN, 30, 150, seed=77)
MODES = ["changelog", "snapshot"]


def _span(i):
    return i * PER_RUN, (i + 1) * PER_RUN


@pytest.fixture(scope="module")
def recovery_runs(testfs_jar, tmp_path_factory):
    """Per mode: runs A, B (JVM 1), C (JVM 2), the cache deleted, D (JVM 2, after both
    modes' C: it was a third JVM, whose start cost more than the wait). The cache is
    deleted only when no JVM holds a provider of the checkpoint: a stopped query's stores
    stay loaded until maintenance unloads them, and that last maintenance may put files
    back into the cache (seen: manifests and SSTs reappeared a second after deleting it), so
    JVM 2 first waits until Spark holds no store of the checkpoint (`wait_unloaded`: none
    loaded, none waiting for its last maintenance or close, none in a maintenance pass)."""
    root = tmp_path_factory.mktemp("recovery")
    jvms: list[list[dict]] = [[], []]
    where: dict[str, dict[str, tuple[int, int]]] = {m: {} for m in MODES}

    def paths(mode: str):
        """(checkpoint, cache, inputs) of a mode's query."""
        d = root / mode
        return d / "ck", d / "cache", d / "in"

    def add(mode: str, jvm: int, name: str, step: dict):
        """Appends a named step (its result found by `where`) to a JVM's steps."""
        where[mode][name] = (jvm, len(jvms[jvm]))
        jvms[jvm].append(step)

    def add_run(mode: str, jvm: int, i: int, name: str):
        """Writes run i's batches, then runs the mode's query over them."""
        ck, cache, inputs = paths(mode)
        lo, hi = _span(i)
        jvms[jvm].append(dict(do="write_batches", dir=str(inputs), batches=BATCHES,
                              start=lo, stop=hi))
        add(mode, jvm, name, dict(
            do="run", name=f"{mode}_{name}", query="sum_by_key", inputs=[str(inputs)],
            checkpoint=cq.faulty(ck), confs={cq.MODE: mode, cq.CACHE_DIR: str(cache), cq.MIN_DELTAS: "2"},
            count={"store": re.escape(str(ck)) + cq.STORE_FILES_REGEX}))

    for mode in MODES:
        add_run(mode, 0, 0, "A")
        add_run(mode, 0, 1, "B")
        add_run(mode, 1, 2, "C")
    for mode in MODES:  # D after both C runs, in the JVM of C (see the fixture's docstring)
        ck, cache, _ = paths(mode)
        add(mode, 1, "unloaded", dict(do="wait_unloaded", checkpoint=cq.faulty(ck), timeout_s=120,
                                      after_s=1))
        add(mode, 1, "rmtree", dict(do="rmtree", path=str(cache)))
        add(mode, 1, "listing", dict(do="list_stores", checkpoint=cq.faulty(ck)))
        add_run(mode, 1, 3, "D")
    confs = {cq.MAINTENANCE_INTERVAL: "1s"}
    results = [cq.check_steps(cq.run_subprocess({"tag": f"recovery-{i + 1}", "steps": steps,
                                                 "session_confs": confs}, root / "work"))
               for i, steps in enumerate(jvms)]
    out = {}
    for mode in MODES:
        get = {name: results[j][k] for name, (j, k) in where[mode].items()}
        out[mode] = (cq.Run(get["A"]), cq.Run(get["B"]), cq.Run(get["C"]),
                     dict(get["rmtree"], listing=get["listing"]["store_files"], ck=root / mode / "ck",
                          unloaded=get["unloaded"]["unloaded"]),
                     cq.Run(get["D"]))
    return out


def _first_batch(run: cq.Run, expected: int) -> int:
    ids = run.batch_ids()
    assert ids and ids[0] == expected, f"{run.name}: batches {ids}, expected to start at {expected}"
    return ids[0]


@pytest.mark.parametrize("mode", MODES)
def test_restart_with_intact_local_files_downloads_nothing(recovery_runs, mode):
    a, b, c, _, _ = recovery_runs[mode]
    for r in (a, b, c):
        r.check()
    assert {cq.DOWNLOADED, cq.REUSED} <= a.metric_names(), sorted(a.metric_names())
    for run, start, where in ((b, PER_RUN, "same JVM"), (c, 2 * PER_RUN, "fresh JVM")):
        first = _first_batch(run, start)
        downloaded = run.metric(first, cq.DOWNLOADED)
        reused = run.metric(first, cq.REUSED)
        assert downloaded == 0, (f"{mode}, restart in the {where}: the first batch downloaded "
                                 f"{downloaded} bytes although the local files are intact")
        assert reused is not None and reused > 0, (
            f"{mode}, restart in the {where}: ttlstateReusedFiles {reused} in the first batch")
        assert run.fs["store"]["read"] == 0, (
            f"{mode}, restart in the {where}: {run.fs['store']['read']} bytes were read from "
            f"the store directories through the FileSystem ({run.fs['store']})")


@pytest.mark.parametrize("mode", MODES)
def test_deleted_local_files_are_downloaded_with_identical_results(recovery_runs, mode):
    a, b, c, removed, d = recovery_runs[mode]
    for r in (a, b, c, d):
        r.check()
    assert removed["existed"], f"{mode}: the local cache directory was never created"
    assert removed["unloaded"] is not False, (
        f"{mode}: Spark still held a store of the checkpoint when the cache was deleted")
    first = _first_batch(d, 3 * PER_RUN)
    downloaded = d.metric(first, cq.DOWNLOADED)
    assert downloaded is not None and downloaded > 0, (
        f"{mode}: with the local cache deleted the first batch downloaded {downloaded} bytes")
    # a full download: every file the load of the last version needs, as the checkpoint
    # held them when the cache was deleted (no JVM was running then)
    stores = cq.store_dirs(removed["ck"])
    plans = {n: cq.v1_load_plan(removed["listing"][n], stores[n], first)
             for n in removed["listing"]}
    needed = sum(sum(p.values()) for p in plans.values())
    assert downloaded == needed, (
        f"{mode}: the first batch downloaded {downloaded} bytes; loading version {first} of "
        f"every store needs {needed} bytes: {plans}")
    assert d.fs["store"]["read"] > 0, d.fs
    expected, _ = cq.model_sum_by_key(BATCHES)
    got = cq.merged_rows(a, b, c, d)
    assert got == expected, f"{mode}: rows differ from the model:\n{got}\n!=\n{expected}"


def test_mode_switch_across_restarts(spark, tmp_path):
    """changelog -> snapshot -> changelog on one checkpoint gives the model's rows."""
    inputs, ck = tmp_path / "in", tmp_path / "ck"
    plan = ["changelog", "snapshot", "changelog"]
    batches = BATCHES[:len(plan) * PER_RUN]
    results, layouts = [], []
    for i, mode in enumerate(plan):
        lo, hi = _span(i)
        cq.write_batches(inputs, batches, lo, hi)
        r = st.run_query(spark, st.TTLSTATE, cq.sum_by_key, "update", inputs, ck,
                         sink="foreach_batch",
                         confs={cq.MODE: mode, cq.CACHE_DIR: str(tmp_path / f"cache-{i}")})
        results.append(r)
        layouts.append({n: cq.list_files(d) for n, d in cq.store_dirs(ck).items()})
        assert sorted(r.batches) == list(range(lo, hi)), (mode, sorted(r.batches))
        if i > 0:  # a fresh cache: the restart loaded the other mode's files from the checkpoint
            downloaded = sum(op.get("customMetrics", {}).get(cq.DOWNLOADED, 0)
                             for op in r.progress[0].get("stateOperators", []))
            assert downloaded > 0, (f"run {i} ({mode}): first batch downloaded {downloaded} "
                                    "bytes with an empty cache directory")
    expected, _ = cq.model_sum_by_key(batches)
    got = dict(sorted(st.merge_runs(*results).batches.items()))
    assert got == expected, f"rows differ from the model:\n{got}\n!=\n{expected}"

    # each run wrote its mode's files: changelogs for its versions, or manifests and none
    for i, mode in enumerate(plan):
        lo, hi = _span(i)
        for store, files in layouts[i].items():
            manifests, changelogs = cq.versions_v1(files)
            for v in range(lo + 1, hi + 1):
                if mode == "changelog":
                    assert v in changelogs, (f"run {i} ({mode}), store {store}: no changelog "
                                             f"of version {v}: {sorted(files)}")
                else:
                    assert v in manifests and v not in changelogs, (
                        f"run {i} ({mode}), store {store}: version {v} should have a manifest "
                        f"and no changelog: {sorted(files)}")
