"""Rebuilding a store's database as a checkpointed version: a snapshot's SSTs (checked and
hard-linked) and inline files, then the changelogs after it; files of another value layout
or database kind are migrated on the way (docs/decisions/018-sst-snapshots.md to
docs/decisions/028-migrations-open-old-snapshot.md).
"""

from __future__ import annotations

import logging
import operator
import os
import shutil

from rocksdict import AccessType, Options, Rdict, WriteBatch

from . import manifest, statefile
from .engine import db_items, link_checked, without_write_time
from .errors import CorruptFileError, StorageError, TtlstateError
from .manifest import Manifest
from .statefile import FILE_CHANGELOG
from .ttl import codec, event_time

log = logging.getLogger("ttlstate.store")

_REWRITE_BATCH = 10_000  # entries per WriteBatch when a load migrates a checkpoint


def load(store, version: int, batch_ts: int, manifest_version: int, manifest_path: str,
         ssts: dict[str, str], changelogs) -> int:
    """Rebuild `store`'s database as `version` (see `Store.load`); returns its key count."""
    store._drop_db()
    store.version = -1
    store.num_keys = 0
    store.hist.clear()
    store.migrated = False
    store.batch_ts, store.cursor = -1, b""
    store.ssts = {}
    if store.ttl.event_time:  # the watermark; UNSTAMPED while there is none (ttl.event_time)
        restore_ts = event_time.stamp(event_time.clock(batch_ts))
    else:
        restore_ts = batch_ts if batch_ts >= 0 else store.clock.current_timestamp()
    try:
        if manifest_path:
            m = manifest.read(manifest_path, manifest_version)
            _restore(store, m, ssts, batch_ts, restore_ts)
        elif manifest_version != 0:
            raise TtlstateError(f"{store.store_id}: no manifest path for manifest version "
                                f"{manifest_version} (an empty path means version 0)")
        else:
            store.db = store._open(store._new_dir(), batch_ts)
        last = manifest_version
        for file_version, path in changelogs:
            if file_version != last + 1:
                raise StorageError(
                    f"changelog {path} is version {file_version}, expected {last + 1}")
            _replay(store, path, file_version, restore_ts)
            last = file_version
        if last != version:
            raise StorageError(f"files end at version {last}, asked to load {version}")
    except BaseException:
        store._drop_db()
        store.num_keys, store.ssts, store.migrated = 0, {}, False
        store.hist.clear()
        store.db = store._open(store._new_dir(), -1)
        raise
    store.version = version
    if store.migrated:
        log.info("%s: migrated version %d to the %s value layout%s (restore time %d)",
                 store.store_id, version, statefile.LAYOUT_NAMES[store.layout],
                 " in a TTL database" if store.db_ttl else "", restore_ts)
    return store.num_keys


def _restore(store, m: Manifest, ssts: dict[str, str], batch_ts: int, restore_ts: int):
    """Build a database directory from a manifest: its SSTs, checked and hard-linked
    under their RocksDB names, and its inline files; then open it (or migrate it)."""
    path = store.db_dir = store._new_dir()
    os.makedirs(path)
    for f in m.ssts:
        given = ssts.get(f.name)
        if given is None:
            raise CorruptFileError(f"sst/{f.name}", m.version, "not given to LOAD (the manifest lists it)")
        link_checked(f, given, os.path.join(path, f.local), m.version)
    for name, data in m.inline.items():
        with open(os.path.join(path, name), "wb") as out:
            out.write(data)
    store.batch_ts, store.cursor = m.batch_ts, m.cursor
    if m.layout != store.layout or m.db_ttl != store.db_ttl:
        _migrate(store, path, m, batch_ts, restore_ts)
        return
    store.db = store._open(path, batch_ts)
    store.num_keys = m.num_keys
    for ts, n in m.histogram:
        store.hist.add(ts, n)
    store.ssts = {f.local: f for f in m.ssts}


def _migrate(store, path: str, m: Manifest, batch_ts: int, restore_ts: int):
    """Rewrite the entries of a restored checkpoint of another layout or database kind
    into a new database of the store's kind (its SSTs all get new names)."""
    to_ttl = bool(store.ttl_ms)
    relayout = m.layout != store.layout
    old = Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        store.db = store._open(store._new_dir(), batch_ts)
        n = 0
        batch = WriteBatch(raw_mode=True)
        for key, value in db_items(old, b"", set()):
            if m.db_ttl:  # a plain database shows RocksDB's TTL write time after the value
                value = without_write_time(key, value)
            if relayout:
                value = codec.migrate(value, to_ttl, restore_ts)
            batch.put(key, value)
            if to_ttl:
                store.hist.add(codec.timestamp(value))
            n += 1
            if n % _REWRITE_BATCH == 0:
                store.db.write(batch)
                batch = WriteBatch(raw_mode=True)
        store.db.write(batch)
    finally:
        old.close()
        shutil.rmtree(path, ignore_errors=True)
    store.num_keys = n
    store.migrated = True


def _replay(store, path: str, version: int, restore_ts: int):
    """Apply the changelog of `version` (migrating its values if it has another layout)."""
    meta, records = statefile.read(path, FILE_CHANGELOG, version)
    ttl = bool(store.ttl_ms)
    if meta.layout != store.layout:
        store.migrated = True
        records = _migrated(records, ttl, restore_ts)
    pending: dict[bytes, bytes | None] = dict(records)  # a key's last record wins
    batch = WriteBatch(raw_mode=True)
    delta = 0
    hist = store.hist
    # a database with no key and no SST (nothing restored, nothing left by a replay) needs no lookup
    get = _nothing_stored if store.num_keys == 0 and not store.ssts else store.db.get
    for key, value in sorted(pending.items(), key=_KEY):  # key order: docs/decisions/077-memtable-bloom-and-sorted-writes.md
        old = get(key)
        if value is None:
            batch.delete(key)
            delta -= old is not None
        else:
            batch.put(key, value)
            delta += old is None
            if ttl:
                hist.add(codec.timestamp(value))
        if ttl and old is not None:
            hist.add(codec.timestamp(old), -1)
    store.db.write(batch)
    store.num_keys += delta
    store.batch_ts, store.cursor = meta.batch_ts, meta.cursor


_KEY = operator.itemgetter(0)


def _nothing_stored(key: bytes) -> None:
    """The lookup of a database that holds no key."""
    return None


def _migrated(records, to_ttl: bool, restore_ts: int):
    for key, value in records:
        yield key, None if value is None else codec.migrate(value, to_ttl, restore_ts)
