"""Shared protocol vectors (tests/vectors/frames.tsv) decoded by both sides identically: the
Python side here, the JVM side by the JVM unit tests (`FrameVectorsTest`, `make test-java`)."""

import pathlib

import pytest

from ttlstate import protocol as p

VECTORS = pathlib.Path(__file__).parent / "vectors" / "frames.tsv"


def _rows():
    for line in VECTORS.read_text().splitlines():
        name, hexbody, expected = line.split("\t")
        yield name, bytes.fromhex(hexbody), expected


def test_vectors_cover_every_op_and_bad_frames():
    rows = list(_rows())
    names = {n for n, _, _ in rows}
    decoded_ops = {p.decode_request(b)[0] for n, b, _ in rows if not n.startswith("bad-")}
    assert decoded_ops == set(p.OP_NAMES)
    assert sum(n.startswith("bad-") for n in names) >= 5


@pytest.mark.parametrize("name,body,expected", list(_rows()), ids=[r[0] for r in _rows()])
def test_python_decoder_matches_vector(name, body, expected):
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_vectors", VECTORS.with_name("make_vectors.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.canonical(body) == expected
    if name.startswith("bad-"):
        with pytest.raises(p.ProtocolError):
            p.decode_request(body)
