"""A minimal Python client of the store service, for tests (the JVM shim is the real client)."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile

import psutil

from ttlstate import protocol as p
from ttlstate.ttl import codec


def encode_records(w: p.Writer, records) -> p.Writer:
    """Append `(kind, key, value)` write records to `w` as the JVM encodes them (a WRITE_BATCH
    frame's records, whose bytes a changelog copies); a live-entry hint as `read_records` gives
    it: `(RECORD_PUT_OVER_LIVE, key, (value, expiresAt))`, `(RECORD_REMOVE_LIVE, key, expiresAt)`."""
    for kind, key, value in records:
        if kind == p.RECORD_ACCESS:
            w.u8(kind).u32(value)
            continue
        w.u8(kind).bytes(key)
        if kind == p.RECORD_PUT_OVER_LIVE:
            w.bytes(value[0]).i64(value[1])
        elif kind == p.RECORD_REMOVE_LIVE:
            w.i64(value)
        elif kind not in (p.RECORD_REMOVE, p.RECORD_REMOVE_PRESENT):
            w.bytes(value)
    return w


def encode_stamped(txn: int, stamp: int, records, expired=()) -> p.Writer:
    """The WRITE_STAMPED frame the JVM sends for `records` (as `encode_records` takes them) on a
    transaction whose BEGIN answered `stamp`: each put's value stamped, a live-entry hint as
    PUT_OVER / REMOVE_PRESENT with its expiry time counted in the tail, ACCESS records summed
    into the tail, then the keys of reads the JVM found `expired` (docs/PROTOCOL.md, WRITE_STAMPED)."""
    body, n, accesses, live = p.Writer(), 0, 0, {}
    for kind, key, value in records:
        if kind == p.RECORD_ACCESS:
            accesses += value
            continue
        n += 1
        if kind == p.RECORD_PUT_OVER_LIVE:
            kind, (value, expires_at) = p.RECORD_PUT_OVER, value
            live[expires_at] = live.get(expires_at, 0) + 1
        elif kind == p.RECORD_REMOVE_LIVE:
            live[value] = live.get(value, 0) + 1
            kind, value = p.RECORD_REMOVE_PRESENT, None
        body.u8(kind).bytes(key)
        if value is not None:
            body.bytes(codec.encode(stamp, value))
    w = p.request(p.WRITE_STAMPED, txn).i64(stamp).u32(n)
    w.parts.extend(body.parts)
    w.u32(accesses).u32(len(live))
    for expires_at, count in live.items():
        w.i64(expires_at).u32(count)
    w.u32(len(expired))
    for key in expired:
        w.bytes(key)
    return w


# Run in the store service's interpreter before its main() (`service_code`): workers that cannot
# start, as a broken install (ttlstate.worker does not import) or a worker failing as it starts.
BROKEN_WORKER_SETUPS = {
    "import": "sys.modules['ttlstate.worker'] = None",
    "start": "import ttlstate.worker as w\ndef serve(*args):\n    raise RuntimeError('no worker starts')\n"
             "w.serve = serve",
    # A fault in native code as the worker starts (a broken extension module): SIGSEGV.
    "crash": "import ttlstate.worker as w\ndef serve(*args):\n    import ctypes\n    ctypes.string_at(0)\n"
             "w.serve = serve",
}
# What the service's stderr says of each failed start of a worker broken as BROKEN_WORKER_SETUPS does.
FAILED_START_LINES = {"start": "no worker starts", "crash": "was killed by SIGSEGV"}


def service_code(setup: str) -> str:
    """Python source that runs `setup`, then the store service's main() on sys.argv[1:]."""
    return f"import sys\n{setup}\nfrom ttlstate.service import main\nsys.exit(main(sys.argv[1:]))"


def start_service(directory: str, token: bytes, workers: int, confs: dict | None = None,
                  setup: str | None = None) -> subprocess.Popen:
    """`python -m ttlstate.service --dir directory` with its start-up lines written as the shim
    writes them (token, confs, an empty line), stdin left open; with `setup`, that code runs in
    its interpreter first (`service_code`)."""
    code = ["-m", "ttlstate.service"] if setup is None else ["-c", service_code(setup)]
    proc = subprocess.Popen([sys.executable, *code, "--dir", directory], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [token.hex()] + [f"{k}={v}" for k, v in (confs or {}).items()]
    lines += [f"spark.sql.streaming.stateStore.ttlstate.workers={workers}", ""]
    proc.stdin.write("\n".join(lines) + "\n")
    proc.stdin.flush()
    return proc


def service_processes(directory: str) -> list[psutil.Process]:
    """Live processes of the store service started with `--dir directory`, and its workers
    (forked from it, so with its command line), whoever their parent is now."""
    found = []
    for c in psutil.process_iter():
        try:
            args = c.cmdline()
            if "--dir" in args[:-1] and args[args.index("--dir") + 1] == directory \
                    and c.status() != psutil.STATUS_ZOMBIE:
                found.append(c)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


class ServiceProcess:
    """Starts `python -m ttlstate.service` like the shim does; stop() or EOF ends it."""

    def __init__(self, workers: int = 2, confs: dict | None = None):
        self.parent = tempfile.mkdtemp(prefix="ttlstate-test-")
        self.dir = os.path.join(self.parent, "svc")
        self.token = secrets.token_bytes(32)
        self.proc = start_service(self.dir, self.token, workers, confs)
        ready = self.proc.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise RuntimeError(f"service did not start: {ready} {self.proc.stderr.read()}")
        self.pid, self.workers, self.worker_timeout_ms = int(ready[1]), int(ready[2]), int(ready[3])

    def socket_path(self, index: int) -> str:
        return os.path.join(self.dir, f"w{index}.sock")

    def connect(self, index: int = 0, token: bytes | None = None) -> "Client":
        return Client(self.socket_path(index), self.token if token is None else token)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        shutil.rmtree(self.parent, ignore_errors=True)


class WorkerError(Exception):
    def __init__(self, error_class, message):
        super().__init__(f"[{error_class}] {message}")
        self.error_class = error_class


class Client:
    def __init__(self, path: str, token: bytes):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        r = self.call(p.request(p.HELLO, 0).bytes(token).u16(p.PROTOCOL_VERSION))
        self.protocol, self.worker_pid, self.worker_index = r.u16(), r.i32(), r.u32()

    def send(self, w: p.Writer):
        self.sock.sendall(w.frame())

    def recv(self) -> p.Reader:
        header = self._exact(4)
        body = self._exact(int.from_bytes(header, "little"))
        status, r = p.decode_response(body)
        if status == p.STATUS_ERROR:
            raise WorkerError(r.str(), r.str())
        return r

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the worker")
            buf += chunk
        return buf

    def call(self, w: p.Writer) -> p.Reader:
        self.send(w)
        return self.recv()

    # conveniences
    def open(self, store_id: str, local_dir: str, confs=(), operator: int = 0,
             store_name: str = "default") -> tuple[int, dict]:
        r = self.call(p.request(p.OPEN, 0).str(store_id).str(local_dir).i64(operator)
                      .str(store_name).str_pairs(confs))
        return r.u32(), dict(r.str_pairs())

    def load(self, store: int, version: int, manifest_version: int = 0, manifest_path: str = "",
             ssts=(), changelogs=(), batch_ts: int = -1) -> int:
        """`ssts`: (sstName, path) pairs or a dict; `changelogs`: (version, path) pairs."""
        ssts = list(ssts.items()) if isinstance(ssts, dict) else list(ssts)
        w = (p.request(p.LOAD, store).i64(version).i64(batch_ts).i64(manifest_version)
             .str(manifest_path).u32(len(ssts)))
        for name, path in ssts:
            w.str(name).str(path)
        w.u32(len(changelogs))
        for file_version, path in changelogs:
            w.i64(file_version).str(path)
        return self.call(w).i64()

    def begin(self, store: int, version: int, read_only=False, batch_ts: int = -1) -> int:
        return self.call(p.request(p.BEGIN, store).i64(version).u8(read_only).i64(batch_ts)).u32()

    def write(self, txn: int, records):
        """WRITE_BATCH of `(key, value)` puts and `(key, None)` removes, without hints."""
        self.write_records(txn, [(p.RECORD_PUT, k, v) if v is not None else (p.RECORD_REMOVE, k, None)
                                 for k, v in records])

    def write_records(self, txn: int, records):
        """WRITE_BATCH of `(kind, key, value)` records: the JVM's presence hints included."""
        self.send(encode_records(p.request(p.WRITE_BATCH, txn).u32(len(records)), records))

    def get(self, txn: int, key: bytes):
        return self.lookup(txn, key)[0]

    def lookup(self, txn: int, key: bytes) -> tuple[bytes | None, int | None]:
        """(value, expiresAt) as GET answers them (expiresAt None when absent)."""
        r = self.call(p.request(p.GET, txn).bytes(key))
        value = r.optbytes()
        return value, (None if value is None else r.i64())

    def items(self, txn: int, prefix=b"", chunk=2):
        handle, out = self.iter_open(txn, prefix, chunk)
        while handle:
            handle, more = self.iter_next(handle, chunk)
            out += more
        return out

    def iter_open(self, txn: int, prefix=b"", chunk=2) -> tuple[int, list[tuple[bytes, bytes]]]:
        """ITER_OPEN: (the iterator's handle, 0 once it ended; the first chunk's pairs)."""
        r = self.call(p.request(p.ITER_OPEN, txn).bytes(prefix).u32(chunk).u8(p.ITER_PAIRS))
        return _iter_chunk(r, r.u32())

    def iter_next(self, handle: int, chunk=2) -> tuple[int, list[tuple[bytes, bytes]]]:
        """ITER_NEXT: (the handle, 0 once the iterator ended; the chunk's pairs)."""
        return _iter_chunk(self.call(p.request(p.ITER_NEXT, handle).u32(chunk)), handle)

    def stats(self, txn: int):
        r = self.call(p.request(p.STATS, txn))
        return r.i64(), r.i64()

    def stats_metrics(self, txn: int) -> tuple[int, dict]:
        r = self.call(p.request(p.STATS, txn))
        num_keys, _ = r.i64(), r.i64()
        return num_keys, _read_metrics(r)

    def commit(self, txn: int, version: int, path: str):
        return self.commit_full(txn, version, path)[:3]

    def commit_full(self, txn: int, version: int, path: str, id: str = "", base_id: str = ""):
        """(numKeys, fileBytes, memoryUsedBytes, snapshotWanted, metrics); the changelog's
        checkpoint name in `self.changelog_name`, `storedFrom` in `self.stored_from`."""
        r = self.call(p.request(p.COMMIT, txn).i64(version).str(path).str(id).str(base_id))
        num_keys, size, memory, wanted, self.changelog_name = r.i64(), r.i64(), r.i64(), r.bool(), r.str()
        self.stored_from = r.i64()
        return num_keys, size, memory, wanted, _read_metrics(r)

    def snapshot(self, store: int, directory: str, id: str = ""):
        """(version, numKeys, manifestPath, [(sstName, path, size)]); the manifest's checkpoint
        name in `self.manifest_name`."""
        r = self.call(p.request(p.SNAPSHOT, store).str(directory).str(id))
        version, num_keys, manifest_path, self.manifest_name = r.i64(), r.i64(), r.str(), r.str()
        return version, num_keys, manifest_path, [(r.str(), r.str(), r.i64()) for _ in range(r.u32())]

    def manifest_files(self, path: str, version: int) -> list[tuple[str, int]]:
        r = self.call(p.request(p.MANIFEST_FILES, 0).str(path).i64(version))
        return [(r.str(), r.i64()) for _ in range(r.u32())]

    def read_changelog(self, path: str, version: int, start: int = 0, max_records: int = 1 << 20):
        """([(key, value or None)], next record index or -1)."""
        r = self.call(p.request(p.READ_CHANGELOG, 0).str(path).i64(version).i64(start).u32(max_records))
        records = []
        for _ in range(r.u32()):
            kind, key = r.u8(), r.bytes()
            records.append((key, r.bytes() if kind == p.RECORD_PUT else None))
        return records, r.i64()

    def maintain(self, store: int):
        self.call(p.request(p.MAINTAIN, store))

    def close(self):
        self.sock.close()


def _iter_chunk(r: p.Reader, handle: int) -> tuple[int, list[tuple[bytes, bytes]]]:
    last = r.bool()
    return (0 if last else handle), [(r.bytes(), r.bytes()) for _ in range(r.u32())]


def _read_metrics(r: p.Reader) -> dict:
    return {r.str(): r.i64() for _ in range(r.u32())}
