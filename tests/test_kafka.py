"""ttlstate between a Kafka source and a Kafka sink (issue 44): a real broker (KRaft, on
loopback, started here from the jars `make servers` resolved) and Spark's Kafka connector, each
driver its own process set up as a user would (`spark.jars` and `providerClass`, nothing else of
ttlstate's). The aggregation, dropDuplicatesWithinWatermark and the stream-stream join, with TTL
on ttlstate, must write what the HDFS-backed provider writes on the same topics, through a driver
restart mid-stream, SIGKILLed store workers and a lost executor (the second ttlstate driver runs
on `local-cluster`; the topics have one partition, so a batch's records reach the shuffle in the
same order whatever the layout).

The Kafka sink is at-least-once: a batch Spark runs again after a failure writes its records
again. Records are compared after removing such repeats (each query's output records as a set;
a repeated batch writes the same records, the same batch on each provider the same ones).
"""

from __future__ import annotations

import json
import re

import pytest

import cluster
import streaming as st
from kafka_broker import KafkaBroker
from streaming import HDFS, TTLSTATE

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

HERE = st.pathlib.Path(__file__).parent
PIPELINE = HERE / "kafka_pipeline.py"
TTL = {"spark.sql.streaming.stateStore.ttlstate.ttl": "1h"}  # on, and reached by nothing in the run
# what TTL on a join's state needs (ttlstate refuses the join without it); on both providers
SKIP_NULLS = {"spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled": "true"}
N_FILES = 8  # minutes of events per topic; the first half is there at the first run


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = KafkaBroker(tmp_path_factory.mktemp("kafka")).start()
    try:
        yield b
    finally:
        b.stop()


def _driver(work, tag: str, spec: dict) -> list[dict]:
    """Runs kafka_pipeline.py with `spec` in a process of its own; its RESULT lines."""
    proc, log, log_path = st.spawn_spec_process(str(PIPELINE), spec, work, tag)
    code = st.wait_or_kill(proc, 900)
    log.close()
    text = log_path.read_text(errors="replace")
    assert code == 0, f"{tag} exited {code}:\n{text[-4000:]}"
    return [json.loads(m) for m in re.findall(r"^RESULT (.*)$", text, re.M)]


def _rows(inputs: dict, start: int, stop: int) -> dict:
    """Files start..stop-1 of each topic's input, for a driver to write before its queries run."""
    return {topic: [json.dumps(r, sort_keys=True) for f in files[start:stop] for r in f] for topic, files in inputs.items()}


def _run(work, broker, provider: str, part: int, **extra) -> dict:
    confs = {st.PROVIDER_CLASS_KEY: provider, **SKIP_NULLS, **(TTL if provider == TTLSTATE else {})}
    spec = dict(bootstrap=broker.bootstrap, out=_out(provider), confs=confs,
                checkpoint=str(work / f"ck-{_out(provider)}"), **extra)
    return {r["query"]: r for r in _driver(work, f"run-{_out(provider)}-{part}", spec) if "query" in r}


def _out(provider: str) -> str:
    return "ttlstate" if provider == TTLSTATE else "hdfs"


def test_a_kafka_pipeline_with_ttl_writes_what_the_hdfs_provider_writes(broker, tmp_path):
    inputs = {"events": st.generate_events(N_FILES, 150, n_keys=40, n_values=10, seed=71),
              "left": st.generate_events(N_FILES, 100, n_keys=30, seed=72, active_fraction=0.9),
              "right": st.generate_events(N_FILES, 100, n_keys=30, seed=73, active_fraction=0.9)}
    # the first half of the input is written by the HDFS provider's first driver, the second by
    # its second, each before its queries start
    first = {HDFS: _run(tmp_path, broker, HDFS, 1, rows=_rows(inputs, 0, N_FILES // 2)),
             TTLSTATE: _run(tmp_path, broker, TTLSTATE, 1)}
    # the driver restarts: the second runs continue the checkpoints of the first; ttlstate's on a
    # local cluster (every executor a JVM of its own), where once each query has run a batch a
    # store worker of an executor's service (aggregation, join) or an executor (dedup) is
    # SIGKILLed; then that driver reads every output topic of both providers
    topics = [f"{_out(p)}-{q}" for p in (HDFS, TTLSTATE) for q in ("agg", "dedup", "join")]
    second = {HDFS: _run(tmp_path, broker, HDFS, 2, rows=_rows(inputs, N_FILES // 2, N_FILES)),
              TTLSTATE: _run(tmp_path, broker, TTLSTATE, 2, master=cluster.MASTER, kill_after_batches=1,
                             kill={"agg": "worker", "dedup": "executor", "join": "worker"},
                             topics=topics, out_file=str(tmp_path / "out.json"))}
    assert all(second[TTLSTATE][q]["killed"] for q in ("agg", "dedup", "join")), second[TTLSTATE]
    for p in (HDFS, TTLSTATE):
        for q in ("agg", "dedup", "join"):
            assert len(first[p][q]["batches"]) >= 3 and len(second[p][q]["batches"]) >= 3, (p, q, first[p][q], second[p][q])
            assert first[p][q]["ttlstate_metrics"] == second[p][q]["ttlstate_metrics"] == (p == TTLSTATE), (p, q)
    written = json.loads((tmp_path / "out.json").read_text())
    for q, least in (("agg", 200), ("dedup", 200), ("join", 100)):
        expected, actual = set(written[f"hdfs-{q}"]), set(written[f"ttlstate-{q}"])
        assert len(expected) >= least, (q, len(expected))
        assert actual == expected, (q, sorted(expected - actual)[:5], sorted(actual - expected)[:5])
