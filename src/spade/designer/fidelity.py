"""Designer fidelity on solved mechanisms (issue 7, item 3; after VHD-Play's fidelity check).

The question: when the designer is handed a fully specified decision problem, does the environment it
writes implement that problem? For every mechanism family and sampler seed, an instance is drawn and
solved (``spade.envs.mechanisms``). The designer role of the run's model receives a prompt
(``fidelity_prompt``) with the decision process in words (the family's written-out introduction), the
exact parameters ``theta`` as JSON, the command format the reference drivers speak, and the reward rule
with the reference ``u*`` and ``u0`` as constants. Its answer goes through intake and the sandboxed
validator (``config.validation``). A valid answer is then driven by the reference drivers
(``drivers_for``: optimal, default, idle) through the sandbox (``admit`` with validation off and the
``solution()`` replay off), ``replays`` times each from a fresh instance, and compared with the reference.

An environment is **faithful** when every check of ``FIDELITY_CHECKS`` passes:

- ``not_game``: it is a game environment (the drivers send ``\\boxed{...}`` commands);
- ``driver_error``: no driver's call raised, timed out or broke the step contract;
- ``no_terminal``: every driver's episode terminated before its actions ran out;
- ``replay_mismatch``: the replays of one driver agree exactly (steps, flags, reward, utility);
- ``optimal``: the optimal plan scores 1, or its reported ``info["utility"]`` equals the reference ``u*``;
- ``default``: the default plan's score equals the reference default score (0 by construction);
- ``idle``: committing nothing scores at most what the default plan scores;
- ``exceeds_optimum``: no driver's reported utility exceeds the reference ``u*``.

All comparisons use the absolute ``tolerance``. A case records its validity (the validator's reason code
when invalid), every driver's reward and utility beside the reference values, the faithful flag, every
failed check and the first one (``failing_check``, in the order above), the admission verdict (C1-C3 with
the reference ``u*``, for information) and the generation's token counts. ``summarise`` gives the valid
rate and the faithful rate with Wilson intervals (``spade.analysis.rates``), overall and per family.

Seeds: the sampler seeds are ``first_seed .. first_seed + instances - 1`` (default 20,000 on, apart from
the pool seeds 0.. and the held-out evaluation seeds 10,000..); each design prompt is sampled with its own
seed ``derive_seed(config.seed, "fidelity", family, seed)``, so a case does not depend on batching.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from spade.analysis.rates import rate_estimate
from spade.configtools import ConfigError, from_dict, option
from spade.envs.mechanisms import (
    AdmissionConfig,
    MechanismInstance,
    admit,
    drivers_for,
    families,
    get_family,
    sample_instance,
)
from spade.envs.validate import Validator
from spade.provenance import stamp
from spade.seeding import derive_seed

__all__ = ["FIDELITY_CHECKS", "FidelityConfig", "designer_backend", "fidelity_config", "fidelity_prompt",
           "judge_answer", "run_fidelity", "summarise", "summary_lines"]

FIDELITY_CHECKS = ("not_game", "driver_error", "no_terminal", "replay_mismatch", "optimal", "default", "idle",
                   "exceeds_optimum")
AGENTIC_ONLY_KEYS = ("ranges", "probe_budget")  # theta keys used only by the hidden-value presentation
MESSAGE_CHARS = 2_000  # validator message kept per case


@dataclass(frozen=True)
class FidelityConfig:
    """Settings of one fidelity run (``spade fidelity`` sets them from its flags)."""

    families: list = option([], "Mechanism families to check; empty = every registered family.")
    instances: int = option(1, "Instances (sampler seeds) per family.", min=1)
    first_seed: int = option(20_000, "Sampler seed of each family's first instance; the seeds are "
                             "first_seed .. first_seed + instances - 1.", min=0)
    replays: int = option(2, "Fresh-state replays of every reference driver; they must agree.", min=1)
    tolerance: float = option(1e-6, "Absolute tolerance on scores and utilities.", min=0.0)
    batch_size: int = option(8, "Design prompts per generate call (cases do not depend on it: one seed per prompt).",
                             min=1)
    confidence: float = option(0.95, "Confidence of the Wilson intervals.", min=0.0)
    answer_chars: int = option(20_000, "Characters of the designer's answer kept in each case record (0 = none).",
                               min=0)

    def __post_init__(self):
        known = sorted(families())
        unknown = [name for name in self.families if name not in known]
        if unknown:
            raise ConfigError(f"config key 'fidelity.families' names unknown mechanism families {unknown}; "
                              f"allowed: {known}")
        if len(set(self.families)) != len(self.families):
            raise ConfigError(f"config key 'fidelity.families' repeats a family: {self.families!r}")
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(f"config key 'fidelity.confidence' must lie in (0, 1), got {self.confidence!r}")

    def family_names(self) -> list:
        return list(self.families) or sorted(families())

    def seeds(self) -> list:
        return list(range(self.first_seed, self.first_seed + self.instances))


def fidelity_config(**values) -> FidelityConfig:
    """A validated ``FidelityConfig`` from keyword values; ``None`` values keep the default."""
    return from_dict(FidelityConfig, {key: value for key, value in values.items() if value is not None}, "fidelity")


# ---------------------------------------------------------------------------------------------------
# the design prompt
# ---------------------------------------------------------------------------------------------------
FIDELITY_SYSTEM = """\
You turn a fully specified decision problem into a text environment, written as one Python class.
Implement the problem exactly as stated, with the numbers given; do not invent rules or change values.
Reply with exactly ONE ```python fenced block holding the complete module, and nothing after it."""


def _commands(help_line: str) -> list:
    """The family's decision commands from its help line, without ``inspect`` and ``finish``."""
    body = help_line.strip().removeprefix("Commands:").strip().rstrip(".")
    return [part.strip() for part in body.split("|")
            if part.strip() and not part.strip().startswith(("inspect", "finish"))]


def fidelity_prompt(instance: MechanismInstance) -> list:
    """Chat messages asking the designer to implement ``instance`` (decision process, theta, commands, reward)."""
    family = get_family(instance.family)
    theta = json.dumps(instance.params, sort_keys=True)
    ignored = [key for key in AGENTIC_ONLY_KEYS if key in instance.params]
    commands = "\n".join(f"- {command}" for command in _commands(family.commands_help))
    example = instance.default_actions[0] if instance.default_actions else "finish"
    sections = [
        f"Problem: {family.title}.",
        "What the player reads at the start (the rules, in words):\n<problem>\n"
        + family.intro(instance.params, "written", None) + "\n</problem>",
        "The exact parameters theta as JSON; hard-code them unchanged"
        + (f" (the keys {ignored} belong to a hidden-value variant and play no role here)" if ignored else "")
        + f":\ntheta = {theta}",
        "Commands. The player sends one command per turn inside \\boxed{...}, for example \\boxed{" + example + "}. "
        "Read the first \\boxed{...} span with re.search(r\"\\\\boxed\\{([^{}]*)\\}\", action), lower-case it and "
        "split it into words (a comma counts as a space). The commands are:\n" + commands + "\n"
        "- finish (end the episode now; decisions not yet made count as doing nothing)\n"
        "A command that is unknown, badly formed or infeasible in the current state gets a short explanation, "
        "reward 0.0, and changes nothing. The episode terminates when the last decision has been made or on finish.",
        "Utility and reward. Let u be the value the player ends with: the quantity the problem asks to maximise "
        "(for a cost to minimise, u = -cost). Only the terminating step is rewarded:\n"
        f"reward = min(1.0, max(0.0, (u - U0) / (USTAR - U0))) with USTAR = {instance.u_star!r} (the best "
        f"achievable u) and U0 = {instance.u0!r} (u of a simple baseline plan).\n"
        "That step's info holds {\"utility\": u, \"u_star\": USTAR, \"u_default\": U0, \"score\": reward}. "
        "Every other step returns reward 0.0.",
        "The class:\n"
        "- __init__(self, max_turns=20, **kwargs): store max_turns, set every attribute, call self.reset().\n"
        "- reset(self, seed=None) -> (observation: str, info: dict): start the problem from the beginning. The "
        "problem is the same for every seed. The first observation states the rules, the numbers and the "
        "command format.\n"
        "- step(self, action: str) -> (observation: str, reward: float, terminated: bool, truncated: bool, "
        "info: dict) on every code path, never raising. When max_turns steps have passed without termination, "
        "return truncated = True with reward 0.0.\n"
        "- close(self): just return.\n"
        "Standard library only (re, json, math); no print(), no input, no files, no randomness.",
        "Output exactly ONE ```python fenced block with the whole module and nothing after it.",
    ]
    return [{"role": "system", "content": FIDELITY_SYSTEM}, {"role": "user", "content": "\n\n".join(sections)}]


# ---------------------------------------------------------------------------------------------------
# judging one answer
# ---------------------------------------------------------------------------------------------------
def _reference(instance: MechanismInstance) -> dict:
    """Reference (score, utility) of each driver."""
    return {"optimal": (1.0, instance.u_star), "default": (instance.score(instance.u0), instance.u0),
            "idle": (instance.score(instance.u_idle), instance.u_idle)}


def _driver_rows(instance: MechanismInstance, replays) -> dict:
    rows = {}
    for name, (score, utility) in _reference(instance).items():
        runs = [r for r in replays if r.driver == name]
        first = runs[0]
        rows[name] = {
            "reward": first.reward, "utility": first.utility, "terminated": first.terminated,
            "truncated": first.truncated, "steps": first.steps, "error": first.error,
            "reference_score": score, "reference_utility": utility,
            "utility_error": None if first.utility is None else first.utility - utility,
            "replays": len(runs),
        }
    return rows


def _failed_checks(instance: MechanismInstance, replays, tol: float) -> list:
    """The failed checks of ``FIDELITY_CHECKS`` (in that order) for the drivers' replays."""
    failed = []
    if any(r.error for r in replays):
        failed.append("driver_error")
    if any(not r.error and not r.terminated for r in replays):
        failed.append("no_terminal")
    if failed:  # scores of broken episodes say nothing about the environment's arithmetic
        return failed
    key = lambda r: (r.steps, r.terminated, r.truncated, r.reward, r.utility)  # noqa: E731
    by_driver = {name: [r for r in replays if r.driver == name] for name in ("optimal", "default", "idle")}
    if any(len({key(r) for r in runs}) > 1 for runs in by_driver.values()):
        failed.append("replay_mismatch")
    optimal, default, idle = (by_driver[name][0] for name in ("optimal", "default", "idle"))
    reference = _reference(instance)
    scores_one = abs(optimal.reward - 1.0) <= tol
    reaches_u_star = optimal.utility is not None and abs(optimal.utility - instance.u_star) <= tol
    if not (scores_one or reaches_u_star):
        failed.append("optimal")
    if abs(default.reward - reference["default"][0]) > tol:
        failed.append("default")
    if idle.reward > default.reward + tol:
        failed.append("idle")
    if any(r.utility is not None and r.utility > instance.u_star + tol for r in replays):
        failed.append("exceeds_optimum")
    return failed


def judge_answer(instance: MechanismInstance, answer: str, validator: Validator, config: FidelityConfig) -> dict:
    """Validate the designer's ``answer`` for ``instance`` and replay the reference drivers against it."""
    report = validator.validate(answer)
    case = {"valid": report.valid, "reason": report.reason, "message": report.message[:MESSAGE_CHARS],
            "class_name": report.class_name, "kind": report.kind, "code_sha256": report.code_sha256,
            "drivers": {}, "faithful": False, "failed_checks": [], "failing_check": "", "admission_reasons": []}
    if not report.valid:
        return case
    if report.kind != "game":
        case.update(failed_checks=["not_game"], failing_check="not_game")
        return case
    admission = admit(report.code, drivers_for(instance), validator.pool,
                      AdmissionConfig(replays=config.replays, seed=validator.config.seeds[0],
                                      tolerance=config.tolerance, validate=False, check_solution=False),
                      reference_u_star=instance.u_star, validation=validator.config)
    failed = _failed_checks(instance, admission.replays, config.tolerance)
    case.update(drivers=_driver_rows(instance, admission.replays), faithful=not failed, failed_checks=failed,
                failing_check=failed[0] if failed else "", admission_reasons=list(admission.reasons))
    return case


# ---------------------------------------------------------------------------------------------------
# aggregation
# ---------------------------------------------------------------------------------------------------
def _rate(successes: int, trials: int, confidence: float):
    return asdict(rate_estimate(successes, trials, confidence)) if trials else None


def _summary(cases: list, confidence: float) -> dict:
    valid = sum(c["valid"] for c in cases)
    faithful = sum(c["faithful"] for c in cases)
    tokens = sum(c["generated_tokens"] for c in cases)
    reasons, checks = {}, {}
    for case in cases:
        if not case["valid"]:
            reasons[case["reason"]] = reasons.get(case["reason"], 0) + 1
        elif case["failing_check"]:
            checks[case["failing_check"]] = checks.get(case["failing_check"], 0) + 1
    return {
        "cases": len(cases), "valid": _rate(valid, len(cases), confidence),
        "faithful": _rate(faithful, len(cases), confidence),
        "faithful_given_valid": _rate(faithful, valid, confidence),
        "invalid_reasons": dict(sorted(reasons.items())), "failing_checks": dict(sorted(checks.items())),
        "generated_tokens": tokens, "prompt_tokens": sum(c["prompt_tokens"] for c in cases),
        "generated_tokens_per_valid": tokens / valid if valid else None,
        "generated_tokens_per_faithful": tokens / faithful if faithful else None,
    }


def summarise(cases: list, confidence: float = 0.95) -> dict:
    """Valid and faithful rates (Wilson intervals), failure histograms and token counts: overall and per family."""
    if not cases:
        raise ValueError("summarise needs at least one case")
    by_family = {}
    for case in cases:
        by_family.setdefault(case["family"], []).append(case)
    return {"overall": _summary(cases, confidence),
            "by_family": {name: _summary(rows, confidence) for name, rows in sorted(by_family.items())}}


# ---------------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------------
def _progress(enabled: bool):
    from rich.progress import Progress

    return Progress(transient=True, disable=not enabled)


def run_fidelity(spade_config, backend, pool, config: FidelityConfig, progress: bool = False, model: str = "") -> dict:
    """The fidelity report: every (family, seed) case designed by ``backend`` and judged through ``pool``.

    ``spade_config`` gives the designer's sampling (``designer.temperature``, ``designer.max_new_tokens``),
    the validator settings (``validation``) and the master seed.
    """
    from spade.core.agent import ChatTokens, template_kwargs

    instances = [sample_instance(name, seed) for name in config.family_names() for seed in config.seeds()]
    chat = ChatTokens(backend.tokenizer, template_kwargs(spade_config.designer.enable_thinking))
    prompts = [chat.first_prompt(fidelity_prompt(inst)) for inst in instances]
    seeds = [derive_seed(spade_config.seed, "fidelity", inst.family, inst.seed) for inst in instances]
    params = spade_config.designer.design_params()
    validator = Validator(pool, spade_config.validation)
    generations, cases = [], []
    with _progress(progress) as bar:
        design = bar.add_task("designing", total=len(instances))
        for start in range(0, len(prompts), config.batch_size):
            chunk = slice(start, start + config.batch_size)
            generations += backend.generate(prompts[chunk], params, seeds[chunk])
            bar.advance(design, len(prompts[chunk]))
        replay = bar.add_task("validating and replaying", total=len(instances))
        for inst, prompt, seed, generation in zip(instances, prompts, seeds, generations):
            case = {"family": inst.family, "seed": inst.seed, "attempt": inst.attempt,
                    "params_hash": inst.params_hash, "u_star": inst.u_star, "u0": inst.u0, "u_idle": inst.u_idle,
                    "generation_seed": seed, "prompt_tokens": len(prompt),
                    "generated_tokens": len(generation.completion_ids), "finish_reason": generation.finish_reason}
            case.update(judge_answer(inst, generation.text, validator, config))
            if config.answer_chars:
                case["answer"] = generation.text[:config.answer_chars]
            cases.append(case)
            bar.advance(replay)
    return {
        "kind": "designer_fidelity", "model": str(model), "isolation": pool.level,
        "families": config.family_names(), "seeds": config.seeds(), "settings": asdict(config),
        "sampling": asdict(params), "checks": list(FIDELITY_CHECKS), "generations": len(generations),
        "summary": summarise(cases, config.confidence), "cases": cases,
        "provenance": {**stamp(spade_config), "model": str(model)},
    }


def designer_backend(spade_config, model_dir):
    """The generation backend of ``inference.backend`` for the model in ``model_dir`` (GPU when torch sees one)."""
    import torch

    from spade.inference.generation_vllm import build_backend
    from spade.inference.models import load_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = tokenizer = None
    if spade_config.inference.backend == "hf":
        model, tokenizer = load_model(model_dir, device=device)
    return build_backend(spade_config.inference, model_dir, model=model, tokenizer=tokenizer, device=device,
                         rollout_logprobs=spade_config.train.rollout_logprobs)


def summary_lines(report: dict) -> list:
    """One printable line per family and one overall."""
    def line(name, row):
        valid, faithful = row["valid"], row["faithful"]
        return (f"{name:12s} cases {row['cases']:3d}  valid {valid['rate']:.2f} [{valid['low']:.2f}, {valid['high']:.2f}]"
                f"  faithful {faithful['rate']:.2f} [{faithful['low']:.2f}, {faithful['high']:.2f}]"
                f"  tokens {row['generated_tokens']}")

    summary = report["summary"]
    return [line(name, row) for name, row in summary["by_family"].items()] + [line("overall", summary["overall"])]

