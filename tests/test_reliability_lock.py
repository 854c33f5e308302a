"""One writer per output: ``loadbearing.files.output_lock``.

    .venv/bin/pytest -q tests/test_reliability_lock.py
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from loadbearing.files import RunDirError
from loadbearing.locks import LockError, lock_path, output_lock

ROOT = Path(__file__).resolve().parents[1]

HOLD = """
import sys, time
from loadbearing.locks import output_lock
with output_lock(sys.argv[1], command="holder"):
    print("locked", flush=True)
    time.sleep(60)
"""


def _holder(path: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    return p


def test_lock_file_holds_pid_host_command_and_is_removed(tmp_path):
    with output_lock(tmp_path, command="cmd x") as lp:
        assert lp == tmp_path / ".lock"
        d = json.loads(lp.read_text())
        assert d["pid"] == os.getpid() and d["host"] == socket.gethostname() and d["command"] == "cmd x"
        assert d["since"]
    assert not (tmp_path / ".lock").exists()


def test_file_output_lock_is_beside_the_file(tmp_path):
    out = tmp_path / "activations.h5"
    assert lock_path(out) == tmp_path / "activations.h5.lock"
    with output_lock(out):
        assert (tmp_path / "activations.h5.lock").is_file()


def test_second_writer_in_same_process_is_refused(tmp_path):
    with output_lock(tmp_path):
        with pytest.raises(LockError) as e:
            with output_lock(tmp_path):
                pass
    assert str(os.getpid()) in str(e.value) and "\n" not in str(e.value)


def test_second_process_gets_one_line_naming_the_holder(tmp_path):
    p = _holder(tmp_path)
    try:
        with pytest.raises(LockError) as e:
            with output_lock(tmp_path):
                pass
        msg = str(e.value)
        assert f"pid {p.pid}" in msg and socket.gethostname() in msg and "since" in msg and "holder" in msg
        assert "\n" not in msg
    finally:
        p.kill()
        p.wait()


def test_lock_of_killed_process_is_taken_over(tmp_path):
    p = _holder(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert (tmp_path / ".lock").is_file()  # left behind by the dead process
    with output_lock(tmp_path) as lp:
        d = json.loads(lp.read_text())
        assert d["pid"] == os.getpid() and d["took_over_from"] == p.pid


def test_unwritable_location_is_a_clear_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
        with pytest.raises(RunDirError) as e:
            with output_lock(ro):
                pass
        assert "writable" in str(e.value)
    finally:
        ro.chmod(0o700)


def test_lock_released_after_exception(tmp_path):
    with pytest.raises(ValueError):
        with output_lock(tmp_path):
            raise ValueError("boom")
    with output_lock(tmp_path):
        pass
