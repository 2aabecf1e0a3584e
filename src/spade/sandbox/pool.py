"""Host side of the sandbox: persistent workers, episodes and structured outcomes.

Generated code never runs in this process. A ``SandboxPool`` keeps ``workers`` sandboxed worker
processes alive; ``pool.open(code, class_name, seed)`` forks an episode inside one of them and
returns a ``SandboxedEpisode`` whose ``reset``/``step``/``solution`` calls cost one message round trip.
Every call returns an ``Outcome``; nothing raises for a misbehaving environment. A worker that does
not answer within the call limit plus a grace period is killed as a whole process group (and with
it, through its pid namespace, everything it started) and restarted on the next request.

Note: bwrap's ``--die-with-parent`` ties a worker to the *thread* that started it; create pools in a
long-lived thread (normally the main thread).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from spade.sandbox import isolation, procs, protocol
from spade.sandbox.config import SandboxConfig

OUTCOME_KINDS = ("ok", "env_error", "contract_violation", "timeout", "crash")
STARTUP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Outcome:
    """Result of one call into the sandbox."""

    kind: str  # one of OUTCOME_KINDS
    value: Any = None  # the call's plain-data result when kind == "ok"
    error_type: str = ""  # exception class name for env_error
    message: str = ""  # human-readable reason, trimmed
    traceback: str = ""  # trimmed traceback of the environment's frames
    elapsed_ms: float = 0.0  # host-measured wall time of the call
    ended: bool = False  # the episode process is gone (timeout, crash, protocol breach, failed open)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def describe(self) -> str:
        if self.ok:
            return "ok"
        return f"{self.kind}: {self.error_type + ': ' if self.error_type else ''}{self.message}"


class WorkerLost(Exception):
    """The worker process died, broke the protocol or did not answer in time (it has been killed)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class WorkerProcess:
    """One sandboxed worker process at a given isolation level; restartable, thread-safe."""

    def __init__(self, level: str, config: SandboxConfig):
        self.level, self.config = level, config
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.generation = 0  # bumped on every (re)start; episodes of older generations are gone
        self.episodes: set = set()  # ids of live episodes (for load balancing)
        self._seq = itertools.count()
        self._stderr = None

    def start(self) -> None:
        boot = json.dumps(self.config.worker_config(private_tmp=self.level == "bwrap"))
        command = isolation.command_for(self.level, self.config, boot)
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=dict(isolation.SANDBOX_ENV),  # bwrap clears it again inside
            start_new_session=True,  # own process group: killed as a whole
            close_fds=True,
        )
        self.generation += 1
        self.episodes = set()
        self._exchange({"op": "ping"}, STARTUP_TIMEOUT_S)

    def _startup_error(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read(2000).decode("utf-8", "replace").strip()

    def _exchange(self, message: dict, timeout: float) -> dict:
        seq = next(self._seq)
        deadline = time.monotonic() + timeout
        try:
            protocol.write_message(
                self.proc.stdin.fileno(), {**message, "seq": seq}, self.config.limits.max_request_bytes, deadline
            )
            reply = protocol.read_message(
                self.proc.stdout.fileno(), self.config.limits.max_response_bytes + 4096, deadline
            )
        except protocol.DeadlineExceeded:
            self.stop()
            raise WorkerLost("timeout", f"worker gave no answer within {timeout:.3g} s and was killed") from None
        except (protocol.PeerClosed, protocol.ProtocolError, BrokenPipeError) as exc:
            detail = self._startup_error()
            self.stop()
            raise WorkerLost("crash", f"worker lost ({exc}){': ' + detail if detail else ''}") from None
        if reply.get("seq") != seq:
            self.stop()
            raise WorkerLost("crash", f"worker answered out of order (seq {reply.get('seq')!r}, expected {seq})")
        return reply

    def request(self, message: dict, timeout: float) -> dict:
        """Send one request and return the reply. Restarts a dead worker first."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.stop()
                self.start()
            return self._exchange(message, timeout + self.config.limits.grace_s)

    def stop(self) -> None:
        """Kill the worker: its sandboxed processes first, then its whole process group (no-op if not running).

        bwrap's inner processes run in a new session, so they are not in the launcher's process group;
        killing them first lets the launcher reap them, and its pid namespace takes everything else.
        """
        proc, self.proc = self.proc, None
        if proc is not None:
            for pid in procs.descendants(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                proc.wait(timeout=1.0)  # the launcher exits once its child is gone
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                stream.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def shutdown(self) -> None:
        with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                try:
                    protocol.write_message(self.proc.stdin.fileno(), {"op": "shutdown"}, 1024, time.monotonic() + 1)
                    self.proc.wait(timeout=2)
                except (protocol.DeadlineExceeded, protocol.PeerClosed, subprocess.TimeoutExpired, OSError):
                    pass
            self.stop()


def _finite_number(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond float range
        return False


def _plain_value_ok(method: str, value) -> str:
    """Re-check on the host the shape of values the (untrusted) episode process sent back."""
    if method == "reset":
        good = isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], dict)
        return "" if good else "reset() result arrived malformed"
    if method == "step":
        good = (
            isinstance(value, list)
            and len(value) == 5
            and isinstance(value[0], str)
            and _finite_number(value[1])
            and isinstance(value[2], bool)
            and isinstance(value[3], bool)
            and isinstance(value[4], dict)
        )
        return "" if good else "step() result arrived malformed"
    if method == "solution":
        return "" if isinstance(value, str) else "solution() result arrived malformed"
    return ""


def to_outcome(reply: dict, method: str, elapsed_ms: float) -> Outcome:
    kind = reply.get("kind")
    ended = reply.get("ended") is True
    text = {k: str(reply.get(k, ""))[:4000] for k in ("error_type", "message", "traceback")}
    if kind not in OUTCOME_KINDS:
        message = f"worker sent unknown outcome kind {str(kind)[:40]!r}"
        return Outcome("crash", message=message, elapsed_ms=elapsed_ms, ended=ended)
    if kind == "ok":
        problem = _plain_value_ok(method, reply.get("value"))
        if problem:
            return Outcome("contract_violation", message=problem, elapsed_ms=elapsed_ms)
        value = reply.get("value")
        if method == "step":
            value = (value[0], float(value[1]), *value[2:])
        elif method == "reset":
            value = tuple(value)
        return Outcome("ok", value, elapsed_ms=elapsed_ms)
    return Outcome(kind, None, elapsed_ms=elapsed_ms, ended=ended, **text)


@dataclass
class SandboxedEpisode:
    """One episode: an environment instance living in a forked process inside a worker."""

    pool: "SandboxPool"
    worker: WorkerProcess
    episode_id: str
    generation: int
    opened: Outcome
    closed: bool = field(default=False)

    def call(self, method: str, *args) -> Outcome:
        if self.closed or not self.opened.ok:
            return Outcome("crash", message=f"episode is not open ({self.opened.describe()})")
        if self.worker.generation != self.generation:
            self.closed = True
            return Outcome("crash", message="the worker was restarted after a failure; this episode is gone", ended=True)
        timeout = self.pool.config.limits.call_timeout_s
        message = {"op": "call", "id": self.episode_id, "method": method, "args": list(args), "timeout": timeout}
        outcome = self.pool._send(self.worker, message, timeout, method)
        if outcome.ended:
            self.closed = True
            self.worker.episodes.discard(self.episode_id)
        return outcome

    def reset(self, seed: int | None = None) -> Outcome:
        return self.call("reset", seed)

    def step(self, action: str) -> Outcome:
        return self.call("step", action)

    def solution(self) -> Outcome:
        return self.call("solution")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.worker.episodes.discard(self.episode_id)
        if self.opened.ok and self.worker.generation == self.generation:
            self.pool._send(self.worker, {"op": "close", "id": self.episode_id}, 2.0, "close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SandboxPool:
    """A pool of persistent sandboxed workers. Use as a context manager, or call ``close()``."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.level = isolation.resolve_level(self.config)
        self.workers = [WorkerProcess(self.level, self.config) for _ in range(self.config.workers)]
        self._ids = itertools.count()
        self._assign_lock = threading.Lock()

    def _send(self, worker: WorkerProcess, message: dict, timeout: float, method: str) -> Outcome:
        start = time.perf_counter()
        try:
            reply = worker.request(message, timeout)
        except WorkerLost as exc:
            return Outcome(exc.kind, message=str(exc), elapsed_ms=(time.perf_counter() - start) * 1000, ended=True)
        except (isolation.IsolationError, OSError) as exc:
            return Outcome("crash", message=f"could not start a worker: {exc}", ended=True,
                           elapsed_ms=(time.perf_counter() - start) * 1000)
        return to_outcome(reply, method, (time.perf_counter() - start) * 1000)

    def open(self, code: str, class_name: str, seed: int | None = None, env_kwargs: dict | None = None) -> SandboxedEpisode:
        """Load ``code`` in a fresh episode process and instantiate ``class_name(**env_kwargs)``.

        ``random`` is seeded with ``seed`` before the module runs. Check ``episode.opened``.
        """
        with self._assign_lock:
            worker = min(self.workers, key=lambda w: len(w.episodes))
            episode_id = f"e{next(self._ids)}"
            worker.episodes.add(episode_id)  # reserve a slot; removed below if the open fails
        timeout = self.config.limits.open_timeout_s
        message = {
            "op": "open", "id": episode_id, "code": code, "class_name": class_name,
            "seed": seed, "kwargs": env_kwargs or {}, "timeout": timeout,
        }
        outcome = self._send(worker, message, timeout, "open")
        episode = SandboxedEpisode(self, worker, episode_id, worker.generation, outcome)
        if outcome.ok:
            worker.episodes.add(episode_id)  # a restart during the open cleared the reservation
        else:
            episode.closed = True
            worker.episodes.discard(episode_id)
        return episode

    def close(self) -> None:
        for worker in self.workers:
            worker.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
