"""The Python store service through its socket: real processes, real RocksDB, real files."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from service_client import (BROKEN_WORKER_SETUPS, FAILED_START_LINES, ServiceProcess, WorkerError,
                            service_processes, start_service)
from ttlstate import layout
from ttlstate import protocol as p

CONF = "spark.sql.streaming.stateStore.ttlstate."


@pytest.fixture
def svc():
    s = ServiceProcess(workers=2)
    yield s
    s.stop()


def test_ready_line_gives_the_resolved_worker_timeout():
    """The JVM has no timeout of its own: until a store's OPEN reply, a connection waits for the
    query's `workerTimeout`, which the service resolves (default from the registry) and prints."""
    default = ServiceProcess(workers=1)
    try:
        assert default.worker_timeout_ms == 10 * 60 * 1000
    finally:
        default.stop()
    set_ = ServiceProcess(workers=1, confs={"spark.sql.streaming.stateStore.ttlstate.workerTimeout": "90s"})
    try:
        assert set_.worker_timeout_ms == 90_000
    finally:
        set_.stop()


def _store(svc, name="s"):
    c = svc.connect(0)
    h, settings = c.open(name, os.path.join(svc.dir, "stores", name))
    return c, h


def test_service_dir_is_private_and_sockets_listen(svc):
    assert os.stat(svc.dir).st_mode & 0o777 == 0o700
    assert svc.workers == 2
    for i in range(2):
        assert svc.connect(i).worker_index == i


def test_wrong_token_and_missing_hello_are_refused(svc):
    with pytest.raises(WorkerError) as e:
        svc.connect(0, token=b"\x00" * 32)
    assert e.value.error_class == "TTLSTATE_AUTH"
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.connect(svc.socket_path(0))
    s.sendall(p.request(p.PING, 0).frame())
    data = s.recv(4096)
    assert b"TTLSTATE_AUTH" in data
    assert s.recv(4096) == b""  # closed


def test_hinted_and_unhinted_records_in_one_batch_count_keys_exactly(svc, tmp_path):
    """A write transaction writes into RocksDB in batches; a record without a presence hint
    must see the records before it in the same WRITE_BATCH."""
    c, h = _store(svc)
    t = c.begin(h, 0)
    c.write_records(t, [(p.RECORD_PUT_NEW, b"a", b"1"), (p.RECORD_PUT_NEW, b"b", b"2"),
                        (p.RECORD_PUT_OVER, b"a", b"1x"), (p.RECORD_REMOVE_PRESENT, b"b", None),
                        (p.RECORD_PUT, b"b", b"2x"), (p.RECORD_PUT, b"b", b"2y"),
                        (p.RECORD_REMOVE, b"a", None), (p.RECORD_REMOVE, b"a", None),
                        (p.RECORD_REMOVE, b"zz", None), (p.RECORD_PUT_NEW, b"c", b"3")])
    assert c.stats(t)[0] == 2
    assert c.get(t, b"a") is None and c.get(t, b"b") == b"2y"
    c.commit(t, 1, str(tmp_path / "1.changelog"))
    t = c.begin(h, 1)
    c.write_records(t, [(p.RECORD_REMOVE_PRESENT, b"c", None), (p.RECORD_PUT, b"c", b"3x"),
                        (p.RECORD_PUT, b"d", b"4")])
    assert c.stats(t)[0] == 3
    c.commit(t, 2, str(tmp_path / "2.changelog"))
    # the changelogs replay to the same state in a fresh store
    c2, h2 = _store(svc, "replayed")
    assert c2.load(h2, 2, changelogs=[(1, str(tmp_path / "1.changelog")),
                                      (2, str(tmp_path / "2.changelog"))]) == 3
    t2 = c2.begin(h2, 2, read_only=True)
    assert c2.items(t2) == [(b"b", b"2y"), (b"c", b"3x"), (b"d", b"4")]


def test_read_your_writes_num_keys_and_commit(svc, tmp_path):
    c, h = _store(svc)
    t = c.begin(h, 0)
    c.write(t, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"b", None), (b"zz", None)])
    assert c.get(t, b"a") == b"1" and c.get(t, b"b") is None
    assert c.stats(t)[0] == 2
    num_keys, size, mem = c.commit(t, 1, str(tmp_path / "1.changelog"))
    assert num_keys == 2 and size > 0 and mem > 0
    t2 = c.begin(h, 1, read_only=True)
    assert c.items(t2) == [(b"a", b"1"), (b"c", b"3")]


def test_read_transaction_keeps_its_version_while_writer_commits(svc, tmp_path):
    c, h = _store(svc)
    t = c.begin(h, 0)
    c.write(t, [(b"k%d" % i, b"v") for i in range(10)])
    c.commit(t, 1, str(tmp_path / "1.changelog"))
    reader = c.begin(h, 1, read_only=True)
    writer = c.begin(h, 1)
    c.write(writer, [(b"k0", None), (b"k1", b"new"), (b"n", b"x")])
    c.commit(writer, 2, str(tmp_path / "2.changelog"))
    assert c.get(reader, b"k0") == b"v" and c.get(reader, b"k1") == b"v" and c.get(reader, b"n") is None
    assert c.items(reader, chunk=3) == [(b"k%d" % i, b"v") for i in range(10)]


def test_prefix_iteration_in_chunks_tolerates_writes(svc, tmp_path):
    c, h = _store(svc)
    t = c.begin(h, 0)
    c.write(t, [(b"p1/%03d" % i, b"x") for i in range(50)] + [(b"p2/1", b"y")])
    c.commit(t, 1, str(tmp_path / "1.changelog"))
    t = c.begin(h, 1)
    handle, pairs = c.iter_open(t, b"p1/", chunk=7)
    seen = [k for k, _ in pairs]
    while handle:
        c.write(t, [(b"p1/000", None), (b"p1/zzz", b"new")])  # writes during iteration
        handle, pairs = c.iter_next(handle, chunk=7)
        seen += [k for k, _ in pairs]
    assert seen == [b"p1/%03d" % i for i in range(50)]
    assert c.items(t, b"p2/") == [(b"p2/1", b"y")]


def _stored_keys(c, h, version) -> list[bytes]:
    t = c.begin(h, version, read_only=True)
    keys = [k for k, _ in c.items(t)]
    c.call(p.request(p.ABORT, t))
    return keys


def test_writes_during_a_scan_of_the_keys_it_hands_out_count_keys_exactly(svc, tmp_path):
    """A join's eviction: a scan of the write transaction hands keys out and the JVM removes
    or rewrites some, without presence hints (its cache could not keep them). The key count
    stays exact when a key was removed and written again, removed before the scan (pinned
    at its start) reached it, or written several times in one batch
    (docs/decisions/085-worker-scan-presence-hints-not-kept.md)."""
    c, h = _store(svc)
    keys = [b"k%02d" % i for i in range(12)]
    _commit(c, h, 1, [(k, b"v") for k in keys], str(tmp_path / "1.changelog"))
    t = c.begin(h, 1)
    handle, pairs = c.iter_open(t, chunk=2)
    seen = [k for k, _ in pairs]
    assert seen == keys[:2]
    c.write(t, [(b"k00", None)])             # handed out, then removed
    c.write(t, [(b"k00", b"again")])         # then written again: absent before this put
    c.write(t, [(b"k05", None)])             # not handed out yet; the scan may still show it
    while handle:
        handle, pairs = c.iter_next(handle, chunk=2)
        chunk = [k for k, _ in pairs]
        seen += chunk
        # the eviction's pattern: a key handed out is removed (no hint from the JVM)
        c.write(t, [(k, None) for k in chunk if k in (b"k02", b"k03", b"k05", b"k08")])
        if b"k02" in chunk:
            c.write(t, [(b"k02", b"back")])  # removed in the batch before: absent
        if b"k09" in chunk:
            c.write(t, [(b"k09", b"over"), (b"k09", None), (b"k09", b"x")])  # one batch
    assert set(seen) >= set(keys) - {b"k05"}
    c.write(t, [(b"new", b"n")])
    expected = sorted((set(keys) - {b"k03", b"k05", b"k08"}) | {b"new"})
    assert c.stats(t)[0] == len(expected)
    num_keys, _, _ = c.commit(t, 2, str(tmp_path / "2.changelog"))
    assert num_keys == len(expected)
    assert _stored_keys(c, h, 2) == expected


def _commit(c, h, version, records, path):
    t = c.begin(h, version - 1)
    c.write(t, records)
    return c.commit(t, version, path)


def test_load_rebuilds_from_snapshot_and_changelogs(svc, tmp_path):
    c, h = _store(svc, "src")
    for v in range(1, 4):
        _commit(c, h, v, [(b"k%d" % v, b"v%d" % v), (b"k1", b"upd%d" % v)], str(tmp_path / f"{v}.changelog"))
    version, num_keys, manifest_path, ssts = c.snapshot(h, str(tmp_path / "snap-3"))
    assert (version, num_keys) == (3, 3)
    assert manifest_path.startswith(str(tmp_path / "snap-3")) and os.path.isfile(manifest_path)
    assert ssts and all(os.path.getsize(path) == size for _, path, size in ssts)
    assert all(re.fullmatch(r"\d{6}-[0-9a-f]{16}\.sst", name) for name, _, _ in ssts)
    assert c.manifest_files(manifest_path, 3) == [(name, size) for name, _, size in ssts]
    _commit(c, h, 4, [(b"k4", b"v4"), (b"k2", None)], str(tmp_path / "4.changelog"))
    expected = c.items(c.begin(h, 4, True))

    c2, h2 = _store(svc, "dst")
    via_log = [(v, str(tmp_path / f"{v}.changelog")) for v in (1, 2, 3, 4)]
    assert c2.load(h2, 4, changelogs=via_log) == 3
    assert c2.items(c2.begin(h2, 4, True)) == expected
    cached = tmp_path / "cache"  # the JVM hands the worker its own copies of the SSTs
    cached.mkdir()
    given = {}
    for name, path, _ in ssts:
        shutil.copyfile(path, cached / name)
        given[name] = str(cached / name)
    shutil.rmtree(tmp_path / "snap-3/rocksdb")  # the JVM deletes the snapshot directory
    assert c2.load(h2, 4, 3, manifest_path, given, [(4, str(tmp_path / "4.changelog"))]) == 3
    assert c2.items(c2.begin(h2, 4, True)) == expected
    assert c2.load(h2, 3, 3, manifest_path, given) == 3
    assert c2.get(c2.begin(h2, 3, True), b"k2") == b"v2"


def test_the_worker_names_the_checkpoint_files_the_jvm_uploads(svc, tmp_path):
    """COMMIT and SNAPSHOT name the changelog and the manifest as the checkpoint layout does
    (`layout.name`, docs/decisions/110-worker-plans-checkpoint-files.md): the JVM uploads them
    under these names and builds none itself."""
    c, h = _store(svc, "names")
    t = c.begin(h, 0)
    c.write(t, [(b"k", b"v")])
    c.commit_full(t, 1, str(tmp_path / "local-1"))
    assert c.changelog_name == "1.changelog"
    t = c.begin(h, 1)
    c.write(t, [(b"k", b"w")])
    c.commit_full(t, 2, str(tmp_path / "local-2"), "b-é", "a")
    assert c.changelog_name == "2_b-é_a.changelog" == layout.name(2, layout.CHANGELOG, "b-é", "a")
    t = c.begin(h, 2)
    c.commit_full(t, 3, "", "c", "b-é")  # snapshot mode: no changelog, no name
    assert c.changelog_name == ""
    c.snapshot(h, str(tmp_path / "s3"))
    assert c.manifest_name == "3.manifest"
    c.snapshot(h, str(tmp_path / "s3-v2"), "c")
    assert c.manifest_name == "3_c.manifest"


def test_commit_without_changelog_then_snapshot(svc, tmp_path):
    """checkpoint.mode=snapshot: COMMIT with an empty path writes nothing, fileBytes 0."""
    c, h = _store(svc)
    num_keys, size, _ = _commit(c, h, 1, [(b"a", b"1")], "")
    assert (num_keys, size) == (1, 0)
    assert os.listdir(tmp_path) == []
    _, _, manifest_path, ssts = c.snapshot(h, str(tmp_path / "s1"))
    c2, h2 = _store(svc, "other")
    assert c2.load(h2, 1, 1, manifest_path, {n: p for n, p, _ in ssts}) == 1
    assert c2.get(c2.begin(h2, 1, True), b"a") == b"1"


def test_snapshot_lists_every_sst_and_reuses_names(svc, tmp_path):
    c, h = _store(svc)
    _commit(c, h, 1, [(b"k%05d" % i, b"x" * 50) for i in range(5000)], "")
    first = c.snapshot(h, str(tmp_path / "s1"))[3]
    _commit(c, h, 2, [(b"k%05d" % i, b"y") for i in range(0, 5000, 100)], "")
    second = c.snapshot(h, str(tmp_path / "s2"))[3]
    old = {name for name, _, _ in first}
    new = {name for name, _, _ in second}
    assert old < new and len(new - old) == 1
    with pytest.raises(WorkerError) as e:  # the snapshot directory must not exist
        c.snapshot(h, str(tmp_path / "s2"))
    assert "s2" in str(e.value)


@pytest.mark.parametrize("damage", ["size", "bitflip", "missing", "not-given"])
def test_load_refuses_a_damaged_sst_naming_it(svc, tmp_path, damage):
    c, h = _store(svc)
    _commit(c, h, 1, [(b"k%05d" % i, b"v" * 20) for i in range(2000)], "")
    _, _, manifest_path, ssts = c.snapshot(h, str(tmp_path / "s1"))
    name, path, size = ssts[0]
    given = {n: p for n, p, _ in ssts}
    data = bytearray(open(path, "rb").read())
    os.unlink(path)  # a hard link of the live database: never write through it
    if damage == "size":
        open(path, "wb").write(data + b"\0")
    elif damage == "bitflip":
        data[size // 2] ^= 0x01
        open(path, "wb").write(data)
    elif damage == "not-given":
        del given[name]
    c2, h2 = _store(svc, "other")
    with pytest.raises(WorkerError) as e:
        c2.load(h2, 1, 1, manifest_path, given)
    assert e.value.error_class == "TTLSTATE_CORRUPT_FILE"
    assert name in str(e.value) and "version 1" in str(e.value)
    if damage != "not-given":
        assert path in str(e.value)
    with pytest.raises(WorkerError) as e:  # the failed load left the store at no version
        c2.begin(h2, 1)
    assert e.value.error_class == "TTLSTATE_VERSION_MISMATCH"
    assert c2.load(h2, 0) == 0 and c2.items(c2.begin(h2, 0, True)) == []


def test_load_of_another_layout_asks_for_a_snapshot(svc, tmp_path):
    """TTL turned on across a restart: the manifest of the plain store is migrated, and
    COMMIT answers snapshotWanted until a snapshot of the new layout is written."""
    c, h = _store(svc, "plain")
    _commit(c, h, 1, [(b"a", b"1")], "")
    _, _, manifest_path, ssts = c.snapshot(h, str(tmp_path / "s1"))
    c2 = svc.connect(0)
    h2, _ = c2.open("ttl", os.path.join(svc.dir, "stores", "ttl"), [(CONF + "ttl", "1h")])
    assert c2.load(h2, 1, 1, manifest_path, {n: p for n, p, _ in ssts}, batch_ts=10_000) == 1
    t = c2.begin(h2, 1, batch_ts=10_000)
    assert c2.get(t, b"a") == b"1"
    c2.write(t, [(b"b", b"2")])
    assert c2.commit_full(t, 2, "")[3] is True
    c2.snapshot(h2, str(tmp_path / "s2"))
    t = c2.begin(h2, 2, batch_ts=10_001)
    assert c2.commit_full(t, 3, "")[3] is False


def test_read_changelog_gives_spark_records_in_chunks(svc, tmp_path):
    """READ_CHANGELOG: the records of a changelog in order, removes as None, values without
    the TTL timestamp, in chunks; a damaged or wrong file is refused."""
    c, h = _store(svc)
    ttl_c = svc.connect(0)
    th, _ = ttl_c.open("t", os.path.join(svc.dir, "stores", "t"), [(CONF + "ttl", "1h")])
    records = [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3"), (b"b", b"22")]
    plain, ttl = str(tmp_path / "1.changelog"), str(tmp_path / "1t.changelog")
    _commit(c, h, 1, records, plain)
    t = ttl_c.begin(th, 0, batch_ts=5_000)
    ttl_c.write(t, records)
    ttl_c.commit(t, 1, ttl)
    assert open(ttl, "rb").read() != open(plain, "rb").read()  # the TTL layout differs on disk
    c0 = svc.connect(1)  # any worker, no store
    for path in (plain, ttl):
        assert c0.read_changelog(path, 1) == (records, -1)
        got, start = [], 0
        while start >= 0:
            chunk, start = c0.read_changelog(path, 1, start, 2)
            assert 0 < len(chunk) <= 2
            got += chunk
        assert got == records
        assert c0.read_changelog(path, 1, 99) == ([], -1)
    for path, version, reason in [(plain, 2, "expected a changelog of version 2"),
                                  (str(tmp_path / "none.changelog"), 1, "does not exist")]:
        with pytest.raises(WorkerError) as e:
            c0.read_changelog(path, version)
        assert e.value.error_class == "TTLSTATE_CORRUPT_FILE" and reason in str(e.value), e.value
    data = bytearray(open(plain, "rb").read())
    data[12] ^= 1
    open(plain, "wb").write(data)
    with pytest.raises(WorkerError) as e:
        c0.read_changelog(plain, 1)
    assert e.value.error_class == "TTLSTATE_CORRUPT_FILE" and "checksum" in str(e.value)


def test_manifest_files_checks_the_manifest(svc, tmp_path):
    c, h = _store(svc)
    _commit(c, h, 1, [(b"a", b"1")], "")
    _, _, manifest_path, ssts = c.snapshot(h, str(tmp_path / "s1"))
    c0 = svc.connect(1)  # any worker, no store
    assert c0.manifest_files(manifest_path, 1) == [(n, s) for n, _, s in ssts]
    for path, version, reason in [(manifest_path, 2, "expected version 2"),
                                  (str(tmp_path / "none.manifest"), 1, "does not exist")]:
        with pytest.raises(WorkerError) as e:
            c0.manifest_files(path, version)
        assert e.value.error_class == "TTLSTATE_CORRUPT_FILE" and reason in str(e.value)
        assert path in str(e.value)
    data = bytearray(open(manifest_path, "rb").read())
    data[10] ^= 1
    open(manifest_path, "wb").write(data)
    with pytest.raises(WorkerError) as e:
        c0.manifest_files(manifest_path, 1)
    assert "checksum" in str(e.value)
    assert c0.call(p.request(p.PING, 0)) is not None  # an error reply, not a closed connection


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "missing"])
def test_corrupt_files_name_the_file_and_version(svc, tmp_path, damage):
    c, h = _store(svc)
    t = c.begin(h, 0)
    c.write(t, [(b"k%d" % i, b"v" * 100) for i in range(100)])
    c.commit(t, 1, str(tmp_path / "1.changelog"))
    path = tmp_path / "1.changelog"
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "bitflip":
        data[len(data) // 2] ^= 0x10
        path.write_bytes(data)
    else:
        path.unlink()
    c2, h2 = _store(svc, "other")
    with pytest.raises(WorkerError) as e:
        c2.load(h2, 1, changelogs=[(1, str(path))])
    assert e.value.error_class == "TTLSTATE_CORRUPT_FILE"
    assert str(path) in str(e.value) and "version 1" in str(e.value)


def test_invalid_conf_names_key_value_and_allowed(svc):
    c = svc.connect(0)
    with pytest.raises(WorkerError) as e:
        c.open("x", os.path.join(svc.dir, "x"), [(CONF + "iteratorChunkEntries", "lots")])
    assert e.value.error_class == "TTLSTATE_INVALID_CONF"
    assert CONF + "iteratorChunkEntries" in str(e.value) and "'lots'" in str(e.value)
    with pytest.raises(WorkerError) as e:
        c.open("x", os.path.join(svc.dir, "x"), [(CONF + "writeBatchByte", "1")])
    assert "unknown ttlstate key" in str(e.value)


def test_malformed_frame_closes_connection_and_worker_survives(svc):
    c, h = _store(svc)
    c.sock.sendall((5).to_bytes(4, "little") + bytes([0x7F, 0, 0, 0, 0]))
    with pytest.raises(WorkerError) as e:
        c.recv()
    assert e.value.error_class == "TTLSTATE_PROTOCOL_ERROR"
    assert c.sock.recv(16) == b""
    assert svc.connect(0).call(p.request(p.PING, 0)) is not None


def test_deferred_write_error_surfaces_on_next_call(svc):
    c, h = _store(svc)
    t = c.begin(h, 0, read_only=True)
    c.write(t, [(b"a", b"1")])
    with pytest.raises(WorkerError):
        c.get(t, b"a")


def test_a_write_frame_contradicting_its_transaction_fails_the_next_call_not_a_connection(svc):
    """A WRITE_STAMPED that decodes but whose stamp is not its transaction's (here a store
    without TTL: it stamps nothing) is remembered on the transaction like any write error: the
    next request on it gets TTLSTATE_INTERNAL naming the frame, and neither the connection that
    asks nor the one that sent the frame is closed (PROTOCOL.md)."""
    c, h = _store(svc)
    t = c.begin(h, 0)
    other = svc.connect(0)
    other.send(p.request(p.WRITE_STAMPED, t).i64(5).u32(0).u32(0).u32(0).u32(0))
    assert other.call(p.request(p.PING, 0)) is not None  # the sender's connection stays open
    with pytest.raises(WorkerError) as e:
        c.get(t, b"a")
    assert e.value.error_class == "TTLSTATE_INTERNAL"
    assert "write frame of this transaction was refused" in str(e.value) and "stamp 5" in str(e.value)
    assert c.call(p.request(p.PING, 0)) is not None  # and so does the asker's


def test_dead_worker_is_restarted_and_service_exits_on_stdin_eof(tmp_path):
    svc = ServiceProcess(workers=2)
    try:
        before = {ch.pid for ch in psutil.Process(svc.pid).children()}
        victim = svc.connect(1).worker_pid
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                c = svc.connect(1)
                if c.worker_pid != victim:
                    break
            except (OSError, ConnectionError):
                pass
            time.sleep(0.05)
        assert c.worker_pid != victim
        family = {ch.pid for ch in psutil.Process(svc.pid).children()} | {svc.pid}
    finally:
        svc.stop()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(psutil.pid_exists(x) and psutil.Process(x).status() != "zombie" for x in family):
        time.sleep(0.05)
    assert not [x for x in family if psutil.pid_exists(x) and psutil.Process(x).status() != "zombie"]
    assert not os.path.exists(svc.dir)  # the service removed its own directory
    assert not os.path.exists(svc.parent)
    assert before  # workers existed


# A parent that starts the service as the shim does, then a second process that keeps the
# service's stdin open (a child forked with the parent's descriptors), and prints both pids.
_PARENT_WITH_A_SECOND_STDIN_HOLDER = """
import subprocess, sys, time
sys.path.insert(0, sys.argv[2])
from service_client import start_service
svc = start_service(sys.argv[1], bytes(32), 1)
assert svc.stdout.readline().startswith("READY")
holder = subprocess.Popen(["sleep", "600"], pass_fds=[svc.stdin.fileno()])
print(svc.pid, holder.pid, flush=True)
time.sleep(600)
"""


def test_the_service_stops_when_its_parent_dies_while_another_process_holds_its_stdin(tmp_path):
    """Stdin's EOF is the usual sign that the JVM is gone; if a process the JVM forked kept
    the pipe's other end, the service still stops, seeing its parent change. Before, it and its
    workers lived on (as long as the other holder did)."""
    d = str(tmp_path / "svc")
    parent = subprocess.Popen([sys.executable, "-c", _PARENT_WITH_A_SECOND_STDIN_HOLDER, d,
                               os.path.dirname(__file__)], stdout=subprocess.PIPE, text=True)
    holder = None
    try:
        service_pid, holder = map(int, parent.stdout.readline().split())
        assert service_pid in [c.pid for c in service_processes(d)]
        parent.kill()
        parent.wait(10)
        assert psutil.pid_exists(holder)  # stdin has a writer still: no EOF
        deadline = time.monotonic() + 10
        while service_processes(d) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not service_processes(d)
        assert not os.path.exists(d)  # the service removed its directory
    finally:
        parent.kill()
        if holder is not None:
            os.kill(holder, signal.SIGKILL)
        for c in service_processes(d):
            c.kill()


def _service_with(tmp_path, setup: str, workers: int = 1):
    """`python -m ttlstate.service` after `setup` ran in its interpreter (a real service process
    whose worker module was made to fail); its start-up lines written, stdin left open."""
    d = tmp_path / "svc"
    return start_service(str(d), b"\xab" * 32, workers, setup=setup), d


def test_a_worker_module_that_cannot_be_imported_fails_the_start(tmp_path):
    """Imported before READY: a broken install ends the service at once with the import error,
    where every forked worker used to die and be restarted while the JVM waited for it."""
    proc, d = _service_with(tmp_path, BROKEN_WORKER_SETUPS["import"])
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 3, (proc.returncode, err)
    assert "READY" not in out
    assert "cannot import the store worker (ttlstate.worker)" in err and "import of ttlstate.worker halted" in err, err
    assert not d.exists()


@pytest.mark.parametrize("broken", sorted(FAILED_START_LINES))
def test_a_worker_that_keeps_failing_at_start_stops_the_service(tmp_path, broken):
    """A worker that fails right after each start (an exception; a native crash) is restarted
    MAX_FAST_EXITS - 1 times, then the service stops (exit code 4), its workers and directory
    gone, and says why."""
    from ttlstate.service import MAX_FAST_EXITS

    proc, d = _service_with(tmp_path, BROKEN_WORKER_SETUPS[broken], workers=2)
    try:
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == "READY", (ready, proc.stderr.read())
        assert proc.wait(timeout=60) == 4
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.stdin.close()
    assert err.count(FAILED_START_LINES[broken]) >= MAX_FAST_EXITS, err
    assert f"failed {MAX_FAST_EXITS} times in a row" in err and "stopping the service" in err, err
    assert not d.exists()
    assert not service_processes(str(d))


def test_workers_killed_soon_after_their_start_are_restarted_every_time():
    """A kill is not a start-up failure: the JVM kills a worker past `workerTimeout`, which may be
    1 s, so MAX_FAST_EXITS + 1 kills in a row, each within a second of the worker's start,
    leave the service running and a new worker serving."""
    from ttlstate.service import MAX_FAST_EXITS

    svc = ServiceProcess(workers=1)
    try:
        killed = set()
        for _ in range(MAX_FAST_EXITS + 1):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                workers = [c for c in psutil.Process(svc.pid).children()
                           if c.pid not in killed and c.status() != psutil.STATUS_ZOMBIE]
                if workers:
                    break
                time.sleep(0.02)
            assert workers, "no new worker"
            os.kill(workers[0].pid, signal.SIGKILL)
            killed.add(workers[0].pid)
        assert svc.proc.poll() is None
        deadline = time.monotonic() + 10
        while True:
            try:
                assert svc.connect(0).worker_pid not in killed
                break
            except (OSError, ConnectionError):
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        svc.stop()


@pytest.mark.parametrize("status, lived_s, failed, described", [
    (1 << 8, 0.5, True, "exited with code 1"),             # an exception as it started
    (0, 0.5, False, "exited with code 0"),                 # a clean exit
    (1 << 8, 5.0, False, "exited with code 1"),            # an error after it served for a while
    (signal.SIGSEGV, 0.5, True, "was killed by SIGSEGV"),  # a native crash as it started
    (signal.SIGABRT, 0.5, True, "was killed by SIGABRT"),
    (signal.SIGKILL, 0.5, False, "was killed by SIGKILL"),  # the JVM's kill past workerTimeout
    (signal.SIGTERM, 0.5, False, "was killed by SIGTERM"),  # the service's own stop
    (signal.SIGSEGV, 5.0, False, "was killed by SIGSEGV"),
])
def test_which_worker_exits_count_as_failed_starts(status, lived_s, failed, described):
    from ttlstate.service import describe_exit, failed_at_start

    assert failed_at_start(status, lived_s) is failed
    assert describe_exit(status) == described
