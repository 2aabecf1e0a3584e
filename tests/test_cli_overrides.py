"""`--config key=value` as docs/CONFIG.md promises it: `spade <command> --config section.key=value`
and Snakemake's own `snakemake --config key=value`, with the same checks and the same messages as the key in a
YAML file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spade.cli import _config, build_parser, main
from spade.configtools import retype_workflow_overrides

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = str(ROOT / "configs/default.yaml")


@pytest.fixture(autouse=True)
def _in_repository(monkeypatch):
    monkeypatch.chdir(ROOT)  # the default config is configs/default.yaml, relative to the working directory


def load(*config: str, extra: tuple = ()):
    args = build_parser().parse_args(["compute", *extra, *[part for item in config for part in ("--config", item)]])
    return _config(args)


def test_overrides_are_read_as_yaml_and_laid_over_the_default_file():
    config = load("selfplay.total_steps=7", "train.learning_rate=2.0e-5", "selfplay.backfill=false",
                  "validation.seeds=[3, 4]", "designer.reward=ema_lp", "corpus.path=''")
    assert config.selfplay.total_steps == 7 and config.train.learning_rate == 2.0e-5
    assert config.selfplay.backfill is False and config.validation.seeds == [3, 4]
    assert config.designer.reward == "ema_lp" and config.corpus.path == ""
    assert config.run_name == "toy"  # configs/default.yaml is still the run file under them
    assert config.train.global_batch == 8  # and a section's other keys keep the file's values


def test_overrides_win_over_every_file_wherever_they_stand(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text("run_name: mine\nselfplay:\n  total_steps: 9\n  group_size: 3\n")
    config = load("selfplay.total_steps=7", DEFAULT, str(run))
    assert (config.run_name, config.selfplay.total_steps, config.selfplay.group_size) == ("mine", 7, 3)
    args = build_parser().parse_args(["compute", "--config-json", '{"selfplay": {"total_steps": 5}}',
                                      "--config", "selfplay.total_steps=6"])
    assert _config(args).selfplay.total_steps == 6
    assert load(str(run)).selfplay.total_steps == 9


def test_a_file_whose_name_holds_an_equals_sign_is_still_a_file(tmp_path):
    run = tmp_path / "seed=5.yaml"
    run.write_text("seed: 5\n")
    assert load(DEFAULT, str(run)).seed == 5


@pytest.mark.parametrize("override, yaml_text, names", [
    ("selfplay.total_stepz=2", "selfplay:\n  total_stepz: 2\n", "'total_stepz'"),
    ("bogus=1", "bogus: 1\n", "'bogus'"),
    ("selfplay.total_steps=abc", "selfplay:\n  total_steps: abc\n", "'selfplay.total_steps'"),
    ("selfplay.total_steps=0", "selfplay:\n  total_steps: 0\n", "'selfplay.total_steps'"),
    ("train.learning_rate=1e-5", "train:\n  learning_rate: 1e-5\n", "'train.learning_rate'"),
    ("sandbox.isolation=chroot", "sandbox:\n  isolation: chroot\n", "'sandbox.isolation'"),
    ("validation.seeds=[1, 1]", "validation:\n  seeds: [1, 1]\n", "'validation.seeds'"),
    ("selfplay.total_steps.every=2", "selfplay:\n  total_steps:\n    every: 2\n", "'selfplay.total_steps'"),
])
def test_a_bad_key_or_value_gets_the_message_of_the_same_yaml(tmp_path, capsys, override, yaml_text, names):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml_text)
    assert main(["compute", "--config", DEFAULT, "--config", str(bad)]) == 2
    from_file = capsys.readouterr().err
    assert main(["compute", "--config", DEFAULT, "--config", override]) == 2
    from_override = capsys.readouterr().err
    assert from_override == from_file and names in from_file and from_file.startswith("error: ")


def test_malformed_overrides_name_the_argument(capsys):
    assert main(["compute", "--config", "a b=1"]) == 2
    err = capsys.readouterr().err
    assert "--config 'a b=1' is neither an existing config file nor a key=value override" in err
    assert main(["compute", "--config", "selfplay.skills=[a,"]) == 2
    err = capsys.readouterr().err
    assert "the value of config key 'selfplay.skills' is not valid YAML" in err
    assert main(["compute", "--config", "no_such_file.yaml"]) == 2
    assert "config file 'no_such_file.yaml' does not exist" in capsys.readouterr().err


def test_a_directory_as_config_file_says_so(tmp_path, capsys):
    assert main(["compute", "--config", str(tmp_path)]) == 2
    assert f"config file {str(tmp_path)!r} is a directory" in capsys.readouterr().err


def test_an_override_reaches_a_command_run_as_a_user_runs_it():
    result = subprocess.run([sys.executable, "-m", "spade.cli", "compute", "--json", "--config",
                             "selfplay.total_steps=12"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert '"steps": 12' in result.stdout


def test_workflow_overrides_are_read_as_a_file_would_be():
    """Snakemake reads the inside of `--config 'section={...}'` with YAML's BaseLoader: every scalar a string."""
    config = {"seed": 1, "run_name": "toy", "selfplay": {"total_steps": "2", "backfill": "false", "group_size": 4},
              "validation": {"seeds": ["3", "4"]}, "corpus": {"path": "null"}, "paper": {"table_runs": "t.yaml"},
              "toy_ablations": {"x": {"memory": {"enabled": "False"}}}, "agent": {"response_prefix": ""}}
    given = {"seed": 1, "selfplay": {"total_steps": "2", "backfill": "false"}, "validation": {"seeds": ["3", "4"]},
             "corpus": {"path": "null"}, "paper": {"table_runs": "t.yaml"},
             "toy_ablations": {"x": {"memory": {"enabled": "False"}}}, "agent": {"response_prefix": ""}}
    retype_workflow_overrides(config, given)
    assert config == {"seed": 1, "run_name": "toy", "selfplay": {"total_steps": 2, "backfill": False, "group_size": 4},
                      "validation": {"seeds": [3, 4]}, "corpus": {"path": None}, "paper": {"table_runs": "t.yaml"},
                      "toy_ablations": {"x": {"memory": {"enabled": False}}},
                      "agent": {"response_prefix": ""}}  # an empty text stays a text (a config file's "")


def snakemake(tmp_path, *config: str):
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", DEFAULT, "--directory",
                           str(tmp_path), "--config", *config], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_snakemake_config_overrides_a_sections_key(tmp_path):
    """`snakemake --config 'selfplay={total_steps: 2}'`: the toy then trains 2 steps, so it is evaluated at steps
    0 and 2 and no longer at step 4 (before, the 2 arrived as the text '2' and the workflow refused it)."""
    run = snakemake(tmp_path, "seed=3", "selfplay={total_steps: 2}")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "runs/toy/eval/heldout_library/step_000002.json" in run.stdout
    assert "runs/toy/eval/heldout_library/step_000004.json" not in run.stdout


def test_snakemake_config_bad_value_gets_the_message_of_the_same_yaml(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("selfplay:\n  total_steps: 0\n")
    assert main(["compute", "--config", DEFAULT, "--config", str(bad)]) == 2
    message = capsys.readouterr().err.removeprefix("error: ").strip()
    assert "'selfplay.total_steps' has value 0" in message
    run = snakemake(tmp_path, "selfplay={total_steps: 0}")
    output = run.stdout + run.stderr
    assert run.returncode != 0 and f"invalid configuration: {message}" in output, output[-3000:]
