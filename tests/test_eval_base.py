"""The evaluation interface: per-item seeds, resume without redoing items, tidy rows, the chat driver."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from scripted_backend import ScriptedBackend
from spade.evals.base import (Benchmark, Conversation, EvalContext, EvalRun, Item, ItemRecord, evaluate, items_path,
                              mean_stderr, play_conversations, prompt_hash)
from spade.evals import registry as evals_registry
from spade.evals.registry import register_benchmark


@dataclass(frozen=True)
class EchoConfig:
    n: int = 6


class Echo(Conversation):
    """Asks for the item's number; correct on the first try scores 1, on the second 0.5."""

    def __init__(self, number: int):
        super().__init__([{"role": "user", "content": f"Say {number}."}])
        self.number, self.score = number, 0.0

    def respond(self, text):
        if text.strip() == str(self.number):
            self.score = 1.0 if len(self.replies) == 1 else 0.5
            return None
        return "Wrong, try again." if len(self.replies) < 2 else None


class EchoBench(Benchmark):
    name = "echo_test"
    config_cls = EchoConfig

    def __init__(self, config, fail_after=None):
        super().__init__(config)
        self.played, self.fail_after = [], fail_after

    def items(self):
        return [Item(f"q{i}", {"number": i}, group="even" if i % 2 == 0 else "odd") for i in range(self.config.n)]

    def play(self, items, ctx):
        if self.fail_after is not None and len(self.played) >= self.fail_after:
            raise KeyboardInterrupt("simulated kill")
        self.played += [item.id for item in items]
        conversations = [Echo(item.payload["number"]) for item in items]
        play_conversations(ctx, conversations, [ctx.item_seed(item.id) for item in items], max_turns=2)
        return [ItemRecord(item.id, prompt_hash(item.id), c.replies[-1], c.score, len(c.replies), c.tokens, item.group)
                for item, c in zip(items, conversations)]


def reply(prompt, seed):
    """Right at once for even numbers; odd numbers are right on the second try."""
    number = int(prompt.split("Say ")[1].split(".")[0])
    return str(number) if number % 2 == 0 or "Wrong" in prompt else "nope"


def context(tiny_model, seed=3):
    return EvalContext(ScriptedBackend(tiny_model[1], reply), seed=seed, benchmark="echo_test", max_new_tokens=8)


def test_scores_rows_and_groups(tiny_model, tmp_path):
    result = evaluate(EchoBench(EchoConfig()), context(tiny_model), EvalRun("toy", 4, tmp_path / "r.json", 4),
                      progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    assert rows["score"]["value"] == pytest.approx(0.75) and rows["score"]["n"] == 6
    assert rows["score/even"]["value"] == 1.0 and rows["score/odd"]["value"] == 0.5
    assert rows["score/even"]["stderr"] == 0.0
    assert {row["run"] for row in result["rows"]} == {"toy"} and {row["step"] for row in result["rows"]} == {4}
    assert json.loads((tmp_path / "r.json").read_text())["n_items"] == 6
    records = [json.loads(line) for line in items_path(tmp_path / "r.json").read_text().splitlines()]
    assert [r["turns"] for r in records] == [1, 2, 1, 2, 1, 2]


def test_resume_plays_only_missing_items(tiny_model, tmp_path):
    out = tmp_path / "r.json"
    with pytest.raises(KeyboardInterrupt):
        evaluate(EchoBench(EchoConfig(), fail_after=2), context(tiny_model), EvalRun("toy", 0, out, 2), progress=False)
    assert not out.exists() and len(items_path(out).read_text().splitlines()) == 2
    with open(items_path(out), "a") as sink:
        sink.write('{"id": "q4", "prompt_')  # a torn line from the kill
    bench = EchoBench(EchoConfig())
    resumed = evaluate(bench, context(tiny_model), EvalRun("toy", 0, out, 2), progress=False)
    assert bench.played == ["q2", "q3", "q4", "q5"]
    fresh = evaluate(EchoBench(EchoConfig()), context(tiny_model), EvalRun("toy", 0, tmp_path / "f.json", 2),
                     progress=False)
    assert resumed["rows"] == fresh["rows"]
    assert resumed["throughput"]["items_played"] == 4


def test_records_of_another_model_are_not_reused(tiny_model, tmp_path):
    """A training started over writes new checkpoints under the old step names: their evaluations play every item
    again instead of resuming from the old checkpoint's records (the mutation: no identity check, all 6 reused)."""
    out = tmp_path / "r.json"
    evaluate(EchoBench(EchoConfig()), context(tiny_model), EvalRun("toy", 4, out, 2, model_identity="a"),
             progress=False)
    same = EchoBench(EchoConfig())
    evaluate(same, context(tiny_model), EvalRun("toy", 4, out, 2, model_identity="a"), progress=False)
    other = EchoBench(EchoConfig())
    evaluate(other, context(tiny_model), EvalRun("toy", 4, out, 2, model_identity="b"), progress=False)
    assert (same.played, len(other.played)) == ([], 6)
    (tmp_path / "r.items.model").unlink()  # records without a note (written before notes existed): not reused
    legacy = EchoBench(EchoConfig())
    evaluate(legacy, context(tiny_model), EvalRun("toy", 4, out, 2, model_identity="b"), progress=False)
    assert len(legacy.played) == 6


def test_model_identity(tmp_path):
    from spade.evals.base import model_identity

    assert model_identity(tmp_path) == ""
    (tmp_path / "provenance.json").write_text('{"weights_sha256": "1"}')
    base = model_identity(tmp_path)
    (tmp_path / "trainer_state.json").write_text('{"next_step": 2}')
    assert base and model_identity(tmp_path) not in ("", base)  # a checkpoint: its trainer state


def test_item_seeds_do_not_depend_on_batching(tiny_model, tmp_path):
    seen = {}

    def record_seed(prompt, seed):
        seen.setdefault(prompt, set()).add(seed)
        return reply(prompt, seed)

    for batch in (1, 4):
        ctx = EvalContext(ScriptedBackend(tiny_model[1], record_seed), seed=3, benchmark="echo_test")
        evaluate(EchoBench(EchoConfig()), ctx, EvalRun("toy", 0, tmp_path / f"b{batch}.json", batch), progress=False)
    assert all(len(seeds) == 1 for seeds in seen.values())


def test_max_items_takes_first_ids(tiny_model, tmp_path):
    result = evaluate(EchoBench(EchoConfig()), context(tiny_model), EvalRun("toy", 0, tmp_path / "r.json", 4, 3),
                      progress=False)
    assert result["n_items"] == 3


def test_duplicate_registration_raises(monkeypatch):
    class Twice(Benchmark):
        name = "twice_test"

    # a registry of its own: a test benchmark left in the real one shows up in later tests (spade compute, eval list)
    monkeypatch.setattr(evals_registry, "_REGISTRY", dict(evals_registry.registry()))
    register_benchmark(Twice)
    with pytest.raises(ValueError, match="already registered"):
        register_benchmark(Twice)


def test_mean_stderr_by_hand():
    mean, stderr = mean_stderr([0.0, 1.0, 1.0, 0.0])
    assert mean == 0.5 and stderr == pytest.approx((1 / 3) ** 0.5 / 2)
    assert mean_stderr([1.0])[1] != mean_stderr([1.0])[1]  # nan for one value


def test_each_conversation_keeps_its_own_token_budget(tiny_model):
    class Once(Conversation):
        def respond(self, text):
            return None

    tokenizer = tiny_model[1]
    long_reply = " ".join(["word"] * 40)
    ctx = EvalContext(ScriptedBackend(tokenizer, lambda prompt, seed: long_reply), seed=0, benchmark="echo_test",
                      max_new_tokens=30)
    short, near_limit = Once([{"role": "user", "content": "hi"}]), Once([{"role": "user", "content": "x " * 200}])
    text = tokenizer.apply_chat_template(near_limit.messages, tokenize=False, add_generation_prompt=True)
    prompt_len = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    ctx.max_context_tokens = prompt_len + 5
    play_conversations(ctx, [short, near_limit], [1, 2], max_turns=1)
    assert short.tokens == 30 and near_limit.tokens == 5  # the near-limit row is cut, the other is not


def test_cut_to_limit_cuts_ids_logprobs_and_text(tiny_model):
    from spade.inference.generation import Generation, cut_to_limit

    tokenizer = tiny_model[1]
    ids = tokenizer("one two three four", add_special_tokens=False)["input_ids"]
    whole = Generation(tokenizer.decode(ids), ids, [-0.5] * len(ids), "stop")
    assert cut_to_limit(whole, len(ids), tokenizer) is whole
    cut = cut_to_limit(whole, 2, tokenizer)
    assert cut.completion_ids == ids[:2] and cut.logprobs == [-0.5, -0.5] and cut.finish_reason == "length"
    assert cut.text == tokenizer.decode(ids[:2], skip_special_tokens=True)
