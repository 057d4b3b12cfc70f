"""The Python store service through its socket: real processes, real RocksDB, real files."""

import os
import signal
import time

import psutil
import pytest

from service_client import ServiceProcess, WorkerError
from ttlstate import protocol as p

CONF = "spark.sql.streaming.stateStore.ttlstate."


@pytest.fixture
def svc():
    s = ServiceProcess(workers=2)
    yield s
    s.stop()


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
    r = c.call(p.request(p.ITER_OPEN, t).bytes(b"p1/").u32(7))
    handle, seen = r.u32(), []
    while True:
        last = r.bool()
        seen += [(r.bytes(), r.bytes())[0] for _ in range(r.u32())]
        if last:
            break
        c.write(t, [(b"p1/000", None), (b"p1/zzz", b"new")])  # writes during iteration
        r = c.call(p.request(p.ITER_NEXT, handle).u32(7))
    assert seen == [b"p1/%03d" % i for i in range(50)]
    assert c.items(t, b"p2/") == [(b"p2/1", b"y")]


def test_load_rebuilds_from_snapshot_and_changelogs(svc, tmp_path):
    c, h = _store(svc, "src")
    files = []
    for v in range(1, 4):
        t = c.begin(h, v - 1)
        c.write(t, [(b"k%d" % v, b"v%d" % v), (b"k1", b"upd%d" % v)])
        c.commit(t, v, str(tmp_path / f"{v}.changelog"))
    version, size, count = c.snapshot(h, str(tmp_path / "3.snapshot"))
    assert (version, size > 0, count) == (3, True, 3)
    c2, h2 = _store(svc, "dst")
    n = c2.load(h2, 3, [(p.FILE_CHANGELOG, v, str(tmp_path / f"{v}.changelog")) for v in (1, 2, 3)])
    assert n == 3
    via_log = c2.items(c2.begin(h2, 3, True))
    n = c2.load(h2, 3, [(p.FILE_SNAPSHOT, 3, str(tmp_path / "3.snapshot"))])
    assert n == 3 and c2.items(c2.begin(h2, 3, True)) == via_log == c.items(c.begin(h, 3, True))


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
        c2.load(h2, 1, [(p.FILE_CHANGELOG, 1, str(path))])
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
