"""The service's token and permissions (issue 6, "refuse every bad input"), for real.

Token: every connection must start with HELLO carrying the service's token (PROTOCOL.md,
"Transport"). A client that sends another first frame, a wrong token (empty, shorter,
longer, one bit off, all zeros, the token's hex text), the right token with a wrong
protocol version or trailing bytes, or a first frame longer than any HELLO, gets one
`TTLSTATE_AUTH` error and the connection closed; a store operation sent right behind it
(same write) is never run: its local directory never appears.

Permissions: the service directory is 0700 and each worker socket 0600, owned by us; and
another user really cannot list the directory, stat or connect to a socket in it, nor
connect to a socket through a hard link placed in a world-readable directory (that is what
the socket's own mode bits refuse). The other user's attempts run as `nobody` (or another
account) through `runuser`/`setpriv` with a Python that user can execute, else in a forked
child that drops to that user with setgid/setuid; a control attempt as the same user on a
socket it is allowed to use must succeed, so a broken probe cannot pass for a refusal.
"""

from __future__ import annotations

import json
import os
import pathlib
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile

import pytest

from service_client import ServiceProcess
from ttlstate import protocol as p

REPLY_TIMEOUT_S = 20.0


@pytest.fixture
def svc():
    s = ServiceProcess(workers=2)
    yield s
    s.stop()


def _raw(svc, index=0) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(REPLY_TIMEOUT_S)
    s.connect(svc.socket_path(index))
    return s


def _read_all(s: socket.socket) -> bytes:
    """Everything the worker sends until it closes (a timeout fails the test)."""
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return out
        except socket.timeout:
            raise AssertionError(f"the worker kept the connection open; got {out!r}") from None
        if not chunk:
            return out
        out += chunk


def _replies(data: bytes) -> list[tuple[int, str | None, str | None]]:
    out = []
    while data:
        n = int.from_bytes(data[:4], "little")
        status, r = p.decode_response(data[4:4 + n])
        out.append((status, *((r.str(), r.str()) if status == p.STATUS_ERROR else (None, None))))
        data = data[4 + n:]
    return out


def _hello(token: bytes, version: int = p.PROTOCOL_VERSION) -> p.Writer:
    return p.request(p.HELLO, 0).bytes(token).u16(version)


def _open(local_dir: str) -> bytes:
    return p.request(p.OPEN, 0).str("intruder").str(local_dir).i64(0).str("default").str_pairs([]).frame()


def _refused(svc, first: bytes, tmp_path, index=0) -> tuple[int, str | None, str | None]:
    """Send `first`, then an OPEN and a PING in the same write, half-close, and read
    everything: exactly one error, the connection closed, and the OPEN never ran."""
    marker = tmp_path / f"opened-{os.urandom(4).hex()}"
    s = _raw(svc, index)
    try:
        try:
            s.sendall(first + _open(str(marker)) + p.request(p.PING, 0).frame())
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before it read everything
        replies = _replies(_read_all(s))
    finally:
        s.close()
    assert len(replies) == 1 and replies[0][0] == p.STATUS_ERROR, replies
    assert not marker.exists(), f"the OPEN behind a refused first frame ran: {marker} exists"
    return replies[0]


@pytest.mark.parametrize("index", [0, 1])
def test_wrong_tokens_are_refused_and_nothing_runs(svc, tmp_path, index):
    token = svc.token
    flipped = bytearray(token)
    flipped[17] ^= 0x04
    wrong = {"empty": b"", "shorter": token[:-1], "longer": token + b"\0",
             "one bit off": bytes(flipped), "zeros": bytes(len(token)),
             "hex text": token.hex().encode(), "other": os.urandom(len(token))}
    for name, t in wrong.items():
        status, cls, msg = _refused(svc, _hello(t).frame(), tmp_path, index)
        assert cls == "TTLSTATE_AUTH" and "wrong token" in msg, (name, cls, msg)
    # the right token works on the same socket path (the refusals were not a broken worker)
    assert svc.connect(index).call(p.request(p.PING, 0)) is not None


def test_right_token_with_a_wrong_version_or_extra_bytes_is_refused(svc, tmp_path):
    for version in (0, p.PROTOCOL_VERSION - 1, p.PROTOCOL_VERSION + 1, 0xFFFF):
        status, cls, msg = _refused(svc, _hello(svc.token, version).frame(), tmp_path)
        assert cls == "TTLSTATE_AUTH" and f"protocol version {version}" in msg, (version, msg)
    status, cls, msg = _refused(svc, _hello(svc.token).u8(0).frame(), tmp_path)
    assert cls == "TTLSTATE_PROTOCOL_ERROR" and "trailing" in msg, msg


def test_a_first_frame_other_than_hello_is_refused(svc, tmp_path):
    firsts = {
        "open": _open(str(tmp_path / "direct-open")),
        "ping": p.request(p.PING, 0).frame(),
        "manifest files": p.request(p.MANIFEST_FILES, 0).str("/etc/passwd").i64(1).frame(),
        "begin": p.request(p.BEGIN, 1).i64(0).u8(0).i64(-1).frame(),
        "unknown op": p.Writer().u8(0x7F).u32(0).frame(),
        "garbage": b"\x05\x00\x00\x00hello",
        "empty frame": b"\x00\x00\x00\x00",
        "too long": (p.MAX_FRAME + 1).to_bytes(4, "little"),
    }
    for name, first in firsts.items():
        status, cls, msg = _refused(svc, first, tmp_path)
        assert cls in ("TTLSTATE_AUTH", "TTLSTATE_PROTOCOL_ERROR"), (name, cls, msg)
    assert not (tmp_path / "direct-open").exists()


def test_an_oversized_first_frame_is_refused_before_its_body(svc):
    """A header announcing 64 MiB and nothing else: before HELLO the worker answers at once
    (no HELLO is that long) instead of reserving 64 MiB and waiting for them (before the
    fix: no reply, and +64 MiB peak RSS per such connection)."""
    pid = svc.connect(0).worker_pid
    before = _vm_hwm_kib(pid)
    socks = [_raw(svc) for _ in range(4)]
    for s in socks:
        s.sendall(p.MAX_FRAME.to_bytes(4, "little"))  # no half-close: the worker must not wait
    for s in socks:
        replies = _replies(_read_all(s))
        assert len(replies) == 1 and replies[0][1] == "TTLSTATE_AUTH", replies
        assert "not a HELLO" in replies[0][2]
        s.close()
    grown = _vm_hwm_kib(pid) - before
    assert grown < 16 * 1024, f"peak RSS grew by {grown // 1024} MiB"


def test_silence_before_hello_runs_nothing(svc, tmp_path):
    """A client that connects and says nothing gets nothing; closing is clean."""
    s = _raw(svc)
    s.settimeout(0.5)
    with pytest.raises(socket.timeout):
        s.recv(1)
    s.close()
    assert svc.connect(0).call(p.request(p.PING, 0)) is not None


def _vm_hwm_kib(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


# ---------------------------------------------------------------------------------------
# permissions

def test_service_dir_and_sockets_are_private_by_their_mode_bits(svc):
    st = os.stat(svc.dir)
    assert stat.S_ISDIR(st.st_mode) and st.st_mode & 0o777 == 0o700, oct(st.st_mode)
    assert st.st_uid == os.getuid()
    for i in range(svc.workers):
        st = os.stat(svc.socket_path(i))
        assert stat.S_ISSOCK(st.st_mode), oct(st.st_mode)
        assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.getuid(), oct(st.st_mode)


def test_an_existing_loose_service_dir_is_made_private(tmp_path):
    """The service makes its directory 0700 even if it existed with looser bits."""
    d = tmp_path / "svc"
    d.mkdir(mode=0o777)
    os.chmod(d, 0o777)
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate.service", "--dir", str(d)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        proc.stdin.write(os.urandom(32).hex() + "\nspark.sql.streaming.stateStore.ttlstate.workers=1\n\n")
        proc.stdin.flush()
        assert proc.stdout.readline().startswith("READY")
        assert os.stat(d).st_mode & 0o777 == 0o700
        assert os.stat(d / "w0.sock").st_mode & 0o777 == 0o600
    finally:
        proc.stdin.close()
        proc.wait(10)
        proc.stdout.close()


def _other_user() -> pwd.struct_passwd | None:
    me = os.getuid()
    try:
        u = pwd.getpwnam("nobody")
        if u.pw_uid != me:
            return u
    except KeyError:
        pass
    return next((u for u in pwd.getpwall() if u.pw_uid not in (me, 0)), None)


PROBE = r'''
import errno, json, os, socket, sys
out = {"uid": os.getuid()}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(path)
    finally:
        s.close()
args = json.loads(sys.argv[1])
attempt("list_dir", lambda: os.listdir(args["dir"]))
for i, path in enumerate(args["sockets"]):
    attempt(f"stat_socket_{i}", lambda: os.stat(path))
    attempt(f"connect_socket_{i}", lambda: connect(path))
for i, path in enumerate(args["links"]):
    attempt(f"connect_link_{i}", lambda: connect(path))
attempt("connect_control", lambda: connect(args["control"]))
print(json.dumps(out))
'''


def _python_for(user: pwd.struct_passwd, runner: list[str]) -> str | None:
    """A Python interpreter `user` can execute through `runner` (ours may sit in a
    private home directory)."""
    for exe in [sys.executable, shutil.which("python3"), "/usr/bin/python3", "/usr/local/bin/python3"]:
        if not exe or not os.path.exists(exe):
            continue
        r = subprocess.run(runner + [exe, "-c", "print(42)"], capture_output=True, text=True, timeout=60)
        if r.returncode == 0 and r.stdout.strip() == "42":
            return exe
    return None


def _run_as(user: pwd.struct_passwd, args: dict) -> tuple[dict, str]:
    """Run PROBE as `user`; returns (its result, how it was run)."""
    runners = []
    if shutil.which("runuser"):
        runners.append(["runuser", "-u", user.pw_name, "--"])
    if shutil.which("setpriv"):
        runners.append(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"])
    for runner in runners:
        exe = _python_for(user, runner)
        if exe:
            r = subprocess.run(runner + [exe, "-c", PROBE, json.dumps(args)], capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout), " ".join(runner + [exe])
    # no runner with a usable Python: a forked child of this interpreter drops to the user
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rd)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            import io
            import contextlib
            buf = io.StringIO()
            sys.argv = ["probe", json.dumps(args)]
            with contextlib.redirect_stdout(buf):
                exec(PROBE, {"__name__": "probe"})
            os.write(wr, buf.getvalue().encode())
        finally:
            os._exit(0)
    os.close(wr)
    data = b""
    while chunk := os.read(rd, 65536):
        data += chunk
    os.close(rd)
    os.waitpid(pid, 0)
    return json.loads(data), "fork + setuid"


def test_another_user_cannot_list_the_dir_nor_connect(svc, tmp_path):
    user = _other_user()
    if user is None:
        pytest.skip("no other user account exists on this machine to try as")
    if os.getuid() != 0:
        pytest.skip("switching to another user needs root (this test runs as uid "
                    f"{os.getuid()})")
    # the parents are open to everyone, so only the service's own bits can refuse
    open_dir = pathlib.Path(tempfile.mkdtemp(prefix="ttlstate-perm-"))
    try:
        os.chmod(open_dir, 0o755)
        os.chmod(svc.parent, 0o755)
        links = []
        for i in range(svc.workers):  # the same socket inode, reachable through an open dir
            link = open_dir / f"w{i}.sock"
            os.link(svc.socket_path(i), link)
            links.append(str(link))
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # one they may use
        control_path = str(open_dir / "control.sock")
        control.bind(control_path)
        control.listen(4)
        os.chmod(control_path, 0o666)
        args = {"dir": svc.dir, "sockets": [svc.socket_path(i) for i in range(svc.workers)],
                "links": links, "control": control_path}
        result, how = _run_as(user, args)
        control.close()
    finally:
        shutil.rmtree(open_dir, ignore_errors=True)
    print(f"\nas {user.pw_name} (uid {user.pw_uid}) via {how}: {result}")
    assert result["uid"] == user.pw_uid
    assert result["connect_control"] == "ok", (
        f"the probe could not even connect to a socket it may use: {result}")
    refused = {k: v for k, v in result.items() if k not in ("uid", "connect_control")}
    assert refused and all(v == "EACCES" for v in refused.values()), refused
    # and the service is fine for its owner
    assert svc.connect(0).call(p.request(p.PING, 0)) is not None
