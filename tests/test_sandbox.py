"""The sandbox runtime: outcomes, limits, persistence, determinism, isolation levels."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time

import pytest
from conftest import FAST_LIMITS, GOOD_STEP, env_source

from spade.sandbox import IsolationError, SandboxConfig, SandboxPool
from spade.sandbox.levels import resolve_level
from spade.sandbox.procs import descendants

GOOD = env_source(GOOD_STEP)


def test_episode_round_trip(pool):
    with pool.open(GOOD, "Env", seed=3, env_kwargs={"max_turns": 4}) as episode:
        assert episode.opened.ok
        reset = episode.reset(3)
        assert reset.kind == "ok" and reset.value[0].startswith("Guess a digit") and reset.value[1] == {"turn": 0}
        answer = episode.solution()
        assert answer.ok and answer.value.isdigit()
        wrong = str((int(answer.value) + 1) % 10)
        assert episode.step(f"\\boxed{{{wrong}}}").value == ("Wrong.", 0.0, False, False, {"turn": 1})
        assert episode.step(f"\\boxed{{{answer.value}}}").value == ("Correct.", 1.0, True, False, {"turn": 2})


def test_env_error_is_classified_with_trimmed_traceback(pool):
    source = env_source('        raise KeyError("missing piece")')
    with pool.open(source, "Env", seed=0) as episode:
        outcome = episode.step("x")
    assert outcome.kind == "env_error" and outcome.error_type == "KeyError"
    assert "missing piece" in outcome.message
    assert "<spade_generated_env>" in outcome.traceback and "worker.py" not in outcome.traceback


@pytest.mark.parametrize(
    "body, fragment",
    [
        ('        return "obs", 1.0, True, False', "5-tuple"),
        ('        return "obs", float("nan"), True, False, {}', "not finite"),
        ('        return "obs", float("inf"), True, False, {}', "not finite"),
        ('        return "obs", 1.0, 1, False, {}', "terminated is int"),
        ('        return "obs", "1.0", True, False, {}', "reward is str"),
        ('        return ["obs"], 1.0, True, False, {}', "observation is list"),
        ('        return "obs", 1.0, True, False, None', "info is NoneType"),
        ('        return "obs", True, True, False, {}', "reward is bool"),
        ('        return ("obs", 1.0, True, False, {})[:4] + ({},)[:0]', "5-tuple"),
    ],
)
def test_contract_violations(pool, body, fragment):
    with pool.open(env_source(body), "Env", seed=0) as episode:
        outcome = episode.step("x")
        assert outcome.kind == "contract_violation", outcome
        assert fragment in outcome.message
        assert episode.reset(0).ok  # the episode survives a contract violation


def test_info_is_reduced_to_plain_data(pool):
    body = '        return "o", 0.5, False, False, {"s": {1}, 3: "k", "nested": [(1, 2.5), None], "obj": object()}'
    with pool.open(env_source(body), "Env", seed=0) as episode:
        outcome = episode.step("x")
    assert outcome.ok
    assert outcome.value[4] == {"s": "<set>", "<key int>": "k", "nested": [[1, 2.5], None], "obj": "<object>"}


def test_stray_output_does_not_corrupt_protocol(pool):
    body = '''        import os, sys
        print("\\x00\\x00\\x00\\x10{\\"kind\\":\\"ok\\"}" * 100)
        sys.stderr.write("noise\\n")
        os.write(1, b"\\x00\\x00\\x00\\x02{}")
        return "real", 0.25, False, False, {}'''
    with pool.open(env_source(body), "Env", seed=0) as episode:
        assert episode.step("x").value == ("real", 0.25, False, False, {})


def test_timeout_kills_episode_but_not_worker_or_neighbours(pool):
    slow = env_source("        while True:\n            pass")
    with pool.open(GOOD, "Env", seed=1) as neighbour, pool.open(slow, "Env", seed=1) as stuck:
        start = time.monotonic()
        outcome = stuck.step("x")
        elapsed = time.monotonic() - start
        assert outcome.kind == "timeout" and outcome.ended
        assert elapsed < FAST_LIMITS.call_timeout_s + 1.0
        assert stuck.step("x").kind == "crash"  # the episode is gone, and says so
        assert neighbour.step("\\boxed{0}").ok  # same pool, maybe same worker: unaffected


def test_crash_is_classified(pool):
    with pool.open(env_source("        import os\n        os._exit(7)"), "Env", seed=0) as episode:
        outcome = episode.step("x")
    assert outcome.kind == "crash" and "exited with code 7" in outcome.message


def test_unresponsive_worker_is_killed_from_outside_and_restarted(pool):
    with pool.open(GOOD, "Env", seed=0) as episode:
        worker = episode.worker
        frozen = descendants(worker.proc.pid)
        for pid in frozen:  # everything inside the sandbox stops answering, as if the worker hung in C code
            os.kill(pid, signal.SIGSTOP)
        start = time.monotonic()
        outcome = episode.step("x")
        elapsed = time.monotonic() - start
        assert all(not os.path.exists(f"/proc/{pid}") for pid in frozen)  # killed and reaped
    assert outcome.kind == "timeout" and outcome.ended
    assert elapsed < FAST_LIMITS.call_timeout_s + FAST_LIMITS.grace_s + 1.0
    with pool.open(GOOD, "Env", seed=0) as fresh:
        assert fresh.step("\\boxed{1}").ok


def test_same_code_and_seed_give_same_trajectory(pool):
    body = '''        import random as global_random
        return str(global_random.random()) + str(self.rng.random()), 0.0, False, False, {}'''
    source = env_source(body)

    def trajectory(seed):
        with pool.open(source, "Env", seed=seed) as episode:
            episode.reset(seed)
            return [episode.step("x").value[0] for _ in range(3)]

    assert trajectory(5) == trajectory(5)
    assert trajectory(5) != trajectory(6)


def test_code_is_not_run_in_the_caller(pool, tmp_path):
    marker = tmp_path / "ran_here"
    source = f"open({str(marker)!r}, 'w').write('x')\n" + GOOD
    with pool.open(source, "Env", seed=0) as episode:
        assert episode.opened.kind == "env_error"  # the host path does not exist inside the sandbox
    assert not marker.exists()


def test_pool_uses_strongest_level_here(pool):
    assert pool.level == "bwrap"


def test_minimum_level_is_enforced():
    config = SandboxConfig(isolation="rlimits", min_isolation="bwrap")
    with pytest.raises(IsolationError, match="sandbox.min_isolation='bwrap'"):
        resolve_level(config)


def test_auto_falls_back_and_warns_when_bwrap_is_missing(caplog):
    config = SandboxConfig(isolation="auto", bwrap_path="/nonexistent/bwrap")
    with caplog.at_level(logging.WARNING, logger="spade.sandbox"):
        level = resolve_level(config)
    assert level == "unshare"
    assert "WEAKER THAN bwrap" in caplog.text and "bwrap not found" in caplog.text
    with pytest.raises(IsolationError, match="bwrap not found"):
        resolve_level(SandboxConfig(isolation="bwrap", bwrap_path="/nonexistent/bwrap"))


def test_bwrap_that_cannot_start_is_reported_and_skipped(tmp_path, caplog):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    config = SandboxConfig(isolation="auto", bwrap_path=str(fake))
    with caplog.at_level(logging.WARNING, logger="spade.sandbox"):
        assert resolve_level(config) == "unshare"
    assert "No permissions to create new namespace" in caplog.text
    with pytest.raises(IsolationError, match="No permissions to create new namespace"):
        resolve_level(SandboxConfig(isolation="auto", bwrap_path=str(fake), min_isolation="bwrap"))


@pytest.mark.parametrize("level", ["unshare", "rlimits"])
def test_fallback_levels_run_episodes_with_limits(level, monkeypatch):
    monkeypatch.setenv("SPADE_FALLBACK_SECRET", "fallback-token-123")
    body = '''        import os, threading
        leaked = "fallback-token-123" in repr(dict(os.environ))
        try:
            os.fork()
            forked = True
        except OSError:
            forked = False
        return f"leaked={leaked} forked={forked}", 0.0, False, False, {}'''
    config = SandboxConfig(isolation=level, workers=1, limits=FAST_LIMITS)
    with SandboxPool(config) as fallback:
        assert fallback.level == level
        with fallback.open(env_source(body), "Env", seed=0) as episode:
            assert episode.step("x").value[0] == "leaked=False forked=False"


def test_open_failures_are_classified(pool):
    assert pool.open("raise SystemExit(3)", "Env").opened.kind == "env_error"
    assert pool.open("x = 1", "Env").opened.kind == "contract_violation"
    assert pool.open("def (", "Env").opened.kind == "env_error"
    outcome = pool.open("while True:\n    pass", "Env").opened
    assert outcome.kind == "timeout" and outcome.ended


def test_read_only_paths_are_visible_read_only_and_nothing_else_is():
    """sandbox.read_only_paths: a listed host folder is readable inside bwrap but not writable; a sibling is absent.
    (The sandbox runs as nobody, so the folders must be world-readable, and each episode's private /tmp hides
    anything under /tmp: pytest's tmp_path fails both.)"""
    import shutil
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp(prefix="spade-ro-", dir="/var/tmp"))
    root.chmod(0o755)
    shared, other = root / "shared", root / "other"
    shared.mkdir(), other.mkdir()
    (shared / "data.txt").write_text("visible")
    (other / "data.txt").write_text("hidden")
    body = f'''        out = []
        for path in ({str(shared / "data.txt")!r}, {str(other / "data.txt")!r}):
            try:
                out.append(open(path).read())
            except OSError:
                out.append("absent")
        try:
            open({str(shared / "new.txt")!r}, "w").write("x")
            out.append("written")
        except OSError:
            out.append("read-only")
        return " ".join(out), 0.0, False, False, {{}}'''
    config = SandboxConfig(isolation="bwrap", workers=1, limits=FAST_LIMITS, read_only_paths=[str(shared)])
    with SandboxPool(config) as bound:
        with bound.open(env_source(body), "Env", seed=0) as episode:
            observation = episode.step("x").value[0]
    written = (shared / "new.txt").exists()
    shutil.rmtree(root)
    assert observation == "visible absent read-only" and not written


def test_read_only_paths_reject_relative_and_root():
    from spade.config import ConfigError

    for bad in ("relative/dir", "/", "/proc", "/tmp/rlve"):
        with pytest.raises(ConfigError, match=r"sandbox\.read_only_paths.*" + repr(bad).replace("/", "\\/")[:6]):
            SandboxConfig(read_only_paths=[bad])


# ----- the direct episode channel (calls bypass the worker) -----------------------------------------


def _requests_sent(worker) -> int:
    """How many requests the host has numbered for this worker (read off its itertools.count)."""
    import re

    return int(re.fullmatch(r"count\((\d+)\)", repr(worker._seq)).group(1))


def test_episode_calls_go_straight_to_the_episode_process(pool):
    with pool.open(GOOD, "Env", seed=3, env_kwargs={"max_turns": 100}) as episode:
        before = _requests_sent(episode.worker)
        assert episode.reset(3).ok and episode.solution().ok
        assert all(episode.step("\\boxed{x}").ok for _ in range(20))
        assert _requests_sent(episode.worker) == before  # the worker relayed none of them


def test_unknown_method_is_refused_and_the_episode_survives(pool):
    with pool.open(GOOD, "Env", seed=0) as episode:
        refused = episode.call("__init__")
        assert refused.kind == "contract_violation" and "is not one of" in refused.message and not refused.ended
        assert episode.step("\\boxed{0}").ok


def test_request_over_the_cap_ends_only_that_episode():
    limits = dataclasses.replace(FAST_LIMITS, max_request_bytes=4096)
    with SandboxPool(SandboxConfig(workers=1, limits=limits)) as small:
        with small.open(GOOD, "Env", seed=1) as neighbour, small.open(GOOD, "Env", seed=1) as victim:
            outcome = victim.step("x" * 10_000)
            assert outcome.kind == "crash" and outcome.ended and "cap" in outcome.message
            assert victim.step("x").kind == "crash"  # gone, and says so
            assert neighbour.step("\\boxed{0}").ok  # same worker, unaffected


def test_call_after_the_worker_died_is_a_crash_and_the_pool_recovers(pool):
    with pool.open(GOOD, "Env", seed=0) as episode:
        episode.worker.stop()  # the whole worker disappears, as after an outside kill
        outcome = episode.step("x")
        assert outcome.kind == "crash" and outcome.ended, outcome
    with pool.open(GOOD, "Env", seed=0) as fresh:
        assert fresh.step("\\boxed{1}").ok


def test_episodes_leave_no_descriptor_behind_in_the_host(pool):
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    with pool.open(GOOD, "Env", seed=0) as warm:  # both workers started, their channels open
        assert warm.opened.ok
    with pool.open(GOOD, "Env", seed=0) as warm2:
        assert warm2.opened.ok
    before = open_fds()
    for _ in range(10):
        with pool.open(GOOD, "Env", seed=0) as episode:
            assert episode.step("x").ok
    assert pool.open("x = 1", "Env").opened.kind == "contract_violation"  # failed start, reaped
    with pool.open(env_source("        import os\n        os._exit(3)"), "Env", seed=0) as dying:
        assert dying.step("x").kind == "crash"
    assert open_fds() == before


def test_episode_collects_its_own_garbage_but_not_the_inherited_heap(pool):
    body = '''        import gc, weakref
        class Cycle:
            pass
        node = Cycle()
        node.me = node
        ref = weakref.ref(node)
        del node
        gc.collect()
        return f"frozen={gc.get_freeze_count() > 0} collected={ref() is None}", 0.0, False, False, {}'''
    with pool.open(env_source(body), "Env", seed=0) as episode:
        assert episode.step("x").value[0] == "frozen=True collected=True"


# ----- code compiled once on the host (pool.precompile) -------------------------------------------


def test_precompiled_code_is_what_the_episode_runs(pool):
    from spade.sandbox.pool import precompile

    other = env_source('        return "from the precompiled code", 0.0, False, False, {}')
    with pool.open(GOOD, "Env", seed=0, compiled=precompile(other)) as episode:
        assert episode.step("x").value[0] == "from the precompiled code"
    with pool.open(GOOD, "Env", seed=0, compiled="not base64 marshal data!") as episode:  # unusable: compiles GOOD
        assert episode.step("\\boxed{0}").value[0] in ("Correct.", "Wrong.")


def test_precompiled_and_episode_compiled_code_behave_alike(pool):
    from spade.sandbox.pool import precompile

    body = '''        def helper(x: NoSuchName) -> "AlsoMissing":  # annotations stay unevaluated in both
            return x
        if action == "raise":
            raise ValueError("boom")
        assert action != "assert", "asserts run"
        return repr(helper.__annotations__), 0.0, False, False, {}'''
    source = env_source(body)
    compiled = precompile(source)
    assert compiled is not None
    results = []
    for sent in (None, compiled):
        with pool.open(source, "Env", seed=0, compiled=sent) as episode:
            assert episode.opened.ok, episode.opened
            plain_step = episode.step("x").value[0]
            failed = episode.step("raise")
            asserted = episode.step("assert")
            results.append((plain_step, failed.kind, failed.error_type, failed.message, failed.traceback,
                            asserted.error_type, asserted.message))
    assert results[0] == results[1]
    assert "NoSuchName" in results[0][0] and "<spade_generated_env>" in results[0][4]
    assert results[0][5:] == ("AssertionError", "asserts run")


def test_precompile_leaves_some_code_to_the_episode():
    from spade.sandbox.pool import precompile

    assert precompile("def (") is None  # the episode reports the syntax error itself
    assert precompile("ITEMS = {'rock', 'paper', 'scissors'}\n") is None  # set order follows the hash seed
    assert precompile("def f(x):\n    return x in {'a', 'b'}\n") is None
    assert precompile("def f(x):\n    return x in {'a'}\n") is not None  # one item: no order to lose
    assert precompile("x = 1\n" * 1000, cap=100) is None


# ----- spare episode processes and released episodes ---------------------------------------------


def _status(pid: int) -> dict:
    with open(f"/proc/{pid}/status") as handle:
        return dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)


def _confined_children(worker) -> list:
    """Pids under the worker that carry the episode confinement (a seccomp filter, no capabilities)."""
    confined = []
    for pid in descendants(worker.proc.pid):
        try:
            status = _status(pid)
        except FileNotFoundError:
            continue
        if status.get("Seccomp") == "2" and int(status.get("CapEff", "1"), 16) == 0 and status.get("State", "Z")[0] != "Z":
            confined.append(pid)
    return confined


def _wait_for(predicate, seconds: float = 2.0):
    deadline = time.monotonic() + seconds
    while not (value := predicate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return value


def test_spare_episode_is_confined_before_any_code_arrives():
    with SandboxPool(SandboxConfig(workers=1, limits=FAST_LIMITS)) as one:
        worker = one.workers[0]
        assert worker.request({"op": "ping"}, 5.0)["value"]["episodes"] == 0
        spares = _wait_for(lambda: _confined_children(worker))
        assert len(spares) == 1, "an idle worker should hold exactly one confined spare episode process"
        with one.open(GOOD, "Env", seed=3, env_kwargs={"max_turns": 4}) as episode:
            assert episode.opened.ok and episode.reset(3).ok
            both = _wait_for(lambda: len(_confined_children(worker)) == 2 and _confined_children(worker))
            assert spares[0] in both, "the open should have used the spare forked before it"


def test_without_a_spare_no_episode_process_waits_and_opens_still_work():
    with SandboxPool(SandboxConfig(workers=1, limits=FAST_LIMITS, spare_episode=False)) as one:
        worker = one.workers[0]
        worker.request({"op": "ping"}, 5.0)
        time.sleep(0.2)
        assert _confined_children(worker) == []
        with one.open(GOOD, "Env", seed=3, env_kwargs={"max_turns": 4}) as episode:
            assert episode.reset(3).ok and len(_confined_children(worker)) == 1


def test_closed_episode_is_killed_at_once_and_reaped_soon():
    with SandboxPool(SandboxConfig(workers=1, limits=FAST_LIMITS)) as one:
        worker = one.workers[0]
        worker.request({"op": "ping"}, 5.0)
        (pid,) = _wait_for(lambda: _confined_children(worker))  # the spare: the next open's episode
        episode = one.open(GOOD, "Env", seed=0)
        assert episode.opened.ok and episode.reset(0).ok and os.path.exists(f"/proc/{pid}")
        episode.close()
        gone = _wait_for(lambda: not os.path.exists(f"/proc/{pid}"))
        assert gone, f"episode process {pid} was not reaped after close"
        assert worker.request({"op": "ping"}, 5.0)["value"]["episodes"] == 0


def test_spare_episodes_start_from_a_clean_slate(pool):
    """Module globals, ``random`` and /tmp of one episode are not seen by the next (each spare is a
    fresh fork of the zygote, whatever an earlier episode did)."""
    body = '''        import os, random
        seen = sorted(os.listdir("/tmp"))
        open("/tmp/mark", "w").write("x")
        global LEAK
        previous = globals().get("LEAK")
        LEAK = "set"
        return f"tmp={seen} leak={previous} r={random.random():.6f}", 0.0, False, False, {}'''
    values = []
    for _ in range(4):
        with pool.open(env_source(body), "Env", seed=5) as episode:
            values.append(episode.step("x").value[0])
    assert len(set(values)) == 1 and values[0].startswith("tmp=[] leak=None"), values
