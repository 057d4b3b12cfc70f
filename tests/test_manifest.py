"""The manifest format (docs/PROTOCOL.md, "Manifests"): round trip and every kind of damage."""

import json
import struct
import zlib

import pytest
import zstandard

from ttlstate import manifest
from ttlstate.errors import CheckpointTooNewError, CorruptFileError
from ttlstate.manifest import Manifest, SstFile

M = Manifest(
    version=7, num_keys=1234, layout=1, db_ttl=True, batch_ts=1_700_000_000_123,
    cursor=b"\x00k\xff", histogram=((1_700_000_000_000, 1000), (1_700_000_000_123, 234)),
    ssts=(SstFile("000009-3fa2b4c5d6e7f801.sst", "000009.sst", 14825, 0xDEADBEEF),
          SstFile("000011-0123456789abcdef.sst", "000011.sst", 1059, 7)),
    inline={"CURRENT": b"MANIFEST-000005\n", "000008.log": b"", "OPTIONS-000007": b"\x00\x01" * 50})


def _write(tmp_path, m=M, name="7.manifest"):
    path = str(tmp_path / name)
    size = manifest.write(path, m)
    return path, size


def _raw(doc: dict) -> bytes:
    body = manifest.MAGIC + zstandard.ZstdCompressor().compress(json.dumps(doc).encode())
    return body + struct.pack("<I", zlib.crc32(body))


def test_round_trip_and_layout(tmp_path):
    path, size = _write(tmp_path)
    raw = (tmp_path / "7.manifest").read_bytes()
    assert size == len(raw)
    assert raw[:8] == b"TTLMANI1"
    assert struct.unpack("<I", raw[-4:])[0] == zlib.crc32(raw[:-4])
    doc = json.loads(zstandard.ZstdDecompressor().decompress(raw[8:-4]))
    assert doc["format"] == 1 and doc["numKeys"] == 1234 and doc["dbTtl"] is True
    assert doc["cursor"] == "006bff" and doc["histogram"][0] == [1_700_000_000_000, 1000]
    assert doc["ssts"][0] == {"name": "000009-3fa2b4c5d6e7f801.sst", "local": "000009.sst",
                              "size": 14825, "crc32": 0xDEADBEEF}
    assert doc["inline"]["CURRENT"] == "TUFOSUZFU1QtMDAwMDA1Cg=="
    assert manifest.read(path, 7) == M
    assert manifest.read(path) == M  # version unchecked
    assert not (tmp_path / "7.manifest.tmp").exists()


def test_empty_manifest_round_trips(tmp_path):
    m = Manifest(version=0, num_keys=0, layout=0, db_ttl=False)
    path, _ = _write(tmp_path, m, "0.manifest")
    assert manifest.read(path, 0) == m


@pytest.mark.parametrize("where", ["magic", "middle", "crc", "last-body-byte"])
def test_a_flipped_bit_anywhere_is_caught(tmp_path, where):
    path, size = _write(tmp_path)
    data = bytearray(open(path, "rb").read())
    pos = {"magic": 3, "middle": size // 2, "crc": size - 2, "last-body-byte": size - 5}[where]
    data[pos] ^= 0x04
    open(path, "wb").write(data)
    with pytest.raises(CorruptFileError) as e:
        manifest.read(path, 7)
    assert path in str(e.value) and "version 7" in str(e.value)
    assert e.value.error_class == "TTLSTATE_CORRUPT_FILE"


def test_a_flip_of_the_format_number(tmp_path):
    """A single-bit flip that turns `"format":1` into 3 inside the zstd frame: with the
    stored CRC the checksum catches it; with the CRC recomputed it is what a newer
    ttlstate's manifest looks like, and is refused as too new (not as corrupt), naming the
    format it found. (A flip the bit-flip sweep of test_checkpoint_corruption can reach.)"""
    path, _ = _write(tmp_path)
    raw = open(path, "rb").read()
    frame = raw[len(manifest.MAGIC):-4]
    flips = []
    for i in range(len(frame)):
        for bit in range(8):
            b = bytearray(frame)
            b[i] ^= 1 << bit
            try:
                text = zstandard.ZstdDecompressor().stream_reader(bytes(b)).read()
            except zstandard.ZstdError:
                continue
            if text.startswith(b'{"format":3,'):
                flips.append((len(manifest.MAGIC) + i, bit))
    assert flips, "no single-bit flip of this manifest's frame gives format 3"
    i, bit = flips[0]
    flipped = bytearray(raw)
    flipped[i] ^= 1 << bit
    open(path, "wb").write(flipped)
    with pytest.raises(CorruptFileError, match="checksum mismatch"):
        manifest.read(path, 7)
    body = bytes(flipped[:-4])
    open(path, "wb").write(body + struct.pack("<I", zlib.crc32(body)))
    with pytest.raises(CheckpointTooNewError, match="manifest of format 3") as e:
        manifest.read(path, 7)
    assert path in str(e.value) and e.value.error_class == "TTLSTATE_CHECKPOINT_TOO_NEW"


@pytest.mark.parametrize("keep", [0, 3, 11, -1])
def test_truncation_is_caught(tmp_path, keep):
    path, size = _write(tmp_path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:keep if keep >= 0 else size + keep])
    with pytest.raises(CorruptFileError, match="checksum"):
        manifest.read(path, 7)


def test_wrong_version_and_missing_file(tmp_path):
    path, _ = _write(tmp_path)
    with pytest.raises(CorruptFileError, match="holds the manifest of version 7, expected version 8"):
        manifest.read(path, 8)
    with pytest.raises(CorruptFileError, match="does not exist") as e:
        manifest.read(str(tmp_path / "nope.manifest"), 3)
    assert "version 3" in str(e.value)


def test_not_a_manifest(tmp_path):
    other = tmp_path / "x"
    body = b"TTLSTAT2" + b"junk"
    other.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    with pytest.raises(CorruptFileError, match="bad magic"):
        manifest.read(str(other))


@pytest.mark.parametrize("change,reason", [
    ({"format": 0}, "format 0 is not supported"),  # a newer format: test_checkpoint_too_new.py
    ({"numKeys": "12"}, "expected an integer"),
    ({"dbTtl": 1}, "expected true or false"),
    ({"inline": {"../CURRENT": ""}}, "bad file name"),
    ({"ssts": [{"name": "a/b.sst", "local": "000009.sst", "size": 1, "crc32": 1}]}, "bad file name"),
    ({"ssts": [{"name": "a.sst", "size": 1, "crc32": 1}]}, "KeyError"),
    ({"cursor": "zz"}, "ValueError"),
])
def test_well_checksummed_but_malformed_json_is_refused(tmp_path, change, reason):
    doc = {"format": 1, "version": 7, "numKeys": 1, "layout": 0, "dbTtl": False,
           "batchTimestampMs": -1, "cursor": "", "histogram": [], "ssts": [], "inline": {}}
    path = tmp_path / "7.manifest"
    path.write_bytes(_raw(doc))
    assert manifest.read(str(path), 7).num_keys == 1
    path.write_bytes(_raw({**doc, **change}))
    with pytest.raises(CorruptFileError, match=reason):
        manifest.read(str(path), 7)


def test_body_that_is_not_zstd_json(tmp_path):
    path = tmp_path / "7.manifest"
    body = manifest.MAGIC + b"not zstd at all"
    path.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    with pytest.raises(CorruptFileError, match="not a valid manifest body"):
        manifest.read(str(path), 7)
