"""The offline tools on a checkpoint on any Hadoop file system the query can use (hdfs:, s3a:,
abfs:, gs:, ...): the checkpoint's files are copied to a local temporary directory by the shim's
`CheckpointMirror` run through pyspark's `spark-submit` (so the Hadoop configuration is the
query's: the `spark.*` confs given, spark-defaults.conf, HADOOP_CONF_DIR), the local tools work
on the copy, and what they changed is written back (`repartition`). The copy is always deleted.
A local path or `file:` URI is used in place, with no JVM."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import subprocess
from typing import Callable

from . import scratch
from .errors import NotACheckpointError, TtlstateError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
_MIRROR_CLASS = "io.ttlstate.spark.checkpoint.CheckpointMirror"
# written back in this order, so that a query (or a rerun of the tool) never sees a commit
# whose state is not there yet: state files, then the offset log, then the commit log
_WRITE_ORDER = ("state/", "metadata", "offsets/", "commits/")
_LOGS = ("offsets/", "commits/")


class RemoteCheckpointError(TtlstateError):
    """Copying a checkpoint from or to its Hadoop file system failed; names the file."""

    error_class = "TTLSTATE_REMOTE_CHECKPOINT"


def is_remote(location: str) -> bool:
    """Whether `location` names a file system other than the local one (a URI scheme of more
    than one letter, not `file:`)."""
    m = _SCHEME.match(location)
    return bool(m) and m.group(1).lower() != "file"


@dataclasses.dataclass
class CheckpointCopy:
    """Where the tools read a checkpoint (`path`), and how to show its paths to the user."""

    location: str  # as the user gave it
    path: str  # local: the location's own path; remote: the temporary copy
    confs: dict[str, str]

    def shown(self, text: str) -> str:
        """`text` with the copy's paths given as the checkpoint's own."""
        if self.path == self.location:
            return text
        return text.replace(self.path, self.location.rstrip("/"))

    def _files(self) -> dict[str, tuple[int, int]]:
        out = {}
        for d, _, names in os.walk(self.path):
            for n in names:
                p = os.path.join(d, n)
                st = os.stat(p)
                out[os.path.relpath(p, self.path)] = (st.st_size, st.st_mtime_ns)
        return out


@contextlib.contextmanager
def opened(location: str, confs: dict[str, str], parts: list[str] | None = None):
    """A CheckpointCopy of `location`; `parts` limits a remote copy to those entries of the
    checkpoint directory (default: metadata, offsets/, commits/, state/)."""
    if not is_remote(location):
        yield CheckpointCopy(location, location, confs)
        return
    tmp = scratch.mkdtemp("checkpoint")
    try:
        path = os.path.join(tmp, "checkpoint")
        os.mkdir(path)
        _mirror(confs, ["download", location, path, *(parts or [])])
        if not os.listdir(path):
            raise NotACheckpointError(f"{location} does not exist or has no metadata, offsets/, commits/ "
                                      f"or state/: not a checkpoint location")
        yield CheckpointCopy(location, path, confs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def written_back(copy: CheckpointCopy, query_wrote: Callable[[str], Exception] | None = None):
    """Writes what the block changed in a remote copy back to the checkpoint: new and changed
    files, then deletions, in `_WRITE_ORDER`. With `query_wrote`, the checkpoint's offset and
    commit logs are listed again first, and if they are no longer those copied (the query ran
    meanwhile) nothing is written and `query_wrote(what changed)` is raised."""
    if copy.path == copy.location:
        yield
        return
    before = copy._files()
    yield
    after = copy._files()
    if query_wrote is not None:
        _check_logs_unchanged(copy, before, query_wrote)
    changed = [f for f, st in after.items() if before.get(f) != st and not f.endswith(".crc")]
    removed = [f for f in before if f not in after and not f.endswith(".crc")]

    def order(rel: str) -> int:
        return next((i for i, p in enumerate(_WRITE_ORDER) if rel.startswith(p)), len(_WRITE_ORDER))

    ops = sorted(changed, key=order) + ["-" + f for f in removed]
    if ops:
        _mirror(copy.confs, ["upload", copy.path, copy.location, *ops])


def _check_logs_unchanged(copy: CheckpointCopy, copied: dict[str, tuple[int, int]],
                          query_wrote: Callable[[str], Exception]):
    def logs(files) -> set[str]:
        return {f for f in files if f.startswith(_LOGS) and not f.endswith(".crc") and "/." not in f}

    with scratch.directory("checkpoint-logs") as tmp:
        _mirror(copy.confs, ["download", copy.location, tmp, *(d.rstrip("/") for d in _LOGS)])
        now = logs(CheckpointCopy(copy.location, tmp, copy.confs)._files())
    was = logs(copied)
    if now != was:
        new, gone = sorted(now - was), sorted(was - now)
        raise query_wrote(f"{copy.location.rstrip('/')}: its logs changed while the tool worked on a copy ("
                          + ", ".join([*(f"{f} written" for f in new), *(f"{f} removed" for f in gone)][:6])
                          + "): is the query running? Stop it, then run the tool again")


def _mirror(confs: dict[str, str], args: list[str]) -> str:
    from . import jar_path
    try:
        jar = jar_path()
    except FileNotFoundError as e:
        raise RemoteCheckpointError(f"cannot reach {args[1] if args[0] == 'download' else args[2]}: {e}") from e
    cmd = [_spark_submit(), "--master", "local[1]", "--class", _MIRROR_CLASS,
           "--conf", "spark.ui.enabled=false"]
    for k, v in confs.items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += [jar, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = next((line for line in reversed(proc.stderr.splitlines()) if line.startswith("ERROR ")),
                    proc.stderr.strip()[-2000:] or f"spark-submit exited {proc.returncode}")
        raise RemoteCheckpointError(f"{args[0]} of {args[1] if args[0] == 'download' else args[2]} failed: "
                                    f"{last.removeprefix('ERROR ')}")
    return proc.stdout


def _spark_submit() -> str:
    from pyspark.find_spark_home import _find_spark_home
    return os.path.join(_find_spark_home(), "bin", "spark-submit")
