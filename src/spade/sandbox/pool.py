"""Host side of the sandbox: persistent workers, episodes and structured outcomes.

Generated code never runs in this process. A ``SandboxPool`` keeps ``workers`` sandboxed worker
processes (``worker_process.WorkerProcess``) alive; ``pool.open(code, class_name, seed)`` forks an
episode inside one of them and returns a ``SandboxedEpisode`` whose ``reset``/``step``/``solution``
calls cost one message round trip, straight to the episode process over a socket the worker handed
over when it forked the episode. Every call returns an ``Outcome``; nothing raises for a misbehaving
environment. An episode that does not answer within the call limit is killed by its worker; a worker
that does not answer within a grace period after that is killed as a whole process group (and with
it, through its pid namespace, everything it started) and restarted on the next request. Calls to the
episodes of one worker are serialised by that worker's lock, as every request to the worker itself is.

Note: bwrap's ``--die-with-parent`` ties a worker to the *thread* that started it; create pools in a
long-lived thread (normally the main thread).
"""

from __future__ import annotations

import __future__
import base64
import itertools
import marshal
import math
import socket
import threading
import time
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

from spade.sandbox import isolation, levels, protocol
from spade.sandbox.config import SandboxConfig
from spade.sandbox.worker_process import WorkerLost, WorkerProcess

OUTCOME_KINDS = ("ok", "env_error", "contract_violation", "timeout", "crash")


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


EPISODE_FILENAME = "<spade_generated_env>"  # the file name the episode compiles generated code under


def precompile(code: str, cap: int | None = None) -> str | None:
    """Compile ``code`` here, once, exactly as an episode process would (same file name; the episode
    compiles under ``from __future__ import annotations`` and without -O), and return the code object
    marshalled and base64-encoded for ``SandboxPool.open(..., compiled=...)``, so that the episodes of
    one validation or of one environment's plays skip compiling it. Only for code the host has
    compiled already (intake does for every candidate); the episode process still runs it confined.

    None, so that the episode compiles the source itself as before, when the code does not compile
    (the episode then reports the error), when the result would exceed ``cap`` characters, or when a
    constant set of two or more items is in it: a set's iteration order can depend on the order its
    items were inserted, and unmarshalling inserts them in the host's hash order, not the episode's.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = compile(code, EPISODE_FILENAME, "exec", flags=__future__.annotations.compiler_flag,
                             dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
        return None
    if _holds_constant_set(module):
        return None
    encoded = base64.b64encode(marshal.dumps(module)).decode("ascii")
    return None if cap is not None and len(encoded) > cap else encoded


def _holds_constant_set(value) -> bool:
    if isinstance(value, types.CodeType):
        return any(_holds_constant_set(const) for const in value.co_consts)
    if isinstance(value, frozenset):
        return len(value) > 1 or any(_holds_constant_set(item) for item in value)
    if isinstance(value, tuple):
        return any(_holds_constant_set(item) for item in value)
    return False


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
    text = {k: str(reply.get(k, ""))[:4000] for k in ("error_type", "message", "traceback")}
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
    sock: socket.socket | None = field(default=None, repr=False)  # host end of the episode's socket
    conn: protocol.SocketConnection | None = field(default=None, repr=False)

    def call(self, method: str, *args) -> Outcome:
        if self.closed or not self.opened.ok:
            return Outcome("crash", message=f"episode is not open ({self.opened.describe()})")
        if method not in protocol.METHODS:
            return Outcome("contract_violation", message=f"method {method!r} is not one of {protocol.METHODS}")
        timeout = self.pool.config.limits.call_timeout_s
        start = time.perf_counter()
        with self.worker.lock:
            return self.pool._call_locked(self, {"method": method, "args": list(args)}, timeout,
                                          time.monotonic() + timeout, method, start)

    def reset(self, seed: int | None = None) -> Outcome:
        return self.call("reset", seed)

    def step(self, action: str) -> Outcome:
        return self.call("step", action)

    def solution(self) -> Outcome:
        return self.call("solution")

    def _drop(self) -> None:
        """Forget the episode on the host side (its process is gone or about to be killed)."""
        self.closed = True
        self.worker.episodes.discard(self.episode_id)
        if self.sock is not None:
            self.sock.close()
            self.sock = self.conn = None

    def close(self) -> None:
        if self.closed:
            return
        self._drop()  # the episode sees the end of its stream; the worker kills it (and reaps it later)
        if self.opened.ok and self.worker.generation == self.generation:
            self.pool._send(self.worker, {"op": "release", "id": self.episode_id}, 2.0, "close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SandboxPool:
    """A pool of persistent sandboxed workers. Use as a context manager, or call ``close()``."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.level = levels.resolve_level(self.config)
        self.workers = [WorkerProcess(self.level, self.config) for _ in range(self.config.workers)]
        self._ids = itertools.count()
        self._assign_lock = threading.Lock()

    def _send(self, worker: WorkerProcess, message: dict, timeout: float, method: str) -> Outcome:
        """A request to the worker process itself (open, close, ping)."""
        start = time.perf_counter()
        try:
            reply = worker.request(message, timeout)
        except WorkerLost as exc:
            return Outcome(exc.kind, message=str(exc), elapsed_ms=(time.perf_counter() - start) * 1000, ended=True)
        except (isolation.IsolationError, OSError) as exc:
            return Outcome("crash", message=f"could not start a worker: {exc}", ended=True,
                           elapsed_ms=(time.perf_counter() - start) * 1000)
        return to_outcome(reply, method, (time.perf_counter() - start) * 1000)

    def _call_locked(self, episode: SandboxedEpisode, message: dict | bytes | None, timeout: float, deadline: float,
                     method: str, start: float) -> Outcome:
        """Send ``message`` (a dict, or a frame already encoded) to the episode and read its answer by
        ``deadline``. An episode that runs out of time, dies or breaks the protocol is killed and reaped
        by its worker, and the Outcome says ``ended``. The caller holds the worker's lock."""
        worker = episode.worker
        if episode.conn is None:  # closed by another thread meanwhile
            return Outcome("crash", message="episode is not open (it was closed)", ended=True)
        if worker.generation != episode.generation:
            episode._drop()
            return Outcome("crash", message="the worker was restarted after a failure; this episode is gone", ended=True)
        limits = self.config.limits
        try:
            if isinstance(message, bytes):  # a frame encoded by the caller
                episode.conn.send_frame(message, deadline)
            elif message is not None:
                try:
                    frame = protocol.encode(message, limits.max_request_bytes)
                except protocol.ProtocolError as exc:
                    raise _Unsendable(str(exc)) from None
                episode.conn.send_frame(frame, deadline)
            reply = episode.conn.receive(limits.max_response_bytes, deadline)
        except protocol.DeadlineExceeded:
            kind, message_text = "timeout", f"no answer within {timeout:.3g} s; episode process killed"
        except protocol.PeerClosed:
            kind, message_text = "crash", "episode process died: "
        except protocol.ProtocolError as exc:
            kind, message_text = "contract_violation", f"episode broke the protocol: {exc}"
        except _Unsendable as exc:
            kind, message_text = "crash", f"request not sent: {exc}"
        else:
            reply = {key: reply[key] for key in protocol.REPLY_KEYS if key in reply}  # nothing else counts
            return to_outcome(reply, method, (time.perf_counter() - start) * 1000)
        episode._drop()
        status = self._kill_locked(worker, episode.episode_id)
        if message_text.endswith("died: "):
            message_text += status
        elapsed = (time.perf_counter() - start) * 1000
        return to_outcome({**_error_reply(kind, message_text), "ended": True}, method, elapsed)

    def _kill_locked(self, worker: WorkerProcess, episode_id: str) -> str:
        """Have the worker SIGKILL and reap one episode; returns how it ended. The caller holds the lock."""
        if not worker.alive():
            worker.stop()
            return "its worker is gone"
        try:
            reply = worker._exchange({"op": "close", "id": episode_id}, self.config.limits.grace_s)
        except WorkerLost as exc:
            return f"its worker did not answer either and was killed ({exc})"
        return str(reply.get("value", ""))[:200] if reply.get("kind") == "ok" else str(reply.get("message", ""))[:200]

    def open(self, code: str, class_name: str, seed: int | None = None, env_kwargs: dict | None = None,
             compiled: str | None = None, turn_cap: int | None = None) -> SandboxedEpisode:
        """Load ``code`` in a fresh episode process and instantiate ``class_name(**env_kwargs)``.

        ``random`` is seeded with ``seed`` before the module runs. ``compiled``: ``precompile(code)``,
        to skip compiling in the episode (None: the episode compiles ``code``). ``turn_cap``: the class keeps
        its own ``max_turns``, capped there (``worker.construct``). Check ``episode.opened``.
        """
        with self._assign_lock:
            worker = min(self.workers, key=lambda w: len(w.episodes))
            episode_id = f"e{next(self._ids)}"
            worker.episodes.add(episode_id)  # reserve a slot; removed below if the open fails
        timeout = self.config.limits.open_timeout_s
        load = {"code": code, "class_name": class_name, "seed": seed, "kwargs": env_kwargs or {}}
        if compiled is not None:
            load["compiled"] = compiled
        if turn_cap is not None:
            load["turn_cap"] = int(turn_cap)
        start = time.perf_counter()
        deadline = time.monotonic() + timeout
        with worker.lock:
            episode = SandboxedEpisode(self, worker, episode_id, worker.generation, Outcome("crash"))
            try:
                load_frame = protocol.encode(load, self.config.limits.max_request_bytes)
                reply = worker.request_locked({"op": "open", "id": episode_id}, timeout)
                episode.generation = worker.generation  # the request may have (re)started the worker
                if reply.get("kind") == "ok":
                    episode.sock = worker.receive_socket(deadline + self.config.limits.grace_s)
            except protocol.ProtocolError as exc:
                reply = {"kind": "crash", "message": f"load request not sent: {exc}", "ended": True}
            except WorkerLost as exc:
                reply = {"kind": exc.kind, "message": str(exc), "ended": True}
            except (isolation.IsolationError, OSError) as exc:
                reply = {"kind": "crash", "message": f"could not start a worker: {exc}", "ended": True}
            if episode.sock is None:
                outcome = to_outcome({**reply, "ended": True}, "open", (time.perf_counter() - start) * 1000)
            else:
                # The episode process is confined already; its first frame is the code to load.
                episode.conn = protocol.SocketConnection(episode.sock)
                outcome = self._call_locked(episode, load_frame, timeout, deadline, "open", start)
                if outcome.ok:  # calls are short: poll for their replies first (a load is not; it sleeps)
                    episode.conn.spin_s = self.config.reply_spin_us / 1e6
                if not outcome.ok and not outcome.ended:  # a failed start: the episode process exits; reap it
                    episode._drop()
                    self._kill_locked(worker, episode_id)
                    outcome = Outcome(outcome.kind, None, outcome.error_type, outcome.message, outcome.traceback,
                                      outcome.elapsed_ms, ended=True)
        episode.opened = outcome
        if outcome.ok:
            worker.episodes.add(episode_id)  # a restart during the open cleared the reservation
        else:
            episode._drop()
        return episode

    def close(self) -> None:
        for worker in self.workers:
            worker.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Unsendable(Exception):
    """The host's own request to an episode is over the request cap."""


def _error_reply(kind: str, message: str) -> dict:
    return {"kind": kind, "error_type": "", "message": message[:4000], "traceback": ""}
