"""Shared protocol vectors. Requests (tests/vectors/frames.tsv): decoded here by
`protocol.decode_request`, which reads every payload as the worker does
(`protocol.read_payload`); the JVM's unit test `FrameVectorsTest` builds the same bytes with the
shim's own encoders. Replies (tests/vectors/replies.tsv): written here by the worker's own
encoders (`ttlstate.replies`); the JVM's `ReplyVectorsTest` decodes them with the shim's.
`make test-java` runs the JVM side."""

import importlib.util
import json
import pathlib

import pytest

from ttlstate import protocol as p

VECTORS = pathlib.Path(__file__).parent / "vectors" / "frames.tsv"
REPLY_VECTORS = VECTORS.with_name("replies.tsv")


def _make_vectors():
    spec = importlib.util.spec_from_file_location("make_vectors", VECTORS.with_name("make_vectors.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows():
    for line in VECTORS.read_text().splitlines():
        name, hexbody, expected = line.split("\t")
        yield name, bytes.fromhex(hexbody), expected


def _reply_rows():
    for line in REPLY_VECTORS.read_text().splitlines():
        name, op, context, hexbody, fields = line.split("\t")
        yield name, op, json.loads(context), bytes.fromhex(hexbody), fields


def test_vectors_cover_every_op_and_bad_frames():
    rows = list(_rows())
    names = {n for n, _, _ in rows}
    decoded_ops = {p.decode_request(b)[0] for n, b, _ in rows if not n.startswith("bad-")}
    assert decoded_ops == set(p.OP_NAMES)
    assert sum(n.startswith("bad-") for n in names) >= 5


def test_one_write_batch_holds_every_record_kind():
    (body,) = [b for n, b, _ in _rows() if n == "write-batch-every-kind"]
    r = p.Reader(body)
    assert p.read_header(r) == (p.WRITE_BATCH, 9)
    (records,) = p.read_payload(r, p.WRITE_BATCH)
    assert [kind for kind, _, _ in records] == list(range(1, 9))


@pytest.mark.parametrize("name,body,expected", list(_rows()), ids=[r[0] for r in _rows()])
def test_python_decoder_matches_vector(name, body, expected):
    assert _make_vectors().canonical(body) == expected
    if name.startswith("bad-"):
        with pytest.raises(p.ProtocolError):
            p.decode_request(body)


def test_the_vector_files_are_what_the_encoders_write_now(tmp_path, monkeypatch):
    """The reply bodies are the worker's encoders' (`ttlstate.replies`) output for the fields on
    each line, and the requests' decodings the worker's reading: regenerated, nothing changes."""
    mod = _make_vectors()
    monkeypatch.setattr(mod, "OUT", tmp_path / "frames.tsv")
    monkeypatch.setattr(mod, "OUT_REPLIES", tmp_path / "replies.tsv")
    mod.main()
    assert (tmp_path / "frames.tsv").read_text() == VECTORS.read_text()
    assert (tmp_path / "replies.tsv").read_text() == REPLY_VECTORS.read_text()


def test_reply_vectors_cover_every_reply_an_error_and_bad_replies():
    rows = list(_reply_rows())
    good = [r for r in rows if not r[0].startswith("bad-")]
    assert {op for _, op, _, _, _ in good} == set(p.OP_NAMES.values()) - {"WRITE_BATCH", "WRITE_STAMPED"}  # which get none
    assert any(body[0] == p.STATUS_ERROR for _, _, _, body, _ in good)
    assert sum(r[0].startswith("bad-") for r in rows) >= 8
    assert all(fields == "ERROR" for name, _, _, _, fields in rows if name.startswith("bad-"))
