"""The longest designer prompt of a run against --data.max_len, before launch (spade.rlhf.prompt_budget; issue 46).

The bound is checked against the prompts the core builds (``design_prompt`` with the memory's own draws, as
``spade.core.design.DesignSession._design_chat`` calls it) over every corpus document, skill and draw, with a memory
full of the longest examples it can hold; then that a launch whose budget is too small stops before it writes anything.
"""

from __future__ import annotations

import json
import random

import pytest

from spade.config import CONFIG_DIR, load_config
from spade.configtools import ConfigError
from spade.core.agent import ChatTokens, template_kwargs
from spade.core.backend_setup import corpus_sampler, fresh_memory
from spade.designer.corpus import truncate_words
from spade.designer.memory import MemoryRecord
from spade.designer.prompts import design_prompt, hint_prompt
from spade.inference.tiny_tokenizer import build_tiny_tokenizer
from spade.rlhf.prompt_budget import (CODE_MARGIN, check_designer_prompts_fit, designer_prompt_bounds,
                                      longest_document, over_budget)

MAX_NEW = 40  # designer.max_new_tokens of these runs: a policy-written example's code is at most this long
WORDS = 60  # corpus.games_max_words


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer(512, "qwen3", "hybrid")


def _corpus(tmp_path):
    """Ten documents; the one of most tokens after the 60-word cut is the sixth (neither first nor last), and the
    one of most characters before the cut is another (the cut decides)."""
    rows = [" ".join(f"word{i}" for i in range(n)) for n in (5, 20, 35, 50, 12)]
    rows.append(" ".join(f"x{i}_{i * 7919 % 97}()" for i in range(200)))  # many tokens per word
    rows.append("plain " * 400)  # most characters, but one token a word
    rows += [" ".join(f"w{i}" for i in range(n)) for n in (3, 9, 15)]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(rows)))
    return path


def _config(**overrides):
    base = {"designer": {"max_new_tokens": MAX_NEW}, "corpus": {"games_max_words": WORDS},
            "memory": {"n_positive": 2, "negative_low": 0.1, "negative_high": 0.9}}
    for key, value in overrides.items():
        base.setdefault(key, {}).update(value)
    return load_config(CONFIG_DIR / "paper" / "spade_games_4b.yaml", overrides=base)


def _written_code(tokenizer, n_tokens: int, seed: int) -> str:
    """A policy-written environment's code of exactly ``n_tokens`` tokens (a reply cut at designer.max_new_tokens)."""
    rng = random.Random(seed)
    body = "\n".join(f"    def m{rng.randrange(10**6)}(self, q{rng.randrange(99)}): return {rng.random()!r}"
                     for _ in range(n_tokens))
    return tokenizer.decode(tokenizer(f"class Env{seed}:\n{body}", add_special_tokens=False)["input_ids"][:n_tokens])


def _full_memory(config, tokenizer):
    """The run's memory later: policy-written environments of the longest code, in the band (good examples) and
    outside it (examples to avoid), for every skill."""
    memory = fresh_memory(config)
    for i, skill in enumerate(config.selfplay.skills):
        for j, win_rate in enumerate((0.5, 0.6, 0.95, 0.02)):
            memory.add(MemoryRecord(f"e{i}-{j}", _written_code(tokenizer, MAX_NEW, 10 * i + j), skill,
                                    config.selfplay.flavour, win_rate, -0.99 + 0.1 * j, 4))
    return memory


def _tokens(config, tokenizer, messages) -> int:
    chat = ChatTokens(tokenizer, template_kwargs(config.designer.enable_thinking))
    opening = config.designer.opening()
    return len(chat.first_prompt(messages)) + (len(chat.encode(opening)) if opening else 0)


def _actual_prompts(config, tokenizer, corpus, memory):
    """(skill, tokens) of the design prompts the core builds from ``memory``: every document, every skill, 20 memory
    draws each (as spade.core.design.DesignSession._design_chat draws them)."""
    sampler = corpus_sampler(config, corpus)
    for document in sampler.documents:
        text = truncate_words(document.text, sampler.max_words)
        for skill in config.selfplay.skills:
            for draw in range(20):
                rng = random.Random(draw)
                messages = design_prompt(config.selfplay.flavour, skill, text, memory.positive_seeds(skill, rng=rng),
                                         memory.negative_seed(skill, rng=rng), examples=config.memory.examples,
                                         example_chars=config.memory.example_chars)
                yield skill, _tokens(config, tokenizer, messages)


def _design_bounds(config, tokenizer, corpus) -> dict:
    return {b.what.split(",")[0].removeprefix("design prompt (skill "): b
            for b in designer_prompt_bounds(config, tokenizer, corpus) if b.what.startswith("design prompt")}


@pytest.mark.parametrize("examples", ["reference", "full"])
def test_the_bound_holds_every_design_prompt_the_core_builds(tokenizer, tmp_path, examples):
    config = _config(memory={"examples": examples})
    corpus = _corpus(tmp_path)
    bounds = _design_bounds(config, tokenizer, corpus)
    assert set(bounds) == set(config.selfplay.skills)
    # the memory at the run's start (the library's environments, unmeasured: the good examples of their skill), whose
    # longest prompt is `built`, and later (policy-written environments of the longest code, in the band and out)
    for memory, at_start in ((fresh_memory(config), True), (_full_memory(config, tokenizer), False)):
        for skill, tokens in _actual_prompts(config, tokenizer, corpus, memory):
            assert tokens <= bounds[skill].prompt_tokens, (skill, tokens, bounds[skill])
            assert tokens <= bounds[skill].built or not at_start, (skill, tokens, bounds[skill])
    assert all(bound.new_tokens == MAX_NEW for bound in bounds.values())


@pytest.mark.parametrize("examples", ["reference", "full"])
def test_the_bound_is_reached_by_the_longest_examples(tokenizer, tmp_path, examples):
    """Not a loose bound: the skill's longest library environment shown twice beside the longest document, and a
    policy-written one to avoid with a long name, come within the margins the bound adds."""
    config = _config(memory={"examples": examples})
    corpus = _corpus(tmp_path)
    bounds = _design_bounds(config, tokenizer, corpus)
    document, _ = longest_document(config, tokenizer, corpus)
    name = "Avoided" + "Q" * 400  # one token a letter or so in the tiny vocabulary: at least NAME_TOKENS
    avoided = MemoryRecord("bad", f"class {name}:\n" + _written_code(tokenizer, MAX_NEW - 30, 1), "logical_deduction",
                           config.selfplay.flavour, 0.02, 0.0, 4)
    for skill, bound in bounds.items():
        records = [r for r in fresh_memory(config).records if r.skill == skill]
        shown = config.memory.example_chars if examples == "reference" else None
        longest = max(records, key=lambda r: len(tokenizer(r.code.strip()[:shown])["input_ids"]))
        messages = design_prompt(config.selfplay.flavour, skill, document, [longest] * config.memory.n_positive,
                                 avoided, examples=examples, example_chars=config.memory.example_chars)
        built = _tokens(config, tokenizer, messages)
        margins = config.memory.n_positive * 2 * CODE_MARGIN + (0 if examples == "reference" else 3 * CODE_MARGIN)
        assert bound.prompt_tokens - margins - 4 <= built, (skill, bound.prompt_tokens, built)
        if examples == "reference":  # the name beyond NAME_TOKENS is what the bound leaves to the plugin
            assert built > bound.prompt_tokens


# what a feedback message can list today: every check of spade.envs.validate and every repair of spade.envs.intake
CHECKS = ["intake", "load", "reset_step_contract", "second_seed", "reset_gate", "determinism", "solution_gate",
          "idle_gate", "overlap_gate"]
CHANGES = ["removed <think> reasoning", "converted CRLF/CR line endings to LF",
           "trimmed blank lines and trailing whitespace at the ends of the code"]


def test_the_revision_bound_holds_the_longest_feedback_chat(tokenizer, tmp_path):
    """designer_feedback.revisions 2 (the feedback comparison run): the second revision's chat, built as the core
    builds it (spade.core.design: each revision on the chat of the one before), with the longest answers and reports
    the settings allow, stays within its bound; and a run without revisions has no such bound."""
    from spade.designer.feedback import REASON_ADVICE, revision_chat

    config = _config(designer_feedback={"revisions": 2, "answer_chars": 300, "report_chars": 200})
    corpus = _corpus(tmp_path)
    bounds = designer_prompt_bounds(config, tokenizer, corpus)
    revision = {b.what.split(",")[0].removeprefix("revision 2 prompt (skill "): b
                for b in bounds if b.what.startswith("revision 2 prompt")}
    assert set(revision) == set(config.selfplay.skills)
    assert not [b for b in designer_prompt_bounds(_config(), tokenizer, corpus) if b.what.startswith("revision")]
    document, _ = longest_document(config, tokenizer, corpus)
    memory = fresh_memory(config)
    answer = config.designer.opening() + _written_code(tokenizer, MAX_NEW, 3)  # a reply cut at max_new_tokens
    for skill, bound in revision.items():
        chat = design_prompt(config.selfplay.flavour, skill, document, memory.positive_seeds(skill),
                             memory.negative_seed(skill), examples=config.memory.examples,
                             example_chars=config.memory.example_chars)
        for reason in REASON_ADVICE:
            message = "Traceback (most recent call last): " + "x = y + 1; " * 100  # over report_chars: trimmed
            report = {"valid": False, "reason": reason, "message": message, "checks": CHECKS, "changes": CHANGES}
            first = revision_chat(chat, answer, report, 1, 2, 300, 200)
            second = revision_chat(first, answer, report, 2, 2, 300, 200)
            assert _tokens(config, tokenizer, second) <= bound.prompt_tokens, (skill, reason)


def test_the_longest_document_is_the_one_of_most_tokens_after_its_cut(tokenizer, tmp_path):
    config = _config()
    text, doc_id = longest_document(config, tokenizer, _corpus(tmp_path))
    assert doc_id == "d5" and len(text.split()) == WORDS
    assert longest_document(_config(corpus={"enabled": False}), tokenizer, _corpus(tmp_path)) == (None, "")


@pytest.mark.parametrize("backfill", [False, True])
def test_the_hint_bound_holds_the_longest_environment_code(tokenizer, tmp_path, backfill):
    """A hint is written for an environment the policy wrote (at most designer.max_new_tokens) or, with
    selfplay.backfill, for one of the backfill pool (the library's); the bound holds the longest, within margins."""
    from spade.core.selfplay import backfill_pool

    config = _config(selfplay={"backfill": backfill})
    hint = next(b for b in designer_prompt_bounds(config, tokenizer, _corpus(tmp_path)) if b.what.startswith("hint"))
    chat = ChatTokens(tokenizer, template_kwargs(config.designer.enable_thinking))
    codes = [_written_code(tokenizer, MAX_NEW, seed) for seed in range(5)]
    codes += [entry.source() for entry in backfill_pool(config)] if backfill else []
    longest = max(len(chat.first_prompt(hint_prompt(code, config.selfplay.flavour))) for code in codes)
    assert longest <= hint.prompt_tokens <= longest + 2 * CODE_MARGIN
    assert hint.new_tokens == config.designer.hint_max_new_tokens


def test_a_budget_too_small_is_refused_naming_the_keys(tokenizer, tmp_path):
    """Refused when a prompt the run builds at its start does not fit; a warning when only the upper bound does not."""
    corpus = _corpus(tmp_path)
    fits = check_designer_prompts_fit(_config(), tokenizer, corpus, 32768)
    assert over_budget(fits, 32768) == []
    built = max(b.built + b.new_tokens for b in fits if b.built is not None)
    bound = max(b.total for b in fits)
    assert built < bound
    assert check_designer_prompts_fit(_config(), tokenizer, corpus, built) == fits  # within: no refusal
    lines = over_budget(fits, built)
    assert lines and all("an upper bound" in line and f"over --data.max_len {built}" in line for line in lines)
    with pytest.raises(ConfigError, match=rf"the design prompt \(skill \w+, document d5, 2 library examples\), which "
                                          rf"this run builds at its start, takes \d+ tokens, plus {MAX_NEW} new ones = "
                                          rf"{built}, over --data.max_len {built - 1} .*openrlhf.max_len.*"
                                          r"openrlhf.design_prompt_tokens.*corpus.games_max_words"):
        check_designer_prompts_fit(_config(), tokenizer, corpus, built - 1)
    # the built prompt is what the run's own corpus and memory give: with the memory off, no examples in it
    no_memory = check_designer_prompts_fit(_config(memory={"enabled": False}), tokenizer, corpus, 32768)
    assert max(b.built for b in no_memory if b.built is not None) < built - MAX_NEW
    # no designer on the engines (a pool mode): nothing to bound
    pool = _config(baseline={"mode": "fixed_pool"})
    assert check_designer_prompts_fit(pool, tokenizer, corpus, 1) == []


def test_launch_stops_before_writing_anything(tokenizer, tmp_path, monkeypatch):
    """The launcher runs the check before the command, the run spec and the script: a too-small openrlhf.max_len
    stops it with the prompt named, and the run folder stays empty."""
    pytest.importorskip("openrlhf", reason="openrlhf is not installed (pip install --no-deps openrlhf==0.11.2)")
    from spade.rlhf import launch

    model = tmp_path / "model"
    tokenizer.save_pretrained(model)
    monkeypatch.setattr(launch, "missing_gpu_modules", lambda *a, **k: [])
    monkeypatch.setattr(launch, "check_logger_modules", lambda *a, **k: None)
    monkeypatch.setattr(launch, "environment_guards", lambda config: [])

    def no_command(*args, **kwargs):
        raise AssertionError("the command was built before the prompt check")

    monkeypatch.setattr(launch, "openrlhf_command", no_command)
    run = tmp_path / "run"
    run.mkdir()
    config = _config(agent={"max_context_tokens": 64}, openrlhf={"max_len": 64})
    with pytest.raises(ConfigError, match=r"the design prompt \(skill .*which this run builds at its start.* over "
                                          r"--data.max_len 64"):
        launch.launch(config, str(model), str(_corpus(tmp_path)), str(run))
    assert list(run.iterdir()) == []


def test_the_command_prints_every_bound_and_warns(tokenizer, tmp_path, capsys):
    """`spade prompt-budget`: the run's --data.max_len, each prompt built and bounded, and a warning for a bound over."""
    from spade.cli import main

    model = tmp_path / "model"
    tokenizer.save_pretrained(model)
    corpus = _corpus(tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text("designer: {max_new_tokens: 40}\ncorpus: {games_max_words: 60}\n"
                      "designer_feedback: {revisions: 2}\nagent: {max_context_tokens: 4096}\n"
                      "openrlhf: {design_prompt_tokens: 8000}\n")
    rc = main(["prompt-budget", "--config", str(CONFIG_DIR / "paper" / "spade_games_4b.yaml"), "--config", str(config),
               "--model", str(model), "--corpus", str(corpus)])
    out, err = capsys.readouterr()
    assert rc == 0 and "spade_games_4b: --data.max_len 8040" in out
    assert out.count("design prompt (skill ") == 6 and out.count("revision 2 prompt (skill ") == 6
    assert "built at the start" in out and "hint prompt" in out
    # the revisions' reports, 3,000 characters at a token each, over; the prompts built at the start within
    assert "warning: the longest revision 2 prompt" in err and "design prompt" not in err
