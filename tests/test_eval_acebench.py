"""ACEBench-Agent adapter against a fake checkout (tests/fixtures/evals/acebench/ACEBench, real layout and
names) and a local stand-in OpenAI-compatible server playing the multi-turn user. Scripted agents with
known right and wrong API calls score 1 and 0 through the checkout's own checker and app classes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from scripted_backend import ScriptedBackend
from user_server import UserServer

from spade.configtools import ConfigError, from_dict
from spade.evals.acebench import (
    ACEBench,
    ACEBenchConfig,
    CallSyntaxError,
    decode_calls,
    end_state_check,
    process_accuracy,
)
from spade.evals.base import DataMissing, EvalContext, EvalRun, evaluate

CHECKOUT = Path(__file__).parent / "fixtures" / "evals" / "acebench" / "ACEBench"


# ------------------------------------------------------------------------------------------------ the user
def user_reply(body: dict) -> str:
    """Grace wants to message Frank; she answers what the agent asks and ends with 'finish conversation'."""
    last = body["messages"][-1]["content"]
    if last == "Is there anything you need help with today?":
        return "Hi, I'd like to send a message to Frank."
    if "What should the message say?" in last:
        return "Are you free tomorrow?"
    return "finish conversation"


@pytest.fixture
def user_server():
    server = UserServer(lambda body: {"content": user_reply(body)})
    yield server
    server.close()


# ------------------------------------------------------------------------------------------------ the agent
def scripted_agent(wrong: bool):
    """Right API calls; with ``wrong``, a wrong argument in the state-changing call (or a wrong id)."""

    def reply(prompt: str, seed: int) -> str:
        history = prompt.split("history", 1)[1]
        if "Send Frank a message saying" in prompt:  # multi-step: state from the number of execution results
            done = history.count("execution result:")
            text = "Lunch?" if wrong else "Lunch at noon?"
            return ["[turn_on_wifi()]", f"[send_message(sender_name='Eve', receiver_name='Frank', message='{text}')]",
                    "finish conversation"][min(done, 2)]
        if "Delete the message with ID 1" in prompt:
            return "finish conversation" if "execution result:" in history else \
                f"[delete_message(message_id={2 if wrong else 1})]"
        # multi-turn (Grace): the history holds user:, agent: and execution: lines
        executions = history.count("execution:")
        if executions == 0:
            return "[turn_on_wifi()]"
        if executions == 1 and "Are you free tomorrow?" not in history:
            return "What should the message say?"
        if executions == 1:
            sender, receiver = ("Frank", "Grace") if wrong else ("Grace", "Frank")
            return f"[send_message(sender_name='{sender}', receiver_name='{receiver}', message='Are you free tomorrow?')]"
        return "Your message has been sent."

    return reply


def config(server=None, **overrides) -> ACEBenchConfig:
    base = ACEBenchConfig(checkout=str(CHECKOUT), user_base_url=server.url if server else "", user_model="user-sim",
                          user_api_key_env="")
    return replace(base, **overrides)


def run(tiny_model, tmp_path, cfg, reply, name="r"):
    ctx = EvalContext(ScriptedBackend(tiny_model[1], reply), seed=5, benchmark="acebench", max_new_tokens=512)
    result = evaluate(ACEBench(cfg), ctx, EvalRun("toy", 0, tmp_path / f"{name}.json", batch_size=4), progress=False)
    records = {json.loads(line)["id"]: json.loads(line)
               for line in (tmp_path / f"{name}.items.jsonl").read_text().splitlines()}
    return {row["metric"]: row for row in result["rows"]}, records


# ------------------------------------------------------------------------------------------------ tests
def test_right_calls_score_one(tiny_model, tmp_path, user_server):
    rows, records = run(tiny_model, tmp_path, config(user_server), scripted_agent(wrong=False))
    assert sorted(records) == ["multi_step/agent_multi_step_0", "multi_step/agent_multi_step_1",
                               "multi_turn/agent_multi_turn_0"]
    assert all(r["score"] == 1.0 and r["extra"]["process_accuracy"] == 1.0 for r in records.values())
    assert rows["multi_step"]["value"] == 1.0 and rows["multi_turn"]["value"] == 1.0 and rows["avg"]["value"] == 1.0
    step0 = records["multi_step/agent_multi_step_0"]
    assert step0["turns"] == 3 and step0["extra"]["process"] == [
        "[turn_on_wifi()]", "[send_message(sender_name='Eve', receiver_name='Frank', message='Lunch at noon?')]"]
    # the end state went through a JSON round trip (int inbox keys became strings, as in ACEBench's result file)
    assert "3" in step0["extra"]["state"][1]["MessageApi"]["inbox"]
    turn = records["multi_turn/agent_multi_turn_0"]["extra"]
    assert turn["dialogue"][-1] == {"sender": "user", "recipient": "agent", "message": "finish conversation"}
    assert records["multi_turn/agent_multi_turn_0"]["turns"] == 4


def test_wrong_calls_score_zero_with_process_by_hand(tiny_model, tmp_path, user_server):
    rows, records = run(tiny_model, tmp_path, config(user_server), scripted_agent(wrong=True))
    assert [r["score"] for r in records.values()] == [0.0, 0.0, 0.0]
    # step 0: turn_on_wifi matches, the send_message milestone does not -> 1/2; step 1: 0/1; turn 0: 1/2
    process = {key: r["extra"]["process_accuracy"] for key, r in records.items()}
    assert process == {"multi_step/agent_multi_step_0": 0.5, "multi_step/agent_multi_step_1": 0.0,
                       "multi_turn/agent_multi_turn_0": 0.5}
    assert rows["multi_step/process"]["value"] == pytest.approx(0.25)
    assert rows["avg"]["value"] == 0.0


def test_user_simulator_messages_follow_acebench(tiny_model, tmp_path, user_server):
    run(tiny_model, tmp_path, config(user_server, categories=["multi_turn"]), scripted_agent(wrong=False))
    first, last = user_server.requests[0]["body"], user_server.requests[-1]["body"]
    assert first["model"] == "user-sim" and first["temperature"] == 0.001 and first["max_tokens"] == 1000
    assert "Your name is Grace" in first["messages"][0]["content"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    # the user model's own replies are stored with role "system", as ACEBench's APIUSER does
    assert [m["role"] for m in last["messages"]][:4] == ["system", "user", "system", "user"]
    assert last["messages"][3]["content"] == "What should the message say?"


def test_mixed_items_by_hand(tiny_model, tmp_path, user_server):
    """Right on step 0 and turn 0, wrong on step 1 -> multi_step 0.5, multi_turn 1.0, avg 0.75."""
    right, wrong = scripted_agent(False), scripted_agent(True)
    rows, _ = run(tiny_model, tmp_path, config(user_server),
                  lambda p, s: (wrong if "Delete the message" in p else right)(p, s))
    assert rows["multi_step"]["value"] == 0.5 and rows["multi_step"]["n"] == 2
    assert rows["multi_turn"]["value"] == 1.0 and rows["avg"]["value"] == pytest.approx(0.75)


def test_unparseable_replies_get_acebench_feedback(tiny_model, tmp_path):
    cfg = config(categories=["multi_step"], max_items=1, max_dialog_turns=6)
    _, records = run(tiny_model, tmp_path, cfg, lambda prompt, seed: "I need more details.")
    record = records["multi_step/agent_multi_step_0"]
    assert record["score"] == 0.0 and record["turns"] == 3  # 6 messages = 3 agent + 3 execution
    assert record["extra"]["dialogue"][2]["message"].startswith("Please do not ask me any questions")
    assert record["extra"]["end_state_errors"] == ["wrong number of class"]  # nothing was ever executed


def test_decode_calls_never_evaluates():
    assert decode_calls("[turn_on_wifi()]") == [("turn_on_wifi", {})]
    assert decode_calls(" send_message(sender_name='Eve', message=\"hi\")") == [
        ("send_message", {"sender_name": "Eve", "message": "hi"})]
    assert decode_calls("[a(x=2*3, y=-1, z=[1, (2, 3)]), b(w=Eve)]") == [
        ("a", {"x": 6, "y": -1, "z": [1, (2, 3)]}), ("b", {"w": "Eve"})]
    # a call in an argument stays text; nothing is run
    assert decode_calls("[f(x=__import__('os').system('false'))]") == [("f", {"x": "__import__('os').system('false')"})]
    assert decode_calls("done") == []  # ACEBench treats any other expression as an empty call list
    for text in ("finish conversation", "[f(x=lambda: 1)]", "[f(cfg={'a': 1})]", "[f(), 3]", "[f(x=2**9)]", ""):
        with pytest.raises(CallSyntaxError):
            decode_calls(text)


def test_end_state_check_and_process_by_hand():
    checker = lambda model, answer: {"valid": model == answer, "error": ["differs"]}
    state = [{"BaseApi": {"wifi": True}}, {"ReminderApi": {"reminder_list": {}}}]
    assert end_state_check(state, [{"BaseApi": {"wifi": True}}, {"ReminderApi": {"reminder_list": {}}}], checker) == (
        True, [])
    assert end_state_check(state, [{"BaseApi": {"wifi": False}}], checker) == (False, ["wrong number of class"])
    # ACEBench quirk kept: a ground-truth class with no same-named result class re-uses the previous verdict
    assert end_state_check(state, [{"BaseApi": {"wifi": True}}, {"ReminderAPI": {"x": 1}}], checker)[0] is True
    assert process_accuracy(["[a()]", "[x()]", "[b()]"], ["[a()]", "[b()]", "[c()]"], False) == pytest.approx(2 / 3)
    assert process_accuracy(["[b()]", "[a()]"], ["[a()]", "[b()]"], False) == 0.5  # order matters
    assert process_accuracy([], [["[a()]"], ["[b()]", "[c()]"]], False) == 0.0
    assert process_accuracy(["[b()]", "[c()]"], [["[a()]"], ["[b()]", "[x()]"]], False) == 0.5  # best path
    assert process_accuracy(["[c()]"], ["[b()]", "[c()]"], False) == 0.0  # a missed milestone consumes the rest
    assert process_accuracy([], ["[a()]"], True) == 1.0


# ------------------------------------------------------------------------------------------------ failures
def test_missing_checkout_fails_before_any_model(tmp_path):
    bench = ACEBench(ACEBenchConfig(checkout=str(tmp_path / "nowhere"), categories=["multi_step"]))
    with pytest.raises(DataMissing) as info:
        bench.check_data()
    assert "git clone https://github.com/ACEBench/ACEBench" in str(info.value)
    assert "eval.acebench.checkout" in str(info.value)
    with pytest.raises(DataMissing, match="data_zh"):
        ACEBench(config(categories=["multi_step"], language="zh")).check_data()


def test_config_problems_name_the_keys():
    with pytest.raises(ConfigError, match="eval.acebench.categories.*allowed"):
        ACEBench(config(categories=["multi_hop"])).check_data()
    ACEBench(config(categories=["multi_step"])).check_data()  # no user simulator needed
    with pytest.raises(ConfigError) as info:
        ACEBench(config(categories=["multi_turn"])).check_data()
    assert all(key in str(info.value) for key in ("eval.acebench.user_base_url", "eval.acebench.user_model",
                                                   "eval.acebench.user_api_key_env"))
    with pytest.raises(ConfigError, match="eval.acebench.language"):
        from_dict(ACEBenchConfig, {"language": "fr"}, "eval.acebench")


def test_heavy_modules_are_not_imported(tiny_model, tmp_path):
    import sys

    run(tiny_model, tmp_path, config(categories=["multi_step"], max_items=1), scripted_agent(False))
    assert "model_inference.common_inference" not in sys.modules
    assert "model_inference.multi_turn.APIModel_user" not in sys.modules


def test_smoke_real_backend(tiny_model, tmp_path):
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = tiny_model
    ctx = EvalContext(HFBackend(model, tokenizer), seed=1, benchmark="acebench", max_new_tokens=4)
    cfg = config(categories=["multi_step"], max_items=1, max_dialog_turns=4)
    result = evaluate(ACEBench(cfg), ctx, EvalRun("toy", 0, tmp_path / "s.json", batch_size=1), progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    assert rows["multi_step"]["n"] == 1 and rows["multi_step"]["value"] in (0.0, 1.0)
