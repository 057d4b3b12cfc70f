"""Scratch directories of the offline tools (`migrate`, `repartition`, the copy of a remote
checkpoint): `ttlstate-<kind>-<pid>-<random>` in the temporary directory (TMPDIR), removed when
the command ends. A command killed (SIGKILL, the machine's OOM killer) cannot remove its own, so
each command first removes those whose process is gone: a killed command's files last only until
the next one starts. A directory of a live process, or named otherwise, is never touched."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from typing import Iterator

_NAME = re.compile(r"^ttlstate-[a-z-]+?-(\d+)-[A-Za-z0-9_]+$")
log = logging.getLogger("ttlstate.scratch")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_orphans(parent: str | None = None) -> list[str]:
    """Removes the scratch directories under `parent` (default: the temporary directory) whose
    process is gone; returns their paths."""
    parent = parent or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            m = _NAME.match(name)
            path = os.path.join(parent, name)
            if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))) and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
                log.info("removed %s, left by a command that did not end (process %s is gone)", path, m.group(1))
    return removed


def mkdtemp(kind: str) -> str:
    """A new scratch directory for `kind` (after removing the orphans); the caller removes it."""
    remove_orphans()
    return tempfile.mkdtemp(prefix=f"ttlstate-{kind}-{os.getpid()}-")


@contextlib.contextmanager
def directory(kind: str) -> Iterator[str]:
    """A scratch directory for `kind`, removed on exit."""
    path = mkdtemp(kind)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
