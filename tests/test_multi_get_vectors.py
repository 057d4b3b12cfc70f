"""How a MULTI_GET is split (`tests/vectors/multi_get_split.tsv`, written by hand from the
limits): the worker answers each reply's keys as the vector cuts them (`protocol.answerable`)
and accepts each of the JVM's requests as the vector cuts them (`protocol.frame_length`); the JVM
cuts its requests so (`RemoteTxn.requestEnd`) and takes those replies (`MultiGetSplitVectorsTest`,
`make test-java`)."""

import json
import pathlib

import pytest

from ttlstate import protocol as p

VECTORS = pathlib.Path(__file__).parent / "vectors" / "multi_get_split.tsv"


class _Sized:
    """A value of `n` bytes, as far as the split is concerned (its length)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n


def _rows():
    for line in VECTORS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, kind, sizes, cuts = line.split("\t")
            yield name, kind, json.loads(sizes), json.loads(cuts)


@pytest.mark.parametrize("name,kind,sizes,cuts", list(_rows()), ids=[r[0] for r in _rows()])
def test_the_worker_splits_and_takes_multi_gets_as_the_vector_says(name, kind, sizes, cuts):
    start = 0
    for n in cuts:
        part = sizes[start:start + n]
        if kind == "reply":
            values = [None if s is None else _Sized(s) for s in sizes[start:]]
            assert p.answerable(values) == n
            body = 5 + sum(1 if s is None else p.answer_bytes(_Sized(s)) for s in part)
        else:
            body = 9 + sum(4 + s for s in part)  # u8 op, u32 handle, u32 n, bytes key * n
        assert p.frame_length(body.to_bytes(4, "little")) == body
        start += n
    assert start == len(sizes)


def test_the_vectors_reach_both_limits():
    rows = list(_rows())
    assert {k for _, k, _, _ in rows} == {"request", "reply"}
    assert any(len(c) > 1 for _, k, _, c in rows if k == "request")
    assert any(len(c) > 1 for _, k, _, c in rows if k == "reply")
    assert any(sizes == [p.MAX_FRAME - 18] for _, k, sizes, _ in rows if k == "reply")
    assert any(sizes == [p.MAX_FRAME - 13] for _, k, sizes, _ in rows if k == "request")
