"""`python -m ttlstate inspect|dump|verify|repartition|migrate <checkpointLocation>`: argument parsing,
the commands and their text or JSON output. Reading the checkpoint is `checkpoint_reader`;
decoding Spark's rows is `unsaferow`; rescaling a stopped query's state is `repartition`; a
checkpoint on another Hadoop file system (hdfs:, s3a:, ...) is reached through
`remote_checkpoint`.

Exit status: 0 success; 1 `verify` found problems (or `inspect` could not load a store);
2 a usage error or a location that cannot be read as asked (`error: [CLASS] message`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import sys
import time

from . import checkpoint_reader as cr
from . import migrate, prefix_key, remote_checkpoint, repartition, statefile, unsaferow
from .conf import PREFIX
from .errors import MigrateRunningError, MigrateUnsupportedError, RepartitionNotStoppedError, TtlstateError
from .ttl import event_time, expiration_ts
from .ttl import config as ttl_config
from .ttl.config import TimeCharacteristic

READ_ONLY = ("Never changes the checkpoint. "
             "A checkpoint on another Hadoop file system (hdfs:, s3a:, ...) is copied to a local "
             "temporary directory first, with the --conf spark.* settings the query uses for it.")
# Histogram edges (ms): remaining time-to-live (or age) up to each edge, then beyond the last.
_EDGES = [(0, "<= 0"), (1_000, "<= 1s"), (10_000, "<= 10s"), (60_000, "<= 1m"),
          (600_000, "<= 10m"), (3_600_000, "<= 1h"), (21_600_000, "<= 6h"),
          (86_400_000, "<= 1d"), (604_800_000, "<= 7d"), (2_592_000_000, "<= 30d")]


_shown = [lambda text: text]  # paths of a remote checkpoint's local copy shown as its own


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_signal)  # so temporary directories are deleted
    try:
        return args.run(args)
    except TtlstateError as e:
        print(f"error: [{e.error_class}] {_shown[0](str(e))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `... dump | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        # the `ttlstate` console command or `python -m ttlstate`
        prog="ttlstate" if os.path.basename(sys.argv[0]) == "ttlstate" else "python -m ttlstate",
        description="Look inside the state of a streaming query's checkpoint kept by ttlstate, "
                    "rescale a stopped query's state to another number of shuffle partitions, "
                    "or move a stopped query's state from Spark's providers to ttlstate, "
                    "on any Hadoop file system the query uses (a local path, file:, hdfs:, "
                    "s3a:, ...).")
    sub = p.add_subparsers(dest="command", required=True,
                           metavar="{inspect,dump,verify,repartition,migrate}")

    def location(sp):
        sp.add_argument("location", metavar="checkpointLocation",
                        help="the query's checkpoint location: a local path or a URI of a "
                             "Hadoop file system (file:, hdfs:, s3a:, ...)")
        sp.add_argument("--conf", metavar="KEY=VALUE", action="append", default=[],
                        help="a Spark conf the query's file system needs (spark.hadoop.*, "
                             "spark.jars.packages, ...: passed to spark-submit) or, for "
                             f"inspect, a {PREFIX}* TTL setting of the query, per-operator and "
                             "per-store overrides included (repeatable)")

    def ttl_args(sp):
        sp.add_argument("--ttl", metavar="DURATION",
                        help="the TTL the query runs with (30s, 10 minutes, 1h, ...): the "
                             "checkpoint does not record it; gives remaining time-to-live "
                             "and live key counts")
        sp.add_argument("--now", metavar="MS", type=int,
                        help="the time (ms since the epoch) to measure time-to-live against; "
                             "default: now, or for stores whose TTL runs on event time "
                             "(--conf ...timeCharacteristic=EventTime) the watermark of their "
                             "latest version")

    sp = sub.add_parser("inspect", help="operators, partitions, stores, versions, sizes, key "
                        "counts, TTL settings and a time-to-live histogram",
                        description="Summarise the state of a checkpoint location: its "
                        "operators, partitions and stores, the versions retained (manifests, "
                        "changelogs), sizes on disk, key counts of the latest version, the TTL "
                        "settings recorded and a histogram of the entries' remaining "
                        "time-to-live (their age without --ttl). " + READ_ONLY)
    location(sp)
    ttl_args(sp)
    sp.add_argument("--json", action="store_true", help="print one JSON document")
    sp.set_defaults(run=_inspect)

    sp = sub.add_parser("dump", help="keys and values of a store, with their TTL timestamps",
                        description="Print the entries of a store at one version, for one partition, "
                        "several, or every one: keys and values decoded with the state schema Spark "
                        "recorded (hex when it is unknown or does not fit) and each entry's TTL "
                        "timestamp. " + READ_ONLY)
    location(sp)
    sp.add_argument("--operator", type=int, required=True, metavar="N")
    sp.add_argument("--partition", type=int, action="append", metavar="P",
                    help="a partition (repeat for several; default: every partition of the "
                         "operator). With one, --json prints one document; otherwise a list of them")
    sp.add_argument("--store", metavar="NAME",
                    help="store name (a join has left-keyToNumValues, left-keyWithIndexToValue, "
                         "right-...); needed only when the operator has several")
    sp.add_argument("--version", type=int, metavar="V", help="state version (default: the latest)")
    sp.add_argument("--limit", type=int, metavar="N", help="print at most N entries")
    sp.add_argument("--json", action="store_true", help="print one JSON document")
    sp.set_defaults(run=_dump)

    sp = sub.add_parser("verify", help="check every retained version's files (exit 1 on a problem)",
                        description="Check every retained version's files: manifest checksums, "
                        "the size and CRC32 of every SST a manifest lists, every changelog read "
                        "to its end, and that each version's files are all there. Exit 0 if all "
                        "is good, else 1, printing each problem with its file and version. "
                        + READ_ONLY)
    location(sp)
    sp.add_argument("--json", action="store_true", help="print one JSON document")
    sp.set_defaults(run=_verify)

    sp = sub.add_parser("repartition", help="rescale a STOPPED query's state to N shuffle partitions",
                        description="Rewrite the state of a stopped query to N shuffle partitions "
                        "(each key where Spark's hash partitioning puts it, TTL timestamps kept) "
                        "and record it as Spark's offline repartition does: a new batch in the "
                        "offset log whose conf says spark.sql.shuffle.partitions=N, and in the "
                        "commit log. The restarted query runs with N partitions. Stop the query "
                        "first. On another Hadoop file system (hdfs:, s3a:, ...) the checkpoint is "
                        "copied to a local temporary directory, rescaled there and what changed "
                        "written back: state files first, then the offset and commit logs.")
    location(sp)
    sp.add_argument("--partitions", required=True, metavar="N",
                    help="the new number of shuffle partitions (a positive integer)")
    sp.add_argument("--json", action="store_true", help="print one JSON document")
    sp.set_defaults(run=_repartition)

    sp = sub.add_parser("migrate", help="move a STOPPED query's state between Spark's HDFS-backed "
                        "or RocksDB provider and ttlstate",
                        description="Move the state of a stopped query's last committed batch from "
                        "the provider its checkpoint names (Spark's HDFS-backed or RocksDB provider, "
                        "or ttlstate) to another, written beside the source's files, then switch the "
                        "offset log to it in one atomic step: the restarted query goes on on it. "
                        "With TTL on (--ttl, or the query's TTL settings as --conf), every entry "
                        "gets the TTL timestamp of that batch (its watermark under EventTime). "
                        "Stop the query first. Interrupted, the checkpoint still runs on its "
                        "source provider; run the command again. Several checkpoint locations "
                        "(the queries of one application) are all checked before any is "
                        "changed, then migrated one after another in one Spark session.")
    location(sp)
    sp.add_argument("more_locations", nargs="*", metavar="checkpointLocation",
                    help="more checkpoint locations to migrate the same way")
    sp.add_argument("--to", required=True, choices=migrate.TARGETS, help="the target provider")
    sp.add_argument("--ttl", metavar="DURATION", help="the TTL the query will run with on ttlstate")
    sp.add_argument("--dry-run", action="store_true",
                    help="read the state and print what would be migrated; change nothing")
    sp.add_argument("--json", action="store_true",
                    help="print one JSON document (with several locations, an array of them)")
    sp.set_defaults(run=_migrate)
    return p


# -- inspect ----------------------------------------------------------------------------------

@contextlib.contextmanager
def _opened(args, parts: list[str] | None = None):
    """The checkpoint location of `args` (a remote one copied locally, `parts` of it)."""
    with remote_checkpoint.opened(args.location, _confs(args)[1], parts) as copy:
        _shown[0] = copy.shown
        yield copy


def _inspect(args) -> int:
    confs = _ttl_confs(args)
    with _opened(args) as copy:
        return _inspect_location(args, cr.CheckpointLocation(copy.path), confs, copy.shown)


def _inspect_location(args, loc: cr.CheckpointLocation, confs: dict[str, str], shown) -> int:
    ops = loc.operators()
    given = args.now is not None
    now = args.now if given else time.time_ns() // 1_000_000
    all_stores = [(op, sd) for op in ops for sd in loc.stores(op)]
    progress = _Progress("loading stores")
    doc_ops, failed = [], 0
    by_op: dict[int, list[dict]] = {op.id: [] for op in ops}
    for i, (op, sd) in enumerate(all_stores):
        progress(i, len(all_stores), sd.label)
        info = _store_summary(sd, op, confs, now, given)
        info["path"] = shown(info["path"])
        if "error" in info:
            info["error"] = shown(info["error"])
        failed += "error" in info
        by_op[op.id].append(info)
    progress(len(all_stores), len(all_stores), "")
    for op in ops:
        stores = by_op[op.id]
        doc_ops.append({
            "id": op.id, "name": op.name, "numPartitions": op.num_partitions,
            "partitions": op.partitions,
            "storeNames": [s.name for s in op.stores],
            "keys": sum(s.get("keys", 0) for s in stores),
            "keysByStore": {n.name: sum(s.get("keys", 0) for s in stores if s["store"] == n.name)
                            for n in op.stores},
            "sizeBytes": sum(s["sizeBytes"]["total"] for s in stores),
            "ttl": _operator_ttl(stores),
            "ttlHistogram": _histogram(stores, now, given),
            "stores": stores,
        })
    doc = {
        "checkpoint": shown(loc.path),
        "lastCommittedBatch": loc.last_committed_batch(),
        "now": now,
        "keys": sum(o["keys"] for o in doc_ops),
        "sizeBytes": sum(o["sizeBytes"] for o in doc_ops),
        "operators": doc_ops,
    }
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        _print_inspect(doc)
    return 1 if failed else 0


def _confs(args) -> tuple[dict[str, str], dict[str, str]]:
    """The --conf settings: (ttlstate's TTL settings, the other Spark confs)."""
    ttl, spark = {}, {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise cr.CheckpointReadError(f"--conf {item!r}: expected KEY=VALUE")
        (ttl if key.strip().startswith(PREFIX) else spark)[key.strip()] = value.strip()
    return ttl, spark


def _ttl_confs(args) -> dict[str, str]:
    confs = _confs(args)[0]
    if args.ttl is not None:
        confs[PREFIX + "ttl"] = args.ttl
    ttl_config.resolve(confs, 0)  # a bad value: InvalidConfError naming the key, before any work
    return confs


def _store_summary(sd: cr.StoreDir, op: cr.OperatorInfo, confs: dict, now: int, given: bool) -> dict:
    """A store's files, keys and TTL. `now` measures time-to-live; under EventTime, unless
    `given`, it is the watermark of the store's latest version instead (the wall clock says
    nothing about event time)."""
    manifests = sorted({f.version for f in sd.of_kind("manifest")})
    changelogs = sorted({f.version for f in sd.of_kind("changelog")})
    info = {
        "partition": sd.partition, "store": sd.name, "path": sd.path,
        "versions": sd.versions(), "manifests": manifests, "changelogs": changelogs,
        "latestVersion": sd.latest(),
        "sizeBytes": dict(sd.sizes, total=sd.size),
    }
    try:
        with cr.materialise(sd) as loaded:
            store = loaded.store
            info["keys"] = store.num_keys
            ttl = {"valueLayout": statefile.LAYOUT_NAMES[store.layout], "dbTtl": loaded.db_ttl,
                   "batchTimestampMs": store.batch_ts, "cursor": store.cursor.hex()}
            if loaded.ttl_layout:
                resolved = ttl_config.resolve(confs, op.id, sd.name) if confs else None
                ttl_ms = resolved.ttl_ms if resolved is not None and resolved.enabled else None
                ttl["ttlMs"] = ttl_ms
                ttl["timestamps"] = sorted([ts, n] for ts, n in store.hist.counts.items() if n)
                ttl["clock"] = resolved.time_characteristic.value if resolved is not None else None
                if resolved is not None and resolved.event_time:
                    now = now if given else event_time.clock(store.batch_ts)
                    ttl["now"] = now  # the watermark the live counts and the histogram use
                    ttl["unstamped"] = store.hist.counts.get(event_time.UNSTAMPED, 0)
                if ttl_ms:
                    if store.batch_ts >= 0:
                        info["liveKeysAtVersionClock"] = store.hist.live_count(ttl_ms, store.batch_ts)
                    info["liveKeysNow"] = store.hist.live_count(ttl_ms, now)
            info["ttl"] = ttl
    except TtlstateError as e:
        info["error"] = f"[{e.error_class}] {e}"
    return info


def _operator_ttl(stores: list[dict]) -> dict:
    """What the stores of an operator record about TTL (the values seen, across stores)."""
    loaded = [s["ttl"] for s in stores if "ttl" in s]
    return {
        "valueLayouts": sorted({t["valueLayout"] for t in loaded}),
        "dbTtl": sorted({t["dbTtl"] for t in loaded}, key=str),
        "ttlMs": sorted({t.get("ttlMs") for t in loaded if t["valueLayout"] == "ttl"}, key=str),
        "batchTimestampMs": max((t["batchTimestampMs"] for t in loaded), default=-1),
        "clocks": sorted({t["clock"] for t in loaded if t.get("clock")}),
    }


def _histogram(stores: list[dict], now: int, given: bool) -> dict | None:
    """Entries by remaining time-to-live at `now` (their age if a TTL store's TTL is unknown).

    When every store's TTL runs on event time, the clock is the watermark (the latest of the
    stores' latest versions, unless `now` is `given`), and the entries written before the
    watermark started (no timestamp yet) get a bucket of their own, "unstamped"."""
    ttl_stores = [s for s in stores if s.get("ttl", {}).get("valueLayout") == "ttl"]
    if not ttl_stores:
        return None
    remaining = all(s["ttl"].get("ttlMs") for s in ttl_stores)
    clocks = {s["ttl"].get("clock") for s in ttl_stores}
    on_event_time = clocks == {TimeCharacteristic.EVENT_TIME.value}
    if on_event_time and not given:
        now = max(s["ttl"]["now"] for s in ttl_stores)
    counts = [0] * (len(_EDGES) + 1)
    unstamped = 0
    for s in ttl_stores:
        ttl_ms = s["ttl"].get("ttlMs")
        for ts, n in s["ttl"]["timestamps"]:
            if on_event_time and ts == event_time.UNSTAMPED:
                unstamped += n
                continue
            ms = expiration_ts(ts, ttl_ms) - now if remaining else now - ts
            counts[next((i for i, (edge, _) in enumerate(_EDGES) if ms <= edge), len(_EDGES))] += n
    labels = [label for _, label in _EDGES] + [f"> {_EDGES[-1][1][3:]}"]
    if remaining:
        labels[0] = "expired"
    buckets = [{"label": label, "upToMs": _EDGES[i][0] if i < len(_EDGES) else None, "entries": n}
               for i, (label, n) in enumerate(zip(labels, counts))]
    if on_event_time:
        buckets.append({"label": "unstamped", "upToMs": None, "entries": unstamped})
    return {
        "basis": "remainingTtl" if remaining else "age",
        "clock": clocks.pop() if len(clocks) == 1 else None,
        "now": now,
        "buckets": buckets,
    }


def _print_inspect(doc: dict):
    ops = doc["operators"]
    n_stores = sum(len(o["stores"]) for o in ops)
    n_parts = len({(o["id"], p) for o in ops for p in o["partitions"]})
    last = doc["lastCommittedBatch"]
    print(f"Checkpoint {doc['checkpoint']}")
    print(f"Last committed batch: {last} (state version {last + 1})" if last is not None
          else "Last committed batch: none")
    print(f"State: {len(ops)} operator{_s(len(ops))}, {n_parts} partition{_s(n_parts)}, "
          f"{n_stores} store{_s(n_stores)}, {doc['keys']} keys in the latest versions, "
          f"{_size(doc['sizeBytes'])} on disk")
    for o in ops:
        print()
        print(f"Operator {o['id']}: {o['name'] or '(no operator metadata)'}, "
              f"{len(o['partitions'])} partition{_s(len(o['partitions']))}, "
              f"store{_s(len(o['storeNames']))} {', '.join(o['storeNames'])}")
        print("  TTL: " + _ttl_text(o["ttl"]))
        rows = [("partition", "store", "versions", "manifests", "changelogs", "latest", "keys", "size")]
        for s in o["stores"]:
            keys = str(s["keys"]) if "keys" in s else "error"
            if "liveKeysNow" in s:
                keys += f" ({s['liveKeysNow']} live)"
            rows.append((str(s["partition"]), s["store"], cr.format_ranges(s["versions"]) or "-",
                         cr.format_ranges(s["manifests"]) or "-", cr.format_ranges(s["changelogs"]) or "-",
                         str(s["latestVersion"]), keys, _size(s["sizeBytes"]["total"])))
        if len(o["keysByStore"]) > 1:
            for name, n in o["keysByStore"].items():
                size = sum(s["sizeBytes"]["total"] for s in o["stores"] if s["store"] == name)
                rows.append(("all", name, "", "", "", "", str(n), _size(size)))
        rows.append(("total", "", "", "", "", "", str(o["keys"]), _size(o["sizeBytes"])))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        for s in o["stores"]:
            if "error" in s:
                print(f"  partition {s['partition']} store {s['store']}: cannot load version "
                      f"{s['latestVersion']}: {s['error']}")
        h = o["ttlHistogram"]
        if h:
            total = sum(b["entries"] for b in h["buckets"])
            what = ("Remaining time-to-live" if h["basis"] == "remainingTtl"
                    else "Age (time since last write; give --ttl for the remaining time-to-live)")
            at = ("on the event-time clock, at the watermark " if h["clock"] == TimeCharacteristic.EVENT_TIME.value
                  else "at ")
            print(f"  {what} {at}{_ts(h['now'])}, {total} entries:")
            top = max((b["entries"] for b in h["buckets"]), default=0) or 1
            for b in h["buckets"]:
                bar = "#" * (round(40 * b["entries"] / top) if b["entries"] else 0)
                print(f"    {b['label']:>9}  {b['entries']:>10}  {bar}".rstrip())


def _ttl_text(t: dict) -> str:
    layouts = t["valueLayouts"]
    if not layouts:
        return "unknown (no store could be loaded)"
    if layouts == ["plain"]:
        return "off (plain value layout: the values carry no TTL timestamps)"
    parts = ["on (ttl value layout: an 8-byte timestamp before each value)" if layouts == ["ttl"]
             else "mixed value layouts across stores: " + ", ".join(layouts)]
    db = t["dbTtl"]
    parts.append("RocksDB TTL compaction filter: " + ", ".join(
        "on" if d else "off" if d is False else "not recorded (no snapshot)" for d in db))
    clocks = [c for c in t["clocks"] if c]
    parts.append("clock: " + (", ".join(clocks) + " (given)" if clocks else
                              "not recorded in the checkpoint (give --conf ...timeCharacteristic=...)"))
    if t["batchTimestampMs"] >= 0:
        what = "watermark" if clocks == [TimeCharacteristic.EVENT_TIME.value] else "clock"
        parts.append(f"{what} of the latest version: {_ts(t['batchTimestampMs'])}")
    ttls = [x for x in t["ttlMs"] if x]
    parts.append("duration: " + (", ".join(_duration(x) for x in ttls) + " (given)" if ttls else
                 "not recorded in the checkpoint (give --ttl)"))
    return "; ".join(parts)


# -- dump -------------------------------------------------------------------------------------

def _dump(args) -> int:
    with _opened(args, ["metadata", "offsets", "commits", f"state/{args.operator}"]) as copy:
        return _dump_location(args, cr.CheckpointLocation(copy.path), copy.shown)


def _dump_location(args, loc: cr.CheckpointLocation, shown) -> int:
    op = loc.operator(args.operator)
    docs = [_dump_store(args, loc, op, p, shown) for p in (args.partition or op.partitions)]
    if args.json:
        print(json.dumps(docs[0] if args.partition and len(args.partition) == 1 else docs,
                         indent=1, ensure_ascii=False))
    return 0


def _dump_store(args, loc: cr.CheckpointLocation, op: cr.OperatorInfo, partition: int, shown) -> dict | None:
    """One partition's store: printed as text, or returned as a JSON document (with --json)."""
    sd = loc.store(op, partition, args.store)
    schema = loc.schema(op.id, sd.name)
    key_schema, value_schema = (unsaferow.parse_schema(schema[0]), unsaferow.parse_schema(schema[1])) \
        if schema else (None, None)
    prefix_cols = next((s.num_prefix_cols for s in op.stores if s.name == sd.name), 0)
    version = sd.latest() if args.version is None else args.version
    with cr.materialise(sd, version) as loaded:
        total = loaded.store.num_keys
        header = {
            "checkpoint": shown(loc.path), "operator": op.id, "operatorName": op.name,
            "partition": sd.partition, "store": sd.name, "version": version,
            "versions": sd.versions(), "numEntries": total,
            "valueLayout": statefile.LAYOUT_NAMES[loaded.store.layout],
            "keySchema": key_schema, "valueSchema": value_schema,
        }
        if not args.json:
            _print_dump_header(header, key_schema, value_schema)
        entries = []
        for i, (key, value, ts) in enumerate(loaded.entries()):
            if args.limit is not None and i >= args.limit:
                break
            e = _entry(key, value, ts, key_schema, value_schema, prefix_cols)
            if args.json:
                entries.append(e)
            else:
                print(_entry_text(e))
    if args.json:
        header["truncated"] = args.limit is not None and total > args.limit
        header["entries"] = entries
        return header
    if args.limit is not None and total > args.limit:
        print(f"# ... {total - args.limit} more (--limit {args.limit})")
    return None


def _entry(key: bytes, value: bytes, ts: int | None, key_schema, value_schema, prefix_cols: int) -> dict:
    e: dict = {}
    for name, raw, schema, row in (("key", key, key_schema, lambda: prefix_key.key_row(key, prefix_cols)),
                                   ("value", value, value_schema, lambda: value)):
        try:
            if schema is None:
                raise unsaferow.UnsafeRowError("no schema recorded")
            e[name] = unsaferow.decode_row(row(), schema)
        except (unsaferow.UnsafeRowError, ValueError, KeyError, TypeError) as err:
            e[name] = None
            e[name + "Hex"] = raw.hex()
            e[name + "Error"] = str(err)
    if ts is not None:
        e["ttlTimestampMs"] = ts
        e["ttlTimestamp"] = _ts(ts)
    return e


def _entry_text(e: dict) -> str:
    parts = []
    for name in ("key", "value"):
        if e.get(name + "Hex") is not None:
            parts.append(f"{name}=0x{e[name + 'Hex']}")
        else:
            parts.append(f"{name}={json.dumps(e[name], ensure_ascii=False)}")
    if "ttlTimestampMs" in e:
        parts.append(f"ttlTimestamp={e['ttlTimestamp']} ({e['ttlTimestampMs']})")
    return "  ".join(parts)


def _print_dump_header(h: dict, key_schema, value_schema):
    print(f"# operator {h['operator']} ({h['operatorName'] or 'no operator metadata'}), "
          f"partition {h['partition']}, store {h['store']}, version {h['version']} "
          f"(retained: {cr.format_ranges(h['versions']) or 'none'}): {h['numEntries']} entries, "
          f"value layout {h['valueLayout']}")
    if key_schema is None:
        print("# no state schema recorded: keys and values in hex")
    else:
        print(f"# key {unsaferow.type_name(key_schema)}  value {unsaferow.type_name(value_schema)}")


# -- verify -----------------------------------------------------------------------------------

def _verify(args) -> int:
    with _opened(args) as copy:
        loc = cr.CheckpointLocation(copy.path)
        checked, problems = cr.verify(loc, _Progress("verifying stores"))
    shown = copy.shown
    if args.json:
        print(json.dumps({
            "checkpoint": shown(loc.path), "ok": not problems, "filesChecked": checked,
            "problems": [{"path": shown(p.path), "version": p.version, "reason": p.reason,
                          "message": shown(str(p))} for p in problems]}, indent=1))
    else:
        for p in problems:
            print(f"PROBLEM {shown(str(p))}")
        print(f"{shown(loc.path)}: {checked} files checked, "
              + (f"{len(problems)} problem{_s(len(problems))}" if problems else "all good"))
    return 1 if problems else 0


# -- repartition ------------------------------------------------------------------------------

def _repartition(args) -> int:
    try:
        n = int(args.partitions)
    except ValueError:
        n = args.partitions
    with _opened(args) as copy, remote_checkpoint.written_back(copy, RepartitionNotStoppedError):
        r = repartition.repartition(copy.path, n, _Progress("rescaling stores"))
    r.checkpoint = copy.shown(r.checkpoint)
    if args.json:
        print(json.dumps({
            "checkpoint": r.checkpoint, "oldPartitions": r.old_partitions,
            "newPartitions": r.new_partitions, "readBatch": r.read_batch, "newBatch": r.new_batch,
            "stateVersion": r.version, "retried": r.retried, "stores": r.stores}, indent=1))
        return 0
    print(f"{r.checkpoint}: rescaled from {r.old_partitions} to {r.new_partitions} shuffle "
          f"partitions{' (an interrupted rescale finished)' if r.retried else ''}")
    print(f"  state of batch {r.read_batch} written as version {r.version}; batch {r.new_batch} "
          f"recorded in offsets/ and commits/ with spark.sql.shuffle.partitions={r.new_partitions}")
    for s in r.stores:
        print(f"  operator {s['operator']} ({s['operatorName']}), store {s['store']}: {s['keys']} "
              f"keys, per partition {s['keysPerPartition']}")
    print("  restart the query to continue with the new partition count")
    return 0


# -- migrate ------------------------------------------------------------------------------------

def _migrate(args) -> int:
    confs = _ttl_confs(args)
    locations = [args.location, *args.more_locations]
    if len(set(locations)) != len(locations):
        raise MigrateUnsupportedError(f"a checkpoint location is named twice: {' '.join(locations)}")
    done: list[migrate.Result] = []
    with contextlib.ExitStack() as stack:
        spark_confs = _confs(args)[1]
        copies = [stack.enter_context(remote_checkpoint.opened(loc, spark_confs)) for loc in locations]
        plans = []
        for copy in copies:  # every refusal before anything changes
            _shown[0] = copy.shown
            plans.append(migrate.prepare(copy.path, args.to, confs))
        sessions = stack.enter_context(migrate.Sessions())
        try:
            for copy, plan in zip(copies, plans):
                _shown[0] = copy.shown
                with remote_checkpoint.written_back(copy, MigrateRunningError):
                    r = migrate.run(plan, sessions, args.dry_run, _Progress("migrating stores"))
                r.checkpoint = copy.shown(r.checkpoint)
                done.append(r)
        except BaseException:
            if done and not args.dry_run:
                print("migrated before the failure (these run on the target now): "
                      + ", ".join(r.checkpoint for r in done), file=sys.stderr)
            raise
    if args.json:
        docs = [{"checkpoint": r.checkpoint, "source": r.source, "target": r.target, "batch": r.batch,
                 "stateVersion": r.version, "partitions": r.partitions, "ttlTimestamp": r.ttl_timestamp,
                 "dryRun": r.dry_run, "stores": r.stores} for r in done]
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=1))
        return 0
    for r in done:
        _print_migration(r)
    return 0


def _print_migration(r: migrate.Result):
    done = "would be migrated (dry run: nothing changed)" if r.dry_run else "migrated"
    print(f"{r.checkpoint}: the state of batch {r.batch} {done} from {r.source} to {r.target}, "
          f"as version {r.version} of {r.partitions} partitions"
          + (f", TTL timestamp {_ts(r.ttl_timestamp)}" if r.ttl_timestamp is not None else ""))
    for s in r.stores:
        print(f"  operator {s['operator']} ({s['operatorName']}), store {s['store']}: {s['keys']} "
              f"keys ({_size(s['bytes'])}), per partition {s['keysPerPartition']}")
    if not r.dry_run:
        print(f"  offsets/{r.batch} now names {migrate.PROVIDERS[r.target]}: restart the query")


# -- output helpers -----------------------------------------------------------------------------

class _Progress:
    """Progress on stderr, overwritten in place, when stderr is a terminal (else silent)."""

    def __init__(self, what: str):
        self.what = what
        self.on = sys.stderr.isatty()
        self.shown = 0.0
        self.started = time.monotonic()

    def __call__(self, done: int, total: int, item: str):
        if not self.on:
            return
        t = time.monotonic()
        if done >= total:
            if self.shown:
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()
            return
        if t - self.started < 0.5 or t - self.shown < 0.1:  # only for scans that take a while
            return
        self.shown = t
        sys.stderr.write(f"\r\x1b[K{self.what}: {done}/{total} {item}"[:200])
        sys.stderr.flush()


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _ts(ms: int) -> str:
    try:
        t = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return f"{ms} ms"
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d} UTC"


def _duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
