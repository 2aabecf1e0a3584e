"""What a user hits at the terminal: Ctrl-C and Ctrl-D in `spade env play`, and `spade env validate` given a
directory or a missing file (as text, and as the JSON verdict of `--json`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import GOOD_STEP, env_source

from spade.cli import main

FIXED = env_source(GOOD_STEP).replace("self.target = self.rng.randint(0, 9)", "self.target = 7")
ROOT = Path(__file__).resolve().parents[1]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _read_until(process: subprocess.Popen, marker: bytes, timeout: float = 90) -> bytes:
    os.set_blocking(process.stdout.fileno(), False)
    seen, deadline = b"", time.monotonic() + timeout
    while marker not in seen:
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(f"no {marker!r} from `spade env play`; stdout so far: {seen[-2000:]!r}")
        seen += process.stdout.read() or b""
        time.sleep(0.05)
    os.set_blocking(process.stdout.fileno(), True)
    return seen


def test_ctrl_c_while_play_waits_for_input_exits_130_without_a_traceback(tmp_path):
    """A real process, a real SIGINT, sent to its whole process group as a terminal's Ctrl-C is, while the prompt
    waits for the user's answer: a short message, exit code 130, and the sandbox's processes gone."""
    game = tmp_path / "game.py"
    game.write_text(FIXED)
    # SIGINT as a terminal leaves it: a test run started in the background (`cmd &` in a script) inherits it ignored,
    # and Python then never raises KeyboardInterrupt
    process = subprocess.Popen([sys.executable, "-m", "spade.cli", "env", "play", str(game)], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        seen = _read_until(process, b"\n> ")
        sandbox = _children(process.pid)
        assert sandbox, "the sandbox of the environment should be running while the game waits"
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)  # stdin stays open: communicate() would close it, and an EOF could win the race
        out, err = process.stdout.read(), process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    err = err.decode()
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip() == "interrupted"
    assert b"Guess a digit" in seen + out
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in sandbox) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in sandbox if _alive(pid)], "the sandbox outlived `spade env play`"


def test_ctrl_d_ends_the_prompt_line_and_exits_cleanly(tmp_path):
    """Closed stdin (what Ctrl-D gives input()) at the first prompt and after a turn: the prompt's line is ended
    with a newline, so that the shell's prompt starts on a line of its own; exit code 0."""
    game = tmp_path / "game.py"
    game.write_text(FIXED)
    for given in (subprocess.DEVNULL, b"3\n"):
        kwargs = {"stdin": given} if given is subprocess.DEVNULL else {"input": given}
        result = subprocess.run([sys.executable, "-m", "spade.cli", "env", "play", str(game)], cwd=ROOT,
                                capture_output=True, timeout=120, **kwargs)
        out, err = result.stdout.decode(), result.stderr.decode()
        assert result.returncode == 0, err
        assert out.endswith("\n> \n"), out[-200:]
        assert "Traceback" not in err
    assert "Wrong." in out  # the second run played its turn before the end of input


def test_validate_a_directory_says_it_is_a_directory(tmp_path, capsys):
    folder = tmp_path / "envs"
    folder.mkdir()
    assert main(["env", "validate", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"environment file {str(folder)!r} is a directory" in err and "does not exist" not in err


def _rejected_report(tmp_path, capsys) -> dict:
    bad = tmp_path / "bad.py"
    bad.write_text(env_source('        return "x", 5.0, False, False, {}'))
    assert main(["env", "validate", str(bad), "--json"]) == 1
    return json.loads(capsys.readouterr().out)


def test_validate_json_gives_a_verdict_for_a_missing_file_or_a_directory(tmp_path, capsys):
    """`--json` answers on stdout in the schema of a rejected candidate, with the rejection exit code (1), whatever
    the input; the message names the path and what is wrong with it."""
    rejected = _rejected_report(tmp_path, capsys)
    assert rejected["reason"] == "reward_out_of_range"
    folder = tmp_path / "envs"
    folder.mkdir()
    for path, problem in ((tmp_path / "missing.py", "does not exist"), (folder, "is a directory")):
        assert main(["env", "validate", str(path), "--json"]) == 1
        captured = capsys.readouterr()
        verdict = json.loads(captured.out)
        assert set(verdict) == set(rejected)
        assert verdict["valid"] is False and verdict["reason"] == "unreadable_input"
        assert str(path) in verdict["message"] and problem in verdict["message"]
        assert verdict["isolation"] == "none" and verdict["checks"] == [] and verdict["code_sha256"] == ""
        assert captured.err == ""


def test_validate_json_still_stops_on_a_bad_config(tmp_path, capsys):
    """A bad config is the command's own error (exit 2, on stderr), not a verdict about the file."""
    config = tmp_path / "config.yaml"
    config.write_text("sandbox:\n  isolation: chroot\n")
    assert main(["env", "validate", str(tmp_path / "missing.py"), "--json", "--config", str(config)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "'sandbox.isolation' has value 'chroot'" in captured.err
