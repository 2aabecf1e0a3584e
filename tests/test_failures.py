"""Why a step earns nothing (spade.core.failures): the cause of every agent episode and the failing stage of every
design, by hand-computed cases of the pure functions, then through the episode runner and one self-play step with a
scripted model that keeps to its token budget (tests/scripted_backend.BudgetBackend), and in what the run table, the
live metrics and the environment browser show."""

from __future__ import annotations

import json
import random

import pytest

from conftest import GOOD_STEP, env_source
from scripted_backend import BudgetBackend
from spade.core.agent import AgentConfig, EpisodeJob, EpisodeRecord, EpisodeRunner, parsed_action
from spade.core.failures import (DESIGN_STAGES, EPISODE_CAUSES, STAGE_OF_REASON, cause_counts, counts, counts_text,
                                 design_stage, episode_cause, record_cause, report_stage, stage_counts, summed,
                                 wrote_code)

SYSTEM = {"game": "You play games.", "tool_use": "You use tools."}
# ends the episode on any boxed answer (a wrong one with reward 0)
ENDS_ON_ANY_ANSWER = """        won = action.strip() == "\\\\boxed{" + str(self.target) + "}"
        return ("Correct." if won else "Wrong."), float(won), action.startswith("\\\\boxed{"), False, {}"""
NEVER_ENDS = """        return "Again.", 0.0, False, False, {}"""
PROSE = "Let me think step by step about which digit it could be, starting from the smallest one and going up"


# ----- the pure functions, by hand ------------------------------------------------------------------------
@pytest.mark.parametrize("outcome, final_return, parsed, cut, cause", [
    ("terminated", 1.0, True, False, "earned"),
    ("terminated", 0.5, True, True, "earned"),  # a partial reward earns; a cut after the answer does not matter
    ("truncated", 0.0, False, False, "no_action"),
    ("terminated", 0.0, False, False, "no_action"),  # the environment ended it on a format error: still no action
    ("truncated", 0.0, False, True, "cut"),
    ("turn_limit", 0.0, False, True, "cut"),
    ("terminated", 0.0, True, False, "wrong_action"),
    ("terminated", 0.0, True, True, "wrong_action"),  # the action was there: the cut came after it
    ("truncated", 0.0, True, False, "turn_limit"),
    ("turn_limit", 0.0, True, False, "turn_limit"),
    ("context_limit", 0.0, False, True, "context_limit"),
    ("env_failure", 0.0, False, False, "env_failure"),
    ("env_failure", 0.0, True, False, "env_failure"),
])
def test_episode_cause_by_hand(outcome, final_return, parsed, cut, cause):
    assert episode_cause(outcome, final_return, parsed, cut) == cause


@pytest.mark.parametrize("reason, cut, code, stage", [
    ("ok", False, True, "ok"), ("ok", True, True, "ok"),
    ("syntax_error", True, True, "cut"),  # the unfinished code is the root cause of the syntax error
    ("syntax_error", False, True, "syntax"),
    ("syntax_error", True, False, "no_code"),  # prose cut at the budget: more budget buys more prose
    ("syntax_error", False, False, "no_code"),
    ("empty", True, True, "cut"), ("empty", False, True, "no_code"),
    ("no_env_class", True, True, "cut"), ("no_env_class", False, True, "class"), ("no_env_class", True, False, "no_code"),
    ("multiple_env_classes", True, True, "class"),  # a cut cannot add a second class
    ("too_large", True, True, "size"),
    ("load_failed", True, True, "load"),  # intake read it: the program itself failed, cut or not
    ("reset_failed", False, True, "reset"), ("step_failed", False, True, "step"),
    ("reward_out_of_range", False, True, "checks"), ("nondeterministic", False, True, "checks"),
    ("reset_gate_error", False, True, "checks"), ("reset_gate_presatisfied", False, True, "checks"),
    ("no_solution", False, True, "gates"), ("solution_failed", False, True, "gates"),
    ("idle_too_high", False, True, "gates"), ("eval_overlap", False, True, "gates"),
])
def test_design_stage_by_hand(reason, cut, code, stage):
    assert design_stage(reason, cut, code) == stage


@pytest.mark.parametrize("text, code", [
    ("The task is to create a guessing game with a difficulty of 25.", False),  # a toy designer's answer
    ("The class of problems is hard; def: a definition.", False),
    ("Here it is:\n```python\nimport ran", True),
    ("Sure.\nimport random\n", True),
    ("Sure.\nclass Guess:\n    pass", True),
    ("    def step(self, action):", True),
    ("from spade.envs.tool_base import ToolUseBaseEnv", True),
])
def test_wrote_code(text, code):
    assert wrote_code(text) is code


def test_every_reject_reason_has_a_stage_and_unknown_ones_are_named():
    """A reason code added to the validator without a stage fails here (mutation: drop one from STAGE_OF_REASON)."""
    from spade.envs.validate import REASONS

    assert set(STAGE_OF_REASON) == set(REASONS)
    assert set(STAGE_OF_REASON.values()) | {"cut"} == set(DESIGN_STAGES)
    with pytest.raises(ValueError, match="'no_such_reason'.*syntax_error"):
        design_stage("no_such_reason", False)


def test_counting_helpers_by_hand():
    assert counts(["b", "a", "b"], ("a", "b", "c")) == {"a": 1, "b": 2, "c": 0}
    with pytest.raises(ValueError, match="unknown category 'd'"):
        counts(["d"], ("a", "b"))
    assert summed([{"a": 1}, None, {"a": 2, "b": 1}]) == {"a": 3, "b": 1}
    assert counts_text({"x": 1, "b": 3, "a": 3, "z": 0}) == "a 3, b 3, x 1" and counts_text({"a": 0}) == ""
    reports = [{"valid": True, "reason": "ok"}, {"valid": False, "reason": "syntax_error", "cut": True},
               {"valid": False, "reason": "syntax_error"},  # written before stages were recorded: code, not cut
               {"valid": False, "reason": "syntax_error", "cut": True, "wrote_code": False},
               {"valid": False, "reason": "load_failed", "stage": "load"}]
    assert [report_stage(r) for r in reports] == ["ok", "cut", "syntax", "no_code", "load"]
    assert stage_counts(reports) == {**dict.fromkeys(DESIGN_STAGES, 0), "cut": 1, "syntax": 1, "no_code": 1, "load": 1}
    assert cause_counts([{"cause": "cut"}, {"cause": "cut"}]) == {**dict.fromkeys(EPISODE_CAUSES, 0), "cut": 2}
    # records made without the runner carry no cause: it comes from their fields
    unsettled = [EpisodeRecord("e", 0, "no_hint", final_return=1.0, outcome="terminated"),
                 EpisodeRecord("e", 1, "no_hint", outcome="truncated", last_parsed=True),
                 {"outcome": "env_failure", "final_return": 0.0}]
    assert [record_cause(r) for r in unsettled] == ["earned", "turn_limit", "env_failure"]


@pytest.mark.parametrize("text, kind, action", [
    ("so \\boxed{7}.", "game", "\\boxed{7}"),
    ("The integer is 10.", "game", None),
    ("<think>\\boxed{1}</think> no answer after thinking", "game", None),
    ('{"name": "look", "arguments": {}}', "tool_use", '{"name": "look", "arguments": {}}'),
    ('I would call {"tool": "look"}', "tool_use", None),  # an object without a name is no tool call
    ("I would call { look }", "tool_use", None),
    ("<answer>done</answer>", "tool_use", "<answer>done</answer>"),
])
def test_parsed_action(text, kind, action):
    assert parsed_action(text, kind) == action


# ----- through the episode runner --------------------------------------------------------------------------
def _play(pool, tokenizer, body: str, replies: list, seed: int = 3, **agent):
    from spade.envs.intake import intake

    code = intake(env_source(body))
    config = AgentConfig(**{"max_turns": 2, "max_new_tokens": 12, "max_context_tokens": 4096, **agent})
    runner = EpisodeRunner(BudgetBackend(tokenizer, {"agent": replies}), pool, config, SYSTEM)
    (record,) = runner.run([EpisodeJob("env", code.code, code.class_name, "game", seed)], seed=0)
    return record


def _target(seed: int) -> int:
    return random.Random(seed).randint(0, 9)  # conftest.env_source's reset


def _wrong(seed: int) -> str:
    return "\\boxed{" + str((_target(seed) + 1) % 10) + "}"


def test_each_cause_through_the_runner(pool, tiny_model):
    """One episode per cause, each with its per-turn counts (unparsed turns, turns cut at max_new_tokens)."""
    _, tokenizer = tiny_model
    right = "\\boxed{" + str(_target(3)) + "}"
    cases = {
        "earned": (GOOD_STEP, ["The digit is 0.", right], "terminated", (1, 0)),
        "wrong_action": (ENDS_ON_ANY_ANSWER, [_wrong(3)], "terminated", (0, 0)),
        "turn_limit": (GOOD_STEP, [_wrong(3), _wrong(3)], "truncated", (0, 0)),  # the environment's own limit
        "no_action": (GOOD_STEP, [_wrong(3), "The integer is 10."], "truncated", (1, 0)),
        "cut": (GOOD_STEP, [PROSE, PROSE], "truncated", (2, 2)),
    }
    for cause, (body, replies, outcome, (unparsed, cut)) in cases.items():  # cut turns continue (before issue 32)
        record = _play(pool, tokenizer, body, replies, cut_turns="continue")
        assert (record.cause, record.outcome) == (cause, outcome), cause
        assert (record.unparsed_turns, record.cut_turns) == (unparsed, cut), cause
        assert record.summary()["cause"] == cause  # the record carries it to evaluations and the OpenRLHF executor
    # the runner's own turn limit: the environment never ends the episode
    record = _play(pool, tokenizer, NEVER_ENDS, [_wrong(3), _wrong(3)])
    assert (record.outcome, record.cause, record.turns) == ("turn_limit", "turn_limit", 2)
    # a reply cut after its answer is not a cut when cut turns continue: the action was parsed
    record = _play(pool, tokenizer, ENDS_ON_ANY_ANSWER, [_wrong(3) + " " + PROSE], cut_turns="continue")
    assert (record.cut_turns, record.unparsed_turns, record.cause) == (1, 0, "wrong_action")


def test_a_cut_turn_ends_the_episode_unseen_by_the_environment(pool, tiny_model):
    """agent.cut_turns 'end' (reference): a reply without eos ends the episode at once (outcome cut_turn, return
    0, cause cut), even one whose answer came before the cut and would have won; the environment never steps."""
    _, tokenizer = tiny_model
    right = "\\boxed{" + str(_target(3)) + "}"
    record = _play(pool, tokenizer, GOOD_STEP, [PROSE, PROSE])
    assert (record.outcome, record.cause, record.turns, record.rewards) == ("cut_turn", "cut", 1, [])
    assert (record.unparsed_turns, record.cut_turns) == (1, 1)
    record = _play(pool, tokenizer, ENDS_ON_ANY_ANSWER, [right + " " + PROSE])
    assert (record.outcome, record.cause, record.final_return, record.rewards) == ("cut_turn", "cut", 0.0, [])
    assert _play(pool, tokenizer, ENDS_ON_ANY_ANSWER, [right + " " + PROSE], cut_turns="continue").won


def test_context_limit_and_env_failure_through_the_runner(pool, tiny_model):
    _, tokenizer = tiny_model
    first = _play(pool, tokenizer, GOOD_STEP, ["The integer is 10.", "The integer is 10."])
    prompt = first.loss_mask.index(1)  # tokens of the first prompt
    reply = first.loss_mask.index(0, prompt) - prompt  # tokens of the first reply, eos included
    # room for the first prompt and reply, not for the next observation
    record = _play(pool, tokenizer, GOOD_STEP, ["The integer is 10.", "The integer is 10."],
                   max_context_tokens=prompt + reply + 2)
    assert (record.outcome, record.cause, record.turns) == ("context_limit", "context_limit", 1)
    broken = _play(pool, tokenizer, "        raise RuntimeError('broken step')", ["\\boxed{1}"])
    assert (broken.outcome, broken.cause) == ("env_failure", "env_failure")


# ----- one self-play step: metrics, live metrics, run table, archives, browser -------------------------------------
def _core(pool, tokenizer, rejected_dir, design_tokens: int, agent_reply: str, design: str | None = None):
    from spade.config import load_config
    from spade.core.selfplay import SelfPlay
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator

    config = load_config(overrides={
        "model_card": "tiny-random",
        "selfplay": {"active_skills": 1, "envs_per_skill": 1, "group_size": 2, "total_steps": 1, "design_attempts": 1,
                     "backfill": True},
        "designer": {"max_new_tokens": design_tokens}, "agent": {"max_turns": 1, "max_new_tokens": 16},
        "corpus": {"enabled": False}, "train": {"global_batch": 2}})
    design = design or "Here it is:\n```python\n" + get_env("knapsack_selection").source() + "```\n"
    backend = BudgetBackend(tokenizer, {"design": design, "hint": "<hint>Count.</hint>", "agent": agent_reply})
    return SelfPlay(config, backend, Validator(pool), EnvironmentMemory(config.memory), None, rejected_dir=rejected_dir)


def test_a_step_logs_causes_and_stages_and_the_browser_shows_them(pool, tiny_model, tmp_path):
    """A design cut at designer.max_new_tokens (a syntax error at intake) counts as stage 'cut'; the backfilled
    environment's plays, all prose, count as 'no_action'; the counts reach metrics.jsonl's keys, the TensorBoard
    tags, the run table, the set archive, the rejected candidate's report and the environment browser."""
    import pandas as pd

    from spade.paper.env_cards_archive import load_run
    from spade.paper.env_cards_content import no_replay
    from spade.paper.env_cards_pages import render_browser_html
    from spade.paper.report import TIDY_COLUMNS, run_table_rows
    from spade.train.live_metrics import scalars
    from spade.train.trainer import write_archives

    _, tokenizer = tiny_model
    run_dir = tmp_path / "runs" / "diag"
    core = _core(pool, tokenizer, run_dir / "rejected", design_tokens=60, agent_reply="The integer is 10.")
    _, metrics, _ = core.rollout(0)
    (slot,) = core._envs()
    assert slot.source.startswith("backfill:") and slot.reports[0]["cut"] is True
    assert (slot.reports[0]["reason"], slot.reports[0]["stage"]) == ("syntax_error", "cut")
    assert metrics["reject_reasons"] == {"syntax_error": 1}
    assert metrics["design_fail_stages"] == {**dict.fromkeys(DESIGN_STAGES, 0), "cut": 1}
    assert metrics["design_cut_share"] == 1.0
    plays = metrics["episodes"]  # global batch 2 over 1 environment: 2 no-hint plays; G = 2 hinted plays
    assert plays == 2 and metrics["agent_causes"] == {**dict.fromkeys(EPISODE_CAUSES, 0), "no_action": 2}
    assert metrics["hint_causes"] == {**dict.fromkeys(EPISODE_CAUSES, 0), "no_action": 2}
    assert metrics["agent_unearned_share"] == 1.0 and metrics["agent_unparsed_turn_share"] == 1.0
    assert metrics["agent_cut_turn_share"] == 0.0
    assert slot.causes == {**dict.fromkeys(EPISODE_CAUSES, 0), "no_action": 2} and slot.hint_causes["no_action"] == 2
    tags = scalars(metrics)
    assert tags["agent/causes/no_action"] == 2.0 and tags["agent/hint_causes/earned"] == 0.0
    assert tags["designer/fail_stages/cut"] == 1.0 and tags["designer/cut_share"] == 1.0
    assert tags["agent/unparsed_turn_share"] == 1.0
    rows = {q: (v, d) for q, v, d in run_table_rows("diag", pd.DataFrame(columns=TIDY_COLUMNS), [metrics], {})}
    assert rows["Designer rejections by failing stage"] == ("1", "cut 1")
    assert rows["No-hint episodes by cause"] == ("2", "no_action 2")
    assert rows["Hint-arm episodes by cause"] == ("2", "no_action 2")
    assert rows["Designer rejections (reason codes)"] == ("1", "syntax_error 1")

    (kept,) = (run_dir / "rejected").iterdir()
    assert json.loads((kept / "report.json").read_text())["stage"] == "cut"
    from dataclasses import asdict

    write_archives(run_dir, [asdict(slot)])
    (run_dir / "metrics.jsonl").write_text(json.dumps(metrics) + "\n")
    archive = load_run(run_dir)
    page = render_browser_html(archive, no_replay(archive.envs), "cards.html")
    assert "rejected at cut: syntax_error" in page  # the rejected candidate's badge
    assert "<th>failing stage</th><td>cut</td>" in page  # its statistics table
    assert "<td>rejected</td><td>cut</td><td><code>syntax_error</code>" in page  # the slot's report table
    assert "<td>cut 1</td><td>no_action 2</td>" in page  # the overview of the set
    assert "no-hint plays by cause</th><td>no_action 2</td>" in page  # the slot's window statistics


@pytest.mark.parametrize("design, tokens, cut, stage", [
    (None, 4096, False, "ok"),  # the previous test's design with room to finish: valid, nothing cut
    (" ".join(["The task is to create a guessing game."] * 20), 60, True, "no_code"),  # prose, cut: no code
    ("The task is to create a guessing game.", 60, False, "no_code"),  # prose that ended by itself
    ("```python\nclass Guess(:\n    pass\n```", 60, False, "syntax"),  # finished code with a syntax error
])
def test_design_stages_through_the_designer(pool, tiny_model, tmp_path, design, tokens, cut, stage):
    _, tokenizer = tiny_model
    core = _core(pool, tokenizer, tmp_path / "rejected", tokens, "The integer is 10.", design)
    slots, _ = core.design(0)
    report = slots[0].reports[0]
    assert (report["cut"], report["stage"], slots[0].source == "designer") == (cut, stage, stage == "ok")
    assert core._design_metrics(slots)["design_fail_stages"] == {**dict.fromkeys(DESIGN_STAGES, 0),
                                                                 **({} if stage == "ok" else {stage: 1})}
