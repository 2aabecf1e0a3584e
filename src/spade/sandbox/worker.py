"""The sandboxed worker: a zygote that forks one process per episode. Runs INSIDE the sandbox.

Standard library only. The host starts it as ``python -s -S -c BOOT CONFIG_JSON`` under the chosen
isolation. It speaks length-prefixed JSON (``protocol``) on its original stdin/stdout, which it moves
to private descriptors before pointing fds 0-2 at ``/dev/null``: stray prints of an environment can
never reach the protocol stream. The config names one more inherited descriptor, ``channel_fd``: a
Unix socket on which the zygote hands the host its end of each new episode's socket.

Requests (host -> worker), one at a time, each answered by one response:

- ``{"op": "open", "id"}``: take an episode process (the spare, or a new fork), pass the host its end
  of the episode's socket pair over ``channel_fd`` and answer ``ok`` at once. The episode process
  confines itself (private /tmp, no capabilities, resource limits, seccomp) BEFORE it reads anything,
  then waits for its load request, ``{"code", "class_name", "seed", "kwargs", "compiled"?, "turn_cap"?}``,
  which the host sends as the first frame on that socket: it seeds ``random``, runs the module, instantiates
  the class (``construct``) and reports the result.
- ``{"op": "close", "id"}``: SIGKILL and reap that episode; the value says how it ended.
- ``{"op": "release", "id"}``: SIGKILL that episode and answer at once; it is reaped later, without
  blocking (the normal end of an episode, where nobody asks how it ended).
- ``{"op": "ping"}``, ``{"op": "shutdown"}``.

Spare episode process (``spare_episode`` in the config): after answering a request, the zygote forks
and confines the next episode process while the host works, so an ``open`` only hands over a socket and
the episode only loads code. A spare holds nothing of any episode: it is forked from the zygote, has run
no generated code and reads its code only after every restriction is in place, exactly as before.

Episode calls (``{"method", "args"}``) go from the host straight to the episode's socket and back,
without passing through the zygote: one round trip between two processes instead of two. The host
enforces each call's wall-clock limit and, when it passes, asks the zygote to kill the episode; if
the zygote does not answer within the grace period either, the host kills the whole worker.

Every response carries ``kind`` in ``ok | env_error | contract_violation | timeout | crash``.
"""

from __future__ import annotations

import base64
import ctypes
import gc
import json
import marshal
import math
import os
import random
import resource
import select
import signal
import socket
import sys
import traceback
import types

from spade.envs.tool_base import ToolUseBaseEnv
from spade.sandbox import protocol, seccomp

METHODS = protocol.METHODS
TRACEBACK_CHARS = 2000
MESSAGE_CHARS = 500
MODULE_NAME = "spade_generated_env"
REAP_POLL_S = 0.001  # how often an idle zygote checks whether released episodes have exited


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n...[trimmed]...\n" + text[-limit // 2 :]


def _error(kind: str, message: str, error_type: str = "", tb: str = "") -> dict:
    return {
        "kind": kind,
        "error_type": error_type,
        "message": _trim(message, MESSAGE_CHARS),
        "traceback": _trim(tb, TRACEBACK_CHARS),
    }


def _env_error(exc: BaseException) -> dict:
    try:
        message = str(exc)
    except BaseException:  # a hostile __str__
        message = "<exception message could not be rendered>"
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if f.filename == f"<{MODULE_NAME}>"] or frames[-3:]
    tb = "".join(traceback.format_list(ours[-8:]))
    return _error("env_error", message, type(exc).__name__, tb)


# ----- plain-data conversion of whatever the environment returned ----------------------------------


def _type_name(value) -> str:
    try:
        return str(type(value).__name__)[:60]
    except BaseException:
        return "object"


MAX_DEPTH = 32
MAX_NODES = 10_000
MAX_INT_DIGITS = 300


def plain(value, budget: list | None = None, depth: int = 0):
    """Copy ``value`` into exact builtin JSON types; anything else becomes a short type tag.

    ``budget`` bounds the nodes visited and ``depth`` the nesting, so self-referencing or deeply
    nested containers cannot blow up; huge integers become a tag too (JSON peers reject them).
    """
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    kind = type(value)
    if value is None or kind in (bool, str):
        return value
    if kind is int:
        return value if abs(value) < 10**MAX_INT_DIGITS else "<int too large>"
    if kind is float:
        return value if math.isfinite(value) else repr(value)
    if budget[0] <= 0 or depth >= MAX_DEPTH:
        return "<truncated>"
    if kind in (list, tuple):
        return [plain(v, budget, depth + 1) for v in value]
    if kind is dict:
        return {
            k if type(k) is str else f"<key {_type_name(k)}>": plain(v, budget, depth + 1) for k, v in value.items()
        }
    return f"<{_type_name(value)}>"


def check_reset(result) -> dict:
    if type(result) is not tuple or len(result) != 2:
        return _error("contract_violation", f"reset() must return (str, dict), got {type(result).__name__}")
    observation, info = result
    if type(observation) is not str or type(info) is not dict:
        return _error(
            "contract_violation",
            f"reset() must return (str, dict), got ({type(observation).__name__}, {type(info).__name__})",
        )
    return {"kind": "ok", "value": [observation, plain(info)]}


def check_step(result) -> dict:
    if type(result) is not tuple or len(result) != 5:
        size = len(result) if type(result) in (tuple, list) else "?"
        return _error(
            "contract_violation",
            f"step() must return a 5-tuple (str, float, bool, bool, dict), got {type(result).__name__} of length {size}",
        )
    observation, reward, terminated, truncated, info = result
    problems = []
    if type(observation) is not str:
        problems.append(f"observation is {type(observation).__name__}, not str")
    if type(reward) not in (int, float):
        problems.append(f"reward is {type(reward).__name__}, not float")
    elif type(reward) is int and abs(reward) >= 10**MAX_INT_DIGITS:
        problems.append("reward is an integer too large for a float")
    elif not math.isfinite(reward):
        problems.append(f"reward is not finite ({reward!r})")
    if type(terminated) is not bool:
        problems.append(f"terminated is {type(terminated).__name__}, not bool")
    if type(truncated) is not bool:
        problems.append(f"truncated is {type(truncated).__name__}, not bool")
    if type(info) is not dict:
        problems.append(f"info is {type(info).__name__}, not dict")
    if problems:
        return _error("contract_violation", "step() returned a bad tuple: " + "; ".join(problems))
    return {"kind": "ok", "value": [observation, float(reward), terminated, truncated, plain(info)]}


def check_solution(result) -> dict:
    if type(result) is not str:
        return _error("contract_violation", f"solution() must return str, got {type(result).__name__}")
    return {"kind": "ok", "value": result}


def reset_gate(env) -> dict:
    """Evaluate every tool-use success criterion on the current state (spec section 5, reset gate)."""
    criteria = getattr(env, "_message_criteria", None)
    if type(criteria) is not list or not criteria:
        return _error("contract_violation", "tool-use environment has no _message_criteria list")
    verdicts = []
    for criterion in criteria:
        try:
            verdicts.append(bool(criterion(env.state)))
        except Exception as exc:
            verdicts.append(f"{type(exc).__name__}: {_trim(str(exc), 200)}")
    return {"kind": "ok", "value": verdicts}


CHECKS = {"reset": check_reset, "step": check_step, "solution": check_solution}


# ----- the episode process -----------------------------------------------------------------------


_LIBC: list = []  # the C library handle, loaded once in the zygote and inherited by every episode


def _libc():
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _die_with_worker(worker_pid: int) -> None:
    """Ask the kernel to SIGKILL this episode when the worker dies (PR_SET_PDEATHSIG), on every level."""
    _libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != worker_pid:  # the worker died before the request took effect
        os._exit(0)


def _private_tmp(size_mb: int) -> None:
    """Give this episode its own mount namespace with a fresh, size-capped tmpfs on /tmp."""
    libc = _libc()
    clone_newns, ms_rec, ms_private, ms_nosuid, ms_nodev = 0x20000, 0x4000, 0x40000, 0x2, 0x4
    steps = (
        ("unshare(CLONE_NEWNS)", lambda: libc.unshare(clone_newns)),
        ("making mounts private", lambda: libc.mount(None, b"/", None, ms_rec | ms_private, None)),
        ("mounting /tmp", lambda: libc.mount(b"tmpfs", b"/tmp", b"tmpfs", ms_nosuid | ms_nodev,
                                             f"size={size_mb}m,mode=1777".encode())),
    )
    for what, call in steps:
        if call() != 0:
            raise OSError(ctypes.get_errno(), f"private /tmp: {what} failed")
    os.chdir("/tmp")


def _drop_capabilities() -> None:
    """Clear every capability (effective, permitted, inheritable, ambient); fail if any remain."""
    libc = _libc()
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # two all-zero __user_cap_data_struct
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    fd = os.open("/proc/self/status", os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    fields = dict(line.split(b":", 1) for line in b"".join(chunks).splitlines() if line.startswith(b"Cap"))
    if any(int(fields[key], 16) for key in (b"CapEff", b"CapPrm", b"CapInh", b"CapAmb") if key in fields):
        raise OSError("capabilities remain after capset")


def _apply_limits(limits: dict) -> None:
    mib = 1 << 20
    pairs = [
        (resource.RLIMIT_AS, limits["memory_mb"] * mib),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mib),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_NPROC, limits["processes"]),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in pairs:
        resource.setrlimit(which, (value, value))
    cpu = limits["cpu_seconds"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def _respond(sock: socket.socket, message: dict, cap: int) -> None:
    try:
        data = protocol.encode(message, cap)
    except protocol.ProtocolError as exc:
        data = protocol.encode(_error("contract_violation", f"return value too large: {exc}"), cap)
    except (TypeError, ValueError) as exc:
        data = protocol.encode(_error("contract_violation", f"return value is not serialisable: {exc}"), cap)
    sock.sendall(data)


def construct(cls, kwargs: dict, turn_cap: int | None = None):
    """An instance of the environment class ``cls``. Without ``turn_cap``: ``cls(**kwargs)`` (the runner's turn
    budget is in ``kwargs['max_turns']``). With it, the class keeps its own turn limit, capped at ``turn_cap`` (the
    reference's ``respect_game_max_turns``, spade/core/envs/synthetic_game_env.py:227-239): it is built with its own
    defaults (with ``max_turns=turn_cap`` only when it cannot be built without); a positive integer ``max_turns``
    attribute becomes ``min(it, turn_cap)``, any other value of that attribute becomes ``turn_cap``."""
    if turn_cap is None:
        return cls(**kwargs)
    try:
        env = cls(**kwargs)
    except TypeError:  # max_turns is a required argument
        env = cls(**kwargs, max_turns=turn_cap)
    own = getattr(env, "max_turns", None)
    if isinstance(own, int) and not isinstance(own, bool) and own > 0:
        env.max_turns = min(own, turn_cap)
    elif hasattr(env, "max_turns"):
        env.max_turns = turn_cap
    return env


def _module_code(request: dict) -> types.CodeType:
    """The module's code object: the host's precompiled one when it sent it (``compiled``, marshal in
    base64, made by ``pool.precompile`` with the same file name and flags as the line below), else
    compiled here from the source. Either way the same bytecode runs, under the same confinement."""
    compiled = request.get("compiled")
    if isinstance(compiled, str):
        try:
            code = marshal.loads(base64.b64decode(compiled, validate=True))
        except (ValueError, EOFError, TypeError):
            code = None
        if type(code) is types.CodeType:
            return code
    return compile(request["code"], f"<{MODULE_NAME}>", "exec")  # inherits this module's future import


# Run by a spare episode process while it waits (after confinement, before it reads anything): the same
# steps a load takes (decode a frame, unmarshal code, run a module that defines a class, instantiate it,
# encode a reply) on a fixed snippet, so that the copy-on-write faults of those paths through the
# inherited heap are taken now rather than while the host waits. No generated code, no randomness.
_WARM_UP_SOURCE = """
class WarmUp:
    def __init__(self, max_turns=1):
        self.state = {"turn": 0, "max_turns": max_turns, "log": []}

    def reset(self, seed=None):
        self.state["turn"] = 0
        return f"start {seed}", {"seed": seed}

    def step(self, action):
        self.state["turn"] += 1
        self.state["log"].append(str(action).strip()[:10])
        return "obs", 0.0, False, self.state["turn"] >= self.state["max_turns"], {}
"""


def warm_up_payload() -> bytes:
    """The warm-up's load request as the host would send it (built once, in the zygote)."""
    code = marshal.dumps(compile(_WARM_UP_SOURCE, f"<{MODULE_NAME}>", "exec"))
    return json.dumps({"code": _WARM_UP_SOURCE, "class_name": "WarmUp", "seed": 0, "kwargs": {"max_turns": 2},
                       "compiled": base64.b64encode(code).decode("ascii")}).encode("utf-8")


def _warm_up(payload: bytes, cap: int) -> None:
    request = protocol.decode(payload)
    module = types.ModuleType(MODULE_NAME)
    exec(_module_code(request), module.__dict__)
    env = module.__dict__["WarmUp"](**request["kwargs"])
    replies = [check_reset(env.reset(0)), check_step(env.step("warm up"))]
    protocol.encode({"kind": "ok", "value": replies}, cap)


def episode_main(sock: socket.socket, config: dict, worker_pid: int, warm_up: bytes | None = None) -> None:
    """Body of a forked episode process; never returns. Confines itself, runs the ``warm_up`` load request (a
    spare), then waits for its own load request."""
    cap = config["max_response_bytes"]
    os.setpgid(0, 0)
    _die_with_worker(worker_pid)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    failure = ""
    try:  # fail closed: no generated code runs unless every restriction is in place
        if config.get("private_tmp"):
            _private_tmp(config["limits"]["tmpfs_mb"])
        _drop_capabilities()
        _apply_limits(config["limits"])
        if config.get("seccomp", True):
            seccomp.install(os.getpid())
    except (OSError, ValueError) as exc:
        failure = f"could not confine the episode process: {exc}"
    if not failure and warm_up is not None:
        _warm_up(warm_up, cap)
    requests = protocol.Connection(sock.fileno(), blocking=True)  # the host is the only writer
    try:
        request = requests.receive(config["max_request_bytes"])  # the load request (trusted: from the host)
    except (protocol.PeerClosed, protocol.ProtocolError):
        os._exit(0)
    if failure:
        _respond(sock, _error("crash", failure), cap)
        os._exit(71)
    random.seed(request.get("seed"))
    try:
        module = types.ModuleType(MODULE_NAME)
        module.__dict__["ToolUseBaseEnv"] = ToolUseBaseEnv
        code = _module_code(request)
        exec(code, module.__dict__)
        cls = module.__dict__.get(request["class_name"])
        if not isinstance(cls, type):
            reply = _error("contract_violation", f"module defines no class named {request['class_name']!r}")
        else:
            env = construct(cls, request.get("kwargs", {}), request.get("turn_cap"))
            reply = {"kind": "ok", "value": None}
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from the env count as env errors
        reply, env = _env_error(exc), None
    _respond(sock, reply, cap)
    if env is None:
        os._exit(0)
    while True:
        try:
            message = requests.receive(config["max_request_bytes"])
        except (protocol.PeerClosed, protocol.ProtocolError):
            os._exit(0)
        method, args = message.get("method"), message.get("args", [])
        try:
            if method not in METHODS:  # the host checks too; this keeps the episode's surface fixed
                reply = _error("contract_violation", f"method {method!r} is not one of {METHODS}")
            elif method == "reset_gate":
                reply = reset_gate(env)
            else:
                result = getattr(env, method)(*args)
                check = CHECKS.get(method)
                reply = check(result) if check else {"kind": "ok", "value": plain(result)}
        except BaseException as exc:
            reply = _env_error(exc)
        _respond(sock, reply, cap)


# ----- the zygote --------------------------------------------------------------------------------


class Zygote:
    def __init__(self, config: dict, in_fd: int, out_fd: int, channel: socket.socket):
        self.config = config
        self.in_fd, self.out_fd = in_fd, out_fd
        self.channel = channel  # hands the host each episode's socket
        self.episodes: dict = {}  # id -> pid
        self.spare: tuple | None = None  # (pid, socket) of a confined episode process awaiting its code
        self.released: list = []  # pids killed by "release", not reaped yet
        self.warm_up = warm_up_payload() if config.get("spare_episode", True) else None

    def kill(self, episode_id: str) -> str:
        pid = self.episodes.pop(episode_id)
        # The pid itself: the episode may have left its process group (setpgid), and it cannot
        # have children (seccomp), so killing the pid is complete.
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        return describe_status(status)

    def release(self, episode_id: str) -> None:
        pid = self.episodes.pop(episode_id)
        os.kill(pid, signal.SIGKILL)
        self.released.append(pid)

    def reap_released(self) -> None:
        waiting = []
        for pid in self.released:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if not done:
                waiting.append(pid)
        self.released = waiting

    def fork_episode(self) -> tuple:
        """Fork an episode process; returns its pid and the zygote's end of its socket pair."""
        parent_sock, child_sock = socket.socketpair()
        worker_pid = os.getpid()
        # Everything the zygote holds now goes into the collector's permanent generation, so the
        # episode's garbage collections never walk (and so never copy-on-write) the inherited heap.
        gc.freeze()
        pid = os.fork()
        if pid == 0:  # episode process
            try:
                parent_sock.close()
                keep = child_sock.fileno()
                for fd in (self.in_fd, self.out_fd, self.channel.fileno()):
                    os.close(fd)
                os.closerange(3, keep)
                os.closerange(keep + 1, 1 << 16)
                episode_main(child_sock, self.config, worker_pid, self.warm_up)
            finally:
                os._exit(70)
        gc.unfreeze()  # the zygote's own objects stay collectable
        child_sock.close()
        return pid, parent_sock

    def prepare(self) -> None:
        """Between requests: fork the next spare if there is none, then reap released episodes until
        they are all gone or the next request arrives (a request never waits for a reap)."""
        if self.spare is None and self.config.get("spare_episode", True):
            self.spare = self.fork_episode()
        self.reap_released()
        while self.released and not select.select([self.in_fd], [], [], REAP_POLL_S)[0]:
            self.reap_released()

    def open(self, request: dict) -> dict:
        episode_id = request["id"]
        if episode_id in self.episodes:
            self.kill(episode_id)
        (pid, parent_sock), self.spare = self.spare or self.fork_episode(), None
        self.episodes[episode_id] = pid
        try:  # the host's end leaves this process: only the host and the episode hold the pair
            socket.send_fds(self.channel, [b"E"], [parent_sock.fileno()])
        except OSError as exc:
            self.kill(episode_id)
            return {**_error("crash", f"could not hand the episode socket to the host: {exc}"), "ended": True}
        finally:
            parent_sock.close()
        return {"kind": "ok", "value": None}

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "ping":
            return {"kind": "ok", "value": {"pid": os.getpid(), "uid": os.getuid(), "episodes": len(self.episodes)}}
        if op == "open":
            return self.open(request)
        if op in ("close", "release"):
            if request.get("id") not in self.episodes:
                return {**_error("crash", f"unknown episode {request.get('id')!r} (it ended earlier)"), "ended": True}
            if op == "release":
                self.release(request["id"])
                return {"kind": "ok", "value": None}
            return {"kind": "ok", "value": self.kill(request["id"])}
        return _error("crash", f"unknown op {op!r}")

    def serve(self) -> None:
        while True:
            self.prepare()
            try:
                request = protocol.read_message(self.in_fd, self.config["max_request_bytes"])
            except (protocol.PeerClosed, protocol.ProtocolError):
                break
            if request.get("op") == "shutdown":
                break
            reply = self.handle(request)
            reply["seq"] = request.get("seq")
            protocol.write_frame(self.out_fd, protocol.encode(reply, self.config["max_response_bytes"] + 4096))
        if self.spare is not None:
            pid, parent_sock = self.spare
            parent_sock.close()  # the spare reads the end of its stream and exits; killed anyway
            os.kill(pid, signal.SIGKILL)
            self.released.append(pid)
        for episode_id in list(self.episodes):
            self.kill(episode_id)
        for pid in self.released:
            os.waitpid(pid, 0)


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by signal {name}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def main(argv: list | None = None) -> None:
    config = json.loads((argv or sys.argv)[1])
    _libc().prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE=0: episodes (which inherit it) cannot open our /proc files
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    seccomp.prepare()  # load what installing the filter needs once, here, rather than in every episode
    channel = socket.socket(fileno=config["channel_fd"])
    Zygote(config, in_fd, out_fd, channel).serve()
    os._exit(0)
