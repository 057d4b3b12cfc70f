"""A checkpoint ttlstate cannot continue is refused, naming both versions (issue 19;
docs/decisions/059-checkpoint-too-new.md).

What ttlstate cannot continue is a state file of a format newer than it reads: a manifest of a
newer format (manifests record their writer: ttlstate and Spark version) or a changelog of a
newer format. Loading one, in a query or with the offline CLI, fails with
`TTLSTATE_CHECKPOINT_TOO_NEW` naming the writer (when recorded) and the running ttlstate and
Spark. Newer ttlstate files are made here the way a newer ttlstate would write them: the
current files with the format raised (the rest of the file as this ttlstate writes it)."""

from __future__ import annotations

import json
import pathlib
import struct
import subprocess
import sys
import zlib

import pytest
import pyspark
import zstandard

import ttlstate
from ttlstate import manifest, statefile
from ttlstate.errors import CheckpointTooNewError, CorruptFileError
from ttlstate.manifest import Manifest

NEWER = {"ttlstate": "9.9.0", "spark": "4.9.1"}


def _doc(path) -> dict:
    raw = pathlib.Path(path).read_bytes()
    return json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(raw[len(manifest.MAGIC):-4]))


def _rewrite_manifest(path, **changes) -> None:
    """`path`'s manifest with `changes` in its JSON (checksum recomputed, as a writer would)."""
    doc = {**_doc(path), **changes}
    doc = {k: v for k, v in doc.items() if v is not None}
    body = manifest.MAGIC + zstandard.ZstdCompressor().compress(json.dumps(doc).encode())
    pathlib.Path(path).write_bytes(body + struct.pack("<I", zlib.crc32(body)))


def _newer_manifest(tmp_path, writer=NEWER) -> str:
    path = str(tmp_path / "7.manifest")
    manifest.write(path, Manifest(version=7, num_keys=0, layout=0, db_ttl=False))
    _rewrite_manifest(path, format=manifest.FORMAT + 1, writer=writer)
    return path


def test_a_manifest_records_its_writer(tmp_path):
    path = str(tmp_path / "3.manifest")
    manifest.write(path, Manifest(version=3, num_keys=0, layout=0, db_ttl=False))
    assert _doc(path)["writer"] == {"ttlstate": ttlstate.__version__, "spark": pyspark.__version__}
    assert manifest.read(path, 3).version == 3


def test_a_manifest_of_a_newer_format_names_its_writer_and_the_reader(tmp_path):
    path = _newer_manifest(tmp_path)
    with pytest.raises(CheckpointTooNewError) as e:
        manifest.read(path, 7)
    msg = str(e.value)
    assert e.value.error_class == "TTLSTATE_CHECKPOINT_TOO_NEW"
    assert f"a manifest of format {manifest.FORMAT + 1}" in msg and path in msg and "(version 7)" in msg
    assert "written by ttlstate 9.9.0 on Spark 4.9.1" in msg, msg
    assert f"this is ttlstate {ttlstate.__version__} on Spark {pyspark.__version__}" in msg, msg
    assert not isinstance(e.value, CorruptFileError)


def test_a_newer_manifest_that_records_no_writer_still_names_both_sides(tmp_path):
    path = _newer_manifest(tmp_path, writer=None)
    with pytest.raises(CheckpointTooNewError, match=rf"a ttlstate newer than {ttlstate.__version__}") as e:
        manifest.read(path, 7)
    assert f"this is ttlstate {ttlstate.__version__} on Spark {pyspark.__version__}" in str(e.value)


def test_a_newer_ttlstate_writing_the_same_format_is_continued(tmp_path):
    path = str(tmp_path / "7.manifest")
    manifest.write(path, Manifest(version=7, num_keys=5, layout=0, db_ttl=False))
    _rewrite_manifest(path, writer=NEWER)
    assert manifest.read(path, 7).num_keys == 5


def _changelog(tmp_path) -> str:
    path = str(tmp_path / "5.changelog")
    statefile.write(path, statefile.FILE_CHANGELOG, 5, [(b"k", b"v")])
    return path


def _with_magic(path: str, magic: bytes) -> None:
    """The changelog with another magic, both checksums recomputed (docs/PROTOCOL.md)."""
    raw = pathlib.Path(path).read_bytes()
    data = zstandard.ZstdDecompressor().stream_reader(raw[:-4]).read()
    data = magic + data[len(magic):-4]
    data += struct.pack("<I", zlib.crc32(data))
    frame = zstandard.ZstdCompressor().compress(data)
    pathlib.Path(path).write_bytes(frame + struct.pack("<I", zlib.crc32(frame)))


def test_a_changelog_of_a_newer_format_is_refused_naming_the_reader(tmp_path):
    path = _changelog(tmp_path)
    assert list(statefile.read(path, statefile.FILE_CHANGELOG, 5)[1]) == [(b"k", b"v")]
    _with_magic(path, b"TTLSTAT4")
    with pytest.raises(CheckpointTooNewError) as e:
        statefile.read(path, statefile.FILE_CHANGELOG, 5)
    msg = str(e.value)
    assert "a changelog of format 4" in msg and f"a ttlstate newer than {ttlstate.__version__}" in msg, msg
    assert f"this is ttlstate {ttlstate.__version__} on Spark {pyspark.__version__}" in msg, msg


def test_an_older_unknown_changelog_stays_a_corrupt_file(tmp_path):
    path = _changelog(tmp_path)
    _with_magic(path, b"TTLSTAT1")
    with pytest.raises(CorruptFileError, match="older ttlstate format"):
        statefile.read(path, statefile.FILE_CHANGELOG, 5)


# ---- end to end: a query restarted on a checkpoint a newer ttlstate wrote ---------------

def _counts(spark, source, checkpoint):
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ttlstate.PROVIDER_CLASS)
    spark.conf.set("spark.sql.streaming.stateStore.ttlstate.checkpoint.mode", "snapshot")
    try:
        q = (spark.readStream.schema("key STRING").option("maxFilesPerTrigger", 1).json(str(source))
             .groupBy("key").count().writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        q.awaitTermination()
        return q
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.ttlstate.checkpoint.mode")


@pytest.mark.slow
def test_a_query_refuses_a_checkpoint_a_newer_ttlstate_wrote(spark, restart_spark, tmp_path):
    source, checkpoint = tmp_path / "in", tmp_path / "ck"
    source.mkdir()
    for i, keys in enumerate(["ab", "ba"]):
        (source / f"part-{i}.json").write_text("".join(json.dumps({"key": k}) + "\n" for k in keys))
    _counts(spark, source, checkpoint)
    manifests = sorted((checkpoint / "state").rglob("*.manifest"))
    assert manifests, "the run wrote no manifest (checkpoint.mode=snapshot)"
    for m in manifests:
        _rewrite_manifest(m, format=manifest.FORMAT + 1, writer=NEWER)
    (source / "part-2.json").write_text(json.dumps({"key": "a"}) + "\n")
    spark = restart_spark()  # a new executor: the stores load from the checkpoint
    with pytest.raises(Exception) as e:
        _counts(spark, source, checkpoint)
    # Spark reports CANNOT_LOAD_STATE_STORE; ttlstate's error is its cause (in the JVM trace)
    msg = str(e.value) + "\n" + str(getattr(e.value, "_stackTrace", "") or "")
    assert "TTLSTATE_CHECKPOINT_TOO_NEW" in msg, msg[-3000:]
    assert "written by ttlstate 9.9.0 on Spark 4.9.1" in msg, msg[-3000:]
    assert f"this is ttlstate {ttlstate.__version__} on Spark {spark.version}" in msg, msg[-3000:]
    verify = subprocess.run([sys.executable, "-m", "ttlstate", "verify", str(checkpoint)],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode != 0
    assert "TTLSTATE_CHECKPOINT_TOO_NEW" in verify.stderr + verify.stdout, verify.stderr
