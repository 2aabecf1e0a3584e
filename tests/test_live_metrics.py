"""Live metrics (spade.train.live_metrics): the local trainer's TensorBoard events read back with TensorBoard's own
EventAccumulator and served by the `tensorboard` command; offline W&B read back from its run file; OpenRLHF's logger
flags through its real parser and its real loggers; the switches and the error for a missing wandb package."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorboard", reason="the live metrics are TensorBoard event files (./setup.sh installs it)")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from spade.config import CONFIG_DIR, load_config  # noqa: E402
from spade.configtools import ConfigError  # noqa: E402
from spade.train.live_metrics import LiveMetrics, scalars, tensorboard_dir  # noqa: E402
from spade.train.trainer import train_run  # noqa: E402
from test_training import TINY_RUN  # noqa: E402

# the training tests' tiny run (without its held-out evaluation), two steps with a checkpoint after each
TINY = {**{key: value for key, value in TINY_RUN.items() if key != "eval"}, "run_name": "tiny_live",
        "selfplay": {**TINY_RUN["selfplay"], "total_steps": 2, "checkpoint_every": 1}}
# the tags the issue lists -> the metrics.jsonl key each one plots (designer/reward: see the test below)
LISTED = {"agent/return": "agent_mean_return", "agent/win_rate": "agent_win_rate", "designer/regret": "mean_regret",
          "designer/valid_env_rate": "valid_env_rate", "train/loss": "train_loss", "train/kl": "train_kl_mean",
          "train/clip_frac": "train_clip_frac", "perf/step_seconds": "step_seconds",
          "perf/tokens_per_s/no_hint_arm": "phase_no_hint_arm_tokens_per_s"}


def lines_of(run_dir: Path) -> list:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def same(logged: float, value: float) -> bool:
    """TensorBoard stores a scalar as a float32: equal after that rounding (NaN equals NaN)."""
    want = float(np.float32(value))
    return (math.isnan(logged) and math.isnan(want)) or logged == want


def accumulator(folder: Path) -> EventAccumulator:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


@pytest.fixture(scope="module")
def run(tiny_model_dir, tmp_path_factory):
    """Two steps of the real local trainer in <root>/results/runs/tiny_live, then the same run resumed from its
    step-1 checkpoint as if the process had died after step 2's metrics line (step 2 is written again)."""
    root = tmp_path_factory.mktemp("live")
    run_dir = root / "results" / "runs" / "tiny_live"
    config = load_config(overrides=TINY)
    train_run(config, tiny_model_dir, None, run_dir)
    first = lines_of(run_dir)
    shutil.rmtree(run_dir / "checkpoints" / "step_000002")
    train_run(config, tiny_model_dir, None, run_dir)
    return {"root": root, "run_dir": run_dir, "config": config, "first": first, "lines": lines_of(run_dir)}


def test_every_number_of_every_step_reads_back_from_tensorboard(run):
    run_dir, lines = run["run_dir"], run["lines"]
    assert [line["step"] for line in lines] == [0, 1]
    # the resume wrote step 2 (step index 1) again, with its own timings, into a second event file
    assert len(list(tensorboard_dir(run_dir).glob("events.out.tfevents.*"))) == 2
    assert run["first"][1]["step_seconds"] != lines[1]["step_seconds"]
    expected: dict = {}
    for line in lines:
        for tag, value in scalars(line).items():
            expected.setdefault(tag, {})[line["step"] + 1] = value
    acc = accumulator(tensorboard_dir(run_dir))
    assert set(acc.Tags()["scalars"]) == set(expected)
    for tag, steps in expected.items():
        events = acc.Scalars(tag)
        # each step once: the first process's step 2 is purged, the resumed one's kept
        assert [event.step for event in events] == sorted(steps), tag
        for event in events:
            assert same(event.value, steps[event.step]), (tag, event.step, event.value, steps[event.step])


def test_the_listed_tags_carry_the_metrics_jsonl_values(run):
    lines = run["lines"]
    acc = accumulator(tensorboard_dir(run["run_dir"]))
    for tag, key in LISTED.items():
        want = {line["step"] + 1: line[key] for line in lines if line.get(key) is not None}
        got = {event.step: event.value for event in acc.Scalars(tag)}
        assert want and sorted(got) == sorted(want), tag
        assert all(same(got[step], value) for step, value in want.items()), (tag, got, want)
    # the tiny designer writes no valid environment, so no closed set has a designer reward: the key is None on
    # every line and TensorBoard has no point for it (a record that has one: test_a_designer_reward_is_plotted)
    assert all(line.get("closed_mean_designer_reward") is None for line in lines)
    assert "designer/reward" not in acc.Tags()["scalars"]


def test_a_designer_reward_is_plotted(tmp_path):
    config = load_config(overrides=TINY)
    records = [{"step": 3, "closed_mean_designer_reward": 0.375, "closed_mean_regret": 0.125, "valid_env_rate": 0.5},
               {"step": 5, "closed_mean_designer_reward": None, "closed_mean_regret": 0.25}]
    with LiveMetrics(config, tmp_path) as live:
        for record in records:
            live.log(record)
    acc = accumulator(tensorboard_dir(tmp_path))
    assert [(e.step, e.value) for e in acc.Scalars("designer/reward")] == [(4, 0.375)]
    assert [(e.step, e.value) for e in acc.Scalars("designer/regret_closed_set")] == [(4, 0.125), (6, 0.25)]


def test_scalars_maps_a_record_to_tags():
    record = {"step": 4, "agent_mean_return": 0.5, "agent_win_rate": 0.25, "mean_regret": 0.1, "valid_env_rate": 0.75,
              "closed_mean_designer_reward": 0.6, "train_loss": -0.02, "train_kl_mean": 0.001, "train_clip_frac": 0.05,
              "step_seconds": 12.5, "phase_no_hint_arm_tokens_per_s": 900.0, "phase_no_hint_arm_seconds": 3.0,
              "phase_other_seconds": 0.5, "win_rate_by_skill": {"optimization": 0.5, "broken": None},
              "reject_reasons": {"syntax_error": 2}, "designer_weight": None, "regenerated": True,
              "env_source": "designer", "agent_returns": [0.0, 1.0], "env_win_rates": {"s0-x": 1.0},
              "pool_size": 24}
    assert scalars(record) == {
        "agent/return": 0.5, "agent/win_rate": 0.25, "designer/regret": 0.1, "designer/valid_env_rate": 0.75,
        "designer/reward": 0.6, "train/loss": -0.02, "train/kl": 0.001, "train/clip_frac": 0.05,
        "perf/step_seconds": 12.5, "perf/tokens_per_s/no_hint_arm": 900.0, "perf/seconds/no_hint_arm": 3.0,
        "perf/seconds/other": 0.5, "agent/win_rate_by_skill/optimization": 0.5, "designer/rejects/syntax_error": 2.0,
        "other/pool_size": 24.0,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


def test_tensorboard_serves_results_runs_out_of_the_box(run):
    """`tensorboard --logdir results/runs` (the installed command, as docs/RUNNING.md says) lists the run and its tags."""
    logdir = run["root"] / "results" / "runs"
    port = _free_port()
    command = [str(Path(sys.executable).with_name("tensorboard")), "--logdir", str(logdir), "--host", "127.0.0.1",
               "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        runs, deadline = [], time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None:
            try:
                runs = _get(f"{base}/data/runs")
                tags = _get(f"{base}/data/plugin/scalars/tags").get("tiny_live/tensorboard", {})
                if runs and set(LISTED) <= set(tags):
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(1)
        assert server.poll() is None, server.stdout.read()
        assert runs == ["tiny_live/tensorboard"]
        assert set(LISTED) <= set(tags)
        loss = _get(f"{base}/data/plugin/scalars/scalars?run=tiny_live/tensorboard&tag=train/loss")
        assert [point[1] for point in loss] == [1, 2]
        assert all(same(point[2], line["train_loss"]) for point, line in zip(loss, run["lines"]))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_tensorboard_switch_off_writes_no_events(tiny_model_dir, tmp_path):
    config = load_config(overrides={**TINY, "selfplay": {**TINY["selfplay"], "total_steps": 1},
                                    "logging": {"tensorboard": False}})
    train_run(config, tiny_model_dir, None, tmp_path / "run")
    assert len(lines_of(tmp_path / "run")) == 1
    assert not tensorboard_dir(tmp_path / "run").exists() and not (tmp_path / "run" / "wandb").exists()


def test_wandb_switched_on_without_the_package_stops_before_any_model(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` fails here as it does without the package
    config = load_config(overrides={**TINY, "logging": {"wandb": True}})
    with pytest.raises(ConfigError, match=r"config key 'logging\.wandb' is true, but the wandb package cannot be "
                                          r"imported .*pip install -e '\.\[wandb\]'.*or set logging\.wandb: false"):
        train_run(config, tmp_path / "no-model-needed", None, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    # the CLI says the same, without a traceback
    from spade.cli import main

    (tmp_path / "run.yaml").write_text(json.dumps({**TINY, "logging": {"wandb": True}}))
    rc = main(["train", "--backend", "local", "--config", str(tmp_path / "run.yaml"), "--model", str(tmp_path / "m"),
               "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and "config key 'logging.wandb' is true" in err and "Traceback" not in err
    # the OpenRLHF launcher checks the same before anything starts
    from spade.rlhf.command import LaunchError
    from spade.rlhf.launch import check_logger_modules

    with pytest.raises(LaunchError, match=r"config key 'logging\.wandb' is true, but the wandb package is missing"):
        check_logger_modules(config)
    check_logger_modules(load_config(overrides=TINY))  # W&B off: nothing to check beyond TensorBoard


def test_logging_keys_are_checked():
    with pytest.raises(ConfigError, match=r"'logging\.wandb' must be of type bool, got 'yes'"):
        load_config(overrides={"logging": {"wandb": "yes"}})
    with pytest.raises(ConfigError, match=r"'logging\.wandb_project' has value ''"):
        load_config(overrides={"logging": {"wandb_project": ""}})
    with pytest.raises(ConfigError, match=r"'logging\.wandb'.*'openrlhf\.wandb_project' \('team'.*exclude each other"):
        load_config(overrides={"logging": {"wandb": True}, "openrlhf": {"wandb_project": "team"}})


# ----- W&B, offline ----------------------------------------------------------------------------------------------


def wandb_records(path: Path) -> list:
    """The records of a W&B run file (``run-<id>.wandb``): wandb's header, then LevelDB-style log blocks of 32 KiB
    whose chunks (crc32, length, type: 1 full, 2 first, 3 middle, 4 last) carry protobuf ``Record`` messages."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    records, pos, block, pending = [], 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        body, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if len(body) < length:  # a chunk still being written
            break
        if kind == 1:
            records.append(body)
        elif kind == 2:
            pending = body
        elif kind == 3:
            pending += body
        elif kind == 4:
            records.append(pending + body)
    return [pb.Record.FromString(body) for body in records]


def wandb_run(folder: Path, timeout_s: float = 30.0) -> dict:
    """{"name", "project", "group", "history": {step: {key: value}}} of one offline run folder.

    wandb's service process writes the file; ``finish()`` can return before its last blocks reach the disk (seen on a
    loaded machine: a file holding only the header). So the file is read until it holds the ``exit`` record that
    ``finish()`` writes last, for at most ``timeout_s``; a run that never completes fails below."""
    [path] = folder.glob("run-*.wandb")
    deadline = time.monotonic() + timeout_s
    records = wandb_records(path)
    while not any(r.WhichOneof("record_type") == "exit" for r in records) and time.monotonic() < deadline:
        time.sleep(0.2)
        records = wandb_records(path)
    out = {"history": {}}
    for record in records:
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out.update(name=record.run.display_name, project=record.run.project, group=record.run.run_group)
        elif kind == "history":
            row = {"/".join(item.nested_key) or item.key: json.loads(item.value_json) for item in record.history.item}
            out["history"][record.history.step.num] = {k: v for k, v in row.items() if not k.startswith("_")}
    return out


def test_wandb_offline_run_in_the_run_folder(run, tmp_path):
    pytest.importorskip("wandb", reason="logging.wandb needs the wandb extra (pip install -e '.[wandb]')")
    run_dir = tmp_path / "runs" / "tiny_live"
    config = load_config(overrides={**TINY, "logging": {"wandb": True, "tensorboard": False, "wandb_project": "toys"}})
    with LiveMetrics(config, run_dir) as live:
        for line in run["lines"]:
            live.log(line)
    assert not tensorboard_dir(run_dir).exists()
    [folder] = (run_dir / "wandb").glob("offline-run-*")
    logged = wandb_run(folder)
    assert (logged["name"], logged["project"], logged["group"]) == ("tiny_live", "toys", "tiny_live")
    assert logged["history"] == {line["step"] + 1: scalars(line) for line in run["lines"]}


# ----- the OpenRLHF path ----------------------------------------------------------------------------------------


def _toy(**logging):
    return load_config(CONFIG_DIR / "default.yaml", overrides={"logging": logging} if logging else None)


def test_openrlhf_command_turns_on_openrlhfs_loggers_with_the_run_name(tmp_path):
    pytest.importorskip("openrlhf", reason="openrlhf is not installed (pip install --no-deps openrlhf==0.11.2)")
    from spade.rlhf.command import WANDB_OFFLINE_KEY, check_command, openrlhf_command, probe_parser
    from spade.rlhf.script import logger_env

    run = tmp_path / "runs" / "toy"
    argvs = {name: openrlhf_command(config, run, tmp_path / "m", "c.jsonl", python="py") for name, config in
             (("default", _toy()), ("wandb", _toy(wandb=True)), ("off", _toy(tensorboard=False)))}
    table = probe_parser(list(argvs.values()))  # OpenRLHF 0.11.2's own parser
    parsed = {}
    for (name, argv), result in zip(argvs.items(), table["results"]):
        assert check_command(argv, table, result) == [], name
        parsed[name] = result["parsed"]["logger"]
    assert parsed["default"]["tensorboard_dir"] == str(run / "openrlhf" / "tensorboard")
    assert parsed["default"]["wandb"]["run_name"] == "toy" and parsed["default"]["wandb"]["key"] is None
    wandb = parsed["wandb"]["wandb"]
    assert (wandb["run_name"], wandb["group"], wandb["project"], wandb["key"]) == ("toy", "toy", "spade",
                                                                                  WANDB_OFFLINE_KEY)
    assert parsed["off"]["tensorboard_dir"] is None and parsed["off"]["wandb"]["run_name"] == "toy"
    assert logger_env(_toy(), run) == {}
    assert logger_env(_toy(wandb=True), run) == {"WANDB_MODE": "offline", "WANDB_DIR": str(run)}


def test_launch_scripts_send_the_wandb_environment_to_rays_workers(tmp_path):
    from spade.rlhf.config import resolve_openrlhf
    from spade.rlhf.script import launch_script

    config = load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml", overrides={"logging": {"wandb": True}})
    run = tmp_path / "run"
    local = launch_script(config, run, tmp_path / "m", "c.jsonl")
    exports = f"export WANDB_DIR={run}\nexport WANDB_MODE=offline\n"
    assert exports in local and local.index(exports) < local.index("RAY_START=")  # before Ray starts
    remote = launch_script(config, run, tmp_path / "m", "c.jsonl",
                           resolve_openrlhf(config, {"ray_address": "http://head:8265"}))
    argv = shlex.split(next(line for line in remote.splitlines() if " job submit " in line))
    env_vars = json.loads(argv[argv.index("--runtime-env-json") + 1])["env_vars"]
    assert {key: env_vars.get(key) for key in ("WANDB_DIR", "WANDB_MODE")} == {"WANDB_DIR": str(run),
                                                                                "WANDB_MODE": "offline"}
    plain = launch_script(load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml"), run, tmp_path / "m", "c.jsonl")
    assert "WANDB_MODE" not in plain and "--runtime-env-json" not in plain
    for text in (local, remote):
        (tmp_path / "s.sh").write_text(text)
        assert subprocess.run(["bash", "-n", str(tmp_path / "s.sh")]).returncode == 0


# Runs OpenRLHF 0.11.2's own TensorboardLogger and WandbLogger (openrlhf/utils/logging_utils.py) on the arguments its
# parser made of our command, in a fresh interpreter with the environment of the launch script.
_OPENRLHF_LOGGERS = r'''
import json, sys, types
from openrlhf.utils.logging_utils import TensorboardLogger, WandbLogger

def namespace(value):
    return types.SimpleNamespace(**{k: namespace(v) for k, v in value.items()}) if isinstance(value, dict) else value

args = namespace(json.loads(sys.stdin.read()))
loggers = [TensorboardLogger(args)] + ([WandbLogger(args)] if args.logger.wandb.key else [])
for logger in loggers:
    logger.log_train(1, {"policy_loss": 0.25, "rollout/reward_mean": 0.5})
    logger.close()
'''


def test_openrlhfs_own_loggers_write_into_the_run_folder_with_the_run_name(tmp_path):
    pytest.importorskip("openrlhf", reason="openrlhf is not installed (pip install --no-deps openrlhf==0.11.2)")
    pytest.importorskip("wandb", reason="logging.wandb needs the wandb extra (pip install -e '.[wandb]')")
    from spade.rlhf.command import openrlhf_command, probe_parser
    from spade.rlhf.script import logger_env

    config = _toy(wandb=True)
    run = tmp_path / "runs" / "toy"
    argv = openrlhf_command(config, run, tmp_path / "m", "c.jsonl", python="py")
    parsed = probe_parser([argv])["results"][0]["parsed"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")} | logger_env(config, run)
    done = subprocess.run([sys.executable, "-c", _OPENRLHF_LOGGERS], input=json.dumps(parsed), capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    acc = accumulator(run / "openrlhf" / "tensorboard" / "toy")  # <tensorboard_dir>/<run_name>
    assert [(e.step, e.value) for e in acc.Scalars("train/policy_loss")] == [(1, 0.25)]
    [folder] = (run / "wandb").glob("offline-run-*")  # WANDB_DIR: beside the coordinator's run
    logged = wandb_run(folder)
    assert (logged["name"], logged["project"], logged["group"]) == ("toy", "spade", "toy")
    [row] = logged["history"].values()  # OpenRLHF logs its own x axis, train/global_step
    assert row["train/policy_loss"] == 0.25 and row["train/rollout/reward_mean"] == 0.5 and row["train/global_step"] == 1
