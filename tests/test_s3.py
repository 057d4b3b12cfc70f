"""ttlstate with its checkpoint on S3 (issue 44): S3A (hadoop-aws, resolved by `make servers`)
against a real S3-protocol server on loopback (moto's, started here; tests/s3_server.py) behind
a proxy that counts requests and injects faults (tests/s3_proxy.py), each driver its own process.
The aggregation and dropDuplicatesWithinWatermark with TTL, their checkpoints at `s3a://`, give
batch for batch the output of the HDFS-backed provider with a local checkpoint, across a driver
restart and with snapshots uploaded by maintenance; the state files are objects in the bucket.
With 503 SlowDowns, connections reset after an upload's bytes were sent, and PUTs whose reply is
lost after the server stored them, the output is still the same."""

from __future__ import annotations

import collections
import json
import re

import pytest

import checkpoint_pipeline as pipeline
import jvm_archive
import streaming as st
from offline_tools import cli, cli_json, cli_meanwhile, conf_args
from s3_server import running_s3, s3a_jars
from streaming import HDFS, TTLSTATE

pytestmark = [pytest.mark.s3, pytest.mark.slow]
PREFIX = pipeline.PREFIX

BUCKET = "ttlstate-checkpoints"
N_FILES = 8
PARTS = ((0, N_FILES // 2), (N_FILES // 2, N_FILES))  # each part a driver of its own


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with running_s3(tmp_path_factory.mktemp("s3"), BUCKET) as server_and_proxy:
        yield server_and_proxy


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The input files, and the HDFS provider's output of each part (a local checkpoint, so
    neither S3A nor the server: one driver for both parts)."""
    files = st.generate_events(N_FILES, 200, n_keys=50, n_values=10, seed=81)
    work = tmp_path_factory.mktemp("s3-reference")
    return files, pipeline.run_parts(work, "hdfs", HDFS, str(work / "ck-hdfs"), {}, files, PARTS)


def _run(work, tag: str, provider: str, checkpoint: str, confs: dict, s3, **kw) -> dict:
    return pipeline.run(work, tag, provider, checkpoint, {**server_confs(s3), **confs}, driver_classpath=s3a_jars(),
                        **kw)


def _assert_same_output(reference, runs):
    pipeline.assert_same_batches(reference[1], runs, min_batches=N_FILES // 2, min_rows=200)  # and no-data batches


@pytest.fixture(scope="module")
def plain(s3, reference, tmp_path_factory):
    """ttlstate's run with its checkpoint at s3a://BUCKET/plain in two drivers: (work directory,
    part -> output, the second driver's log). As the second starts, the bucket's listing of the
    aggregation's partition 0 lags the writes: its first three LISTs leave out the two objects the
    first driver wrote there last (its newest changelog among them). Three, not one: maintenance's
    cleanup may list the directory before the load does (it plans with a connection of its own),
    and the load lists up to four times (CheckpointLoader.LISTING_LAG_PAUSES_MS)."""
    _, proxy = s3
    files, _ = reference
    work = tmp_path_factory.mktemp("s3-plain")
    runs = {}
    for part, (start, stop) in enumerate(PARTS, start=1):
        st.write_files(work / "events", files, start, stop)
        if part == 2:
            proxy.lag(r"^plain/agg/state/0/0/$", hide=2, times=3)
        runs[part] = _run(work, f"plain-{part}", TTLSTATE, f"s3a://{BUCKET}/plain", pipeline.TTLSTATE_CONFS, s3,
                          log_level="WARN" if part == 2 else "ERROR")
    return work, runs, (work / "plain-2.log").read_text(errors="replace")


def test_checkpoints_on_s3_give_the_hdfs_providers_output_across_a_restart(s3, reference, plain):
    _assert_same_output(reference, plain[1])
    # the lagging listings left out the newest changelog; the load listed again, found it and
    # went on (the same output), and logged what was missing
    _, proxy = s3
    lagging = [keys for prefix, keys in proxy.lags.hidden if prefix == "plain/agg/state/0/0/"]
    assert len(lagging) == 3 and len(set(lagging)) == 1, lagging  # no PUT there before the load
    changelogs = [k for k in lagging[0] if k.endswith(".changelog")]
    assert changelogs, lagging
    changelog = max(changelogs, key=lambda k: int(k.rpartition("/")[2].partition(".")[0]))
    assert f"lacks s3a://{BUCKET}/{changelog}: listing it again" in plain[2], plain[2][-4000:]
    # the state is in the bucket: changelogs of every version, and snapshots with their SSTs
    server, _ = s3
    keys = [o["Key"] for page in server.client().get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix="plain/") for o in page.get("Contents", [])]
    for q in ("agg", "dedup"):
        state = [k for k in keys if k.startswith(f"plain/{q}/state/")]
        assert any(k.endswith(".changelog") for k in state), state[:20]
        assert any(k.endswith(".manifest") for k in state) and any(k.endswith(".sst") for k in state), state[:40]


def test_s3_faults_and_a_driver_killed_mid_commit_change_no_output_in_format_v2(s3, reference, tmp_path):
    """Checkpoint format v2 (state files named by checkpoint ids) under S3 faults, and the
    second driver SIGKILLed as it sends an aggregation changelog's PUT (the commit of its second
    batch cut short), then run again: the batches of both, the rerun's for a batch both ran,
    are the HDFS provider's."""
    _, proxy = s3
    files, _ = reference
    ck = f"s3a://{BUCKET}/faults"
    # and retention: 3 versions kept, so cleanups delete on S3 while the runs go on
    confs = {**pipeline.TTLSTATE_CONFS, "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
             "spark.sql.streaming.minBatchesToRetain": "3"}
    # ttlstate writes a state file on S3 in place, one PUT
    # (docs/decisions/105-object-store-puts-and-listings.md): faults on those PUTs,
    # of changelogs, manifests and SSTs, and on the GETs of a restart
    proxy.fail("slowdown", "PUT", r"/faults/.*/state/.*\.changelog$", times=3)
    proxy.fail("reset", "PUT", r"/faults/.*/state/.*\.changelog$", times=2)
    proxy.fail("lost-reply", "PUT", r"/faults/.*/state/.*\.changelog$", times=2)
    proxy.fail("lost-reply", "PUT", r"/faults/.*/state/.*(\.manifest|\.sst)", times=2)
    proxy.fail("slowdown", "GET", r"/faults/.*/state/", times=2)
    runs = {}
    st.write_files(tmp_path / "events", files, *PARTS[0])
    runs[1] = _run(tmp_path, "faults-1", TTLSTATE, ck, confs, s3)
    st.write_files(tmp_path / "events", files, *PARTS[1])
    killed = []

    def kill_at_the_second_batchs_changelog(proc):
        proxy.interrupt("PUT", r"/faults/agg/state/.*\.changelog$", lambda: (proc.kill(), killed.append(True)), after=2)

    pipeline.run_failing(tmp_path, "faults-2-killed", TTLSTATE, ck, {**server_confs(s3), **confs},
                         driver_classpath=s3a_jars(), while_running=kill_at_the_second_batchs_changelog)
    assert killed
    runs[2] = _run(tmp_path, "faults-2", TTLSTATE, ck, confs, s3)
    before_the_kill = pipeline.batches_written(tmp_path, "faults-2-killed")
    assert before_the_kill.get("agg"), before_the_kill  # the kill came after a batch of the second driver
    for q in ("agg", "dedup"):
        runs[2][q]["batches"] = {**before_the_kill.get(q, {}), **runs[2][q]["batches"]}
    _assert_same_output(reference, runs)
    injected = collections.Counter(how for how, _, path in proxy.faults.injected if "/faults/" in path)
    assert injected["slowdown"] >= 3 and injected["reset"] == 2 and injected["lost-reply"] >= 3, proxy.faults.injected
    assert injected["interrupt"] == 1
    # format v2: the state files carry checkpoint ids
    server, _ = s3
    keys = [o["Key"] for page in server.client().get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix="faults/agg/state/0/0/") for o in page.get("Contents", [])]
    assert any(re.search(r"/\d+_[0-9a-f-]+_[0-9a-f-]*\.changelog$", k) for k in keys), keys[:20]
    # retention deleted the oldest versions from the bucket, and the rerun still loaded what it needed
    versions = {int(m.group(1)) for k in keys if (m := re.search(r"/(\d+)_[^/]*\.(changelog|manifest)$", k))}
    assert versions and min(versions) > 1, sorted(versions)


def server_confs(s3) -> dict:
    server, proxy = s3
    return server.spark_confs(proxy.endpoint)


def cli_confs(s3) -> dict:
    """The confs of an offline command on the bucket: the server's, S3A on the driver's classpath
    (and the tests' class-data archive of that classpath, tests/jvm_archive.py)."""
    classpath = ":".join(s3a_jars())
    options = jvm_archive.driver_options(classpath)
    return {**server_confs(s3), "spark.driver.extraClassPath": classpath,
            **({"spark.driver.extraJavaOptions": options} if options else {})}


def test_the_offline_tools_and_damaged_objects_on_s3(s3, reference, plain):
    """inspect, verify and dump on the aggregation's checkpoint in the bucket (S3A with the
    query's confs), repartition on the dedup's; then with a changelog cut short, the SSTs of a
    partition flipped by one bit and those of the other deleted, verify names the damaged and the
    missing objects, and the restarted query fails naming one."""
    server, proxy = s3
    work, _, _ = plain
    agg = f"s3a://{BUCKET}/plain/agg"
    s3a = cli_confs(s3)
    keys = {json.loads(row)[0] for part in reference[1].values() for rows in part["agg"]["batches"].values()
            for row in rows}
    doc = cli_json("inspect", agg, *conf_args(s3a))
    assert doc["checkpoint"] == agg and doc["keys"] == len(keys) >= 40, doc
    assert cli_json("verify", agg, *conf_args(s3a))["ok"]
    dumped = cli_json("dump", agg, "--operator", 0, *conf_args(s3a))  # every partition, one download
    assert [d["partition"] for d in dumped] == [0, 1], dumped
    assert {e["key"]["key"] for d in dumped for e in d["entries"]} == keys
    assert all(d["checkpoint"] == agg for d in dumped), [d["checkpoint"] for d in dumped]

    # repartition, on the dedup's checkpoint (the aggregation's is damaged below)
    dedup = f"s3a://{BUCKET}/plain/dedup"
    before = cli_json("inspect", dedup, *conf_args(s3a))
    commits = _keys(server, "plain/dedup/commits/")
    r = cli_json("repartition", dedup, "--partitions", 3, *conf_args(s3a))
    assert (r["checkpoint"], r["oldPartitions"], r["newPartitions"]) == (dedup, 2, 3), r
    assert len(_keys(server, "plain/dedup/commits/")) == len(commits) + 1  # the rescale's batch, in the bucket
    after = cli_json("inspect", dedup, *conf_args(s3a))
    assert after["operators"][0]["partitions"] == [0, 1, 2] and after["keys"] == before["keys"] > 0, (before, after)
    assert _keys(server, "plain/dedup/state/0/2/"), "no state objects of the new partition 2"
    assert cli_json("verify", dedup, *conf_args(s3a))["ok"]

    client = server.client()
    store = "plain/agg/state/0/0/"
    objects = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=store)
               for o in page.get("Contents", [])]
    newest = max((k for k in objects if k.endswith(".changelog")), key=lambda k: int(k.rsplit("/", 1)[1].split(".")[0]))
    damaged = {newest: _body(client, newest)[: len(_body(client, newest)) // 2]}
    for k in objects:
        if k.endswith(".sst"):
            body = bytearray(_body(client, k))
            body[len(body) // 2] ^= 0x10
            damaged[k] = bytes(body)
    for k, body in damaged.items():
        client.put_object(Bucket=BUCKET, Key=k, Body=body)
    # and partition 1's SSTs deleted: missing objects
    missing = [k for k in _keys(server, "plain/agg/state/0/1/sst/") if k.endswith(".sst")]
    assert missing
    client.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in missing]})
    r = json.loads(cli("verify", agg, *conf_args(s3a), "--json", rc=1).stdout)
    named = {p["path"] for p in r["problems"]}
    assert f"s3a://{BUCKET}/{newest}" in named, r["problems"]
    assert any(p.startswith(f"s3a://{BUCKET}/{store}sst/") for p in named), r["problems"]
    assert named & {f"s3a://{BUCKET}/{k}" for k in missing}, r["problems"]
    assert all(p.startswith((f"s3a://{BUCKET}/{store}", f"s3a://{BUCKET}/plain/agg/state/0/1/sst/")) for p in named), \
        r["problems"]

    # the restarted query, on a host whose local checkpoint cache does not hold partition 0's
    # files (a cached copy is the file as written, and would be used), fails naming an object
    files, _ = reference
    st.write_files(work / "events", files + st.generate_events(1, 50, n_keys=50, n_values=10, seed=84),
                   N_FILES, N_FILES + 1)
    log = pipeline.run_failing(work, "damaged", TTLSTATE, f"s3a://{BUCKET}/plain",
                               {**server.spark_confs(proxy.endpoint), **pipeline.TTLSTATE_CONFS,
                                PREFIX + "checkpoint.localCacheDir": str(work / "another-hosts-cache")},
                               queries=["agg"], driver_classpath=s3a_jars())
    assert any(f"s3a://{BUCKET}/{k}" in log for k in [*damaged, *missing]), log[-4000:]


def test_migrate_on_s3(s3, reference, tmp_path):
    """`migrate` on a checkpoint in the bucket (issue 45 through issue 44's copy): the aggregation
    run on the HDFS-backed provider for the first part (a migration while it writes refused),
    migrated to ttlstate with TTL on, runs the
    second part on ttlstate with the HDFS provider's output batch for batch; each migrated entry
    carries the TTL timestamp of the last batch before the migration."""
    server, _ = s3
    files, expected = reference
    ck = f"s3a://{BUCKET}/migrate"
    s3a = cli_confs(s3)
    (start, stop), second = PARTS
    st.write_files(tmp_path / "events", files, start, stop)
    first = _run(tmp_path, "hdfs-1", HDFS, ck, {}, s3, queries=["agg"])
    assert first["agg"]["batches"] == expected[1]["agg"]["batches"]

    # a migration during which the query writes its next offset entry (it runs again) is
    # refused, and writes nothing back to the bucket
    client = server.client()
    last = max(int(k.rsplit("/", 1)[1]) for k in _keys(server, "migrate/agg/offsets/") if k.rsplit("/", 1)[1].isdigit())
    entry = f"migrate/agg/offsets/{last + 1}"
    proc = cli_meanwhile("migrate", ck + "/agg", "--to", "ttlstate", *conf_args(s3a), tmp_dir=tmp_path / "tmp",
                         step="ttlstate-migrate-*", action=lambda: client.put_object(
                             Bucket=BUCKET, Key=entry, Body=_body(client, f"migrate/agg/offsets/{last}")))
    assert proc.returncode == 2 and "TTLSTATE_MIGRATE_RUNNING" in proc.stderr, proc.stderr[-3000:]
    assert f"offsets/{last + 1} written" in proc.stderr, proc.stderr[-3000:]
    assert HDFS in _body(client, f"migrate/agg/offsets/{last}").decode()
    assert not [k for k in _keys(server, "migrate/agg/state/") if k.endswith((".manifest", ".sst"))]
    client.delete_object(Bucket=BUCKET, Key=entry)

    r = cli_json("migrate", ck + "/agg", "--to", "ttlstate", "--ttl", "1h", *conf_args(s3a))
    assert (r["checkpoint"], r["source"], r["target"]) == (ck + "/agg", "hdfs", "ttlstate"), r
    keys = {json.loads(row)[0] for rows in expected[1]["agg"]["batches"].values() for row in rows}
    assert r["stores"][0]["keys"] == len(keys) > 0, r
    offsets = _body(client, f"migrate/agg/offsets/{r['batch']}").decode()
    assert TTLSTATE in offsets and r["ttlTimestamp"] == json.loads(
        offsets.splitlines()[1])["batchTimestampMs"], offsets
    dumped = cli_json("dump", ck + "/agg", "--operator", 0, *conf_args(s3a))
    assert {e["key"]["key"] for d in dumped for e in d["entries"]} == keys
    assert {e["ttlTimestampMs"] for d in dumped for e in d["entries"]} == {r["ttlTimestamp"]}, dumped[0]["entries"][:2]

    st.write_files(tmp_path / "events", files, *second)
    runs = {2: _run(tmp_path, "migrated-2", HDFS, ck, pipeline.TTLSTATE_CONFS, s3, queries=["agg"])}
    pipeline.assert_same_batches({2: expected[2]}, runs, queries=["agg"], min_batches=N_FILES // 2)


def _body(client, key: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def _keys(server, prefix: str) -> list[str]:
    return [o["Key"] for page in server.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
            for o in page.get("Contents", [])]
