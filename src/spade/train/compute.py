"""A rough GPU-hour estimate of a SPADE run from its config (``spade compute``).

This is an ESTIMATE from assumptions (``configs/compute.yaml``), not a measurement. It counts model FLOPs
with the standard approximations and divides by the peak bf16 throughput times an assumed model-FLOP
utilisation (MFU). With ``N`` the active parameters of the model card, ``L`` its layers and ``d`` its
attention width (query heads x head dim):

* one sequence of ``T`` tokens costs ``F(T) = 2 N T + L d T^2`` forward FLOPs: ``2 N`` per token for the
  weights, plus (when ``include_attention``) the attention term ``2 L d c`` per token at context position
  ``c``, summed over ``c < T`` (Kaplan et al. 2020);
* inference: the share of ``F(T)`` that falls on sampled tokens runs at ``mfu_generate``, the share on
  prompt and observation tokens at ``mfu_prefill`` (``2 N`` per generated token, as usual);
* training: forward + backward = ``3 F(T)`` (``6 N`` per trained token), plus one forward for the old-policy
  log-probs (``old_logprob_forward``) and one for the reference policy when ``train.kl_coef > 0``; whole
  sequences are processed even though only sampled tokens carry loss;
* GPU-hours = FLOPs / (``peak_tflops_bf16`` x 1e12 x MFU) / 3600.

What is counted, per run (``selfplay``, ``agent``, ``designer``, ``eval`` keys of the config):

* rollout generation: every step, ``train.global_batch`` no-hint episodes spread over the filled slots
  (``selfplay.batch_structure: global_batch``; ``groups``: ``G`` per filled slot); at every regeneration (every
  ``k`` steps, ``ceil(total_steps / k)`` of them) also ``G`` hint-arm episodes per filled slot. A pool designed
  before training (Fixed-env GRPO, the external designer's offline pool) costs design rounds of one slot set each
  until it holds ``baseline.pool_size`` valid environments (at most ``pool_max_rounds``), and its sets are full. Slots =
  ``active_skills x envs_per_skill``; a slot is filled with probability ``1 - (1 - p)^A`` (``p`` =
  ``design_valid_rate``, ``A`` = ``design_attempts x (1 + designer_feedback.revisions)``: a revision counts as one
  more try), or always with ``backfill``. An episode has
  ``max_turns x agent_turn_fraction`` turns of ``max_new_tokens x agent_token_fraction`` sampled tokens,
  the first prompt and observations between turns, cut at ``max_context_tokens``;
* designer: per regeneration, every slot makes ``(1 - (1 - p)^A) / p`` attempts (the expected number of
  tries until one validates, at most ``A``) of ``designer.max_new_tokens x designer_token_fraction`` tokens
  on a prompt of instructions + corpus document (``corpus.*_max_words x tokens_per_word`` when
  ``corpus.enabled``) + memory seeds (``memory.n_positive + 1`` examples when ``memory.enabled``), and one
  hint per filled slot (``designer.hint_max_new_tokens x hint_token_fraction``) on the environment's code;
* training: the no-hint episodes of every step (with ``global_batch``, less the places the designer samples
  take), plus (``selfplay.train_designer``) the designer's valid designs (``designer.invalid: penalty`` trains on
  every attempt);
* evaluation: every ``eval.during_training`` benchmark at step 0 and at every checkpoint
  (``selfplay.checkpoint_every`` and the last step), and every ``eval.final`` benchmark at step 0 and the
  last step (pairs counted once). Episodes per benchmark come from its config keys (:func:`eval_episodes`)
  and the ``benchmarks`` section of the assumptions file. User simulators (tau2, ACEBench) and sandboxed
  environment code run elsewhere and are not counted.

Not counted: weight synchronisation, checkpoint writing, idle time between pipeline stages, failed runs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from spade.configtools import ConfigError, load_yaml

COMPUTE_FILE = Path(__file__).resolve().parents[3] / "configs" / "compute.yaml"
ASSUMPTION_KEYS = (
    "mfu_train", "mfu_prefill", "mfu_generate", "include_attention", "old_logprob_forward", "agent_turn_fraction",
    "agent_token_fraction", "agent_prompt_tokens", "observation_tokens", "design_valid_rate",
    "designer_token_fraction", "designer_instruction_tokens", "tokens_per_word", "memory_seed_tokens",
    "hint_prompt_extra_tokens", "hint_token_fraction", "eval_token_fraction",
)
MODEL_KEYS = ("params_total_b", "params_active_b", "n_layers", "d_attn", "gpus")
FRACTIONS = ("mfu_train", "mfu_prefill", "mfu_generate", "agent_turn_fraction", "agent_token_fraction",
             "design_valid_rate", "designer_token_fraction", "hint_token_fraction", "eval_token_fraction")
BENCHMARK_KEYS = ("items", "turns", "prompt_tokens", "observation_tokens", "token_fraction")
COMPONENTS = ("rollout", "designer", "training", "evaluation")


# ----- the assumptions file ----------------------------------------------------------------------------------
def load_assumptions(path: str | Path = COMPUTE_FILE) -> dict:
    """The assumptions file as a dict, with its sections checked (bad keys name the file and what is allowed)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"compute assumptions file {str(path)!r} does not exist")
    data = load_yaml(path) or {}
    for section in ("hardware", "defaults", "models", "benchmarks"):
        if not isinstance(data.get(section), dict):
            raise ConfigError(f"{path}: section {section!r} is missing or not a mapping")
    _check_keys(data["defaults"], ASSUMPTION_KEYS, f"{path}: defaults", required=True)
    if not _positive(data["hardware"].get("peak_tflops_bf16")):
        raise ConfigError(f"{path}: hardware.peak_tflops_bf16 must be a positive number, "
                          f"got {data['hardware'].get('peak_tflops_bf16')!r}")
    for name, entry in data["models"].items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: models.{name} must be a mapping")
        _check_keys(entry, MODEL_KEYS + ASSUMPTION_KEYS, f"{path}: models.{name}")
        missing = [k for k in MODEL_KEYS if k not in entry]
        if missing:
            raise ConfigError(f"{path}: models.{name} lacks {missing}; every model needs {list(MODEL_KEYS)}")
    for name, entry in data["benchmarks"].items():
        _check_keys(entry if isinstance(entry, dict) else {}, BENCHMARK_KEYS, f"{path}: benchmarks.{name}")
    return data


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _check_keys(entry: dict, allowed: tuple, where: str, required: bool = False) -> None:
    unknown = sorted(set(entry) - set(allowed))
    if unknown:
        raise ConfigError(f"{where} has unknown key(s) {unknown}; allowed: {list(allowed)}")
    if required:
        missing = [k for k in allowed if k not in entry]
        if missing:
            raise ConfigError(f"{where} lacks {missing}")
    for key, value in entry.items():
        if key in FRACTIONS and not (_positive(value) and value <= 1):
            raise ConfigError(f"{where}.{key} must be in (0, 1], got {value!r}")


def model_assumptions(assumptions: dict, model_name: str, path: str | Path = COMPUTE_FILE) -> dict:
    """The defaults overridden by the model's entry; an unknown model names the file and the known names."""
    models = assumptions["models"]
    if model_name not in models:
        raise ConfigError(f"model card {model_name!r} has no entry under 'models' in {path}; known: "
                          f"{', '.join(sorted(models))}. Add its parameter counts and shape there.")
    return {**assumptions["defaults"], **models[model_name]}


# ----- FLOPs and hours -----------------------------------------------------------------------------------------
def sequence_flops(tokens: float, model: dict) -> float:
    """Forward FLOPs of one causal sequence of ``tokens`` tokens: 2 N T (+ L d T^2 with the attention term)."""
    n_active = model["params_active_b"] * 1e9
    attention = model["n_layers"] * model["d_attn"] * tokens ** 2 if model["include_attention"] else 0.0
    return 2.0 * n_active * tokens + attention


def gpu_hours(flops: float, mfu: float, peak_tflops: float) -> float:
    return flops / (peak_tflops * 1e12 * mfu) / 3600.0


@dataclass(frozen=True)
class Episode:
    """Expected length of one episode: all tokens of its sequence and the sampled ones among them."""

    tokens: float
    generated: float


def episode_length(turns: float, generated_per_turn: float, prompt: float, observation: float,
                   context: int) -> Episode:
    """First prompt, then ``turns`` sampled turns with an observation between turns, cut at ``context``
    tokens (the sampled share is kept when the sequence is cut)."""
    turns = max(turns, 1.0)
    generated = turns * generated_per_turn
    total = prompt + generated + (turns - 1) * observation
    if total > context:
        generated *= context / total
        total = float(context)
    return Episode(total, generated)


@dataclass
class Work:
    """Token and FLOP totals of one component."""

    sequences: float = 0.0
    tokens: float = 0.0
    generated_tokens: float = 0.0
    flops: float = 0.0
    gpu_hours: float = 0.0

    def add(self, other: "Work") -> None:
        for key in ("sequences", "tokens", "generated_tokens", "flops", "gpu_hours"):
            setattr(self, key, getattr(self, key) + getattr(other, key))


def inference(episode: Episode, count: float, model: dict, peak: float) -> Work:
    """``count`` episodes generated by the inference engine: decode share at mfu_generate, the rest at prefill."""
    flops = sequence_flops(episode.tokens, model) * count
    share = episode.generated / episode.tokens if episode.tokens else 0.0
    hours = (gpu_hours(flops * share, model["mfu_generate"], peak)
             + gpu_hours(flops * (1 - share), model["mfu_prefill"], peak))
    return Work(count, episode.tokens * count, episode.generated * count, flops, hours)


def training(episode: Episode, count: float, model: dict, peak: float, kl: bool) -> Work:
    """``count`` sequences trained: 3 forward-equivalents (6 N per token) + old-policy and reference forwards."""
    passes = 3 + int(bool(model["old_logprob_forward"])) + int(kl)
    flops = passes * sequence_flops(episode.tokens, model) * count
    return Work(count, episode.tokens * count, episode.generated * count, flops,
                gpu_hours(flops, model["mfu_train"], peak))


# ----- the run ---------------------------------------------------------------------------------------------------
def expected_attempts(valid_rate: float, attempts: int) -> float:
    """Expected design attempts per slot when each validates with probability p and at most A are made:
    sum_{i<A} (1-p)^i = (1 - (1-p)^A) / p."""
    return (1 - (1 - valid_rate) ** attempts) / valid_rate


def filled_share(valid_rate: float, attempts: int) -> float:
    """Share of slots holding a valid environment: 1 - (1-p)^A."""
    return 1 - (1 - valid_rate) ** attempts


def agent_episode(config, model: dict) -> Episode:
    agent = config.agent
    return episode_length(agent.max_turns * model["agent_turn_fraction"],
                          agent.max_new_tokens * model["agent_token_fraction"],
                          model["agent_prompt_tokens"], model["observation_tokens"], agent.max_context_tokens)


def design_episode(config, model: dict) -> Episode:
    """One design call: instructions + corpus document + memory seeds, then the environment."""
    words = (config.corpus.tool_use_max_words if config.selfplay.flavour == "tool_use"
             else config.corpus.games_max_words)
    prompt = model["designer_instruction_tokens"]
    if config.corpus.enabled:
        prompt += words * model["tokens_per_word"]
    if config.memory.enabled:
        prompt += (config.memory.n_positive + 1) * model["memory_seed_tokens"]
    generated = config.designer.max_new_tokens * model["designer_token_fraction"]
    return Episode(prompt + generated, generated)


def hint_episode(config, model: dict, design: Episode) -> Episode:
    generated = config.designer.hint_max_new_tokens * model["hint_token_fraction"]
    return Episode(design.generated + model["hint_prompt_extra_tokens"] + generated, generated)


def eval_episodes(config, name: str, bench: dict, where: str) -> float:
    """Episodes of one evaluation of benchmark ``name``: its item count (assumptions ``items`` unless the config
    lists or cuts them) times its repeats (samples, episodes, trials). ``eval.max_items`` > 0 cuts the items of
    every benchmark."""
    section = getattr(config.eval, name)

    def items(default_key: str = "items") -> float:
        value = bench.get(default_key)
        if not _positive(value):
            raise ConfigError(f"{where}: benchmarks.{name}.items must be a positive number, got {value!r}")
        return value

    def cut(n: float, limit: int) -> float:
        return min(n, limit) if limit else n

    def per_key(values: dict, keys: list, limit: int) -> float:
        missing = [k for k in keys if k not in (values or {})]
        if missing:
            raise ConfigError(f"{where}: benchmarks.{name}.items lacks {missing}; it needs a count per entry of "
                              f"eval.{name}")
        return sum(cut(values[k], limit) for k in keys)

    if name == "reasoning_gym_hard":
        n = (len(section.tasks) or items()) * section.episodes_per_task
    elif name == "aime":
        n = len(section.years) * cut(items(), section.max_problems) * section.samples
    elif name == "gpqa_diamond":
        n = cut(items(), section.max_questions)
    elif name == "livecodebench":
        n = cut(items(), section.max_problems) * section.samples
    elif name == "gem_games":
        n = len(section.games) * section.episodes
    elif name == "heldout_library":
        n = len(section.environments) * section.episodes
    elif name == "mechanism_check_heldout":
        n = len(section.needs) * section.instances
    elif name == "heldout_mechanisms":
        from spade.evals.heldout_mechanisms import heldout_seeds

        n = sum(len(seeds) for seeds in heldout_seeds(section).values()) * len(section.presentations)
    elif name == "bfcl_multi_turn":
        n = len(section.categories) * cut(items(), section.max_entries_per_category)
    elif name == "tau2":
        n = per_key(bench.get("items"), list(section.domains), section.max_tasks) * section.trials
    elif name == "acebench":
        n = per_key(bench.get("items"), list(section.categories), section.max_items)
    else:
        raise ConfigError(f"benchmark {name!r} has no episode count rule in spade.train.compute.eval_episodes")
    return cut(n, config.eval.max_items)


def eval_turns(config, name: str, bench: dict) -> float:
    """Expected model turns per episode, capped by the benchmark's own turn limit where the config has one."""
    turns = bench.get("turns", 1)
    limit = getattr(getattr(config.eval, name), "max_turns", 0)
    return min(turns, limit) if limit else turns


def eval_pairs(config) -> list[tuple[int, str]]:
    """(step, benchmark) evaluations of the run: during_training at step 0 and every checkpoint, final at step 0
    and the last step; each pair once."""
    steps = [0] + config.selfplay.checkpoint_steps()
    pairs = [(s, b) for b in config.eval.during_training for s in steps]
    pairs += [(s, b) for b in config.eval.final for s in (0, steps[-1])]
    return list(dict.fromkeys(pairs))


@dataclass
class Estimate:
    run: str
    model: str
    params_total_b: float
    params_active_b: float
    gpus: int
    gpu: str
    components: dict  # component -> Work
    counts: dict  # what was counted (steps, slots, episodes, ...)
    assumptions: dict

    @property
    def total_gpu_hours(self) -> float:
        return sum(w.gpu_hours for w in self.components.values())

    @property
    def wall_clock_hours(self) -> float:
        return self.total_gpu_hours / max(self.gpus, 1)

    def to_dict(self) -> dict:
        return {"run": self.run, "model": self.model, "params_total_b": self.params_total_b,
                "params_active_b": self.params_active_b, "gpu": self.gpu, "gpus_suggested": self.gpus,
                "gpu_hours": {k: w.gpu_hours for k, w in self.components.items()},
                "total_gpu_hours": self.total_gpu_hours, "wall_clock_hours_on_suggested_gpus": self.wall_clock_hours,
                "components": {k: asdict(w) for k, w in self.components.items()},
                "counts": self.counts, "assumptions": self.assumptions,
                "note": "rough estimate from configs/compute.yaml assumptions, not a measurement"}


def estimate(config, assumptions: dict | None = None, path: str | Path = COMPUTE_FILE) -> Estimate:
    """The GPU-hour estimate of the run described by ``config`` (a :class:`spade.config.SpadeConfig`)."""
    assumptions = assumptions if assumptions is not None else load_assumptions(path)
    model = model_assumptions(assumptions, config.model.name, path)
    peak = assumptions["hardware"]["peak_tflops_bf16"]
    sp = config.selfplay
    from spade.core.designed_pool import pool_max_rounds, pool_size_of
    from spade.core.env_source import baseline_of, designs_pool, pool_slots

    slots = pool_slots(config)  # active_skills x envs_per_skill; baseline.rlve_slots in 'rlve'

    base = baseline_of(config)  # fixed_pool / rlve fill their sets from a source, designed pools design before training
    external = base.mode == "fixed_external_designer"  # designs and hints run on the external endpoint, not here
    pooled = designs_pool(config)  # fixed_env_grpo, or the external designer's offline pool
    every_k = math.ceil(sp.total_steps / sp.regen_interval)
    # designer_feedback.revisions R: each attempt may be followed by up to R revisions, counted as further tries of
    # the same validity and length (revision prompts are longer: the previous answer and report are added)
    p, attempts = model["design_valid_rate"], sp.design_attempts * (1 + config.designer_feedback.revisions)
    designed_valid = slots * filled_share(p, attempts)
    if pooled:  # rounds of `slots` designs until the pool holds pool_size valid environments (or the round cap)
        regenerations = min(math.ceil(pool_size_of(config) / max(designed_valid, 1e-9)), pool_max_rounds(config))
    else:
        regenerations = every_k if base.mode == "spade" or external else 0  # the external designer online: every k
    hint_sets = regenerations if not pooled and base.mode in ("spade", "fixed_external_designer") else int(base.hint_arm)
    # every step's set of a pool mode is full (drawn from the pool or the source); a designed set keeps its empty slots
    filled = slots if sp.backfill or pooled or base.mode in ("fixed_pool", "rlve") else slots * filled_share(p, attempts)
    tries = slots * expected_attempts(p, attempts)

    agent = agent_episode(config, model)
    # selfplay.batch_structure: 'global_batch' spreads one global batch of no-hint plays over the filled slots
    # (ceil(192 / 24) = 8 each); 'groups' plays G per slot. The hint arm plays G per slot at each regeneration.
    per_step = filled * sp.group_size if sp.batch_structure == "groups" else (config.train.global_batch if filled else 0)
    no_hint = sp.total_steps * per_step
    hinted = hint_sets * filled * sp.group_size
    rollout = inference(agent, no_hint + hinted, model, peak)

    design = design_episode(config, model)
    designer = Work()
    if not external:
        designer.add(inference(design, regenerations * tries, model, peak))
        designer.add(inference(hint_episode(config, model, design), hint_sets * filled, model, peak))

    kl = config.train.kl_coef > 0
    designer_samples = 0.0
    if sp.train_designer:
        designer_samples = regenerations * (tries if config.designer.invalid == "penalty" else designed_valid)
    # 'global_batch': designer samples take their places in the batch, the surplus agent plays are not trained
    trained_agent = no_hint if sp.batch_structure == "groups" else max(0.0, no_hint - designer_samples)
    trained = training(agent, trained_agent, model, peak, kl)
    if designer_samples:
        trained.add(training(design, designer_samples, model, peak, kl))

    evaluation, per_benchmark = Work(), {}
    for step, name in eval_pairs(config):
        bench = assumptions["benchmarks"].get(name)
        if bench is None:
            raise ConfigError(f"benchmark {name!r} (config eval.during_training/final) has no entry under "
                              f"'benchmarks' in {path}; known: {', '.join(sorted(assumptions['benchmarks']))}")
        episodes = eval_episodes(config, name, bench, str(path))
        episode = episode_length(eval_turns(config, name, bench),
                                 config.eval.max_new_tokens * bench.get("token_fraction", model["eval_token_fraction"]),
                                 bench.get("prompt_tokens", 0), bench.get("observation_tokens", 0),
                                 config.eval.max_context_tokens)
        work = inference(episode, episodes, model, peak)
        evaluation.add(work)
        per_benchmark[name] = per_benchmark.get(name, 0.0) + work.gpu_hours

    counts = {"steps": sp.total_steps, "regenerations": regenerations, "slots": slots, "filled_slots": filled,
              "expected_attempts_per_slot": expected_attempts(p, attempts), "group_size": sp.group_size,
              "agent_episodes_no_hint": no_hint, "agent_episodes_hint": hinted, "agent_samples_trained": trained_agent,
              "agent_episode_tokens": agent.tokens, "agent_episode_generated_tokens": agent.generated,
              "design_attempts": regenerations * tries, "design_tokens": design.tokens,
              "designer_samples_trained": designer_samples, "kl_reference_forward": kl,
              "evaluations": len(eval_pairs(config)), "eval_gpu_hours_by_benchmark": per_benchmark}
    return Estimate(config.run_name, config.model.name, model["params_total_b"], model["params_active_b"],
                    int(model["gpus"]), str(assumptions["hardware"].get("gpu", "")),
                    {"rollout": rollout, "designer": designer, "training": trained, "evaluation": evaluation},
                    counts, {"hardware": assumptions["hardware"], **model})


# ----- output ------------------------------------------------------------------------------------------------------
HEADER = ("run", "model", "params (total/active, B)", "rollout", "designer", "training", "evaluation",
          "total GPU-h", "GPUs", "wall-clock h")


def hours_text(hours: float) -> str:
    """GPU-hours for a table: three significant digits below 100 (toy runs are tiny), whole hours above."""
    return f"{hours:,.0f}" if hours >= 100 else f"{hours:.3g}"


def table_rows(estimates: list[Estimate]) -> list[tuple]:
    rows = []
    for e in estimates:
        hours = [hours_text(e.components[c].gpu_hours) for c in COMPONENTS]
        rows.append((e.run, e.model, f"{e.params_total_b:g}/{e.params_active_b:g}", *hours,
                     hours_text(e.total_gpu_hours), str(e.gpus), hours_text(e.wall_clock_hours)))
    return rows


def to_markdown(estimates: list[Estimate]) -> str:
    """A Markdown table of the estimates (GPU-hours per component, total, suggested GPUs, wall-clock hours)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(estimates)]
    return "\n".join(lines) + "\n"
