"""Regenerate tests/vectors/ttl.tsv and ttl_event_time.tsv: `python tests/vectors/make_ttl_vectors.py`.

The TTL rule's shared vectors: `ts ttl_ms now expires_at expired refreshes` per line (`refreshes`:
a read at `now` under OnReadAndWrite gives the entry a new expiry time), the expected
values computed here from the rule's definition with Python's unbounded integers (not
with either implementation), so a change of the rule on one side alone fails that side's
test (`tests/test_ttl_vectors.py` checks both `ttlstate.ttl` and the JVM's `TtlRule`).

`ttl_event_time.tsv`, EventTime's rules on top (docs/decisions/061-event-time-ttl.md,
docs/decisions/104-event-time-jvm-view.md): `ts ttl_ms clock
write_expires_at entry_expires_at stamped_expires_at refreshes` per line: the expiry time of a
write at watermark `clock` (UNSTAMPED, never, at a watermark of 0 or below), of an entry stored
with timestamp `ts` (UNSTAMPED = 2^63 - 1: written at watermark 0) before and after a write
transaction at `clock` began (it stamps the UNSTAMPED entries with a watermark past 0), and
whether that transaction's read of it refreshes it under OnReadAndWrite. Only `clock >= ts` for
a stamped entry: the watermark never goes back.
"""

import pathlib

MAX = (1 << 63) - 1
MIN = -(1 << 63)
OUT = pathlib.Path(__file__).with_name("ttl.tsv")
OUT_EVENT_TIME = pathlib.Path(__file__).with_name("ttl_event_time.tsv")
UNSTAMPED = MAX


def expires_at(ts: int, ttl: int) -> int:
    return MAX if ttl <= 0 else min(ts + ttl, MAX)


def cases():
    for ts, ttl in [(1000, 500), (0, 1), (0, MAX), (MAX - 10, 1000), (MAX - 1000, 1000), (-5, MAX),
                    (MIN, 1), (MIN, MAX), (1_700_000_000_000, 86_400_000), (1000, 0), (1000, -1),
                    (5, MAX - 4), (5, MAX - 6)]:
        e = expires_at(ts, ttl)
        for now in sorted({e - 1, e, e + 1, ts, 0, MAX, MIN}):
            if MIN <= now <= MAX:
                yield ts, ttl, now, e, e <= now, expires_at(now, ttl) != e


def event_time_cases():
    day = 86_400_000
    for ttl in [1000, day, 0, MAX, MAX - 4]:
        for ts in [UNSTAMPED, 1, 1_700_000_000_000, MAX - 10]:
            for clock in sorted({-1, 0, 1, 2, ts, ts + 1, 1_700_000_000_000, 1_700_000_000_000 + day, MAX - 1, MAX}):
                if clock > MAX or (ts != UNSTAMPED and clock < ts):
                    continue
                write = expires_at(clock if clock > 0 else UNSTAMPED, ttl)
                stamped = expires_at(clock if ts == UNSTAMPED and clock > 0 else ts, ttl)
                yield ts, ttl, clock, write, expires_at(ts, ttl), stamped, write != stamped


def _bool(b: bool) -> str:
    return "true" if b else "false"


def main():
    lines = ["# ts\tttl_ms\tnow\texpires_at\texpired\trefreshes  (the TTL rule; see make_ttl_vectors.py)"]
    lines += ["\t".join(map(str, (ts, ttl, now, e, _bool(x), _bool(r)))) for ts, ttl, now, e, x, r in cases()]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines) - 1} vectors to {OUT}")
    lines = ["# ts\tttl_ms\tclock\twrite_expires_at\tentry_expires_at\tstamped_expires_at\trefreshes  "
             "(EventTime's rules; see make_ttl_vectors.py)"]
    lines += ["\t".join([*map(str, case[:-1]), _bool(case[-1])]) for case in event_time_cases()]
    OUT_EVENT_TIME.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines) - 1} vectors to {OUT_EVENT_TIME}")


if __name__ == "__main__":
    main()
