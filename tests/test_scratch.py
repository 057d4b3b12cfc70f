"""The offline tools' scratch directories (ttlstate.scratch): a command removes those a killed
command left (its process gone), never one of a live process or one named otherwise."""

import os
import subprocess
import sys

from ttlstate import scratch


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_command_removes_the_scratch_directories_of_processes_that_are_gone(tmp_path, monkeypatch):
    gone, live = _gone_pid(), os.getppid()
    for name in (f"ttlstate-migrate-{gone}-ab12_cd", f"ttlstate-checkpoint-logs-{gone}-x9", f"ttlstate-migrate-{live}-ef34",
                 "ttlstate-test-abc123", f"other-{gone}-x1"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "file").write_bytes(b"x")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(scratch.tempfile, "tempdir", None)  # read TMPDIR again
    with scratch.directory("repartition") as path:
        assert os.path.dirname(path) == str(tmp_path)
        assert os.path.basename(path).startswith(f"ttlstate-repartition-{os.getpid()}-")
        assert sorted(os.listdir(tmp_path)) == sorted([f"ttlstate-migrate-{live}-ef34", "ttlstate-test-abc123",
                                                       f"other-{gone}-x1", os.path.basename(path)])
    assert not os.path.exists(path)
