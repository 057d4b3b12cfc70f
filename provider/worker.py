"""A store worker process: serves the stores pinned to it over one Unix socket.

Each JVM connection gets a thread; requests on a connection are answered in order. Stores,
transactions and iterators are named by handles, unique within the worker.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
from typing import Callable

from . import conf, layout, manifest, plans, replies, statefile
from . import protocol as p
from .errors import AuthError, ProtocolError, TtlstateError, UnknownHandleError
from .frame_source import FrameSource
from .ttl import MAX_TS
from .rocksdb_options import RocksDbSettings
from .store import Store
from .txn import Txn
from .ttl.config import StateVisibility, TimeCharacteristic, TtlConfig, UpdateType

log = logging.getLogger("ttlstate.worker")

MAX_CHUNK_BYTES = 1 << 20
# A HELLO is 11 bytes plus the token (32 bytes from the JVM): a longer first frame is refused
# before its body is read, so a connection that has not authenticated costs no more memory
# than its receive buffer (`frame_source.BUFFER_BYTES`).
MAX_HELLO_BYTES = 1024


class _Iter:
    __slots__ = ("gen", "txn", "with_expiry")

    def __init__(self, gen, txn, with_expiry: bool):
        self.gen = gen
        self.txn = txn
        self.with_expiry = with_expiry


class Worker:
    """Handle tables and op handlers of one worker process."""

    def __init__(self, index: int, token: bytes):
        self.index = index
        self.token = token
        self.lock = threading.Lock()  # guards the handle tables and every store
        self.stores: dict[int, Store] = {}
        self.txns: dict[int, Txn] = {}
        self.iters: dict[int, _Iter] = {}
        self._ids = itertools.count(1)
        self.handlers: dict[int, Callable] = {
            p.OPEN: self.op_open, p.LOAD: self.op_load, p.BEGIN: self.op_begin,
            p.GET: self.op_get, p.MULTI_GET: self.op_multi_get,
            p.ITER_OPEN: self.op_iter_open, p.ITER_NEXT: self.op_iter_next,
            p.ITER_CLOSE: self.op_iter_close, p.STATS: self.op_stats,
            p.COMMIT: self.op_commit, p.ABORT: self.op_abort,
            p.SNAPSHOT: self.op_snapshot, p.CLOSE: self.op_close, p.PING: self.op_ping,
            p.MAINTAIN: self.op_maintain, p.MANIFEST_FILES: self.op_manifest_files,
            p.READ_CHANGELOG: self.op_read_changelog, p.PLAN: self.op_plan,
        }

    def _new_handle(self) -> int:
        return next(self._ids) & 0xFFFFFFFF or next(self._ids)

    # -- lookups ----------------------------------------------------------------------

    def _store(self, h: int) -> Store:
        s = self.stores.get(h)
        if s is None:
            raise UnknownHandleError(f"no open store with handle {h}")
        return s

    def _txn(self, h: int) -> Txn:
        t = self.txns.get(h)
        if t is None or not t.open:
            self.txns.pop(h, None)
            raise UnknownHandleError(f"no open transaction with handle {h}")
        if t.deferred_error is not None:
            err, t.deferred_error = t.deferred_error, None
            self._drop_txn(h)
            raise err
        return t

    def _drop_txn(self, h: int):
        t = self.txns.pop(h, None)
        if t is not None:
            t.end()
            for ih in [ih for ih, it in self.iters.items() if it.txn is t]:
                del self.iters[ih]

    # -- ops (each reads its payload with `protocol.read_payload` and returns its reply,
    # encoded by `replies`; r is positioned after the header) -------------------------------

    def op_open(self, h, r):
        store_id, local_dir, operator_id, store_name, conf_pairs = p.read_payload(r, p.OPEN)
        settings, ttl = resolve_store(dict(conf_pairs), operator_id, store_name)
        store = Store(store_id, local_dir, ttl, rocksdb=RocksDbSettings.from_conf(settings))
        handle = self._new_handle()
        self.stores[handle] = store
        log.info("worker %d opened %s in %s as handle %d (TTL %s)", self.index, store_id,
                 local_dir, handle, f"{store.ttl_ms} ms" if store.ttl_ms else "off")
        return replies.opened(handle, reply_settings(settings, ttl))

    def op_load(self, h, r):
        version, batch_ts, manifest_version, manifest_path, ssts, changelogs = p.read_payload(r, p.LOAD)
        ssts = dict(ssts)
        store = self._store(h)
        self._forget_txns_of(store)
        return replies.loaded(store.load(version, batch_ts, manifest_version, manifest_path,
                                         ssts, changelogs))

    def op_begin(self, h, r):
        version, mode, batch_ts = p.read_payload(r, p.BEGIN)
        txn = self._store(h).begin(version, mode == p.BEGIN_READ_ONLY, batch_ts,
                                   changelog=mode == p.BEGIN_WRITE)
        handle = self._new_handle()
        self.txns[handle] = txn
        return replies.begun(handle, txn.direct, txn.write_stamp())

    def apply_write_batch(self, h, r):
        """WRITE_BATCH has no reply: errors are kept on the transaction (PROTOCOL.md)."""
        (records,) = p.read_payload(r, p.WRITE_BATCH)  # decode fully first: a bad frame changes nothing
        self._write(h, lambda txn: txn.apply(records, p.encoded_records(r.buf, records)))

    def apply_write_stamped(self, h, r):
        """WRITE_STAMPED: as WRITE_BATCH, its values stamped by the JVM."""
        stamp, records, encoded, accesses, replaced, expired = p.read_write_stamped(r)
        r.end()
        self._write(h, lambda txn: txn.apply_prestamped(stamp, records, encoded, accesses, replaced, expired))

    def _write(self, h, apply):
        """`apply` a decoded write frame to transaction `h`; an error is kept on it, returned by
        its next request (the frame gets no reply)."""
        txn = self.txns.get(h)
        if txn is None or not txn.open or txn.deferred_error is not None:
            return
        if txn.read_only:
            txn.deferred_error = TtlstateError("write to a read-only transaction")
            return
        try:
            apply(txn)
        except ProtocolError as e:
            # the frame contradicts its transaction: the request that learns it gets an error and
            # its connection stays open, as it may be another connection than the frame's
            txn.deferred_error = TtlstateError(f"a write frame of this transaction was refused: {e}")
        except TtlstateError as e:
            txn.deferred_error = e
        except Exception as e:  # noqa: BLE001 - surfaced on the next call
            txn.deferred_error = TtlstateError(f"{type(e).__name__}: {e}")

    def op_get(self, h, r):
        (key,) = p.read_payload(r, p.GET)
        return replies.got(*self._txn(h).lookup(key))

    def op_multi_get(self, h, r):
        """The answers of the keys asked, in order, as many as one reply carries
        (`protocol.answerable`); the JVM asks again for the rest."""
        (keys,) = p.read_payload(r, p.MULTI_GET)
        txn = self._txn(h)
        stored = txn.plain_values(keys)
        if stored is not None:  # one batched engine read, no Python call per key
            w = replies.multi_got(len(stored), p.Writer().answers(stored, MAX_TS))
            if w.size() <= p.MULTI_GET_REPLY_BYTES:  # the usual reply: its length costs nothing
                return w
            n = p.answerable(stored)
            return replies.multi_got(n, p.Writer().answers(stored[:n], MAX_TS))
        body, n, size = p.Writer(), 0, 0
        stored = txn.stored_many(keys)  # one batched engine read; None: key by key
        for i, key in enumerate(keys):  # no lookup once the budget is reached: a lookup may refresh the entry
            if n and size >= p.MULTI_GET_REPLY_BYTES:
                break
            value, expires_at = txn.lookup(key) if stored is None else txn.lookup(key, stored[i])
            size += p.answer_bytes(value)
            if n and size > p.MULTI_GET_REPLY_BYTES:
                break  # looked up again when the JVM asks for the rest (same clock, same answer)
            replies.answer(body, value, expires_at)
            n += 1
        return replies.multi_got(n, body)

    def _chunk(self, gen, max_entries: int):
        """The next chunk of an iterator: up to max_entries entries (or ~1 MiB).

        Returns (last, entries, gen): whether the iteration ended, the chunk's entries, and the
        generator to go on with.
        """
        entries = list(itertools.islice(gen, max_entries))
        last = len(entries) < max_entries
        size = 0
        for i, entry in enumerate(entries):
            size += len(entry[0]) + len(entry[1]) + 16
            if size >= MAX_CHUNK_BYTES and i + 1 < len(entries):  # the rest goes back in front
                gen = itertools.chain(entries[i + 1:], gen)
                del entries[i + 1:]
                last = False
                break
        if not last:
            # peek: a chunk that ends exactly at the end is still the last one
            try:
                nxt = next(gen)
            except StopIteration:
                last = True
            else:
                gen = itertools.chain([nxt], gen)
        return last, entries, gen

    def op_iter_open(self, h, r):
        prefix, max_entries, mode = p.read_payload(r, p.ITER_OPEN)
        max_entries = max(1, max_entries)
        txn = self._txn(h)
        with_expiry = mode in (p.ITER_PAIRS_WITH_EXPIRY, p.ITER_STORED_WITH_EXPIRY)
        gen = txn.iterate(prefix, with_expiry, stored=mode == p.ITER_STORED_WITH_EXPIRY)
        last, entries, gen = self._chunk(gen, max_entries)
        handle = 0
        if not last:
            handle = self._new_handle()
            self.iters[handle] = _Iter(gen, txn, with_expiry)
        return replies.iter_opened(handle, last, entries, with_expiry)

    def op_iter_next(self, h, r):
        (max_entries,) = p.read_payload(r, p.ITER_NEXT)
        max_entries = max(1, max_entries)
        it = self.iters.get(h)
        if it is None:
            raise UnknownHandleError(f"no open iterator with handle {h}")
        last, entries, it.gen = self._chunk(it.gen, max_entries)
        if last:
            del self.iters[h]
        return replies.iter_chunk(last, entries, it.with_expiry)

    def op_iter_close(self, h, r):
        p.read_payload(r, p.ITER_CLOSE)
        self.iters.pop(h, None)
        return replies.empty()

    def op_stats(self, h, r):
        p.read_payload(r, p.STATS)
        txn = self._txn(h)
        return replies.stats(txn.num_keys, txn.store.memory_used(), txn.store.take_metrics(txn, final=False))

    def op_commit(self, h, r):
        new_version, path, id, base_id = p.read_payload(r, p.COMMIT)
        txn = self._txn(h)
        if txn.read_only:
            raise TtlstateError("cannot commit a read-only transaction")
        store = txn.store
        try:
            num_keys, size = store.commit(txn, new_version, path)
            metrics = store.take_metrics(txn, final=True)
        finally:
            self._drop_txn(h)
        name = layout.name(new_version, layout.CHANGELOG, id or None, base_id or None) if path else ""
        return replies.committed(num_keys, size, store.memory_used(), store.migrated, name, store.stored_from(), metrics)

    def op_abort(self, h, r):
        p.read_payload(r, p.ABORT)
        self._drop_txn(h)
        return replies.empty()

    def op_snapshot(self, h, r):
        directory, id = p.read_payload(r, p.SNAPSHOT)
        version, num_keys, manifest_path, ssts = self._store(h).snapshot(directory)
        name = layout.name(version, layout.MANIFEST, id or None)
        return replies.snapshot(version, num_keys, manifest_path, name, ssts)

    def op_manifest_files(self, h, r):
        path, version = p.read_payload(r, p.MANIFEST_FILES)
        m = manifest.read(path, version)
        return replies.manifest_files([(f.name, f.size) for f in m.ssts])

    def op_plan(self, h, r):
        """A store's load plan or retention over the listing the JVM sent (`plans`)."""
        return plans.reply(plans.answer(*p.read_payload(r, p.PLAN)))

    def op_read_changelog(self, h, r):
        """Records `fromRecord` on of a changelog file, at most `maxRecords` and about
        `MAX_CHUNK_BYTES`; the reply ends with the next record's index, -1 at the end."""
        path, version, start, max_records = p.read_payload(r, p.READ_CHANGELOG)
        if start < 0:  # well-formed, so an error reply (the connection stays)
            raise TtlstateError(f"READ_CHANGELOG from a negative record index {start}")
        body = p.Writer()
        n = size = 0
        index, following = 0, -1
        for key, value in statefile.user_records(path, version):
            if index >= start:
                if n >= max(max_records, 1) or (n and size >= MAX_CHUNK_BYTES):
                    following = index
                    break
                replies.changelog_record(body, key, value)
                n += 1
                size += len(key) + (len(value) if value is not None else 0) + 9
            index += 1
        return replies.changelog_records(n, body, following)

    def op_close(self, h, r):
        (delete_files,) = p.read_payload(r, p.CLOSE)
        self._close_store(h, delete_files)
        return replies.empty()

    def op_ping(self, h, r):
        p.read_payload(r, p.PING)
        return replies.empty()

    def op_maintain(self, h, r):
        p.read_payload(r, p.MAINTAIN)
        self._store(h).maintain()
        return replies.empty()

    def _close_store(self, h: int, delete_files: bool):
        """Forget store handle `h` and its transactions, and close its database."""
        store = self.stores.pop(h, None)
        if store is not None:
            self._forget_txns_of(store)
            store.close(delete_files)
            log.info("worker %d closed %s", self.index, store.store_id)

    def _forget_txns_of(self, store: Store):
        for th in [th for th, t in self.txns.items() if t.store is store]:
            self._drop_txn(th)

    # -- connections ------------------------------------------------------------------

    def serve_connection(self, conn: socket.socket):
        owned: set[int] = set()  # stores opened on this connection, closed when it drops
        try:
            frames = FrameSource(conn)
            self._handshake(conn, frames)
            while True:
                body = frames.next()
                if body is None:
                    return
                reply = self._dispatch(body, owned)
                if reply is not None:
                    conn.sendall(reply)
        except ProtocolError as e:
            log.error("worker %d: closing connection after a malformed frame: %s", self.index, e)
            _send_quietly(conn, p.error_frame(e.error_class, str(e)))
        except AuthError as e:
            log.warning("worker %d: refused a connection: %s", self.index, e)
            _send_quietly(conn, p.error_frame(e.error_class, str(e)))
        except OSError as e:
            log.info("worker %d: connection lost: %s", self.index, e)
        finally:
            with self.lock:
                for h in owned:
                    try:
                        self._close_store(h, delete_files=True)
                    except TtlstateError as e:
                        log.warning("worker %d: closing store %d: %s", self.index, h, e)
            conn.close()

    def _handshake(self, conn: socket.socket, frames: FrameSource):
        body = frames.next(MAX_HELLO_BYTES)
        if body is None:
            raise OSError("closed before HELLO")
        r = p.Reader(body)
        op, _ = p.read_header(r)
        if op != p.HELLO:
            raise AuthError(f"first frame must be HELLO, got {p.OP_NAMES[op]}")
        token, version = p.read_payload(r, p.HELLO)
        if not _consteq(token, self.token):
            raise AuthError("wrong token")
        if version != p.PROTOCOL_VERSION:
            raise AuthError(f"protocol version {version} is not supported "
                            f"(this worker speaks {p.PROTOCOL_VERSION})")
        conn.sendall(replies.hello(os.getpid(), self.index).frame())

    def _dispatch(self, body: bytes, owned: set[int]) -> bytes | None:
        r = p.Reader(body)
        op, handle = p.read_header(r)
        with self.lock:
            if op == p.WRITE_BATCH:
                self.apply_write_batch(handle, r)
                return None
            if op == p.WRITE_STAMPED:
                self.apply_write_stamped(handle, r)
                return None
            if op == p.HELLO:
                raise ProtocolError("HELLO sent twice")
            try:
                w = self.handlers[op](handle, r)
            except ProtocolError:
                raise
            except TtlstateError as e:
                return p.error_frame(e.error_class, str(e))
            except Exception as e:  # noqa: BLE001 - never let one request kill the worker
                log.exception("worker %d: %s failed", self.index, p.OP_NAMES[op])
                return p.error_frame(TtlstateError.error_class, f"{type(e).__name__}: {e}")
            if op == p.OPEN:  # the reply's first field is the new store handle
                owned.add(p.Reader(w.body(), 1).u32())
            elif op == p.CLOSE:
                owned.discard(handle)
            return w.frame()


def resolve_store(confs: dict[str, str], operator_id: int, store_name: str) -> tuple[dict[str, object], TtlConfig]:
    """A store's settings (short names, `conf.resolve`) and TTL settings (store > operator >
    global, `conf.ttl_settings`) from OPEN's confs; `InvalidConfError` names a bad key."""
    return conf.resolve(confs, "store"), conf.ttl_settings(confs, operator_id, store_name)


def reply_settings(settings: dict[str, object], ttl: TtlConfig) -> list[tuple[str, object]]:
    """What an OPEN reply gives the JVM, by name: the store's resolved settings
    (`conf.resolve(..., "store")`) and what it needs to answer reads itself (`_view_settings`)."""
    return sorted({**settings, **_view_settings(ttl)}.items())


def _view_settings(ttl: TtlConfig) -> dict[str, object]:
    """What the JVM needs to answer reads itself (docs/PROTOCOL.md, OPEN)."""
    return {"ttl.ms": ttl.ttl_ms if ttl.enabled else 0,
            "ttl.refreshOnRead": ttl.enabled and ttl.update_type is UpdateType.ON_READ_AND_WRITE,
            "ttl.batchClock": ttl.time_characteristic is TimeCharacteristic.BATCH_TIMESTAMP,
            "ttl.eventTime": ttl.enabled and ttl.event_time,
            "ttl.countsAccesses": ttl.incremental_cleanup,
            "ttl.returnExpired": ttl.enabled and ttl.state_visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP,
            "ttl.countsEveryRecord": ttl.enabled and ttl.incremental_cleanup and ttl.incremental_every_record}


def _consteq(a: bytes, b: bytes) -> bool:
    import hmac
    return hmac.compare_digest(a, b)


def _send_quietly(conn: socket.socket, data: bytes):
    try:
        conn.sendall(data)
    except OSError:
        pass


def serve(index: int, listener: socket.socket, token: bytes):
    """Accept connections forever (the worker process's main loop)."""
    worker = Worker(index, token)
    log.info("worker %d (pid %d) serving", index, os.getpid())
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=worker.serve_connection, args=(conn,),
                         name="ttlstate-conn", daemon=True).start()
