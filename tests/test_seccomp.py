"""The episode seccomp filter, exercised in a throwaway child process."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from spade.sandbox import seccomp

pytestmark = pytest.mark.skipif(platform.machine() not in seccomp.ARCHES, reason="no filter for this architecture")

CHILD = r"""
import os, subprocess, threading, signal
from spade.sandbox import seccomp
seccomp.install(os.getpid())
results = []
def attempt(name, fn):
    try:
        fn()
        results.append(f"{name}=allowed")
    except (OSError, RuntimeError):
        results.append(f"{name}=denied")
attempt("fork", os.fork)
attempt("thread", lambda: threading.Thread(target=int).start())
attempt("subprocess", lambda: subprocess.run(["/bin/true"]))
attempt("spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
attempt("signal_self", lambda: os.kill(os.getpid(), 0))
attempt("open_file", lambda: open("/dev/null").close())
print(" ".join(results))
"""


def test_filter_denies_process_creation_and_foreign_signals():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "fork=denied", "thread=denied", "subprocess=denied", "spawn=denied",
        "signal_parent=denied", "signal_self=allowed", "open_file=allowed",
    ]


def test_program_shape():
    program = seccomp.build_program(platform.machine(), own_pid=1234)
    assert len(program) % 8 == 0
    _, denied, signal_calls = seccomp.ARCHES[platform.machine()]
    assert len(program) // 8 == 6 + 2 * len(denied) + len(signal_calls) + 1 + 6
