"""A seccomp filter for episode processes: no new processes, threads or programs, no signals to others.

Standard library only (``ctypes``). Installed in each forked episode process right before it runs
generated code, on every isolation level. It makes fork/thread bombs, ``subprocess``,
``posix_spawn`` and ``os.system`` fail with ``EPERM`` instead of relying on ``RLIMIT_NPROC`` (which the
kernel does not apply to root), and stops the code from signalling or tracing its parent.

The program is classic BPF over ``struct seccomp_data`` (nr at offset 0, arch at 4, args at 16).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO | EPERM
LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K

# Per architecture: audit arch, syscalls denied outright, syscalls allowed only towards our own pid.
ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "clone3": 435,
            "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
            "pidfd_open": 434, "pidfd_send_signal": 424,
        },
        {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297},
    ),
    "aarch64": (
        0xC00000B7,
        {
            "clone": 220, "execve": 221, "execveat": 281, "clone3": 435,
            "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
            "pidfd_open": 434, "pidfd_send_signal": 424,
        },
        {"kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240},
    ),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_program(arch: str, own_pid: int) -> bytes:
    """The BPF program for ``arch``, letting signal syscalls through only when aimed at ``own_pid``."""
    audit_arch, denied, signal_calls = ARCHES[arch]
    prog = [
        _insn(LD_ABS_W, 4),
        _insn(JEQ_K, audit_arch, 1, 0),
        _insn(RET_K, RET_KILL_PROCESS),  # a foreign ABI (e.g. int 0x80) could bypass the numbers
        _insn(LD_ABS_W, 0),
        _insn(JGE_K, 0x40000000, 0, 1),  # x32 syscall numbers
        _insn(RET_K, RET_KILL_PROCESS),
    ]
    for number in sorted(denied.values()):
        prog += [_insn(JEQ_K, number, 0, 1), _insn(RET_K, RET_DENY)]
    numbers = sorted(signal_calls.values())
    for i, number in enumerate(numbers):
        prog.append(_insn(JEQ_K, number, len(numbers) - i, 0))  # jump to the own-pid check below
    prog.append(_insn(RET_K, RET_ALLOW))
    prog += [
        _insn(LD_ABS_W, 16),  # args[0], low 32 bits (little endian)
        _insn(JEQ_K, own_pid, 0, 3),
        _insn(LD_ABS_W, 20),  # args[0], high 32 bits
        _insn(JEQ_K, 0, 0, 1),
        _insn(RET_K, RET_ALLOW),
        _insn(RET_K, RET_DENY),
    ]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PREPARED: dict = {}  # "arch" and "prctl", filled by prepare()


def prepare() -> None:
    """Look up the architecture and ``prctl`` once; a zygote calls this so its forks inherit them."""
    if not _PREPARED:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _PREPARED.update(arch=platform.machine(), prctl=prctl)


def install(own_pid: int) -> str:
    """Install the filter in this process (irreversible). Returns a note; raises ``OSError`` on failure."""
    prepare()
    arch = _PREPARED["arch"]
    if arch not in ARCHES:
        return f"seccomp filter not available on {arch}; relying on isolation and resource limits"
    program = build_program(arch, own_pid)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    prctl = _PREPARED["prctl"]
    if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
    return "seccomp filter installed"
