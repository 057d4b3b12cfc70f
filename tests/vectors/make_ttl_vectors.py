"""Regenerate tests/vectors/ttl.tsv: `python tests/vectors/make_ttl_vectors.py`.

The TTL rule's shared vectors: `ts ttl_ms now expires_at expired refreshes` per line (`refreshes`:
a read at `now` under OnReadAndWrite gives the entry a new expiry time), the expected
values computed here from the rule's definition with Python's unbounded integers (not
with either implementation), so a change of the rule on one side alone fails that side's
test (`tests/test_ttl_vectors.py` checks both `ttlstate.ttl` and the JVM's `TtlRule`).
"""

import pathlib

MAX = (1 << 63) - 1
MIN = -(1 << 63)
OUT = pathlib.Path(__file__).with_name("ttl.tsv")


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


def _bool(b: bool) -> str:
    return "true" if b else "false"


def main():
    lines = ["# ts\tttl_ms\tnow\texpires_at\texpired\trefreshes  (the TTL rule; see make_ttl_vectors.py)"]
    lines += ["\t".join(map(str, (ts, ttl, now, e, _bool(x), _bool(r)))) for ts, ttl, now, e, x, r in cases()]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines) - 1} vectors to {OUT}")


if __name__ == "__main__":
    main()
