"""Host-side handle to one sandboxed worker process.

A ``WorkerProcess`` starts the worker (``spade.sandbox.worker``, run inside the command line that
``isolation`` builds for its level), exchanges protocol messages with it over its stdin/stdout, receives
the episode sockets it hands over on a separate channel, and kills it as a whole process tree when it
dies, breaks the protocol or does not answer in time (``WorkerLost``). ``pool`` keeps several of them;
``levels`` starts one to probe whether an isolation level works on this machine.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from spade.sandbox import isolation, procs, protocol
from spade.sandbox.config import SandboxConfig

STARTUP_TIMEOUT_S = 20.0


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
        self.channel: socket.socket | None = None  # the worker sends episode sockets on it
        self._requests = self._replies = None  # protocol.Connection over the worker's stdin / stdout

    def start(self) -> None:
        host_end, worker_end = socket.socketpair()
        inherited = worker_end.fileno()
        if inherited < 3:  # keep clear of the child's stdin/stdout/stderr
            inherited = fcntl.fcntl(inherited, fcntl.F_DUPFD_CLOEXEC, 3)
        try:
            boot = json.dumps({**self.config.worker_config(private_tmp=self.level == "bwrap"), "channel_fd": inherited})
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
                pass_fds=(inherited,),
            )
        except BaseException:
            host_end.close()
            raise
        finally:
            if inherited != worker_end.fileno():
                os.close(inherited)
            worker_end.close()
        self.channel = host_end
        host_end.setblocking(False)
        self._requests = protocol.Connection(self.proc.stdin.fileno())
        self._replies = protocol.Connection(self.proc.stdout.fileno())
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
            self._requests.send({**message, "seq": seq}, self.config.limits.max_request_bytes, deadline)
            reply = self._replies.receive(self.config.limits.max_response_bytes + 4096, deadline)
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
            return self.request_locked(message, timeout)

    def request_locked(self, message: dict, timeout: float) -> dict:
        """``request`` for a caller that holds ``self.lock``."""
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self.start()
        return self._exchange(message, timeout + self.config.limits.grace_s)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def receive_socket(self, deadline: float) -> socket.socket:
        """The episode socket the worker sent with its last ``open`` reply (it is sent first, so it is there)."""
        while True:
            try:
                data, fds, flags, _ = socket.recv_fds(self.channel, 16, 1)
                break
            except BlockingIOError:
                try:
                    protocol.wait_readable(self.channel.fileno(), deadline)
                except protocol.DeadlineExceeded:
                    self.stop()
                    raise WorkerLost("timeout", "worker answered an open without sending the episode socket") from None
            except OSError as exc:
                self.stop()
                raise WorkerLost("crash", f"worker lost ({exc})") from None
        sock = None
        try:
            if data != b"E" or len(fds) != 1 or flags & socket.MSG_CTRUNC:
                raise ValueError(f"expected one episode socket, got {len(fds)} descriptors and {data[:16]!r}")
            sock = socket.socket(fileno=fds[0])
            if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
                raise ValueError("the descriptor it sent is not a Unix stream socket")
        except (ValueError, OSError) as exc:
            if sock is not None:
                sock.close()
            for fd in fds[1 if sock is not None else 0:]:
                os.close(fd)
            self.stop()
            raise WorkerLost("crash", f"worker broke the protocol: {exc}") from None
        return sock

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
        if self.channel is not None:
            self.channel.close()
            self.channel = None
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
