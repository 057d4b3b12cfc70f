"""A counting HTTP proxy in front of the S3 server (tests/s3_server.py): every request S3A makes
passes through it and is counted by kind (PUT, GET, HEAD, LIST, DELETE, POST) and by whether
its object lies under a checkpoint's `state/` directory, with the bytes sent and received.
It also injects faults on request (`fail`): a 503 SlowDown, a connection dropped after the
request's bytes arrived and before the server saw them, or after the server stored them and
before the reply (the client cannot tell whether its PUT happened); and a listing that lags the
writes (`lag`: LISTs that leave out the objects last PUT under their prefix). Threads in the
test's process, on a loopback port; `stop()` ends them."""

from __future__ import annotations

import collections
import http.client
import http.server
import re
import threading
import urllib.parse

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


def request_kind(method: str, path: str, query: str) -> str:
    """What an S3 request is: LIST (a GET of a bucket with a listing query), DELETE (also a
    multi-object delete, `POST ?delete`), else its method."""
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    key = path.lstrip("/").partition("/")[2]
    if method == "GET" and (not key or "list-type" in params):
        return "LIST"
    if method == "POST" and "delete" in params:
        return "DELETE"
    return method


def under_state(path: str, query: str) -> bool:
    """Whether a request's object (or a LIST's prefix) lies under a `state/` directory: a path
    component `state`, not a name ending in it (a bucket or checkpoint named `ttlstate`)."""
    key = path.lstrip("/").partition("/")[2]
    prefix = urllib.parse.parse_qs(query).get("prefix", [""])[0]
    return "/state/" in "/" + key or "/state/" in "/" + prefix


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests: collections.Counter = collections.Counter()  # (kind, under state/) -> n
        self.bytes_in: collections.Counter = collections.Counter()  # (kind, under state/) -> bytes sent to S3
        self.bytes_out: collections.Counter = collections.Counter()  # ... -> bytes received from S3
        self.log: list[tuple[str, str, str]] | None = None  # (kind, path, query) of each request, when a list

    def add(self, kind: str, state: bool, sent: int, received: int, path: str = "", query: str = ""):
        with self.lock:
            if self.log is not None:
                self.log.append((kind, path, query))
            self.requests[kind, state] += 1
            self.bytes_in[kind, state] += sent
            self.bytes_out[kind, state] += received

    def snapshot(self) -> dict:
        with self.lock:
            return {"requests": dict(self.requests), "sent": dict(self.bytes_in), "received": dict(self.bytes_out)}

    def reset(self):
        with self.lock:
            self.requests.clear()
            self.bytes_in.clear()
            self.bytes_out.clear()


SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b'<Message>Please reduce your request rate.</Message></Error>')
FAULTS = ("slowdown", "reset", "lost-reply")


class Faults:
    """Faults to inject: each (how, method, path regex) for its next `times` matching requests."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pending: list[list] = []  # [how, method, compiled regex, times left, to let through, action]
        self.injected: list[tuple[str, str, str]] = []  # (how, method, path)

    def take(self, method: str, path: str) -> str | None:
        with self.lock:
            for f in self.pending:
                if f[3] > 0 and f[1] == method and f[2].search(path):
                    if f[4] > 0:  # an interrupt's requests to let through first
                        f[4] -= 1
                        return None
                    f[3] -= 1
                    self.injected.append((f[0], method, path))
                    if f[5] is not None:
                        f[5]()
                    return f[0]
        return None


def without_keys(listing: bytes, keys: set[str]) -> bytes:
    """A ListObjectsV2 reply with the `<Contents>` of `keys` left out (and KeyCount to match)."""
    kept, dropped = [], 0
    for part in re.split(rb"(<Contents>.*?</Contents>)", listing, flags=re.S):
        m = re.match(rb"<Contents>.*?<Key>(.*?)</Key>", part, flags=re.S)
        if m and m.group(1).decode() in keys:
            dropped += 1
            continue
        kept.append(part)
    out = b"".join(kept)
    return re.sub(rb"<KeyCount>(\d+)</KeyCount>", lambda k: b"<KeyCount>%d</KeyCount>" % (int(k.group(1)) - dropped), out)


class Lags:
    """Listings that lag the writes: each (prefix regex, objects to hide) for its next `times` LISTs."""

    def __init__(self):
        self.lock = threading.Lock()
        self.puts: list[str] = []  # keys of the PUTs the server answered, oldest first
        self.pending: list[list] = []  # [compiled prefix regex, objects to hide, times left]
        self.hidden: list[tuple[str, tuple[str, ...]]] = []  # (prefix, keys left out) of each lagging LIST

    def put(self, key: str):
        with self.lock:
            self.puts.append(key)

    def hide(self, prefix: str) -> set[str]:
        """The keys a LIST of `prefix` leaves out: the last PUT objects directly under it."""
        with self.lock:
            for lag in self.pending:
                if lag[2] > 0 and lag[0].search(prefix):
                    lag[2] -= 1
                    children = [k for k in self.puts if k.startswith(prefix) and "/" not in k[len(prefix):]]
                    keys = tuple(dict.fromkeys(reversed(children)))[: lag[1]]
                    self.hidden.append((prefix, keys))
                    return set(keys)
        return set()


class CountingProxy:
    def __init__(self, upstream_port: int):
        counts = self.counts = Counts()
        faults = self.faults = Faults()
        lags = self.lags = Lags()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY: a reply goes out as its head, then its body; with Nagle's algorithm
            # the body waited for the client's delayed ACK of the head on a kept-alive
            # connection (40 ms a LIST or GET): a 4-batch run of two queries on S3 took 52 s
            # instead of 28
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    parts = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(parts)
                        parts.append(self.rfile.read(size))
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _drop(self):
                """Ends the connection without a reply (the client sees it reset)."""
                self.close_connection = True
                self.connection.shutdown(2)

            def _forward(self):
                body = self._body()
                url = urllib.parse.urlsplit(self.path)
                fault = faults.take(self.command, urllib.parse.unquote(url.path))
                if fault == "slowdown":
                    self.send_response(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOW_DOWN)))
                    self.end_headers()
                    self.wfile.write(SLOW_DOWN)
                    return
                if fault in ("reset", "interrupt"):
                    return self._drop()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                if fault == "lost-reply":
                    return self._drop()
                # counted before the reply, so the client never sees a reply not yet counted
                path, query = urllib.parse.unquote(url.path), urllib.parse.unquote(url.query)
                kind = request_kind(self.command, path, url.query)
                if kind == "PUT" and resp.status == 200:
                    lags.put(path.lstrip("/").partition("/")[2])
                elif kind == "LIST" and resp.status == 200:
                    hidden = lags.hide(urllib.parse.parse_qs(url.query).get("prefix", [""])[0])
                    if hidden:
                        data = without_keys(data, hidden)
                state = under_state(path, url.query) or (kind == "DELETE" and b"/state/" in body)
                counts.add(kind, state, len(body), len(data) if self.command != "HEAD" else 0, path, query)
                self.send_response(resp.status, resp.reason)
                head = self.command == "HEAD"  # its Content-Length is the object's: kept
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP and (head or k.lower() != "content-length"):
                        self.send_header(k, v)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def fail(self, how: str, method: str, path_regex: str, times: int = 1):
        """The next `times` requests of `method` whose (unquoted) path matches `path_regex` fail
        `how` (one of FAULTS)."""
        if how not in FAULTS:
            raise ValueError(f"unknown fault {how!r}; one of {FAULTS}")
        with self.faults.lock:
            self.faults.pending.append([how, method, re.compile(path_regex), times, 0, None])

    def interrupt(self, method: str, path_regex: str, action, after: int = 0):
        """Lets `after` requests of `method` whose path matches `path_regex` through; at the next
        one calls `action()` (say, SIGKILL the client) and drops the request unanswered."""
        with self.faults.lock:
            self.faults.pending.append(["interrupt", method, re.compile(path_regex), 1, after, action])

    def lag(self, prefix_regex: str, hide: int = 1, times: int = 1):
        """The next `times` LISTs whose prefix matches `prefix_regex` leave out the `hide` objects
        last PUT directly under that prefix, as a listing that lags the writes."""
        with self.lags.lock:
            self.lags.pending.append([re.compile(prefix_regex), hide, times])

    def start(self) -> "CountingProxy":
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
