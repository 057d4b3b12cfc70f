"""A stopped query's offset and commit logs on a local file system: their last batches, an
entry's metadata (batch watermark, timestamp, the query's confs), and atomic writes of new or
replaced entries, for the offline commands that change a checkpoint (`repartition`,
`migrate`). Errors are the calling command's (`unsupported`: a log it cannot read)."""

from __future__ import annotations

import contextlib
import json
import os

from . import checkpoint_reader as cr
from .errors import TtlstateError


class CheckpointLogs:
    def __init__(self, path: str, unsupported: type[TtlstateError]):
        self.root = path
        self.offsets, self.commits = os.path.join(path, "offsets"), os.path.join(path, "commits")
        self.unsupported = unsupported

    @staticmethod
    def last(directory: str) -> int | None:
        return max(cr._int_names(directory, files=True), default=None)

    @staticmethod
    def path(directory: str, batch: int) -> str:
        return os.path.join(directory, str(batch))

    def lines(self, directory: str, batch: int) -> list[str]:
        path = self.path(directory, batch)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().split("\n")
        except OSError as e:
            raise self.unsupported(f"{path} cannot be read ({e})") from None

    def metadata(self, batch: int) -> dict:
        """The offset log entry's metadata (line 2: batch watermark, timestamp, conf)."""
        lines = self.lines(self.offsets, batch)
        path = self.path(self.offsets, batch)
        if lines[0] not in ("v1", "v2"):
            raise self.unsupported(f"{path}: offset log format {lines[0]!r} is not supported (v1, v2 are)")
        try:
            doc = json.loads(lines[1])
        except (IndexError, ValueError):
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("conf"), dict):
            raise self.unsupported(f"{path} has no offset metadata with the query's confs "
                                   "(a checkpoint of a Spark older than 2.1?)")
        return doc

    def commit_doc(self, batch: int) -> dict:
        lines = self.lines(self.commits, batch)
        try:
            doc = json.loads(lines[1])
        except (IndexError, ValueError):
            doc = None
        return doc if isinstance(doc, dict) else {}

    def write(self, directory: str, batch: int, text: str, tag: str):
        """Writes entry `batch` of a log atomically (a temp file renamed over it); `tag` names
        the command in the temp file's name."""
        path = self.path(directory, batch)
        crc = os.path.join(directory, f".{batch}.crc")  # a stale checksum of an earlier entry
        with contextlib.suppress(FileNotFoundError):
            os.remove(crc)
        tmp = os.path.join(directory, f".{batch}.ttlstate-{tag}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)

    def with_conf(self, batch: int, changes: dict[str, str]) -> str:
        """Offset log entry `batch`'s text with `changes` made to its metadata's conf."""
        lines = self.lines(self.offsets, batch)
        doc = json.loads(lines[1])
        doc["conf"].update(changes)
        lines[1] = json.dumps(doc, separators=(",", ":"))
        return "\n".join(lines)
