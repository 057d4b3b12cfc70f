"""Corrupted or missing checkpoint files (issue 6, "refuse every bad input"): a load fails
with an error naming the file and the version, and never answers with other data.

A real checkpoint is written through the provider (the py4j harness of tests/jvm_state.py,
the real shim, service and RocksDB): versions 1-5 of one store in changelog mode, a snapshot
(manifest + SSTs) at version 3; then changelogs 1-3 are deleted, as retention would, so
loading version 3 or later needs the manifest. Each case copies that checkpoint, damages
one file (the manifest, an SST, a changelog: deleted, cut in half, or one bit flipped in
the middle), and loads through a new provider with a fresh local cache directory, so the
damaged checkpoint file is what the load downloads and reads. Hadoop's local file system
keeps a `.<name>.crc` side file; the main cases delete it (as on HDFS or S3, which have
none, ttlstate's own checks must catch the damage), the `stale-crc` ones keep it.

Then the local cache (docs/decisions/022-local-file-cache.md): a cached copy that is damaged while
the checkpoint's file
is good must be dropped and downloaded again, for manifests, SSTs and changelogs, and the
load gives the right data; if the checkpoint's file is damaged as well the load fails
naming it. And a proof that a manifest's checksum is what catches a flipped bit: most
single-bit flips of a real manifest still decode to a valid, different manifest, which
`manifest.read` takes once the CRC is recomputed, and refuses (checksum mismatch, naming
the file and version) when it is not.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import re
import shutil
import struct
import tempfile
import zlib

import pytest
import zstandard
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from jvm_state import JvmState
from ttlstate import manifest
from ttlstate.errors import CheckpointTooNewError, CorruptFileError

JavaError = (Py4JJavaError, CapturedException)
SNAPSHOT_VERSION, LATEST = 3, 5
KEYS = 200


def _store_dir(root) -> str:
    return os.path.join(root, "0", "0")


def _crc_side_file(path: str) -> str:
    d, name = os.path.split(path)
    return os.path.join(d, f".{name}.crc")


def _remove(path: str):
    os.remove(path)
    if os.path.exists(_crc_side_file(path)):
        os.remove(_crc_side_file(path))


def _rewrite(path: str, data: bytes):
    """Replace a file's bytes with a new inode (a hard link elsewhere keeps the old bytes)."""
    tmp = path + ".rewrite"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _damage(path: str, how: str):
    """missing / truncated / bitflip; `-stale-crc` keeps Hadoop's side file."""
    keep_crc = how.endswith("-stale-crc")
    how = how.replace("-stale-crc", "")
    if how == "missing":
        _remove(path)
        return
    data = bytearray(open(path, "rb").read())
    if how == "truncated":
        data = data[:len(data) // 2]
    else:
        data[len(data) // 2] ^= 0x10
    _rewrite(path, bytes(data))
    if not keep_crc and os.path.exists(_crc_side_file(path)):
        os.remove(_crc_side_file(path))


def _error_text(e) -> str:
    """The whole error: Spark's message and every cause (py4j's text carries the chain)."""
    return str(e)


def _condition(e) -> str:
    try:
        return (e.java_exception.getCondition() if isinstance(e, Py4JJavaError) else e.getCondition()) or ""
    except Exception:  # noqa: BLE001 - not a SparkThrowable
        return ""


class Checkpoint:
    """The base checkpoint and the exact model of every version."""

    def __init__(self, root: str, models: dict[int, dict], sst_names: list[str]):
        self.root, self.models, self.sst_names = root, models, sst_names

    def copy(self, dest) -> str:
        shutil.copytree(self.root, dest)
        return str(dest)


@pytest.fixture(scope="module")
def base(_session_holder, tmp_path_factory) -> Checkpoint:
    spark = _session_holder.get()
    tmp = tmp_path_factory.mktemp("corruption-base")
    js = JvmState(spark, cache_dir=str(tmp / "cache"))
    root = str(tmp / "state")
    p = js.provider(root)
    rng, model, models = random.Random(11), {}, {0: {}}
    for v in range(LATEST):
        s = js.get_store(p, v, force_snapshot=(v + 1 == SNAPSHOT_VERSION))
        for _ in range(120):
            k = ("k", rng.randrange(KEYS))
            if rng.random() < 0.85:
                model[k] = rng.randrange(1_000_000)
                js.put(s, *k, model[k])
            else:
                model.pop(k, None)
                js.remove(s, *k)
        assert s.commit() == v + 1
        models[v + 1] = dict(model)
    p.close()
    d = _store_dir(root)
    for v in range(1, SNAPSHOT_VERSION + 1):  # as retention would: the manifest is the base
        _remove(os.path.join(d, f"{v}.changelog"))
    names = sorted(n for n in os.listdir(d) if not n.startswith("."))
    assert names == [f"{SNAPSHOT_VERSION}.manifest", "4.changelog", "5.changelog", "sst"], names
    ssts = sorted(n for n in os.listdir(os.path.join(d, "sst")) if n.endswith(".sst"))
    assert ssts
    return Checkpoint(root, models, ssts)


def _load(spark, root: str, version: int, cache: str):
    """(data, custom metrics) of `version` loaded by a new provider with cache dir `cache`."""
    js = JvmState(spark, cache_dir=cache)
    s = js.get_store(js.provider(root), version)
    return js.data(s), js.custom_metrics(s)


CASES = [(what, how) for what in ("manifest", "sst", "changelog")
         for how in ("missing", "truncated", "bitflip", "truncated-stale-crc", "bitflip-stale-crc")]


@pytest.mark.parametrize("what,how", CASES)
def test_damaged_checkpoint_file_fails_the_load_naming_file_and_version(spark, base, tmp_path, what, how):
    root = base.copy(tmp_path / "state")
    d = _store_dir(root)
    if what == "manifest":
        path, file_version, loads = os.path.join(d, f"{SNAPSHOT_VERSION}.manifest"), SNAPSHOT_VERSION, (3, 4, 5)
    elif what == "sst":
        path, file_version, loads = os.path.join(d, "sst", base.sst_names[0]), SNAPSHOT_VERSION, (3, 5)
    else:
        path, file_version, loads = os.path.join(d, "5.changelog"), 5, (5,)
    _damage(path, how)
    name = os.path.basename(path)
    if what == "manifest" and how == "missing":
        # the JVM cannot name a manifest it does not find: without it, the load needs every
        # changelog from version 1, and names the first one retention deleted
        name, file_version = "1.changelog", 1
    for version in loads:
        cache = tmp_path / f"cache-{version}"  # fresh: the damaged checkpoint file is read
        assert not cache.exists()
        with pytest.raises(JavaError) as e:
            data, _ = _load(spark, root, version, str(cache))
            pytest.fail(f"loading version {version} with {name} {how} succeeded: "
                        f"{'the right' if data == base.models[version] else 'WRONG'} data")
        text = _error_text(e.value)
        assert _condition(e.value).startswith("CANNOT_LOAD_STATE_STORE"), text[:2000]
        assert name in text, f"the error does not name {name} ({how}):\n{text[:3000]}"
        if how != "missing":
            assert "TTLSTATE_CORRUPT_FILE" in text or "Downloaded" in text, text[:3000]
        if not re.search(rf"\bversion {file_version}\b", text):
            raise AssertionError(f"loading version {version}: the error names {name} but not "
                                  f"version {file_version}:\n{_causes(text)}")
        if file_version != version and what == "manifest" and how == "missing":
            assert re.search(rf"\bload version {version}\b", text), _causes(text)


def _causes(text: str) -> str:
    return "\n".join(line for line in text.splitlines()
                     if not line.strip().startswith("at ") and line.strip())[:3000]


def test_missing_manifest_with_its_changelogs_kept_loads_the_same_data(spark, base, tmp_path):
    """Not an error: without the manifest, the changelogs rebuild the version exactly
    (version 5 from changelogs 1-5; built here by a fresh run that keeps them)."""
    js = JvmState(spark, cache_dir=str(tmp_path / "cache-w"))
    root = str(tmp_path / "state")
    p = js.provider(root)
    model = {}
    for v in range(4):
        s = js.get_store(p, v, force_snapshot=(v == 1))
        for i in range(30):
            model[("k", v * 10 + i)] = v
            js.put(s, "k", v * 10 + i, v)
        s.commit()
    p.close()
    _remove(os.path.join(_store_dir(root), "2.manifest"))
    data, metrics = _load(spark, root, 4, str(tmp_path / "cache-r"))
    assert data == model and metrics["ttlstateDownloadedBytes"] > 0


# ---------------------------------------------------------------------------------------
# the local cache

def _cache_files(cache: str, what: str) -> list[str]:
    out = []
    for d, _, names in os.walk(cache):
        if os.path.basename(d) == "tmp":
            continue
        for n in names:
            if (what == "sst" and n.endswith(".sst")) or (what != "sst" and f".{what}#" in n):
                out.append(os.path.join(d, n))
    return out


@pytest.mark.parametrize("what", ["manifest", "sst", "changelog"])
@pytest.mark.parametrize("how", ["bitflip", "truncated"])
def test_damaged_cached_copy_is_downloaded_again(spark, base, tmp_path, what, how):
    """The checkpoint's file is good, its copy in the local cache is damaged: the load drops
    the copy, downloads the file again and gives the right data; the next load finds an
    intact cache and downloads nothing."""
    root = base.copy(tmp_path / "state")
    cache = str(tmp_path / "cache")
    data, m = _load(spark, root, LATEST, cache)
    assert data == base.models[LATEST] and m["ttlstateDownloadedBytes"] > 0
    cached = _cache_files(cache, what)
    assert cached, os.listdir(cache)
    good = {path: open(path, "rb").read() for path in cached}
    for path in cached:
        _damage(path, how)
    data, m = _load(spark, root, LATEST, cache)
    assert data == base.models[LATEST]
    assert m["ttlstateDownloadedBytes"] > 0, m
    for path, content in good.items():
        assert open(path, "rb").read() == content, f"{path} was not downloaded again"
    data, m = _load(spark, root, LATEST, cache)
    assert data == base.models[LATEST] and m["ttlstateDownloadedBytes"] == 0, m


@pytest.mark.parametrize("what", ["manifest", "changelog"])
def test_damaged_cached_copy_and_damaged_checkpoint_file_fail_naming_it(spark, base, tmp_path, what):
    root = base.copy(tmp_path / "state")
    cache = str(tmp_path / "cache")
    assert _load(spark, root, LATEST, cache)[0] == base.models[LATEST]
    for path in _cache_files(cache, what):
        _damage(path, "bitflip")
    name = f"{SNAPSHOT_VERSION}.manifest" if what == "manifest" else "5.changelog"
    version = SNAPSHOT_VERSION if what == "manifest" else 5
    _damage(os.path.join(_store_dir(root), name), "bitflip")
    with pytest.raises(JavaError) as e:
        _load(spark, root, LATEST, cache)
    text = _error_text(e.value)
    assert "TTLSTATE_CORRUPT_FILE" in text and name in text, _causes(text)
    assert re.search(rf"\bversion {version}\b", text), _causes(text)


# ---------------------------------------------------------------------------------------
# the manifest's checksum

def _with_crc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def _flip_outcomes(raw: bytes, original: manifest.Manifest, scratch: str, flips):
    """Single-bit flips of the manifest's body (magic and zstd frame), each written with the
    CRC recomputed (as if there were none) and read by `manifest.read`:
    {"refused" | "same" | "different": [(byte, bit, changed fields)]}. Refused is either
    corrupt (zstd, JSON or field checks) or too new: a flip that turns `"format":1` into 3
    is, behind a valid CRC, what a newer ttlstate's manifest looks like, and is refused as
    one (whether the sample reaches that byte depends on the run's manifest length)."""
    body = raw[:-4]
    out = collections.defaultdict(list)
    path = os.path.join(scratch, f"{original.version}.manifest")
    fields = list(manifest.Manifest.__dataclass_fields__)
    for i, bit in flips:
        b = bytearray(body)
        b[i] ^= 1 << bit
        with open(path, "wb") as f:
            f.write(_with_crc(bytes(b)))
        try:
            m = manifest.read(path, original.version)
        except (CorruptFileError, CheckpointTooNewError):
            out["refused"].append((i, bit, ()))
            continue
        changed = tuple(f for f in fields if getattr(m, f) != getattr(original, f))
        out["different" if changed else "same"].append((i, bit, changed))
    return out


def _key_count_flips(raw: bytes, original: manifest.Manifest) -> list[tuple[int, int]]:
    """Flips whose decompressed JSON differs from the original only inside the digits of
    `"numKeys":N` (a cheap in-memory screen over every flip; confirmed by the caller)."""
    body = raw[:-4]
    text = zstandard.ZstdDecompressor().stream_reader(body[len(manifest.MAGIC):]).read()
    field = b'"numKeys":%d' % original.num_keys
    lo = text.index(field) + len(b'"numKeys":')
    hi = lo + len(b"%d" % original.num_keys)
    found = []
    for i in range(len(manifest.MAGIC), len(body)):
        for bit in range(8):
            b = bytearray(body[len(manifest.MAGIC):])
            b[i - len(manifest.MAGIC)] ^= 1 << bit
            try:
                t = zstandard.ZstdDecompressor().stream_reader(bytes(b)).read()
            except zstandard.ZstdError:
                continue
            if len(t) == len(text) and t != text and t[:lo] == text[:lo] and t[hi:] == text[hi:] \
                    and t[lo:hi].isdigit():
                found.append((i, bit))
    return found


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory for thousands of small files: tmpfs if there is one (a loaded disk makes
    each write cost milliseconds), else the test's tmp."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        d = tempfile.mkdtemp(prefix="ttlstate-flips-", dir="/dev/shm")
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield str(tmp_path_factory.mktemp("flips"))


@pytest.fixture(scope="module")
def manifest_flips(base, scratch):
    path = os.path.join(_store_dir(base.root), f"{SNAPSHOT_VERSION}.manifest")
    raw = open(path, "rb").read()
    original = manifest.read(path, SNAPSHOT_VERSION)
    stride = max(1, (len(raw) - 4) // 500)  # every bit of ~500 bytes across the whole body
    sample = [(i, bit) for i in range(0, len(raw) - 4, stride) for bit in range(8)]
    outcomes = _flip_outcomes(raw, original, scratch, sample)
    counts = _flip_outcomes(raw, original, scratch, _key_count_flips(raw, original))
    return raw, original, outcomes, [(i, bit) for i, bit, ch in counts["different"] if ch == ("num_keys",)]


def test_the_checksum_is_what_catches_a_flipped_bit_in_a_manifest(manifest_flips, scratch):
    raw, original, outcomes, _ = manifest_flips
    total = sum(len(v) for v in outcomes.values())
    different = outcomes["different"]
    kinds = collections.Counter(changed for _, _, changed in different)
    print(f"\n{len(raw)}-byte manifest, {total} single-bit flips (every bit of every "
          f"{(len(raw) - 4) // (total // 8)}th byte) of its body with the CRC recomputed: {len(different)} decode to a valid but different manifest "
          f"({dict(kinds.most_common(6))}), {len(outcomes['same'])} to the same one, "
          f"{len(outcomes['refused'])} are refused by zstd/JSON/field/format checks")
    assert len(different) > total // 10, "expected many flips that only the checksum can catch"
    # with the stored CRC, every one of those flips (and every other) is refused by it
    path = os.path.join(scratch, f"{SNAPSHOT_VERSION}.manifest")
    for i, bit, _ in different + outcomes["same"] + outcomes["refused"]:
        b = bytearray(raw)
        b[i] ^= 1 << bit
        with open(path, "wb") as f:
            f.write(b)
        with pytest.raises(CorruptFileError) as e:
            manifest.read(path, SNAPSHOT_VERSION)
        assert "checksum mismatch" in str(e.value)
        assert path in str(e.value) and f"version {SNAPSHOT_VERSION}" in str(e.value)
    # flips in the CRC itself, and every truncation, are refused as well
    for i in range(len(raw) - 4, len(raw)):
        b = bytearray(raw)
        b[i] ^= 0x01
        with open(path, "wb") as f:
            f.write(b)
        with pytest.raises(CorruptFileError, match="checksum mismatch"):
            manifest.read(path, SNAPSHOT_VERSION)
    for n in range(len(raw)):
        with open(path, "wb") as f:
            f.write(raw[:n])
        with pytest.raises(CorruptFileError, match="checksum mismatch"):
            manifest.read(path, SNAPSHOT_VERSION)


def test_a_flip_only_the_checksum_catches_fails_the_provider_load(spark, base, manifest_flips, tmp_path):
    """Through the provider: a manifest whose body decodes to a valid manifest with another
    key count. With the CRC recomputed the load "succeeds" and reports the wrong numKeys
    (what the checksum prevents); with the stored CRC it fails naming the file and version.
    The body is a single-bit flip of the stored one where such a flip exists (it depends on
    the compressed bytes of the run's manifest); otherwise the manifest re-encoded with its
    key count changed, so the test always runs."""
    raw, original, _, count_flips = manifest_flips
    if count_flips:
        i, bit = count_flips[0]
        flipped = bytearray(raw)
        flipped[i] ^= 1 << bit
        body, what = bytes(flipped[:-4]), f"byte {i} bit {bit}"
    else:
        other = str(tmp_path / "re-encoded.manifest")
        manifest.write(other, dataclasses.replace(original, num_keys=original.num_keys + 1))
        body, what = open(other, "rb").read()[:-4], "the re-encoded manifest"
        assert manifest.read(other, SNAPSHOT_VERSION).num_keys == original.num_keys + 1
    for recompute in (True, False):
        root = base.copy(tmp_path / f"state-{recompute}")
        path = os.path.join(_store_dir(root), f"{SNAPSHOT_VERSION}.manifest")
        _rewrite(path, _with_crc(body) if recompute else body + raw[-4:])
        if os.path.exists(_crc_side_file(path)):  # Hadoop's sidecar (uploads to file: write none)
            os.remove(_crc_side_file(path))
        cache = str(tmp_path / f"cache-{recompute}")
        js = JvmState(spark, cache_dir=cache)
        if recompute:
            s = js.get_store(js.provider(root), SNAPSHOT_VERSION)
            assert js.data(s) == base.models[SNAPSHOT_VERSION]  # the rows are the SSTs'
            reported = s.metrics().numKeys()
            assert reported != len(base.models[SNAPSHOT_VERSION]), (
                "the flipped key count should have reached the store's numKeys")
            print(f"\n{what}: with the CRC recomputed the load reports numKeys "
                  f"{reported}, the version has {len(base.models[SNAPSHOT_VERSION])}")
        else:
            with pytest.raises(JavaError) as e:
                js.get_store(js.provider(root), SNAPSHOT_VERSION)
            text = _error_text(e.value)
            assert "checksum mismatch" in text and f"{SNAPSHOT_VERSION}.manifest" in text, _causes(text)
            assert re.search(rf"\bversion {SNAPSHOT_VERSION}\b", text), _causes(text)


def test_a_bogus_zstd_content_size_behind_a_valid_crc_is_a_corrupt_file(base, tmp_path):
    """A manifest whose CRC is right but whose zstd frame header claims an absurd content
    size (found by flipping bits with the CRC recomputed): CorruptFileError naming file and
    version. Before the fix `manifest.read` raised a bare MemoryError (zstd's one-shot
    decompress sized its output by that header), which the worker answered as
    TTLSTATE_INTERNAL without the file."""
    raw = open(os.path.join(_store_dir(base.root), f"{SNAPSHOT_VERSION}.manifest"), "rb").read()
    body = bytearray(raw[:-4])
    pos = len(manifest.MAGIC) + 4  # zstd's frame header descriptor, after its 4-byte magic
    fhd = body[pos]
    assert fhd & 0x20 and not fhd & 0x03, f"expected a single-segment frame without dictionary: {fhd:#x}"
    body[pos] = fhd | 0xC0  # an 8-byte content size field right after the descriptor ...
    body[pos + 1:pos + 9] = (1 << 40).to_bytes(8, "little")  # ... claiming 1 TiB
    path = tmp_path / f"{SNAPSHOT_VERSION}.manifest"
    path.write_bytes(_with_crc(bytes(body)))
    assert zstandard.get_frame_parameters(bytes(body[len(manifest.MAGIC):])).content_size == 1 << 40
    with pytest.raises(CorruptFileError) as e:
        manifest.read(str(path), SNAPSHOT_VERSION)
    assert str(path) in str(e.value) and f"version {SNAPSHOT_VERSION}" in str(e.value)
