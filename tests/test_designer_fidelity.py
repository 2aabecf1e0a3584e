"""Designer fidelity (spade.designer.fidelity): scripted designers that answer with the reference environment,
with a subtly wrong one, and with garbage; the aggregation and the CLI."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from scripted_backend import ScriptedBackend

from spade.config import SpadeConfig
from spade.configtools import ConfigError
from spade.designer.fidelity import (
    FIDELITY_CHECKS,
    fidelity_config,
    fidelity_prompt,
    run_fidelity,
)
from spade.envs.mechanisms import families, render, sample_instance
from spade.inference.models import build_tiny_tokenizer
from spade.seeding import derive_seed

THETA_RE = re.compile(r"^theta = (\{.*\})$", re.M)
SEED = 20_000  # FidelityConfig.first_seed


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


def instance_of(prompt_text: str):
    """The instance whose theta the design prompt states (matched against every family's first seed)."""
    theta = json.loads(THETA_RE.search(prompt_text).group(1))
    matches = [inst for inst in (sample_instance(name, SEED) for name in families()) if inst.params == theta]
    assert len(matches) == 1, f"theta {theta} matches {len(matches)} instances"
    return matches[0]


def fenced(source: str) -> str:
    return "Here is the environment.\n```python\n" + source + "\n```\n"


def designer(tokenizer, answer):
    """A scripted designer: ``answer(instance)`` is its reply for the instance in the prompt."""
    return ScriptedBackend(tokenizer, lambda text, seed: answer(instance_of(text)))


def run(backend, pool, **settings):
    return run_fidelity(SpadeConfig(), backend, pool, fidelity_config(replays=1, **settings))


def test_reference_environment_is_faithful_for_every_family(pool, tokenizer):
    backend = designer(tokenizer, lambda inst: fenced(render(inst, "written")))
    report = run(backend, pool)
    names = sorted(families())
    assert report["families"] == names and report["seeds"] == [SEED] and report["generations"] == len(names)
    # one generate call, one seed per prompt, derived from the master seed (0), the family and the sampler seed
    (texts, params, seeds), = backend.calls
    assert seeds == [derive_seed(0, "fidelity", name, SEED) for name in names]
    assert params.max_new_tokens == SpadeConfig().designer.max_new_tokens
    for case in report["cases"]:
        assert case["valid"] and case["reason"] == "ok", case
        assert case["faithful"] and case["failed_checks"] == [] and case["failing_check"] == ""
        assert case["admission_reasons"] == []
        drivers = case["drivers"]
        assert drivers["optimal"]["reward"] == 1.0 and drivers["optimal"]["utility"] == case["u_star"]
        assert drivers["default"]["reward"] == 0.0 and drivers["default"]["utility"] == case["u0"]
        assert drivers["idle"]["utility"] == case["u_idle"]
        assert all(row["utility_error"] == 0.0 for row in drivers.values())
    overall = report["summary"]["overall"]
    # Wilson 95% for 7/7 (z = 1.959964, z^2 = 3.841459): centre = (1 + z^2/14) / (1 + z^2/7)
    # = 1.274390 / 1.548780 = 0.822834; half = z / 1.548780 * sqrt(z^2 / 196) = 1.265488 * 0.139998 = 0.177166
    # -> low = 0.645668, high = 1.
    for key in ("valid", "faithful", "faithful_given_valid"):
        assert overall[key]["successes"] == overall[key]["trials"] == 7 and overall[key]["rate"] == 1.0
        assert overall[key]["low"] == pytest.approx(0.645668, abs=1e-5) and overall[key]["high"] == 1.0
    assert set(report["summary"]["by_family"]) == set(names)
    assert overall["generated_tokens"] == sum(c["generated_tokens"] for c in report["cases"]) > 0
    assert report["provenance"]["config_hash"] and report["checks"] == list(FIDELITY_CHECKS)


def test_prompt_gives_theta_commands_and_reward_rule():
    inst = sample_instance("inventory", SEED)
    system, user = (m["content"] for m in fidelity_prompt(inst))
    assert "one Python class" in system
    assert json.loads(THETA_RE.search(user).group(1)) == inst.params
    assert "- order Q" in user and "inspect" not in user.split("The commands are:")[1].split("A command")[0]
    assert f"USTAR = {inst.u_star!r}" in user and f"U0 = {inst.u0!r}" in user
    assert '"utility": u' in user and "\\boxed{order 4}" in user  # the default plan's first line as example


def with_price(inst, price):
    return replace(inst, params={**inst.params, "price": price})


def test_changed_parameter_is_valid_but_not_faithful(pool, tokenizer):
    # inventory, seed 20000: T = 4, start stock 0, capacity 8, price 7, unit cost 1, fixed cost 7, holding 2,
    # demands 3, 2, 1, 1. Optimal orders 3, 4, 0, 0 -> profits 11, -1, 5, 7 = 22 = u*; default 4, 1, 2, 1 ->
    # 8, 6, -4, -3 = 7 = u0; both plans sell 3 + 2 + 1 + 1 = 7 units, idle sells nothing (u = 0).
    inst = sample_instance("inventory", SEED)
    assert inst.params["price"] == 7 and inst.params["demands"] == [3, 2, 1, 1]
    assert (inst.u_star, inst.u0, inst.u_idle) == (22.0, 7.0, 0.0)

    # price 8: every sold unit earns 1 more. Optimal 22 + 7 = 29 -> score clipped to 1 (passes 'optimal'),
    # default 7 + 7 = 14 -> score (14 - 7) / 15 = 0.466667 != 0 (fails 'default'); 29 > u* (exceeds_optimum).
    report = run(designer(tokenizer, lambda i: fenced(render(with_price(i, 8), "written"))), pool,
                 families=["inventory"])
    (case,) = report["cases"]
    assert case["valid"] and not case["faithful"]
    assert case["failed_checks"] == ["default", "exceeds_optimum"] and case["failing_check"] == "default"
    assert case["drivers"]["optimal"]["reward"] == 1.0 and case["drivers"]["optimal"]["utility"] == 29.0
    assert case["drivers"]["optimal"]["utility_error"] == 7.0
    assert case["drivers"]["default"]["reward"] == pytest.approx(7 / 15)
    assert case["drivers"]["default"]["utility"] == 14.0
    assert report["summary"]["by_family"]["inventory"]["failing_checks"] == {"default": 1}

    # price 6: optimal 22 - 7 = 15 -> score (15 - 7) / 15 = 0.533333 and utility != u* (fails 'optimal');
    # default 7 - 7 = 0 -> score clipped to 0 (passes); idle 0 <= 0 (passes).
    report = run(designer(tokenizer, lambda i: fenced(render(with_price(i, 6), "written"))), pool,
                 families=["inventory"])
    (case,) = report["cases"]
    assert case["valid"] and case["failed_checks"] == ["optimal"] and case["failing_check"] == "optimal"
    assert case["drivers"]["optimal"]["reward"] == pytest.approx(8 / 15)
    assert case["drivers"]["default"]["reward"] == 0.0 and case["drivers"]["default"]["utility"] == 0.0
    summary = report["summary"]["overall"]
    assert summary["valid"]["rate"] == 1.0 and summary["faithful"]["rate"] == 0.0
    assert summary["faithful_given_valid"]["successes"] == 0


def test_environment_that_never_terminates_fails_no_terminal(pool, tokenizer):
    def answer(inst):  # 'finish' is ignored, so the idle driver runs out of actions without terminating
        source = render(inst, "written").replace('elif words[0] == "finish":', 'elif words[0] == "finish_never":')
        assert "finish_never" in source
        return fenced(source)

    report = run(designer(tokenizer, answer), pool, families=["stopping"])
    (case,) = report["cases"]
    assert case["valid"] and case["failing_check"] == "no_terminal"
    assert case["drivers"]["idle"]["terminated"] is False and case["drivers"]["optimal"]["terminated"] is True


@pytest.mark.parametrize("reply, reason", [
    ("I am sorry, I cannot write that environment.", "syntax_error"),
    ("```python\ndef helper(x):\n    return x\n```", "no_env_class"),
    ("```python\nclass Env:\n    def __init__(self, max_turns=20, **kwargs):\n        self.max_turns = max_turns\n"
     "    def reset(self, seed=None):\n        return 'x', {}\n"
     "    def step(self, action):\n        return 'x', 0.0, False, False\n```", "step_failed"),  # a 4-tuple
])
def test_garbage_is_invalid_with_its_reason(pool, tokenizer, reply, reason):
    report = run(ScriptedBackend(tokenizer, lambda text, seed: reply), pool, families=["lp"])
    (case,) = report["cases"]
    assert not case["valid"] and case["reason"] == reason and not case["faithful"]
    assert case["drivers"] == {} and case["failing_check"] == ""
    summary = report["summary"]["overall"]
    assert summary["valid"]["successes"] == 0 and summary["invalid_reasons"] == {reason: 1}
    assert summary["faithful_given_valid"] is None and summary["generated_tokens_per_valid"] is None


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="fidelity.families.*'no_such'"):
        fidelity_config(families=["no_such"])
    with pytest.raises(ConfigError, match="fidelity.instances"):
        fidelity_config(instances=0)
    settings = fidelity_config(families=["lp", "stopping"], instances=2, first_seed=5)
    assert settings.family_names() == ["lp", "stopping"] and settings.seeds() == [5, 6]
    assert fidelity_config().family_names() == sorted(families())


def test_cli_writes_the_report(tmp_path, tiny_model_dir):
    from spade.cli import main

    out = tmp_path / "fidelity.json"
    overrides = {"designer": {"max_new_tokens": 8}, "sandbox": {"workers": 1}}
    code = main(["fidelity", "--config-json", json.dumps(overrides), "--model", str(tiny_model_dir),
                 "--out", str(out), "--families", "stopping", "--instances", "2", "--first-seed", "3"])
    assert code == 0
    report = json.loads(out.read_text())
    assert [(c["family"], c["seed"]) for c in report["cases"]] == [("stopping", 3), ("stopping", 4)]
    assert all(c["generated_tokens"] <= 8 and not c["valid"] for c in report["cases"])  # a random model's 8 tokens
    assert report["summary"]["overall"]["cases"] == 2 and report["model"] == str(tiny_model_dir)
    assert main(["fidelity", "--config-json", "{}", "--model", str(tiny_model_dir), "--out", str(out),
                 "--families", "nope"]) == 2
