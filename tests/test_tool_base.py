"""ToolUseBaseEnv: schemas, dispatch, errors as text, the multi-turn user, the final answer."""

from __future__ import annotations

import json

import pytest

from spade.envs.tool_base import ALL_COMPLETE, DECLINE_TOOL, ToolUseBaseEnv, parse_tool_call


class Shop(ToolUseBaseEnv):
    _tools = {
        "add_item": {
            "description": "Add an item to the cart.",
            "parameters": {"item": {"type": "string", "enum": ["pen", "ink"]}, "qty": {"type": "integer"}},
            "required": ["item"],
        },
        "crash": {"description": "A tool whose implementation fails.", "parameters": {}},
        "decline_request": DECLINE_TOOL,
    }

    def _setup(self, rng):
        self.state = {"cart": {}}
        self.want = rng.choice(["pen", "ink"])
        self._user_messages = [f"Add one {self.want}.", "Decline the request to fly to the moon."]
        self._message_criteria = [lambda s: s["cart"].get(self.want) == 1, lambda s: bool(s.get("declined"))]

    def tool_add_item(self, item, qty=1):
        self.state["cart"][item] = self.state["cart"].get(item, 0) + qty
        return {"cart": self.state["cart"]}

    def tool_crash(self):
        raise RuntimeError("database offline")


def call(name, **arguments):
    return json.dumps({"name": name, "arguments": arguments})


def test_schemas_follow_openai_format():
    tools = {t["function"]["name"]: t for t in Shop().get_tools()}
    add = tools["add_item"]
    assert add["type"] == "function"
    assert add["function"]["parameters"] == {
        "type": "object",
        "properties": {"item": {"type": "string", "enum": ["pen", "ink"]}, "qty": {"type": "integer"}},
        "required": ["item"],
    }
    assert tools["decline_request"]["function"]["parameters"]["required"] == ["reason"]


@pytest.mark.parametrize(
    "action, expected",
    [
        ('{"name": "a", "arguments": {"x": 1}}', ("a", {"x": 1})),
        ('<tool_call>{"name": "a", "arguments": "{\\"x\\": 2}"}</tool_call>', ("a", {"x": 2})),
        ('I will call {"name": "a"} now', ("a", {})),
    ],
)
def test_parse_tool_call(action, expected):
    assert parse_tool_call(action) == expected


@pytest.mark.parametrize("action", ["no json here", '{"arguments": {}}', '{"name": "a", "arguments": [1]}'])
def test_parse_tool_call_rejects(action):
    with pytest.raises(ValueError):
        parse_tool_call(action)


@pytest.mark.parametrize(
    "action, fragment",
    [
        (call("fly"), "unknown tool 'fly'"),
        (call("add_item"), "missing required argument 'item'"),
        (call("add_item", item="cake"), "must be one of ['pen', 'ink']"),
        (call("add_item", item="pen", qty="two"), "must be of type integer"),
        (call("add_item", item="pen", qty=True), "must be of type integer"),
        (call("add_item", item="pen", colour="red"), "unexpected argument 'colour'"),
        (call("crash"), "Error: RuntimeError: database offline"),
        ("gibberish", "could not parse a tool call"),
    ],
)
def test_tool_errors_are_text(action, fragment):
    env = Shop()
    observation, reward, terminated, truncated, _ = env.step(action)
    assert fragment in observation and reward == 0.0 and not terminated and not truncated


def test_full_episode_reveals_instructions_and_rewards_only_completion():
    env = Shop()
    observation, info = env.reset(seed=4)
    assert env.want in observation and len(info["tools"]) == 3
    assert env.step("<answer>done</answer>")[1:3] == (0.0, True)  # too early: terminated, no reward
    env.reset(seed=4)
    observation = env.step(call("add_item", item=env.want))[0]
    assert "Next instruction: Decline the request" in observation
    observation = env.step(call("decline_request", reason="no tool books flights"))[0]
    assert observation.endswith(ALL_COMPLETE)
    assert env.step("<answer> done </answer>")[1:3] == (1.0, True)


def test_turn_limit_truncates():
    env = Shop(max_turns=2)
    assert env.step("x")[3] is False
    assert env.step("x")[3] is True


def test_setup_must_pair_messages_and_criteria():
    class Broken(Shop):
        def _setup(self, rng):
            self._user_messages = ["a", "b"]
            self._message_criteria = [lambda s: True]

    with pytest.raises(ValueError, match="as many _message_criteria"):
        Broken()
