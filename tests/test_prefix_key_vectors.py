"""The stored key of a store scanned by prefix (`tests/vectors/prefix_keys.tsv`, computed from
the format's definition by `make_key_vectors.py`): Python's offline tools read each key's row
and prefix row with `ttlstate.prefix_key`; the JVM's `KeyCodec` writes the same bytes
(`PrefixKeyVectorsTest`, `make test-java`)."""

import importlib.util
import json
import pathlib

import pytest

from ttlstate import prefix_key, unsaferow

VECTORS = pathlib.Path(__file__).parent / "vectors" / "prefix_keys.tsv"


def _rows():
    for line in VECTORS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, schema, n, values, hexkey = line.split("\t")
            yield name, unsaferow.parse_schema(schema), int(n), json.loads(values), bytes.fromhex(hexkey)


@pytest.mark.parametrize("name,schema,n,values,stored", list(_rows()), ids=[r[0] for r in _rows()])
def test_python_reads_the_vectors_key_rows(name, schema, n, values, stored):
    row = prefix_key.key_row(stored, n)
    assert list(unsaferow.decode_row(row, schema).values()) == values
    if n:
        prefix, rest = prefix_key.split(stored)
        assert rest == row
        head = dict(schema, fields=schema["fields"][:n])
        assert list(unsaferow.decode_row(prefix, head).values()) == values[:n]
    else:
        assert row == stored


def test_the_vectors_cover_prefixes_and_their_absence():
    rows = list(_rows())
    assert {n for _, _, n, _, _ in rows} >= {0, 1, 2}
    assert any(len(prefix_key.split(s)[0]) > 255 for _, _, n, _, s in rows if n)  # a big-endian length
    assert any(None in v[:n] for _, _, n, v, _ in rows if n)


def test_the_vector_file_is_what_the_generator_writes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("make_key_vectors", VECTORS.with_name("make_key_vectors.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "OUT", tmp_path / "prefix_keys.tsv")
    mod.main()
    assert (tmp_path / "prefix_keys.tsv").read_text() == VECTORS.read_text()


@pytest.mark.parametrize("stored", [b"", b"\x00\x00\x00", b"\x00\x00\x00\x05abcd"])
def test_a_key_that_is_no_prefix_scan_key_is_refused(stored):
    with pytest.raises(ValueError, match="prefix-scan key"):
        prefix_key.key_row(stored, 1)
    assert prefix_key.key_row(stored, 0) == stored
