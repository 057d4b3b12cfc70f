"""Nothing on disk breaks: checkpoints an earlier ttlstate wrote (`tests/data/checkpoints/`,
made by `fixture_checkpoints.py`; `made.json` names the commit) load and continue with
today's code, and the first run's rows plus the continued run's equal an uninterrupted run
on Spark's HDFS provider. Aggregation, dropDuplicates, stream-stream join and session
window, each with and without TTL, in changelog and snapshot mode, checkpoint format v1
and v2. The fixtures stay, so every later change proves the same (issue 18).
"""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

import fixture_checkpoints as fx
import streaming as st

pytestmark = pytest.mark.slow


def _plain(rows) -> list:
    """Rows as JSON gives them back (tuples to lists, timestamps to text), in one order."""
    return sorted(json.loads(json.dumps(list(rows), default=str)), key=repr)


def _move_inputs(checkpoint: pathlib.Path, old: list[str], new: list[pathlib.Path]) -> None:
    """Point the file sources' logs at the inputs' new place (their checksums go: the local
    file system checks a log file only when its .crc exists)."""
    for log in (checkpoint / "sources").rglob("*"):
        if not log.is_file():
            continue
        if log.name.endswith(".crc"):
            log.unlink()
            continue
        text = log.read_text()
        for o, n in zip(old, new):
            text = text.replace(o, str(n))
        log.write_text(text)


@pytest.fixture(scope="module")
def uninterrupted() -> dict:
    """query -> the uninterrupted HDFS run over all six files. It depends on the query alone
    (always HDFS, "plain-changelog-v1", the same seeded input), so the four variants of a
    query compare with one run, made by the first of them side by side with its own
    continuation, instead of four identical runs."""
    return {}


@pytest.mark.parametrize("query,variant", fx.FIXTURES, ids=[fx.fixture_name(q, v) for q, v in fx.FIXTURES])
def test_a_checkpoint_of_an_earlier_version_continues(spark, tmp_path, uninterrupted, query, variant):
    src = fx.DATA / fx.fixture_name(query, variant)
    assert (src / "checkpoint").is_dir(), f"fixture {src} is missing"
    work = tmp_path / "fixture"
    shutil.copytree(src, work)
    made = json.loads((work / "made.json").read_text())
    inputs = fx.write_inputs(work, query, fx.N_FILES)  # all six files, the first three as before
    _move_inputs(work / "checkpoint", made["inputs"], inputs)
    first = {int(b): rows for b, rows in json.loads((work / "first.json").read_text()).items()}

    whole_run = None
    if query not in uninterrupted:
        build_df, mode, _ = fx.QUERIES[query]
        whole_run = st.start_query(spark, st.HDFS, build_df, mode,
                                   fx.write_inputs(tmp_path / "whole", query, fx.N_FILES),
                                   tmp_path / "ck-hdfs", sink="foreach_batch",
                                   confs=fx.VARIANTS["plain-changelog-v1"])
    try:
        second = fx.run(spark, query, variant, st.TTLSTATE, inputs, work / "checkpoint")
    finally:
        if whole_run is not None:
            uninterrupted[query] = whole_run.result()
    st.assert_provider_served(second, st.TTLSTATE)
    assert second.batches and min(second.batches) > max(first), "the query did not resume"
    assert sum(second.input_rows_per_batch().values()) == sum(
        len(f) for files in fx.QUERIES[query][2]() for f in files[fx.HALF:]), "it did not read the rest"

    whole = uninterrupted[query]
    resumed = _plain([r for rows in first.values() for r in rows] + list(second.rows))
    expected = _plain(whole.rows)
    assert len(expected) > 20
    assert resumed == expected
