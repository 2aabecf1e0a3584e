"""tau2-bench adapter against a fake checkout (tests/fixtures/evals/tau2/tau2-bench, real layout and names)
and a local stand-in OpenAI-compatible server playing the user. Scripted agents with known right and
wrong tool calls score 1 and 0 through the checkout's own evaluator."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from dataclasses import replace
from pathlib import Path

import pytest
from scripted_backend import ScriptedBackend
from tau2_modules import isolated_tau2
from user_server import UserServer

from spade.configtools import ConfigError, from_dict
from spade.evals import openai_compat
from spade.evals.base import DataMissing, EvalContext, EvalRun, evaluate
from spade.core import tool_calls
from spade.evals.base import prompt_hash
from spade.evals.tau2 import TOOLS_PROMPT, Tau2, Tau2Config, agent_system_prompt, parse_agent_reply, tool_replies

CHECKOUT = Path(__file__).parent / "fixtures" / "evals" / "tau2" / "tau2-bench"
TELECOM = "[service_issue]airplane_mode_on[PERSONA:None]"


@pytest.fixture(autouse=True, scope="module")
def fixture_tau2():
    """The fake checkout's tau2, not the installed package (see tests/tau2_modules.py)."""
    with isolated_tau2():
        yield


# ------------------------------------------------------------------------------------------------ the user
def user_reply(body: dict) -> dict:
    """The simulated customer: the scenario is in the system prompt; the agent's words arrive as 'user'."""
    messages = body["messages"]
    scenario, last = messages[0]["content"], messages[-1]
    opening = last["role"] == "user" and last["content"].startswith("Hi! How can I help")
    if "cancel order #W1" in scenario:
        return {"content": "Please cancel order #W1, I am Ada Lovelace, zip 10001; reason: no longer needed."
                if opening else "Thanks. ###STOP###"}
    if "status of order #W1" in scenario:
        return {"content": "What is the status of order #W1? I am Ada Lovelace, zip 10001."
                if opening else "Thanks. ###STOP###"}
    if "no service" in scenario:
        if opening:
            return {"content": "My phone shows no service."}
        if last["role"] == "tool":
            return {"content": "Service is back, thanks. ###STOP###"}
        if "airplane" in last["content"]:
            return {"content": None, "tool_calls": [{"id": "u1", "type": "function", "function": {
                "name": "toggle_airplane_mode", "arguments": "{}"}}]}
        return {"content": "Still no service. ###STOP###"}
    return {"content": "I do not know. ###STOP###"}


@pytest.fixture
def user_server(monkeypatch):
    monkeypatch.setenv("TAU2_TEST_KEY", "sk-test")
    server = UserServer(user_reply)
    yield server
    server.close()


# ------------------------------------------------------------------------------------------------ the agent
def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def tool_results(prompt: str) -> int:
    """Tool results the agent has seen: <tool_response> blocks (text format) or tool messages (native; the tiny
    model's template renders them as ``<|im_start|>tool``)."""
    return prompt.count("<tool_response>\n") + prompt.count("<|im_start|>tool\n")


def scripted_agent(wrong: set):
    """Right tool calls and answers, except for the tasks named in ``wrong``."""

    def reply(prompt: str, seed: int) -> str:
        results = tool_results(prompt)
        if "Please cancel order #W1" in prompt:
            if results == 0:
                return call("find_user_id_by_name_zip", first_name="Ada", last_name="Lovelace", zip="10001")
            if results == 1:
                reason = "changed my mind" if "retail/0" in wrong else "no longer needed"
                return call("cancel_pending_order", order_id="#W1", reason=reason)
            return "Your order #W1 is cancelled."
        if "status of order #W1" in prompt:
            if results == 0:
                return call("get_order_details", order_id="#W1")
            return "It has shipped." if "retail/1" in wrong else "Order #W1 is still pending."
        if "no service" in prompt:
            return "Please restart your phone." if "telecom" in wrong else "Please turn off airplane mode."
        return "How can I help?"

    return reply


def config(server, **overrides) -> Tau2Config:
    base = Tau2Config(checkout=str(CHECKOUT), domains=["retail", "telecom"], user_base_url=server.url,
                      user_model="user-sim", user_api_key_env="TAU2_TEST_KEY", trials=1)  # one episode per task
    return replace(base, **overrides)


def run(tiny_model, tmp_path, cfg, reply, name="r"):
    ctx = EvalContext(ScriptedBackend(tiny_model[1], reply), seed=7, benchmark="tau2", max_new_tokens=512)
    result = evaluate(Tau2(cfg), ctx, EvalRun("toy", 0, tmp_path / f"{name}.json", batch_size=4), progress=False)
    records = {json.loads(line)["id"]: json.loads(line)
               for line in (tmp_path / f"{name}.items.jsonl").read_text().splitlines()}
    return {row["metric"]: row for row in result["rows"]}, records


# ------------------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("tool_format", ["native", "text"])
def test_right_calls_pass_wrong_calls_fail(tiny_model, tmp_path, user_server, tool_format):
    rows, records = run(tiny_model, tmp_path, config(user_server, tool_format=tool_format), scripted_agent(set()),
                        "right")
    assert {r["extra"]["agent_format"] for r in records.values()} == {tool_format}
    assert sorted(records) == ["retail/0/0", "retail/1/0", f"telecom/{TELECOM}/0"]
    assert all(r["score"] == 1.0 and r["extra"]["termination"] == "user_stop" for r in records.values())
    assert rows["pass^1/retail"]["value"] == 1.0 and rows["pass^1/telecom"]["value"] == 1.0
    assert rows["pass^1/avg"]["value"] == 1.0
    assert records["retail/0/0"]["extra"]["agent_tool_calls"] == 2
    assert records[f"telecom/{TELECOM}/0"]["extra"]["user_tool_calls"] == 1  # the user toggled airplane mode

    rows, records = run(tiny_model, tmp_path, config(user_server, tool_format=tool_format),
                        scripted_agent({"retail/0", "retail/1", "telecom"}), "wrong")
    assert [r["score"] for r in records.values()] == [0.0, 0.0, 0.0]
    assert records["retail/0/0"]["extra"]["reward_info"]["db_match"] is False  # wrong cancel reason
    assert records["retail/1/0"]["extra"]["reward_info"]["communicate_met"] == [False]  # never said "pending"
    assert records[f"telecom/{TELECOM}/0"]["extra"]["reward_info"]["env_assertions_met"] == [False]
    assert rows["pass^1/avg"]["value"] == 0.0


def test_columns_by_hand(tiny_model, tmp_path, user_server):
    """retail: 1 of 2 tasks; telecom: 1 of 1 -> pass^1/retail 0.5, telecom 1.0, avg (0.5 + 1.0) / 2 = 0.75."""
    rows, _ = run(tiny_model, tmp_path, config(user_server), scripted_agent({"retail/1"}))
    assert rows["pass^1/retail"]["value"] == 0.5 and rows["pass^1/retail"]["n"] == 2
    assert rows["pass^1/retail"]["stderr"] == pytest.approx(0.5)
    assert rows["pass^1/telecom"]["value"] == 1.0
    assert rows["pass^1/avg"]["value"] == pytest.approx(0.75) and rows["pass^1/avg"]["n"] == 3
    assert math.isnan(rows["pass^1/avg"]["stderr"] if rows["pass^1/avg"]["stderr"] is not None else math.nan)


def test_user_requests_carry_scenario_tools_key_and_seed(tiny_model, tmp_path, user_server):
    run(tiny_model, tmp_path, config(user_server, domains=["telecom"]), scripted_agent(set()))
    first = user_server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    body = first["body"]
    assert body["model"] == "user-sim" and body["temperature"] == 0.0 and isinstance(body["seed"], int)
    assert body["max_tokens"] == 2048  # eval.tau2.user_max_tokens, the reference's user_max_tokens
    assert "Reason for call" in body["messages"][0]["content"] and "with tools" in body["messages"][0]["content"]
    assert [t["function"]["name"] for t in body["tools"]] == ["check_status_bar", "toggle_airplane_mode"]
    # after the user's tool call, its result goes back to the user model as a tool message
    assert any(m["role"] == "tool" for m in user_server.requests[-1]["body"]["messages"])


def test_user_max_tokens_zero_sends_no_limit(tiny_model, tmp_path, user_server):
    run(tiny_model, tmp_path, config(user_server, domains=["telecom"], user_max_tokens=0), scripted_agent(set()))
    assert all("max_tokens" not in request["body"] for request in user_server.requests)


def test_malformed_tool_calls_end_the_episode(tiny_model, tmp_path, user_server):
    cfg = config(user_server, domains=["retail"], max_tasks=1, max_errors=2)
    _, records = run(tiny_model, tmp_path, cfg, lambda prompt, seed: "<tool_call>{not json</tool_call>")
    extra = records["retail/0/0"]["extra"]
    assert records["retail/0/0"]["score"] == 0.0 and extra["termination"] == "too_many_errors"
    assert extra["format_errors"] == 2 and records["retail/0/0"]["turns"] == 2


def test_trials_and_max_tasks_make_item_ids(user_server):
    bench = Tau2(config(user_server, domains=["retail"], max_tasks=1, trials=3))
    assert [item.id for item in bench.items()] == ["retail/0/0", "retail/0/1", "retail/0/2"]


def test_parse_agent_reply():
    assert parse_agent_reply("Hello there") == ("Hello there", None, None)
    text, calls, problem = parse_agent_reply('<think>hmm</think> ok ' + call("a", x=1) + call("b"))
    assert (text, calls, problem) == ("", [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}], None)
    assert parse_agent_reply("<tool_call>{oops}</tool_call>")[2].startswith("the tool call is not valid JSON")
    assert parse_agent_reply('<tool_call>{"name": "a"')[2].startswith("the <tool_call> tag is not closed")
    assert "must be" in parse_agent_reply('<tool_call>["a"]</tool_call>')[2]


# ------------------------------------------------------------------------------------------------ native format
def test_native_prompt_renders_tools_through_the_template(tiny_model, tmp_path, user_server):
    """native: tau2's system prompt without TOOLS_PROMPT, the tools' openai_schema as tools= (the tiny template
    renders them after the system prompt); text: TOOLS_PROMPT in the system prompt, no tools=."""
    prompts = {}
    for tool_format in ("native", "text"):
        backend = ScriptedBackend(tiny_model[1], scripted_agent(set()))
        ctx = EvalContext(backend, seed=7, benchmark="tau2", max_new_tokens=512)
        bench = Tau2(config(user_server, domains=["retail"], max_tasks=1, tool_format=tool_format))
        evaluate(bench, ctx, EvalRun("toy", 0, tmp_path / f"{tool_format}.json"), progress=False)
        record = json.loads((tmp_path / f"{tool_format}.items.jsonl").read_text())
        prompts[tool_format] = (backend.calls[0][0][0], record)
    lib = Tau2(config(user_server)).lib()
    env = lib.registry.get_env_constructor("retail")()
    schemas = [tool.openai_schema for tool in env.get_tools()]
    rest = [{"role": "assistant", "content": lib.DEFAULT_FIRST_AGENT_MESSAGE.content},
            {"role": "user", "content": user_reply({"messages": [{"content": "cancel order #W1"}, {
                "role": "user", "content": "Hi! How can I help you today?"}]})["content"]}]
    for tool_format, support, tools in (("native", tool_calls.TemplateSupport(True, True), schemas),
                                        ("text", None, None)):
        messages = [{"role": "system", "content": agent_system_prompt(lib, env, support)}] + rest
        expected = tiny_model[1].apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        prompt, record = prompts[tool_format]
        assert prompt == expected and record["prompt_hash"] == prompt_hash(expected)
        assert record["extra"]["agent_format"] == tool_format
        assert record["extra"]["template_support"] == ({"tools": True, "tool_role": True} if support else None)
    native, text = prompts["native"][0], prompts["text"][0]
    assert "Tool results come back" not in native and "<tools>" not in native and env.get_policy() in native
    assert "You can call these tools" in native and all(json.dumps(s) in native for s in schemas)  # tools=
    assert "Tool results come back" in text and "You can call these tools" not in text


def test_native_runs_every_call_of_a_reply_in_order(tiny_model, tmp_path, user_server):
    """Two calls in one reply: both run, in order, each result its own tool message; one tau2 message with two
    calls in the trajectory."""
    lookup = call("find_user_id_by_name_zip", first_name="Ada", last_name="Lovelace", zip="10001")

    def reply(prompt, seed):
        if tool_results(prompt) == 0:
            return "<think>both</think>" + lookup + "\n" + call("get_order_details", order_id="#W1")
        return "Order #W1 is still pending."

    backend = ScriptedBackend(tiny_model[1], reply)
    ctx = EvalContext(backend, seed=7, benchmark="tau2", max_new_tokens=512)
    cfg = config(user_server, domains=["retail"], max_tasks=2)
    evaluate(Tau2(cfg), ctx, EvalRun("toy", 0, tmp_path / "n.json", batch_size=1), progress=False)
    record = json.loads((tmp_path / "n.items.jsonl").read_text().splitlines()[1])  # retail/1: the status task
    assert record["score"] == 1.0 and record["extra"]["agent_tool_calls"] == 2
    roles = [m["role"] for m in record["extra"]["transcript"]]
    calls = [m for m in record["extra"]["transcript"] if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["name"] for c in calls[0]["tool_calls"]] == ["find_user_id_by_name_zip", "get_order_details"]
    assert roles[roles.index("tool") - 1:roles.index("tool") + 2] == ["assistant", "tool", "tool"]
    second = [p for texts, _, _ in backend.calls for p in texts if tool_results(p) == 2][0]
    results = [part.split("<|im_end|>")[0] for part in second.split("<|im_start|>tool\n")[1:]]
    assert results[0] == "ada_lovelace_1001" and json.loads(results[1])["status"] == "pending"
    assert "<tool_response>" not in second


def test_native_replies_and_fallbacks():
    """Parsing through tool_calls.parse_calls; tool messages per result; templates without tools= or a tool role."""
    reply = '<tool_call>{bad}</tool_call> ' + call("a", x=1) + '<tool_call>{"name": "b", "arguments": [1]}</tool_call>'
    assert parse_agent_reply(reply, native=True) == ("", [{"name": "a", "arguments": {"x": 1}}], None)
    assert parse_agent_reply(reply)[2].startswith("the tool call is not valid JSON")  # text: unchanged
    assert parse_agent_reply("<tool_call>{bad}</tool_call>", native=True)[2] == tool_calls.MALFORMED_NOTE.strip()
    assert parse_agent_reply("<think>x</think> Hi ", native=True) == ("Hi", None, None)
    results = [SimpleNamespace(content="r1"), SimpleNamespace(content="r2")]
    assert tool_replies(results, tool_calls.TemplateSupport(True, True)) == [{"role": "tool", "content": "r1"},
                                                                            {"role": "tool", "content": "r2"}]
    assert [m["role"] for m in tool_replies(results, tool_calls.TemplateSupport(False, False))] == ["user", "user"]
    assert tool_replies(results, None) == "<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"
    env = SimpleNamespace(get_policy=lambda: "POLICY", get_tools=lambda: [SimpleNamespace(openai_schema={"n": 1})])
    lib = SimpleNamespace(SYSTEM_PROMPT="{agent_instruction}|{domain_policy}", AGENT_INSTRUCTION="DO")
    assert agent_system_prompt(lib, env, tool_calls.TemplateSupport(True, True)) == "DO|POLICY"
    no_tools = tool_calls.TemplateSupport(False, True)
    assert agent_system_prompt(lib, env, no_tools) == "DO|POLICY" + tool_calls.tools_text([{"n": 1}])
    assert agent_system_prompt(lib, env) == "DO|POLICY" + TOOLS_PROMPT.format(tools='{"n": 1}')


def test_records_of_another_format_are_not_reused(tiny_model, tmp_path, user_server):
    cfg = config(user_server, domains=["retail"], max_tasks=1)
    _, records = run(tiny_model, tmp_path, cfg, scripted_agent(set()), "same")
    assert records["retail/0/0"]["extra"]["agent_format"] == "native"
    _, records = run(tiny_model, tmp_path, replace(cfg, tool_format="text"), scripted_agent(set()), "same")
    assert records["retail/0/0"]["extra"]["agent_format"] == "text"
    assert Tau2(cfg).protocol() == {"tool_format": "native"}


# ------------------------------------------------------------------------------------------------ failures
def test_missing_checkout_fails_before_any_model(tmp_path):
    bench = Tau2(Tau2Config(checkout=str(tmp_path / "nowhere"), user_base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(DataMissing) as info:
        bench.check_data()
    message = str(info.value)
    assert "git clone https://github.com/sierra-research/tau2-bench" in message and "eval.tau2.checkout" in message
    with pytest.raises(DataMissing, match="airline"):  # the fake checkout has no airline domain
        Tau2(Tau2Config(checkout=str(CHECKOUT), user_base_url="http://127.0.0.1:9/v1", user_api_key_env="")).check_data()


def test_missing_endpoint_names_the_keys(monkeypatch):
    with pytest.raises(ConfigError) as info:
        Tau2(Tau2Config(checkout=str(CHECKOUT), domains=["retail"])).check_data()
    assert all(key in str(info.value) for key in ("eval.tau2.user_base_url", "eval.tau2.user_model",
                                                   "eval.tau2.user_api_key_env"))
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ConfigError, match="NO_SUCH_KEY_VAR.*eval.tau2.user_api_key_env"):
        Tau2(Tau2Config(checkout=str(CHECKOUT), domains=["retail"], user_base_url="http://127.0.0.1:9/v1",
                        user_api_key_env="NO_SUCH_KEY_VAR")).check_data()
    unreachable = openai_compat.ChatEndpoint("http://127.0.0.1:9/v1", "m", retries=0, keys="'eval.tau2.user_base_url'")
    with pytest.raises(openai_compat.EndpointError, match="127.0.0.1:9.*eval.tau2.user_base_url"):
        openai_compat.chat(unreachable, [{"role": "user", "content": "hi"}], temperature=0.0)


def test_bad_split_and_domain_name_the_key(user_server):
    with pytest.raises(ConfigError, match="eval.tau2.task_split.*nope"):
        Tau2(config(user_server, domains=["retail"], task_split="nope")).items()
    bench = Tau2(config(user_server, domains=["retail"]))
    with pytest.raises(ConfigError, match="eval.tau2.domains.*mock.*allowed"):
        bench.tasks("mock")


def test_loaders_without_splits(user_server, monkeypatch):
    """tau2 <= v0.2 task loaders take no split argument: 'base' loads the whole file, other splits are refused."""
    bench = Tau2(config(user_server, domains=["retail"]))
    registry = bench.lib().registry
    full = registry.get_tasks_loader("retail")(None)
    monkeypatch.setattr(registry, "get_tasks_loader", lambda name: lambda: full)
    assert [item.id for item in bench.items()] == ["retail/0/0", "retail/1/0"]
    with pytest.raises(ConfigError, match="eval.tau2.task_split.*no task splits"):
        Tau2(config(user_server, domains=["retail"], task_split="test")).items()


def test_config_from_dict_checks_types():
    cfg = from_dict(Tau2Config, {"domains": ["retail"], "trials": 2}, "eval.tau2")
    assert cfg.trials == 2 and cfg.user_model == "gpt-4.1" and cfg.user_max_tokens == 2048
    assert cfg.evaluation_type == "all_with_nl_assertions"
    with pytest.raises(ConfigError, match="eval.tau2.trials"):
        from_dict(Tau2Config, {"trials": 0}, "eval.tau2")


def test_smoke_real_backend(tiny_model, tmp_path, user_server):
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = tiny_model
    ctx = EvalContext(HFBackend(model, tokenizer), seed=1, benchmark="tau2", max_new_tokens=4)
    cfg = config(user_server, domains=["retail"], max_tasks=1, max_steps=4)
    result = evaluate(Tau2(cfg), ctx, EvalRun("toy", 0, tmp_path / "s.json", batch_size=1), progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    assert rows["pass^1/retail"]["n"] == 1 and rows["pass^1/retail"]["value"] in (0.0, 1.0)
