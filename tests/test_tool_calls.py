"""agent.tool_format: the native tool-call format of tool-use episodes (spade.core.tool_calls) and the text format."""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
from pathlib import Path

import pytest

from spade.core import tool_calls
from spade.core.agent import AgentConfig, EpisodeJob, EpisodeRunner
from spade.envs.intake import intake
from spade.envs.library.registry import get_env
from scripted_backend import TurnBackend

SYSTEM = {"game": "You play games.", "tool_use": "You use tools."}
ENV, SEED = "bank_account_ops", 3
# SmolLM2-135M-Instruct's chat template, as prepare_model writes it (chat_template.jinja): any role, no tools.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Written for this test: ChatML that refuses any role but system/user/assistant (as many templates do).
STRICT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unknown role ' + message['role']) }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def env_instance(max_turns=25):
    """The environment run here, outside the sandbox: the oracle for the observations."""
    code = intake(get_env(ENV).source())
    namespace: dict = {}
    exec(code.code, namespace)  # noqa: S102 -- a built-in library environment
    env = namespace[code.class_name](max_turns=max_turns)
    return env, env.reset(SEED)


def job():
    code = intake(get_env(ENV).source())
    return EpisodeJob(ENV, code.code, code.class_name, "tool_use", SEED)


def play(pool, tokenizer, replies, **agent):
    backend = TurnBackend(tokenizer, replies)
    config = AgentConfig(max_turns=agent.pop("max_turns", 6), max_new_tokens=256, max_context_tokens=16384, **agent)
    (record,) = EpisodeRunner(backend, pool, config, SYSTEM).run([job()], seed=0)
    return record, backend


def solution_calls():
    env, _ = env_instance()
    return [line for line in env.solution().splitlines() if line.startswith("{")]


def with_template(tokenizer, template):
    clone = copy.deepcopy(tokenizer)
    clone.chat_template = template
    return clone


# ------------------------------------------------------------------------------------------------ parsing
def test_parse_calls_keeps_every_well_formed_block_in_order():
    text = ('<think><tool_call>{"name": "hidden", "arguments": {}}</tool_call></think> first '
            '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> then <tool_call>{bad json}</tool_call>'
            '<tool_call>{"arguments": {}}</tool_call><tool_call>{"name": "b", "parameters": {"y": "z"}}</tool_call>')
    assert tool_calls.parse_calls(text) == [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": "z"}}]


def xml_call(name, **arguments):
    """A call in the XML body form (agent.tool_call_syntax 'xml_json'); strings are written bare, other values as JSON."""
    body = "".join(f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n</parameter>"
                   for key, value in arguments.items())
    return f"<tool_call>\n<function={name}>\n{body}\n</function>\n</tool_call>"


def test_xml_bodies_are_read_before_json_ones_with_the_reference_syntax():
    """agent.tool_call_syntax 'xml_json' (reference tool_call_parser.py:118-123): an XML-style body becomes a call,
    values that read as JSON become numbers, lists, ..., others stay text (HTML entities unescaped); 'json' skips it."""
    text = (xml_call("transfer_funds", from_account="3136-7061", amount=240.5, note="a &amp; b", tags=["x", 1])
            + call("get_accounts") + "<tool_call><function=bad name></function></tool_call>")
    expected = {"name": "transfer_funds", "arguments": {"from_account": "3136-7061", "amount": 240.5, "note": "a & b",
                                                          "tags": ["x", 1]}}
    assert tool_calls.parse_calls(text, "xml_json") == [expected, {"name": "get_accounts", "arguments": {}}]
    assert tool_calls.parse_calls(text, "json") == [{"name": "get_accounts", "arguments": {}}]
    with pytest.raises(ValueError, match=r"agent\.tool_call_syntax.*'yaml'.*xml_json.*json"):
        tool_calls.parse_calls(text, "yaml")


@pytest.mark.parametrize("text, actions, parsed, malformed", [
    (call("a") + " <answer>done</answer>", [(call("a") + " <answer>done</answer>", "user")], True, False),
    (call("a") + call("b", k=2), [(call("a"), "tool"), (call("b", k=2), "tool")], True, False),
    ('<tool_call>{"name": "a", </tool_call>', [('<tool_call>{"name": "a", </tool_call>', "user")], False, True),
    ("<tool_call>{\"arguments\": {}}</tool_call>", [("<tool_call>{\"arguments\": {}}</tool_call>", "user")], False,
     True),
    ("just words", [("just words", "user")], False, False),
])
def test_plan_turn(text, actions, parsed, malformed):
    assert tool_calls.plan_turn(text) == tool_calls.TurnPlan(actions, parsed, malformed)


# ------------------------------------------------------------------------------------------------ episodes
def test_native_episode_is_one_token_sequence_of_the_template_with_tools(pool, tiny_model):
    """Every call of a reply runs, in order; results are tool messages; a malformed call's turn is masked; the
    episode's tokens are exactly the template's rendering of the whole chat with tools= and no system prompt."""
    _, tokenizer = tiny_model
    first = "I will do it all.\n" + "\n".join(f"<tool_call>{c}</tool_call>" for c in solution_calls())
    first += "\n" + call("get_accounts")
    malformed = 'Oops <tool_call>{"name": "get_accounts", "arguments": </tool_call>'
    replies = [first, malformed, "<answer>done</answer>"]
    record, backend = play(pool, tokenizer, replies, max_turns=8)  # every call is one environment step: 7 here
    assert record.outcome == "terminated" and record.won and record.final_return == 1.0
    assert record.turns == 3 and len(record.rewards) == 5 + 1 + 1 and record.unparsed_turns == 1

    env, (observation, info) = env_instance(max_turns=8)  # the oracle: the same actions, in order, on a fresh environment
    messages = [{"role": "user", "content": observation}, {"role": "assistant", "content": first}]
    for line in solution_calls() + [json.dumps({"name": "get_accounts", "arguments": {}})]:
        messages.append({"role": "tool", "content": env.step(f"<tool_call>{line}</tool_call>")[0]})
    error = env.step(malformed)[0]
    messages += [{"role": "assistant", "content": malformed},
                 {"role": "user", "content": error + tool_calls.MALFORMED_NOTE},
                 {"role": "assistant", "content": "<answer>done</answer>"}]
    expected = tokenizer.apply_chat_template(messages, tools=info["tools"], tokenize=False)
    assert tokenizer.decode(record.token_ids) + "\n" == expected  # the template closes the last turn with "\n"
    assert "You use tools." not in expected and expected.startswith("<|im_start|>system\nYou can call these tools")
    assert expected.count("<|im_start|>tool\n") == 5

    # loss mask: 1 on the first and last replies' sampled tokens only (the malformed turn is masked)
    sampled = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in replies]
    prompts = [len(p) for p in backend.prompts]
    starts = prompts  # each reply starts where its prompt ends
    expected_mask = [0] * len(record.token_ids)
    for start, ids, trained in zip(starts, sampled, (1, 0, 1)):
        assert record.token_ids[start:start + len(ids)] == ids
        expected_mask[start:start + len(ids)] = [trained] * len(ids)
    assert record.loss_mask == expected_mask
    assert [lp for lp, m in zip(record.rollout_logprobs, record.loss_mask) if m] == [-0.5] * sum(expected_mask)


def test_native_calls_stop_where_the_environment_ends_the_episode(pool, tiny_model):
    _, tokenizer = tiny_model
    reply = "".join(call("get_accounts") for _ in range(4))
    record, _ = play(pool, tokenizer, [reply], max_turns=3)  # the environment truncates at its 3rd step
    assert record.outcome == "truncated" and record.turns == 1 and len(record.rewards) == 3


@pytest.mark.parametrize("syntax", ["xml_json", "json"])
def test_an_xml_style_call_steps_the_environment_only_with_the_reference_syntax(pool, tiny_model, syntax):
    """agent.tool_call_syntax reaches the episode: with 'xml_json' (reference) the XML-style call is one environment
    step answered by a tool message; with 'json' it is a malformed call: its turn is masked and the reply goes to
    step() as it is, answered in the user role with the format note."""
    _, tokenizer = tiny_model
    reply = "Let me look.\n" + xml_call("get_accounts")
    record, backend = play(pool, tokenizer, [reply, "<answer>done</answer>"], tool_call_syntax=syntax)
    second_prompt = tokenizer.decode(backend.prompts[1])
    env, _ = env_instance(max_turns=6)
    if syntax == "xml_json":
        listing = env.step(call("get_accounts"))[0]
        assert record.unparsed_turns == 0 and sum(record.loss_mask) > 0
        assert "<|im_start|>tool\n" in second_prompt or "<tool_response>" in second_prompt
        assert listing.splitlines()[0] in second_prompt and tool_calls.MALFORMED_NOTE.strip() not in second_prompt
    else:
        assert record.unparsed_turns == 1 and tool_calls.MALFORMED_NOTE.strip() in second_prompt
        first_reply = len(tokenizer(reply, add_special_tokens=False)["input_ids"]) + 1
        start = len(backend.prompts[0])
        assert record.loss_mask[start:start + first_reply] == [0] * first_reply


def test_text_format_is_unchanged(pool, tiny_model):
    """tool_format 'text': the system prompt, the tools as text, only the first call runs, observations as user."""
    _, tokenizer = tiny_model
    replies = [call("get_accounts") + call("transfer_funds", from_account="x", to_account="y", amount=1.0),
               "<answer>done</answer>"]
    record, _ = play(pool, tokenizer, replies, tool_format="text")
    env, (observation, info) = env_instance()
    messages = [{"role": "system", "content": SYSTEM["tool_use"]},
                {"role": "user", "content": observation + tool_calls.tools_text(info["tools"])},
                {"role": "assistant", "content": replies[0]},
                {"role": "user", "content": env.step('{"name": "get_accounts", "arguments": {}}')[0]},
                {"role": "assistant", "content": replies[1]}]
    assert tokenizer.decode(record.token_ids) + "\n" == tokenizer.apply_chat_template(messages, tokenize=False)
    assert len(record.rewards) == 2 and record.outcome == "terminated" and not record.won
    sampled = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) + 1 for t in replies)
    assert sum(record.loss_mask) == sampled  # nothing masked


# ------------------------------------------------------------------------------------------------ templates
def test_template_without_tools_gets_the_tools_as_text(pool, tiny_model):
    """SmolLM2's template ignores tools= and renders any role: the schemas go after the first observation,
    results stay tool messages, and the episode is still the template's exact rendering."""
    _, base = tiny_model
    tokenizer = with_template(base, SMOLLM2_TEMPLATE)
    assert tool_calls.template_support(tokenizer) == tool_calls.TemplateSupport(tools=False, tool_role=True)
    replies = [call("get_accounts"), "<answer>done</answer>"]
    record, _ = play(pool, tokenizer, replies)
    env, (observation, info) = env_instance()
    messages = [{"role": "user", "content": observation + tool_calls.tools_text(info["tools"])},
                {"role": "assistant", "content": replies[0]},
                {"role": "tool", "content": env.step(call("get_accounts"))[0]},
                {"role": "assistant", "content": replies[1]}]
    text = tokenizer.decode(record.token_ids) + "\n"
    assert text == tokenizer.apply_chat_template(messages, tokenize=False)
    assert "You use tools." not in text and '"name": "transfer_funds"' in text


def test_template_without_a_tool_role_gets_results_as_user_messages(pool, tiny_model):
    _, base = tiny_model
    tokenizer = with_template(base, STRICT_TEMPLATE)
    assert tool_calls.template_support(tokenizer) == tool_calls.TemplateSupport(tools=False, tool_role=False)
    replies = [call("get_accounts") + call("get_exchange_rate", base="EUR", quote="USD"), "<answer>done</answer>"]
    record, _ = play(pool, tokenizer, replies)
    text = tokenizer.decode(record.token_ids)
    assert text.count("<|im_start|>user\n") == 3 and "<|im_start|>tool" not in text and len(record.rewards) == 3


def qwen3_template() -> str:
    """The Qwen3 chat template as bfcl-eval (a PyPI package) carries it: the docstring of
    ``QwenFCHandler._format_prompt`` (read with ast; importing the module needs tree-sitter)."""
    spec = importlib.util.find_spec("bfcl_eval")
    source = (Path(spec.origin).parent / "model_handler" / "local_inference" / "qwen_fc.py").read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "_format_prompt":
            # the docstring as written (its escapes, e.g. \\" inside Jinja strings, are the template's own)
            literal = ast.get_source_segment(source, node.body[0].value)
            return literal.strip('"').split('"chat_template":', 1)[1].strip()
    raise AssertionError("bfcl-eval no longer carries the Qwen3 template")


def test_qwen3_template_renders_tools_and_groups_tool_responses(pool, tiny_model):
    _, base = tiny_model
    tokenizer = with_template(base, qwen3_template())
    assert tool_calls.template_support(tokenizer) == tool_calls.TemplateSupport(tools=True, tool_role=True)
    first = "<think>\nTwo reads.\n</think>\n\n" + call("get_accounts") + "\n" + call("get_exchange_rate",
                                                                                      base="EUR", quote="USD")
    replies = [first, "<think>\nDone.\n</think>\n\n<answer>done</answer>"]
    record, _ = play(pool, tokenizer, replies)
    env, (observation, info) = env_instance()
    messages = [{"role": "user", "content": observation}, {"role": "assistant", "content": first},
                {"role": "tool", "content": env.step(call("get_accounts"))[0]},
                {"role": "tool", "content": env.step(call("get_exchange_rate", base="EUR", quote="USD"))[0]},
                {"role": "assistant", "content": replies[1]}]
    text = tokenizer.decode(record.token_ids)
    assert text + "\n" == tokenizer.apply_chat_template(messages, tools=info["tools"], tokenize=False)
    assert "# Tools" in text and text.count("<tool_response>") == 2
    assert text.count("<|im_start|>user\n<tool_response>") == 1  # both results in one user turn


def test_a_bad_tool_format_names_the_key_and_the_choices():
    from spade.config import SpadeConfig
    from spade.configtools import ConfigError, from_dict

    with pytest.raises(ConfigError, match=r"agent\.tool_format.*'json'.*native.*text"):
        from_dict(SpadeConfig, {"agent": {"tool_format": "json"}})
    with pytest.raises(ConfigError, match=r"eval\.bfcl_multi_turn\.tool_format.*'text'.*native.*prompting"):
        from_dict(SpadeConfig, {"eval": {"bfcl_multi_turn": {"tool_format": "text"}}})
