"""BFCL v4 multi-turn: protocol, decoding without eval, the package's checker, metrics by hand."""

from __future__ import annotations

import ast
import inspect
import json
import math

import pytest

from scripted_backend import ScriptedBackend
from spade.config import SpadeConfig
from spade.configtools import ConfigError, from_dict
from spade.core import tool_calls
from spade.evals import bfcl
from spade.evals.base import EvalContext, EvalRun, ItemRecord, evaluate, items_path, prompt_hash
from spade.evals.bfcl import (ApiSession, BfclMultiTurn, BfclMultiTurnConfig, Call, CallFormatError, check_entry,
                              decode_calls, load_category, session_for)

TOOL = "[{'role': 'tool'"


def keyword_call(session: ApiSession, text: str) -> str:
    """A ground-truth call string (may use positional arguments) rewritten with keywords only."""
    node = ast.parse(text, mode="eval").body
    method = session.methods[node.func.id]
    bound = inspect.signature(method).bind(*[ast.literal_eval(a) for a in node.args],
                                           **{k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return f"{node.func.id}({', '.join(f'{k}={v!r}' for k, v in bound.arguments.items())})"


def user_turns(prompt: str) -> list[str]:
    return prompt.split("<|im_start|>user\n")[1:]


def known_entries(categories) -> list:
    """(entry, ground truth) of every entry of ``categories``."""
    return [pair for category in categories for pair in zip(*load_category(category))]


def replay_script(categories, wrong=None):
    """Replies with each turn's ground-truth calls in one step, then a plain text that ends the turn.

    ``wrong`` = (old, new): replace that text in the replayed calls (a wrong argument).
    """
    known = known_entries(categories)

    def reply(prompt, seed):
        entry, truth = next((e, t) for e, t in known if e["question"][0][0]["content"] in prompt)
        turns = user_turns(prompt)
        if turns[-1].startswith(TOOL):
            return "Done."
        turn = sum(1 for text in turns if not text.startswith(TOOL)) - 1
        if not truth[turn]:
            return "Which value should I use?"
        session = session_for(entry)
        calls = "[" + ", ".join(keyword_call(session, c) for c in truth[turn]) + "]"
        return calls.replace(*wrong) if wrong else calls

    return reply


def run(tmp_path, tokenizer, reply, name="r", **config):
    config.setdefault("tool_format", "prompting")  # these tests script prompting-mode replies (native: test_native_*)
    bench = BfclMultiTurn(BfclMultiTurnConfig(**config))
    bench.check_data()
    ctx = EvalContext(ScriptedBackend(tokenizer, reply), seed=7, benchmark="bfcl_multi_turn", max_new_tokens=512)
    result = evaluate(bench, ctx, EvalRun("toy", 0, tmp_path / f"{name}.json", 4), progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    records = [ItemRecord(**json.loads(line))
               for line in items_path(tmp_path / f"{name}.json").read_text().splitlines()]
    return rows, records


def test_items_are_evenly_spaced_and_validated():
    items = BfclMultiTurn(BfclMultiTurnConfig(categories=["base", "miss_func"], max_entries_per_category=3)).items()
    assert [item.id for item in items] == ["base/000", "base/066", "base/133", "miss_func/000", "miss_func/066",
                                           "miss_func/133"]
    assert len(BfclMultiTurn(BfclMultiTurnConfig()).items()) == 800
    with pytest.raises(ConfigError, match=r"eval\.bfcl_multi_turn\.categories.*miss_func"):
        BfclMultiTurn(BfclMultiTurnConfig(categories=["base", "nope"])).items()


def test_shortest_selection_keeps_the_entries_with_the_shortest_first_prompt():
    """selection: shortest (the tool-use toy) keeps, per category, the entries whose first prompt has the fewest
    characters, in file order; ties go to the earlier entry."""
    assert bfcl.shortest_indices([5, 3, 9, 3, 1], 3) == [1, 3, 4]
    assert bfcl.shortest_indices([2, 2, 2], 2) == [0, 1] and bfcl.shortest_indices([4, 1], 0) == [0, 1]
    config = BfclMultiTurnConfig(categories=["base", "miss_func"], max_entries_per_category=2, selection="shortest")
    items = BfclMultiTurn(config).items()
    for category in ("base", "miss_func"):
        entries, _ = load_category(category)
        lengths = sorted(bfcl.first_prompt_chars(entry) for entry in entries)
        chosen = [bfcl.first_prompt_chars(entries[item.payload["index"]]) for item in items if item.group == category]
        assert len(chosen) == 2 and sorted(chosen) == lengths[:2], category
    assert [item.id for item in items] == ["base/010", "base/029", "miss_func/003", "miss_func/009"]
    with pytest.raises(ConfigError, match=r"eval\.bfcl_multi_turn\.selection.*'longest'.*shortest"):
        from_dict(SpadeConfig, {"eval": {"bfcl_multi_turn": {"selection": "longest"}}})


def test_withheld_functions_are_announced_later():
    entries, _ = load_category("miss_func")
    entry = entries[0]  # sort is withheld until turn 3
    system = bfcl.first_messages(entry)[0]["content"]
    assert system.startswith("You are an expert in composing functions.")
    assert '"name": "sort"' not in system and '"name": "mv"' in system
    assert "'name': 'sort'" in bfcl.turn_message(entry, 3)
    assert bfcl.turn_message(entry, 3).endswith("I have updated some more functions you can choose from. What about now?")


def test_ground_truth_replay_scores_one(tiny_model, tmp_path):
    records = []
    for category in ("base", "miss_func", "miss_param"):  # their entry 0 opens with the same question
        rows, mine = run(tmp_path, tiny_model[1], replay_script([category]), name=category, categories=[category],
                         max_entries_per_category=1)
        assert rows["accuracy"]["value"] == 1.0 and rows[f"accuracy/{category}"]["value"] == 1.0
        records += mine
    for record in records:
        category, index = record.id.split("/")
        truth = load_category(category)[1][int(index)]
        # two replies (calls, then "Done.") per turn with calls, one for a turn whose right answer is to ask
        assert record.turns == sum(2 if calls else 1 for calls in truth)
        assert record.extra["stop_reason"] == "done" and record.extra["error_type"] == ""
        assert len(record.extra["calls"]) == len(truth)
    assert [sum(not calls for calls in truths[0]) for truths in (load_category(c)[1] for c in ("base", "miss_param"))] \
        == [0, 1]  # the miss_param entry has a turn with nothing to call
    base = next(r for r in records if r.id == "base/000")
    assert base.extra["calls"][0] == [["cd(folder='document')", "mkdir(dir_name='temp')",
                                       "mv(source='final_report.pdf', destination='temp')"]]
    first = tiny_model[1].apply_chat_template(bfcl.first_messages(load_category("base")[0][0]), tokenize=False,
                                              add_generation_prompt=True)
    assert base.prompt_hash == prompt_hash(first)


def test_wrong_argument_and_empty_answers_score_zero(tiny_model, tmp_path):
    rows, records = run(tmp_path, tiny_model[1], replay_script(["base"], wrong=("dir_name='temp'", "dir_name='tmp'")),
                        name="wrong", categories=["base"], max_entries_per_category=1)
    assert rows["accuracy"]["value"] == 0.0
    assert records[0].extra["error_type"] == "multi_turn:instance_state_mismatch"

    rows, records = run(tmp_path, tiny_model[1], lambda prompt, seed: "I am not sure what to do.", name="empty",
                        categories=["base", "long_context"], max_entries_per_category=1)
    assert rows["accuracy"]["value"] == 0.0 and rows["accuracy"]["n"] == 2
    assert {r.extra["error_type"] for r in records} == {"multi_turn:empty_turn_model_response"}
    assert [r.turns for r in records] == [4, 4]  # one text reply per user turn


def test_step_limit_force_terminates(tiny_model, tmp_path):
    rows, records = run(tmp_path, tiny_model[1], lambda prompt, seed: "[pwd()]", name="loop",
                        categories=["base"], max_entries_per_category=1, max_steps_per_turn=2)
    assert rows["accuracy"]["value"] == 0.0
    record = records[0]
    assert record.extra["force_quit"] and record.turns == 3  # count > 2 after the third executed step
    assert record.extra["error_type"] == "multi_turn:force_terminated" and record.extra["user_turns_played"] == 1


@pytest.mark.parametrize("reply", [
    "[__import__('os').system('touch {m}')]",
    "[ls(a=__import__('os').system('touch {m}'))]",
    "[ls(a=1 + __import__('os').system('touch {m}'))]",
    "[ls(a=(lambda: __import__('os').system('touch {m}'))())]",
    "[ls(**{{'a': True}})]",
])
def test_malicious_replies_are_not_decoded(reply, tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(CallFormatError):
        decode_calls(reply.format(m=marker))
    assert not marker.exists()


def test_malicious_calls_are_never_executed(tiny_model, tmp_path):
    marker = tmp_path / "pwned"
    entries, truths = load_category("base")
    session = session_for(entries[0])
    assert session.execute_one(Call("__import__", {"name": "os"})) == \
        "Error during execution: name '__import__' is not defined"
    assert session.execute_one(Call("eval", {"source": f"open('{marker}', 'w')"})).startswith("Error during execution")
    assert session.execute_one(Call("_load_scenario", {"scenario": {}})).endswith("is not defined")
    assert session.execute_one(Call("kill", {})) == "Error during execution: Function call kill is not allowed."
    assert session.execute_one(Call("ls", {"a": True})) == '{"current_directory_content": ["document", "archive"]}'
    # the checker replays the model's steps through the same executor, never through eval
    exec_call = Call("exec", {"source": f"open('{marker}', 'w')"})
    result = check_entry(entries[0], truths[0], [[[exec_call]], [], [], []])
    assert not result["valid"] and not marker.exists()
    rows, records = run(tmp_path, tiny_model[1], lambda p, s: f"[__import__('os').system('touch {marker}')]",
                        name="evil", categories=["base"], max_entries_per_category=1)
    assert rows["accuracy"]["value"] == 0.0 and records[0].extra["decode_errors"] == 4 and not marker.exists()


def test_checker_reruns_are_independent():
    """The package caches API instances in module globals; repeated checks must not see each other's state."""
    entries, truths = load_category("base")
    session = session_for(entries[0])
    decoded = [[[decode_calls("[" + ", ".join(keyword_call(session, c) for c in turn) + "]")][0]] for turn in truths[0]]
    assert check_entry(entries[0], truths[0], decoded)["valid"]
    assert check_entry(entries[0], truths[0], decoded)["valid"]
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    assert not [name for name in vars(multi_turn_utils) if name.startswith("spade_check_")]


def test_aggregate_is_unweighted_mean_of_categories():
    def rec(group, score):
        return ItemRecord(f"{group}/{score}", "h", "", score, group=group)

    records = [rec("base", 1.0), rec("base", 0.0)] + [rec("miss_func", s) for s in (1.0, 1.0, 1.0, 0.0)]
    metrics = {m.name: m for m in BfclMultiTurn(BfclMultiTurnConfig()).aggregate(records)}
    assert metrics["accuracy/base"].value == 0.5 and metrics["accuracy/miss_func"].value == 0.75
    assert metrics["accuracy"].value == pytest.approx(0.625) and metrics["accuracy"].n == 6  # item mean would be 0.667
    assert metrics["accuracy"].stderr == pytest.approx(math.sqrt(0.5 ** 2 + 0.25 ** 2) / 2)
    assert "accuracy/long_context" not in metrics
    assert metrics["context_limit_rate"].value == 0.0 and metrics["context_limit_rate"].n == 6


def test_hf_backend_smoke(tiny_model, tmp_path, monkeypatch):
    """The real HFBackend on the tiny model. BFCL's system prompt (10-23k tiny-tokenizer tokens) does not
    fit the tiny model's 4,096 positions, so the function docs are replaced by a short stand-in here."""
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = tiny_model
    monkeypatch.setattr(bfcl, "system_prompt", lambda functions: "Call functions as [f(a=1)]. Functions: ls, cd.")
    bench = BfclMultiTurn(BfclMultiTurnConfig(categories=["base"], max_entries_per_category=1, max_steps_per_turn=1,
                                              tool_format="prompting"))
    ctx = EvalContext(HFBackend(model, tokenizer, batch_size=1), seed=1, benchmark="bfcl_multi_turn",
                      max_new_tokens=8, max_context_tokens=4096)
    result = evaluate(bench, ctx, EvalRun("toy", 0, tmp_path / "hf.json", 1), progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    assert rows["accuracy"]["n"] == 1 and rows["accuracy"]["value"] in (0.0, 1.0)
    assert 1 <= result["throughput"]["generated_tokens"] <= 8 * 4 * 2


# ------------------------------------------------------------------------------------------------ native format
def native_script(categories, calls_seen: list):
    """Native-format replies: each turn's ground-truth calls as <tool_call> blocks in one step (keyword arguments),
    then a plain text that ends the turn once the last message holds tool results."""
    known = known_entries(categories)

    def reply(prompt, seed):
        entry, truth = next((e, t) for e, t in known if e["question"][0][0]["content"] in prompt)
        calls_seen.append(('"name": "mkdir"' in prompt, None))  # every prompt carries the docs (tools=)
        turns = user_turns(prompt)
        if prompt.rstrip().endswith("<|im_start|>assistant") and "<|im_start|>tool\n" in prompt.rsplit(
                "<|im_start|>assistant\n", 2)[-2]:
            return "Done."
        turn = len(turns) - 1
        if not truth[turn]:
            return "Which value should I use?"
        session = session_for(entry)
        blocks = []
        for text in truth[turn]:
            node = ast.parse(keyword_call(session, text), mode="eval").body
            arguments = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            blocks.append("<tool_call>" + json.dumps({"name": node.func.id, "arguments": arguments}) + "</tool_call>")
        calls_seen.append((True, len(blocks)))
        return "\n".join(blocks)

    return reply


def test_native_format_renders_tools_and_returns_tool_messages(tiny_model, tmp_path):
    """No system prompt, the docs through tools= (the tiny template renders them), every call of a step executed
    and sent back as its own tool message; the ground truth replayed this way scores 1."""
    seen: list = []
    rows, records = run(tmp_path, tiny_model[1], native_script(["base"], seen), name="native", categories=["base"],
                        max_entries_per_category=1, tool_format="native")
    assert rows["accuracy"]["value"] == 1.0
    base = records[0]
    truth = load_category("base")[1][0]
    assert base.extra["calls"][0] == [["cd(folder='document')", "mkdir(dir_name='temp')",
                                       "mv(source='final_report.pdf', destination='temp')"]]
    assert base.turns == sum(2 if calls else 1 for calls in truth)
    assert [n for _, n in seen if n is not None][0] == 3 and all(docs for docs, _ in seen)
    entry = load_category("base")[0][0]
    first = tiny_model[1].apply_chat_template(entry["question"][0], tools=entry["function"], tokenize=False,
                                              add_generation_prompt=True)
    assert base.prompt_hash == prompt_hash(first) and "You are an expert in composing functions" not in first
    assert '"name": "mkdir"' in first


def test_native_format_sends_one_tool_message_per_call(tiny_model):
    entry = load_category("base")[0][0]
    support = tool_calls.TemplateSupport(tools=True, tool_role=True)
    conversation = bfcl.BfclConversation(entry, 20, support)
    assert conversation.messages == entry["question"][0] and conversation.tools == entry["function"]
    replies = conversation.respond('<tool_call>{"name": "pwd", "arguments": {}}</tool_call>'
                                   '<tool_call>{"name": "cd", "arguments": {"folder": "document"}}</tool_call>')
    assert [m["role"] for m in replies] == ["tool", "tool"]
    assert json.loads(replies[0]["content"]) == {"current_working_directory": "/workspace"}  # the root of initial_config
    assert json.loads(replies[1]["content"]) == {"current_working_directory": "document"}
    assert conversation.decoded == [[[Call("pwd", {}), Call("cd", {"folder": "document"})]]]
    # a malformed call is a decoding failure: it ends the turn, as in prompting mode
    assert conversation.respond('<tool_call>{"name": "pwd", </tool_call>') == bfcl.turn_message(entry, 1)
    assert conversation.decode_errors == 1
    # a template without tools= or a tool role: the docs as text, the results as user messages
    plain = bfcl.BfclConversation(entry, 20, tool_calls.TemplateSupport(tools=False, tool_role=False))
    assert plain.tools is None and '"name": "mkdir"' in plain.messages[-1]["content"]
    assert plain.respond('<tool_call>{"name": "pwd", "arguments": {}}</tool_call>')[0]["role"] == "user"


def test_records_of_one_tool_format_are_not_reused_for_the_other():
    """Item records are keyed by the tool-call format (``protocol``): a native record is another measurement."""
    from spade.evals.base import records_key

    native, prompting = (BfclMultiTurn(BfclMultiTurnConfig(tool_format=f)).protocol() for f in ("native", "prompting"))
    assert native == {"tool_format": "native"} and prompting == {"tool_format": "prompting"}
    assert records_key("m", {}, native) != records_key("m", {}, prompting)
