"""Who writes state files, and the refusal of files a newer ttlstate wrote
(docs/decisions/059-checkpoint-too-new.md).

Every manifest records its writer (`{"ttlstate": <version>, "spark": <version>}`); the store
service learns the running Spark from the JVM's `sparkVersion` start-up line, the offline CLI
from the installed pyspark. A reader that meets a manifest or changelog format newer than it
reads raises `CheckpointTooNewError` naming the writer (when the file records it) and itself.
A newer ttlstate that still writes the formats this one reads is continued: formats decide,
not version numbers.
"""

from __future__ import annotations

from . import __version__
from .errors import CheckpointTooNewError

_spark: str | None = None  # the running Spark; None: not told (the offline reader asks pyspark)


def set_spark_version(version: str) -> None:
    """The running Spark's version, as the JVM told the store service."""
    global _spark
    _spark = version or None


def spark_version() -> str:
    if _spark is None:
        try:
            import pyspark
            return pyspark.__version__
        except ImportError:
            return "unknown"
    return _spark


def stamp() -> dict[str, str]:
    """What a manifest records as its writer."""
    return {"ttlstate": __version__, "spark": spark_version()}


def describe(writer) -> str:
    """`ttlstate X on Spark Y` of a recorded writer (or of a newer, unrecorded one)."""
    if not isinstance(writer, dict) or "ttlstate" not in writer:
        return f"a ttlstate newer than {__version__} (the file does not record which)"
    return f"ttlstate {writer.get('ttlstate')} on Spark {writer.get('spark') or 'unknown'}"


def too_new(path: str, version: int | None, what: str, reads: str, writer=None) -> CheckpointTooNewError:
    """The refusal of a state file of a newer format (`what`), naming writer and reader."""
    at = "" if version is None else f" (version {version})"
    return CheckpointTooNewError(
        f"State file {path}{at} is {what}, written by {describe(writer)}; this is ttlstate "
        f"{__version__} on Spark {spark_version()}, which reads {reads}. Continue this checkpoint "
        f"with the ttlstate that wrote it (or a newer one); an older ttlstate cannot continue it.")
