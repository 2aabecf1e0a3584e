"""Hostile generated environments against the sandbox.

Each case in ``CASES`` names a data file under ``tests/hostile/`` (``*.py.txt``: never imported on the
host; the text is sent into the sandbox after its ``@@PLACEHOLDER@@`` markers are filled in) and the
classification every call must get. Around every case the harness checks that

1. each call returns an ``Outcome`` of exactly the expected kind within its limit plus the grace
   period plus ``SLACK_S``, and never raises in the caller;
2. the host is unchanged: the canary file (which the sandbox cannot see) keeps its content and
   metadata, nothing new appears in the test's temp dir or as ``/tmp/*<token>*`` on the host, the
   listening TCP / Unix / abstract sockets of the test never see a connection, nothing is planted in
   the spade package on disk, and the secret planted in this process's environment appears in no
   Outcome (these checks, and the benign episode below, run even when the case itself failed);
3. other episodes keep working: two bystander episodes (one in each worker, so one shares the
   hostile episode's worker) answer correctly after the attack, and a fresh benign episode opens,
   steps and solves in the same pool; no episode process is left running in any worker;
4. at the end (``test_zz_nothing_left_behind``), after the pool is closed, no process carrying the
   worker boot marker and no child of this process remains.

The first version of this suite found eight real weaknesses (an episode reaching the worker through
``/proc``, writable uncapped mounts outside ``/tmp``, ``/tmp`` shared between episodes, a ``setpgid``
escape from the kill, NaN / deeply nested / huge-integer replies, a forged ``ended`` flag); the cases
h27, h28, h44, h56-h62 and h77 keep them fixed.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import secrets
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

pytestmark = [pytest.mark.slow]

HOSTILE_DIR = Path(__file__).parent / "hostile"
WORKER_MARKER = b"spade.sandbox.worker"
SECRET_VAR = "SPADE_TEST_SECRET"

WORKERS = 2
CALL_TIMEOUT_S = 1.0
OPEN_TIMEOUT_S = 2.0
GRACE_S = 1.0
REAP_WAIT_S = 2.0  # how long a closed episode may take to be reaped by its worker
SLACK_S = 1.5
MEMORY_MB = 512
TMPFS_MB = 64
FILE_SIZE_MB = 8


class SandboxBreach(AssertionError):
    """A hostile environment reached past its own episode (host, caller, other episodes)."""


# ----- the benign environments ------------------------------------------------------------------

BENIGN_SOURCE = '''
import random


class GuessEnv:
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.target = random.Random(seed).randint(1, 9)
        self.turns = 0
        return "Guess a digit from 1 to 9.", {"max_turns": self.max_turns}

    def step(self, action):
        self.turns += 1
        won = action.strip() == str(self.target)
        return ("Correct!" if won else "Wrong."), float(won), won, self.turns >= self.max_turns, {}

    def solution(self):
        return str(self.target)
'''

BYSTANDER_TEMPLATE = '''
MARK = "@@MARK@@"  # another environment's private data: no other episode may ever read it


class Bystander:
    def __init__(self, **kwargs):
        self.count = 0

    def reset(self, seed=None):
        self.count = 0
        return "bystander ready", {}

    def step(self, action):
        self.count += 1
        return "echo:" + action, float(self.count), False, False, {"count": self.count}

    def solution(self):
        return "bystander"
'''

TMP_LISTER_SOURCE = '''
import os


class Lister:
    def __init__(self, **kwargs):
        pass

    def reset(self, seed=None):
        return "tmp", {"entries": sorted(os.listdir("/tmp"))}

    def step(self, action):
        return "x", 0.0, False, False, {}

    def solution(self):
        return ""
'''


# ----- host-side observation helpers -----------------------------------------------------------


def _read(path: str, mode: str = "rb"):
    try:
        with open(path, mode) as handle:
            return handle.read()
    except OSError:
        return None


def process_table() -> dict:
    """pid -> (ppid, cmdline bytes) for every process visible now."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat", "r")
        if not stat:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        table[int(name)] = (int(fields[1]), _read(f"/proc/{name}/cmdline") or b"")
    return table


def descendants(root: int, table: dict | None = None) -> list:
    table = process_table() if table is None else table
    children: dict = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def worker_marker_pids(tag: bytes = b"") -> set:
    """Processes whose command line carries the worker boot marker (and ``tag``, if given)."""
    return {pid for pid, (_, cmd) in process_table().items() if WORKER_MARKER in cmd and tag in cmd}


def child_pids(tag: bytes = b"") -> set:
    """Children of this process that are zombies or whose command line carries ``tag``.

    (Other fixtures of the session, such as a shared pool, may legitimately start children of their own.)
    """
    me = os.getpid()
    found = set()
    for pid, (ppid, cmd) in process_table().items():
        if ppid != me:
            continue
        stat = _read(f"/proc/{pid}/stat", "r") or ""
        state = stat.rsplit(")", 1)[-1].split()[:1]
        if state == ["Z"] or (tag and tag in cmd):
            found.add(pid)
    return found


def seq_of(worker) -> int:
    """The sequence number the worker's next request will carry (read off itertools.count)."""
    return int(re.fullmatch(r"count\((\d+)\)", repr(worker._seq)).group(1))


# ----- the harness -----------------------------------------------------------------------------


@dataclass
class Run:
    """What one case produced."""

    episode: object = None
    outcomes: list = field(default_factory=list)  # (method, Outcome) in call order
    extra: list = field(default_factory=list)  # Outcomes of bystanders / follow-up episodes

    def out(self, method: str, index: int = -1):
        return [o for m, o in self.outcomes if m == method][index]


class Harness:
    def __init__(self, workdir: Path):
        self.dir = workdir
        self.secret = "spade-secret-" + secrets.token_hex(16)
        self.token = secrets.token_hex(8)
        self.mark = "BYSTANDER-" + secrets.token_hex(6)
        self.canary = workdir / "canary.txt"
        self.canary_text = "canary " + secrets.token_hex(24) + "\n"
        self.canary.write_text(self.canary_text)
        os.chmod(self.canary, 0o640)
        self.canary_stat = self._stat_key(self.canary)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        self.port = self.tcp.getsockname()[1]
        self.unix_path = str(workdir / "host.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        self.unix.listen(8)
        self.unix.setblocking(False)
        self.abstract_name = "spade_hostile_" + self.token + "_abstract"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen(8)
        self.abstract.setblocking(False)
        self.dir_listing = sorted(os.listdir(workdir))
        import spade

        self.pkg_dir = Path(spade.__file__).resolve().parent
        self.home = os.path.expanduser("~")
        self.py_prefix = os.path.realpath(sys.base_prefix)
        self.markers_before = worker_marker_pids()
        # An odd request cap makes this pool's command lines (the boot config is an argument of bwrap
        # and of the worker) recognisable among the workers of other pools running at the same time.
        self.request_cap = (1 << 20) + 1 + secrets.randbelow(999_999)
        self.cmdline_tag = str(self.request_cap).encode()
        self.children_before = child_pids(self.cmdline_tag)
        self.pool = None
        self.baseline = None
        self.closed = False

    @staticmethod
    def _stat_key(path: Path):
        st = os.stat(path)
        return (st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_uid)

    def start(self):
        from spade.sandbox import SandboxConfig, SandboxLimits, SandboxPool

        os.environ[SECRET_VAR] = self.secret  # planted before any worker exists
        limits = SandboxLimits(
            call_timeout_s=CALL_TIMEOUT_S, open_timeout_s=OPEN_TIMEOUT_S, grace_s=GRACE_S,
            memory_mb=MEMORY_MB, tmpfs_mb=TMPFS_MB, file_size_mb=FILE_SIZE_MB,
            max_request_bytes=self.request_cap,
        )
        config = SandboxConfig(workers=WORKERS, min_isolation="bwrap", limits=limits)
        self.pool = SandboxPool(config)  # conftest stops the session earlier where bwrap cannot start
        assert self.pool.level == "bwrap"
        counts = set()
        for worker in self.pool.workers:  # workers start on their first request
            reply = worker.request({"op": "ping"}, 5.0)
            assert reply.get("kind") == "ok", reply
            counts.add(len(descendants(worker.proc.pid)))
        assert worker_marker_pids(self.cmdline_tag), "cannot recognise this pool's workers by command line"
        assert len(counts) == 1, counts
        self.baseline = counts.pop()  # processes under an idle worker (bwrap init + zygote)

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            if self.pool is not None:
                self.pool.close()
        finally:
            os.environ.pop(SECRET_VAR, None)
            for sock in (self.tcp, self.unix, self.abstract):
                sock.close()

    # ----- sources

    def source(self, stem: str, seq_open: int | None = None) -> str:
        text = (HOSTILE_DIR / f"{stem}.py.txt").read_text()
        values = {
            "TOKEN": self.token, "CANARY": str(self.canary), "CANARY_DIR": str(self.dir),
            "PORT": str(self.port), "UNIX_SOCKET": self.unix_path, "ABSTRACT": self.abstract_name,
            "HOST_HOME": self.home, "HOST_PKG": str(self.pkg_dir), "PY_PREFIX": self.py_prefix,
            "SEQ_OPEN": str(seq_open if seq_open is not None else -1000),
        }
        for key, value in values.items():
            text = text.replace(f"@@{key}@@", value)
        assert "@@" not in text, f"unfilled placeholder in {stem}"
        assert self.secret not in text
        return text

    # ----- checks

    def next_worker(self):
        """The worker ``pool.open`` will choose next (same rule as SandboxPool.open)."""
        return min(self.pool.workers, key=lambda w: len(w.episodes))

    def open_bystanders(self) -> list:
        code = BYSTANDER_TEMPLATE.replace("@@MARK@@", self.mark)
        episodes = []
        for _ in range(WORKERS):
            episode = self.pool.open(code, "Bystander", seed=1)
            episodes.append(episode)
            assert episode.opened.ok, episode.opened
            assert episode.reset(1).ok
        assert len({id(e.worker) for e in episodes}) == WORKERS, "bystanders did not spread over the workers"
        return episodes

    def check_bystanders(self, bystanders: list, hostile_worker, run: Run) -> None:
        # the bystander that shares the hostile episode's worker goes first
        ordered = sorted(bystanders, key=lambda e: e.worker is not hostile_worker)
        for episode in ordered:
            outcome = episode.step("ping")
            run.extra.append(outcome)
            expected = ("echo:ping", 1.0, False, False, {"count": 1})
            if outcome.kind != "ok" or outcome.value != expected:
                raise SandboxBreach(f"a bystander episode was harmed: {outcome}")

    def check_worker_processes(self) -> None:
        # A closed episode is killed at once but reaped by its worker shortly after (between requests),
        # so give the count a moment to settle; an episode process that stays is a breach.
        deadline = time.monotonic() + REAP_WAIT_S
        while True:
            table = process_table()
            counts = [(index, len(descendants(worker.proc.pid, table))) for index, worker in enumerate(self.pool.workers)
                      if worker.proc is not None and worker.proc.poll() is None]
            if all(count == self.baseline for _, count in counts) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        for index, count in counts:
            if count != self.baseline:
                raise SandboxBreach(
                    f"worker {index} has {count} processes under it after every episode was closed "
                    f"(an idle worker has {self.baseline}): an episode process was left running"
                )

    def check_host(self) -> None:
        if self.canary.read_text() != self.canary_text or self._stat_key(self.canary) != self.canary_stat:
            raise SandboxBreach("the host canary file was modified")
        if sorted(os.listdir(self.dir)) != self.dir_listing:
            raise SandboxBreach(f"the test's temp dir changed: {sorted(os.listdir(self.dir))}")
        planted = glob.glob(f"/tmp/*{self.token}*")
        if planted:
            raise SandboxBreach(f"files appeared in the host /tmp: {planted}")
        for path in (os.path.join(self.home, f"spade_hostile_{self.token}"),
                     os.path.join(self.pkg_dir, f"spade_hostile_{self.token}"),
                     os.path.join(os.getcwd(), f"spade_hostile_{self.token}_cwd")):
            if os.path.exists(path):
                raise SandboxBreach(f"the sandbox created {path} on the host")
        for name, sock in (("TCP 127.0.0.1", self.tcp), ("Unix", self.unix), ("abstract Unix", self.abstract)):
            try:
                conn, _ = sock.accept()
            except BlockingIOError:
                continue
            conn.close()
            raise SandboxBreach(f"the host's {name} listener received a connection")

    def check_package(self) -> None:
        # (other people may edit the package while this runs, so no digest of the whole tree)
        planted = [str(p) for p in self.pkg_dir.rglob(f"*{self.token}*")]
        if planted:
            raise SandboxBreach(f"files appeared in the host's spade package: {planted}")
        worker = self.pkg_dir / "sandbox" / "worker.py"
        if worker.stat().st_size > 1 << 20 or b"UUUUUUUUUUUUUUUU" in worker.read_bytes():
            raise SandboxBreach("the host's spade/sandbox/worker.py was written to")

    def check_no_secret(self, outcomes) -> None:
        for outcome in outcomes:
            if self.secret in repr(outcome):
                raise SandboxBreach(f"the planted secret leaked into an Outcome: {outcome.kind}")

    def check_benign(self, run: Run) -> None:
        episode = self.pool.open(BENIGN_SOURCE, "GuessEnv", seed=3, env_kwargs={"max_turns": 5})
        try:
            run.extra.append(episode.opened)
            assert episode.opened.ok, f"benign open failed after the hostile case: {episode.opened}"
            reset = episode.reset(3)
            answer = episode.solution()
            wrong = episode.step("0")
            right = episode.step(answer.value if answer.ok else "?")
            run.extra += [reset, answer, wrong, right]
            assert reset.kind == "ok" and reset.value[0].startswith("Guess"), reset
            assert answer.kind == "ok" and answer.value in list("123456789"), answer
            assert wrong.kind == "ok" and wrong.value == ("Wrong.", 0.0, False, False, {}), wrong
            assert right.kind == "ok" and right.value == ("Correct!", 1.0, True, False, {}), right
        finally:
            episode.close()

    def raw_close(self, episode) -> None:
        """Ask the worker to reap an episode even if the host already believes it has ended."""
        worker = episode.worker
        alive = worker.proc is not None and worker.proc.poll() is None
        if alive and worker.generation == episode.generation:
            self.pool._send(worker, {"op": "close", "id": episode.episode_id}, 2.0, "close")


# ----- the cases -------------------------------------------------------------------------------


def OPEN(kind):
    return (("open", kind),)


def RESET(kind):
    return (("open", "ok"), ("reset", kind))


def STEP(kind):
    return (("open", "ok"), ("reset", "ok"), ("step", kind))


def SOLUTION(kind):
    return (("open", "ok"), ("reset", "ok"), ("solution", kind))


@dataclass(frozen=True)
class Case:
    stem: str  # file name in tests/hostile without .py.txt
    calls: tuple  # ((method, expected kind), ...), starting with ("open", kind)
    check: Callable | None = None  # extra assertions: check(harness, run)
    error_type: str = ""  # expected error_type of the last call, if it is an env_error


def info(run: Run, method: str = "step"):
    outcome = run.out(method)
    assert outcome.ok, outcome
    return outcome.value[-1]


def check_stdin(h, run):
    assert run.out("step").value[0] == "stdin='' raw=b''"


def check_os_system(h, run):
    data = info(run)
    assert data["status"] != 0 and data["created"] is False, data


def check_huge_tmp_file(h, run):
    data = info(run)
    limit = FILE_SIZE_MB << 20
    assert data["written"] <= limit and 0 <= data["size"] <= limit, data
    assert "File too large" in data["error"] or "No space left" in data["error"], data


READ_ONLY_TARGETS = ("usr", "usr_lib", "runtime_pkg_overwrite", "runtime_pkg_new", "python_prefix")


def check_writes_outside_tmp(h, run):
    data = info(run)
    for name in READ_ONLY_TARGETS:
        assert data[name]["written"] == 0 and "Read-only file system" in data[name]["error"], (name, data[name])
    for name, result in data.items():
        assert result["written"] <= FILE_SIZE_MB << 20, (name, result)
    h.check_package()


def check_canary_attack(h, run):
    data = info(run)
    for name in ("read", "chmod", "truncate", "rename", "remove", "rmtree", "new_file"):
        assert data[name].startswith("FileNotFoundError"), (name, data[name])
    if h.canary_text.strip() in repr(run.outcomes):
        raise SandboxBreach("the sandbox read the host canary")


def check_planted_tmp_file(h, run):
    assert info(run)["exists"] is True  # it exists in the sandbox's own /tmp only (host checked later)


def check_tmpfs_cap(h, run):
    stored = info(run)["mb_outside_tmp"]
    if sum(stored.values()) > 0:
        raise SandboxBreach(
            f"an episode stored {stored} MiB outside /tmp: every mount but the episode's own /tmp "
            "(capped at tmpfs_mb) must be read-only"
        )


def check_tmp_residue(h, run):
    """A later episode in the same worker must not see what an earlier one left in /tmp."""
    target, opened = run.episode.worker, []
    try:
        for _ in range(WORKERS + 1):
            episode = h.pool.open(TMP_LISTER_SOURCE, "Lister", seed=0)
            opened.append(episode)
            if episode.worker is target:
                listing = episode.reset(0)
                run.extra.append(listing)
                assert listing.ok, listing
                leftovers = [e for e in listing.value[1]["entries"] if h.token in e]
                if leftovers:
                    raise SandboxBreach(f"a new episode sees files left in /tmp by an earlier one: {leftovers}")
                return
        pytest.fail("could not place an episode in the hostile episode's worker")
    finally:
        for episode in opened:
            episode.close()


def check_not_connected(key):
    def check(h, run):
        data = info(run)
        assert data[key] is False, data

    return check


def check_secret_hunt(h, run):
    loot = info(run)["loot"]
    assert SECRET_VAR not in loot["os.environ"], "the planted variable reached the sandbox"
    assert set(loot["os.environ"]) <= {"PATH", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
                                       "PYTHONIOENCODING", "PWD"}, loot["os.environ"]


def check_secret_exception(h, run):
    assert run.out("step").message.startswith("LOOT "), run.out("step")


def check_host_files(h, run):
    data = info(run)
    for name in ("passwd", "shadow", "hosts", "pid1_root_passwd"):
        assert data[name].startswith("ERR "), (name, data[name][:200])
    # (the canary path may exist inside the sandbox if an earlier episode created it there; the host
    # file's content must never show up, checked below)
    # the host home is visible only as far as the read-only binds need it (e.g. a pyenv python)
    allowed = set()
    for bound in (h.py_prefix, str(h.pkg_dir)):
        if bound.startswith(h.home.rstrip("/") + "/"):
            allowed.add(bound[len(h.home.rstrip("/")) + 1:].split("/")[0])
    if not isinstance(data["home_ls"], str):
        extra = [e for e in data["home_ls"] if e not in allowed and not e.startswith("spade_hostile_")]
        if extra:
            raise SandboxBreach(f"host home entries are visible in the sandbox: {extra}")
    # the sandbox's /tmp holds only what episodes made there (h24 recreates the canary's path inside)
    made_inside = {"spade_hostile_"}
    if str(h.dir).startswith("/tmp/"):
        made_inside.add(str(h.dir).split("/")[2])
    sandbox_tmp = data["host_tmp_ls"]
    assert isinstance(sandbox_tmp, list), sandbox_tmp
    foreign = [e for e in sandbox_tmp if not any(e.startswith(m) for m in made_inside)]
    if foreign:
        raise SandboxBreach(f"host /tmp entries are visible in the sandbox: {foreign}")
    if h.canary_text.strip() in repr(run.outcomes):
        raise SandboxBreach("the sandbox read the host canary")


def check_ptrace(h, run):
    data = info(run)
    assert data["ptrace_rc"] == -1 and data["ptrace_errno"] == errno.EPERM, data
    assert data["pidfd"].startswith("ERR"), data


def check_crash_signal(name):
    def check(h, run):
        outcome = [o for _, o in run.outcomes][-1]
        assert name in outcome.message, outcome

    return check


def check_too_large(h, run):
    assert "too large" in run.out("step").message, run.out("step")


def check_fake_on_own_fds(h, run):
    # the forged frame can at most replace this episode's own answer; it never reaches anyone else
    assert run.out("step").value[0] in ("real", "FORGED-BY-SELF"), run.out("step")


def check_no_stolen_mark(h, run):
    if h.mark in repr(run.outcomes):
        raise SandboxBreach("an episode read another episode's source code out of its memory")


def check_tags(h, run):
    assert info(run) == {
        "object": "<Thing>", "set": "<set>", "bytes": "<bytes>", "func": "<builtin_function_or_method>",
        "nested": ["<Thing>", {"deep": "<set>"}], "<key int>": "int key", "<key tuple>": "tuple key",
    }


def check_nasty_observation(h, run):
    assert "Nasty" in run.out("step").message, run.out("step")


def check_weird_reward(h, run):
    message = run.out("step").message
    assert "Weird" in message and "Flag" in message, message


def check_not_finite(h, run):
    assert "not finite" in run.out("step").message, run.out("step")


def check_huge_reward(h, run):
    assert run.out("step").value == ("reward", 1e308, False, False, {})


def check_unrenderable(h, run):
    assert run.out("step").message == "<exception message could not be rendered>", run.out("step")


def check_protocol_breach(h, run):
    outcome = run.out("step")
    assert "protocol" in outcome.message and outcome.ended, outcome


def check_print_patch(h, run):
    assert info(run)["print_is_patched"] is True
    assert run.out("solution").value == "done"


def check_malformed(h, run):
    assert "malformed" in run.out("step").message, run.out("step")


def check_rlimits(h, run):
    data = info(run)
    for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE"):
        assert data[name].startswith("refused"), (name, data[name])
    assert data["alloc_2gb"] == "MemoryError", data
    assert data["file_20mb"].startswith("refused"), data


def check_nasty_info(h, run):
    assert info(run) == {"<key Nasty>": 1, "value": "<Nasty>", "list": ["<Nasty>"]}


def check_self_reference(h, run):
    """A container holding itself is cut off at a bounded depth, not followed forever."""
    assert "<truncated>" in repr(run.out("step").value[4]), run.out("step")

CASES = [
    # --- never-ending code: the episode process is SIGKILLed by the worker at the limit
    Case("h01_loop_in_init", OPEN("timeout")),
    Case("h02_loop_at_import", OPEN("timeout")),
    Case("h03_loop_in_reset", RESET("timeout")),
    Case("h04_loop_in_step", STEP("timeout")),
    Case("h05_loop_in_solution", SOLUTION("timeout")),
    Case("h06_swallow_every_exception", STEP("timeout")),
    Case("h07_sleep_forever", STEP("timeout")),
    Case("h08_ignore_signals_then_loop", STEP("timeout")),
    Case("h09_read_stdin", STEP("ok"), check_stdin),
    Case("h10_input_call", STEP("env_error"), error_type="EOFError"),
    Case("h11_block_on_own_pipe", STEP("timeout")),
    Case("h80_sigalrm_hijack_between_calls", STEP("ok") + (("step", "timeout"),)),
    # --- new processes, threads, programs: refused by the seccomp filter
    Case("h12_fork_bomb", STEP("env_error"), error_type="PermissionError"),
    Case("h13_thread_bomb", STEP("env_error"), error_type="RuntimeError"),
    Case("h14_subprocess_run", STEP("env_error"), error_type="PermissionError"),
    Case("h15_os_system", STEP("ok"), check_os_system),
    Case("h16_posix_spawn", STEP("env_error"), error_type="PermissionError"),
    Case("h17_execv", STEP("env_error"), error_type="PermissionError"),
    # --- memory
    Case("h18_memory_bomb_10gb", STEP("env_error"), error_type="MemoryError"),
    # Either the address-space limit is hit (MemoryError) or, on a loaded machine, the clock first.
    Case("h19_slow_leak", STEP(("env_error", "timeout")), error_type="MemoryError"),
    Case("h20_leak_swallowing_memoryerror", STEP("timeout")),
    Case("h21_mmap_10gb", STEP("env_error"), error_type="OSError"),
    # --- files
    Case("h22_huge_file_in_tmp", STEP("ok"), check_huge_tmp_file),
    Case("h23_huge_writes_outside_tmp", STEP("ok"), check_writes_outside_tmp),
    Case("h24_attack_host_canary", STEP("ok"), check_canary_attack),
    Case("h25_write_host_tmp_name", STEP("ok"), check_planted_tmp_file),
    Case("h26_fd_exhaustion", STEP("env_error"), error_type="OSError"),
    Case("h27_tmpfs_cap_bypass", STEP("ok"), check_tmpfs_cap),
    Case("h28_tmp_residue_for_next_episode", STEP("ok"), check_tmp_residue),
    # --- network
    Case("h29_internet_tcp", STEP("ok"), check_not_connected("connected")),
    Case("h30_dns_lookup", STEP("ok"), check_not_connected("resolved")),
    Case("h31_udp_to_public_dns", STEP("ok"), check_not_connected("sent")),
    Case("h32_host_loopback_tcp", STEP("ok"), check_not_connected("connected")),
    Case("h33_host_unix_socket", STEP("ok"), check_not_connected("connected")),
    Case("h34_host_abstract_socket", STEP("ok"), check_not_connected("connected")),
    # --- secrets and host files
    Case("h35_secret_hunt_observation", STEP("ok") + (("solution", "ok"),), check_secret_hunt),
    Case("h36_secret_hunt_exception", STEP("env_error"), check_secret_exception, error_type="RuntimeError"),
    Case("h37_read_host_files", STEP("ok"), check_host_files),
    # --- signals to others, tracing, process groups
    Case("h38_kill_parent", STEP("env_error"), error_type="PermissionError"),
    Case("h39_kill_pid1", STEP("env_error"), error_type="PermissionError"),
    Case("h40_killpg_zero", STEP("env_error"), error_type="PermissionError"),
    Case("h41_kill_minus_one", STEP("env_error"), error_type="PermissionError"),
    Case("h42_kill_self", STEP("crash"), check_crash_signal("SIGKILL")),
    Case("h43_ptrace_and_pidfd", STEP("ok"), check_ptrace),
    Case(
        "h44_setpgid_escape", STEP("timeout"),
    ),
    # --- hard crashes and exits
    Case("h45_segfault_ctypes", STEP("crash"), check_crash_signal("SIGSEGV")),
    Case("h46_os_exit_in_step", STEP("crash"), check_crash_signal("exited with code 0")),
    Case("h47_sys_exit_in_step", STEP("env_error"), error_type="SystemExit"),
    Case("h48_deep_recursion", STEP("env_error"), error_type="RecursionError"),
    Case("h49_recursion_overflows_c_stack", STEP("crash"), check_crash_signal("SIGSEGV"))
    if sys.version_info < (3, 12) else
    Case("h49_recursion_overflows_c_stack", STEP("env_error"), error_type="RecursionError"),
    Case("h50_abort", STEP("crash"), check_crash_signal("SIGABRT")),
    Case("h51_close_protocol_socket_and_spin", STEP("crash"), check_crash_signal("SIGKILL")),
    # --- output floods
    Case("h52_giant_observation", STEP("contract_violation"), check_too_large),
    Case("h53_print_flood", STEP("timeout")),
    Case("h54_raw_write_flood", STEP("timeout")),
    # --- fake protocol traffic
    Case("h55_fake_reply_on_own_fds", STEP("ok"), check_fake_on_own_fds),
    Case("h56_fake_reply_to_worker_pipes", STEP("ok")),
    Case("h57_inject_shutdown_into_worker", STEP("ok")),
    Case(
        "h58_nan_reply_on_own_socket", STEP("contract_violation"),
    ),
    Case(
        "h59_deeply_nested_reply", STEP("contract_violation"),
    ),
    Case(
        "h60_bigint_reward_reply", STEP("contract_violation"),
    ),
    Case(
        "h61_forged_ended_flag", STEP("env_error"),
    ),
    Case("h62_steal_sibling_memory", STEP("ok"), check_no_stolen_mark),
    # --- return values
    Case("h63_reset_returns_set", RESET("contract_violation")),
    Case("h64_unserialisable_info_values", STEP("ok"), check_tags),
    Case("h65_hostile_str_subclass_observation", STEP("contract_violation"), check_nasty_observation),
    Case("h66_float_subclass_reward", STEP("contract_violation"), check_weird_reward),
    Case("h67_nan_reward", STEP("contract_violation"), check_not_finite),
    Case("h68_inf_reward", STEP("contract_violation"), check_not_finite),
    Case("h69_huge_finite_reward", STEP("ok"), check_huge_reward),
    Case("h70_self_referencing_info", STEP("ok"), check_self_reference),
    Case("h71_exception_with_hostile_str", STEP("env_error"), check_unrenderable, error_type="Slippery"),
    Case("h72_exception_str_never_returns", STEP("timeout")),
    Case("h73_wrong_tuple_length", STEP("contract_violation")),
    Case("h81_hostile_str_in_info", STEP("ok"), check_nasty_info),
    Case("h82_solution_returns_bytes", SOLUTION("contract_violation")),
    # --- monkeypatching the runtime the worker shares with the environment
    Case("h74_patch_json_dumps", STEP("contract_violation"), check_protocol_breach),
    Case("h75_patch_socket_sendall", STEP("timeout")),
    Case("h76_patch_builtins_print", STEP("ok") + (("solution", "ok"),), check_print_patch),
    Case(
        "h77_patch_json_allow_nan", STEP("contract_violation"),
    ),
    Case("h78_patch_builtins_type", STEP("contract_violation"), check_malformed),
    # --- resource limits
    Case("h79_setrlimit_raise", STEP("ok"), check_rlimits),
]


def _params():
    return [pytest.param(case, id=case.stem.split("_", 1)[1]) for case in CASES]


# ----- fixtures and tests ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    workdir, own_dir = tmp_path_factory.mktemp("hostile"), None
    if len(str(workdir / "host.sock")) > 100:  # AF_UNIX paths are limited to 108 bytes
        workdir = own_dir = Path(tempfile.mkdtemp(prefix="spade-hostile-"))
    h = Harness(workdir)
    try:
        h.start()
        yield h
    finally:
        h.close()
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)


def _limit(method: str) -> float:
    return (OPEN_TIMEOUT_S if method == "open" else CALL_TIMEOUT_S) + GRACE_S + SLACK_S


def _call(episode, method: str, step_no: int):
    if method == "reset":
        return episode.reset(0)
    if method == "step":
        return episode.step(f"move {step_no}")
    if method == "solution":
        return episode.solution()
    raise AssertionError(method)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("case", _params())
def test_hostile_environment(harness, case):
    h = harness
    h.check_worker_processes()  # sanity: every worker idle before the case
    run = Run()
    bystanders = h.open_bystanders()
    try:
        seq_open = seq_of(h.next_worker())
        code = h.source(case.stem, seq_open)
        for index, (method, kind) in enumerate(case.calls):
            start = time.monotonic()
            try:
                if method == "open":
                    run.episode = h.pool.open(code, "HostileEnv", seed=0, env_kwargs={"max_turns": 5})
                    outcome = run.episode.opened
                else:
                    outcome = _call(run.episode, method, index)
            except Exception as exc:  # noqa: BLE001 - a misbehaving env must never raise in the caller
                raise SandboxBreach(f"{method} raised {type(exc).__name__} in the caller: {exc}") from exc
            elapsed = time.monotonic() - start
            run.outcomes.append((method, outcome))
            allowed = kind if isinstance(kind, tuple) else (kind,)
            assert outcome.kind in allowed, f"{method}: expected {kind}, got {outcome}"
            assert elapsed <= _limit(method), f"{method} took {elapsed:.2f} s (limit {_limit(method):.2f} s)"
            if outcome.kind in ("timeout", "crash"):
                assert outcome.ended, outcome
        last = run.outcomes[-1][1]
        if case.error_type and last.kind == "env_error":
            assert last.error_type == case.error_type, last
        if case.check is not None:
            case.check(h, run)
        h.check_bystanders(bystanders, run.episode.worker, run)
        run.episode.close()
        for episode in bystanders:
            episode.close()
        h.check_worker_processes()
    finally:
        for episode in bystanders + ([run.episode] if run.episode is not None else []):
            episode.close()
        if run.episode is not None:
            h.raw_close(run.episode)  # reap a process the host may have dropped too early
        # These must hold even when the case itself failed, so the report names host damage first.
        _must_hold("host unchanged", h.check_host)
        _must_hold("no secret in any outcome", lambda: h.check_no_secret([o for _, o in run.outcomes] + run.extra))
        _must_hold("a benign env still works in the pool", lambda: h.check_benign(run))
        _must_hold("no secret in any outcome", lambda: h.check_no_secret(run.extra))
    h.check_worker_processes()


def _must_hold(what: str, check) -> None:
    try:
        check()
    except AssertionError as exc:
        pytest.fail(f"{what}: {exc}")


@pytest.mark.timeout(60)
def test_zz_nothing_left_behind(harness):
    """The pool survived every case; closing it leaves no worker process and no child behind."""
    h = harness
    run = Run()
    held = [h.pool.open(BENIGN_SOURCE, "GuessEnv", seed=5) for _ in range(WORKERS)]  # one per worker
    try:
        assert len({id(e.worker) for e in held}) == WORKERS
        for episode in held:
            reset, answer = episode.reset(5), episode.solution()
            final = episode.step(answer.value)
            run.extra += [episode.opened, reset, answer, final]
            assert final.kind == "ok" and final.value == ("Correct!", 1.0, True, False, {}), final
    finally:
        for episode in held:
            episode.close()
    h.check_benign(run)
    h.check_no_secret(run.extra)
    h.check_host()
    h.check_package()
    h.close()
    deadline = time.monotonic() + 10
    while True:
        # new marker processes that carry this pool's tag; untagged ones belong to other pools that
        # may be running at the same time (another test process), not to this one
        leftover = worker_marker_pids(h.cmdline_tag) - h.markers_before
        children = child_pids(h.cmdline_tag) - h.children_before
        if not leftover and not children or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not leftover, f"sandbox processes survived the pool: {sorted(leftover)}"
    assert not children, f"the test process has leftover (zombie or sandbox) children: {sorted(children)}"
    assert h.canary.read_text() == h.canary_text
    assert not glob.glob(f"/tmp/*{h.token}*")
