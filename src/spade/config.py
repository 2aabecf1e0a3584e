"""The run configuration: one typed tree, loaded from layered YAML.

Layers, later wins: the recipe ``configs/recipes/<recipe>.yaml`` (the paper's Table 5 values), the
model card ``configs/models/<model_card>.yaml`` (under ``model:``), its GPU placement
``configs/openrlhf/<model_card>.yaml`` when there is one (under ``openrlhf:``), then the run file itself (for
example ``configs/default.yaml``, the toy CPU experiment) and command-line overrides. Every section
is a dataclass whose fields carry a description and a default; ``spade config schema`` prints them.
A bad key or value raises ``ConfigError`` naming the key, the value and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spade.core.agent import AgentConfig
from spade.core.env_source import EXTERNAL_MODE, BaselineConfig
from spade.configtools import ConfigError, deep_merge, from_dict, load_yaml, option
from spade.designer.corpus import CorpusConfig
from spade.designer.feedback import DesignerFeedbackConfig
from spade.designer.memory import MemoryConfig
from spade.envs.library.registry import FLAVOURS
from spade.envs.library_check import LibraryCheckConfig
from spade.envs.validate import ValidationConfig
from spade.evals.config import EvalConfig
from spade.inference.generation import SamplingParams
from spade.inference.generation_vllm import InferenceConfig
from spade.train.live_metrics import LoggingConfig
from spade.inference.models import ModelCard
from spade.core.rewards import INVALID_MODES
from spade.rlhf.config import OpenRLHFConfig
from spade.sandbox.config import SandboxConfig

__all__ = ["SpadeConfig", "ConfigError", "load_config", "CONFIG_DIR"]

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
DESIGNER_REWARDS = ("regret", "regret_window", "ema_lp", "calibration")
BATCH_STRUCTURES = ("global_batch", "groups")
PLATEAU_INPUTS = ("mean_return", "win_rate")
TRAIN_DEVICES = ("auto", "cpu", "cuda")
TRAIN_FROZEN = ("embeddings",)  # train.frozen: weights the local trainer may keep fixed
TRAIN_DTYPES = ("auto", "float32", "bfloat16")


@dataclass(frozen=True)
class SelfPlayConfig:
    flavour: str = option("interactive", "What the designer writes (spec 2); 'interactive' is the games setting.",
                          choices=FLAVOURS)
    skills: list = option(
        ["mathematical_reasoning", "logical_deduction", "spatial_reasoning", "pattern_recognition",
         "optimization", "causal_inference"],
        "Skills of the curriculum (the 2-skill ablation keeps two).",
    )
    active_skills: int = option(3, "Skills active per regeneration, round-robin (paper: 3 of 6).", min=1)
    envs_per_skill: int = option(8, "Environment slots per active skill (paper: 8, so 24 per rollout).", min=1)
    group_size: int = option(16, "Episodes per environment and arm, G (paper: 16).", min=1)
    regen_interval: int = option(4, "Steps between regenerations, k (paper: 4 games, 8 tool use).", min=1)
    total_steps: int = option(400, "Training steps (rollouts) of the run (paper: 400).", min=1)
    design_attempts: int = option(5, "Design attempts per slot before it stays empty (paper: 5).", min=1)
    top_up: str = option(
        "window", "Slots that no design attempt filled at a regeneration step (paper: they stay empty). 'window' "
        "(reference code): at every later step of the window the designer tries again (design_attempts per slot) "
        "for each still-empty slot; a slot filled late is played from that step on, has no hint, hint arm or "
        "regret; its designer reward is computed at the set's close (regret term 0) and logged, but its designer "
        "sample does not train (the reference rewards it 0, no gradient); it enters the memory only if "
        "memory.win_rate can measure it ('window_win'). 'none': slots stay empty "
        "until the next regeneration.", choices=("window", "none"))
    backfill: bool = option(
        False, "Fill slots the designer left empty from the built-in library (toy runs with weak designers only)."
    )
    backfill_checks: list = option(
        [], "Backfill from these learning-check environments (spade.envs.checks) instead of the built-in library "
        "(ours, integration runs only: the OpenRLHF CPU run needs nonzero advantages from a tiny random model while "
        "the designer still writes every set). [] = the library (selfplay.library_level).")
    library_level: str = option(
        "standard", "Difficulty tier of backfilled library environments: 'standard', or 'easy' (ours, toy only: "
        "smaller single-turn puzzles, only the library environments that have the tier are drawn).",
        choices=("standard", "easy"))
    train_designer: bool = option(True, "Train on designer samples; false = the 'w/o ED training' ablation.")
    same_problem: bool = option(
        False, "false (reference code, every paper run): each play of an environment resets with its own episode "
        "seed, so one group's plays see different instances. true (ours; the mechanism check, issue 48): every play "
        "of one environment at one step, hinted or not, resets with one seed (new every step, different for every "
        "environment), so a group compares replies to one instance, as GRPO's several answers to one prompt and "
        "the reference's fixed-environment groups (--spade-fixed-env-same-problem, baseline.rlve_shared_problem). "
        "The plays keep their own seeds as their names and for sampling.")
    checkpoint_every: int = option(50, "Save a checkpoint every N steps (and at the end).", min=1)
    batch_structure: str = option(
        "global_batch", "How one rollout becomes training samples (paper: 'global batch 192 (dynamic)'). "
        "'global_batch' (reference code): ceil(train.global_batch / valid environments) no-hint plays per environment "
        "and step (192 / 24 = 8), the hint arm plays group_size at the regeneration step, and the rollout is ONE "
        "optimizer step of at most train.global_batch samples: designer samples first, surplus agent samples cut "
        "from the tail (whole trailing environments). 'groups' (before issue 14): group_size no-hint plays per "
        "environment, every sample trained, in optimizer steps of train.global_batch (192 + 192 + 24 at paper scale).",
        choices=BATCH_STRUCTURES)

    def checkpoint_steps(self) -> list:
        """Steps after which a checkpoint exists; the final step always has one."""
        every = range(self.checkpoint_every, self.total_steps + 1, self.checkpoint_every)
        return sorted(set(every) | {self.total_steps})


@dataclass(frozen=True)
class DesignerConfig:
    temperature: float = option(0.6, "Designer sampling temperature (paper: 0.6).", min=0.0)
    top_p: float = option(1.0, "Designer nucleus sampling mass, designs and hints; 1.0 = off (paper: not stated; "
                               "reference code 0.95, set in the recipes).", min=0.0)
    top_k: int = option(0, "Designer samples among its k most likely tokens, designs and hints; 0 = off (paper: not "
                           "stated; reference code 20, set in the recipes). The policy's own designs only: a chat API "
                           "(external designer) gets top_p alone.", min=0)
    max_new_tokens: int = option(16384, "Most tokens per design (paper: 16,384; 20,000 for Qwen3-8B).", min=1)
    hint_max_new_tokens: int = option(4096, "Most tokens per hint (paper silent; reference code: 4,096 games, "
                                      "2,048 tool use, set in the tool-use recipe).", min=1)
    hint_temperature: float = option(0.3, "Hint sampling temperature (paper silent; reference code 0.3 for games "
                                     "and tool use). Set it to the designer temperature 0.6 for the previous "
                                     "behaviour.", min=0.0)
    hint_top_p: float = option(1.0, "Hint nucleus sampling mass; 1.0 = off (paper silent; reference code 0.9, the "
                                    "hint call's default, set in the recipes). Hints use no top-k, as there.", min=0.0)
    hint_timeout_s: float = option(
        0.0, "Wall-clock seconds one hint request may take; a request past it is asked again (3 requests in all) "
        "and, still timing out, leaves its environment without a hint: no hint arm, regret unmeasured (the regret "
        "term counts 0). 0 = no limit (ours before issue 40). Reference code: 120 with 3 tries (hint_generator.py:250-"
        "257, 268-287; orchestrator.py:1939-1944, 2042), set in both recipes. The policy's own hints only; needs a "
        "backend that can stop a request (OpenRLHF's engines, the HF backend).", min=0.0)
    enable_thinking: bool | None = option(
        None, "The chat template's enable_thinking for the policy's non-agent prompts: designs, feedback revisions, "
        "hints and the tool-use LLM screen (Qwen3-8B's thinking switch; templates that do not read it ignore it). "
        "null = the template's default (Qwen3-8B: thinking). The reference renders these with the adapter's default, "
        "--apply-chat-template-kwargs '{\"enable_thinking\":false}' in its Qwen3-8B scripts "
        "(cmd/games/train_spade_8b.sh:88, cmd/tool_use/_train_spade_blend.sh:161; corpus_orchestrator.py:113, "
        "model_adapter.py:99-101, 192, 269), so only the actor thinks; false in the 8B paper run files. An external "
        "designer's chat API gets no template variables.", choices=(None, True, False))
    response_prefix: str = option(
        "", "Deviation (ours, toy only): text that opens every design reply right after the chat template's "
        "generation prompt, e.g. an opened ```python fence and the start of the class, so a model too small to answer "
        "in code still writes a module. It is part of the prompt tokens (loss mask 0, never trained) and of the text "
        "intake and validation read; the policy's own designs only (an external designer refuses it). '' = none "
        "(paper).")
    response_template: str = option(
        "", "Deviation (ours, mechanism run only): a check environment (spade.envs.checks TEMPLATE_MARKERS) whose file, "
        "cut after its marker, opens every design reply as designer.response_prefix does, so that the design's own "
        "tokens complete the module: 'copy_span' leaves the designer its difficulty NEED to write (issue 39). Excludes "
        "designer.response_prefix. '' = none (paper).")
    reward: str = option(
        "regret", "Designer reward: 'regret' = the blend of floored hint regret and the difficulty plateau (paper; "
        "reward.*); 'regret_window' = max(0, mean hinted return - the window's mean no-hint return), no plateau, no "
        "scale (the reference's regret_based variant, delayed_env_rewards.py:304-366, used by its tool-use 4B script, "
        "cmd/tool_use/train_spade_4b.sh:91); 'ema_lp' = EMA learning potential; 'calibration' = the calibration band "
        "(AutoEnvScaling). Every one is centred per skill.", choices=DESIGNER_REWARDS)
    invalid: str = option("discard", "Invalid candidates: 'discard' (paper, no sample) or 'penalty'.",
                          choices=INVALID_MODES)
    invalid_penalty: float = option(-1.0, "Reward of an invalid candidate when invalid = 'penalty'.")

    def opening(self) -> str:
        """The text every design reply starts with: the template of ``response_template``, else ``response_prefix``."""
        if self.response_template:
            from spade.envs.checks import template_source

            return template_source(self.response_template, "designer.response_template")
        return self.response_prefix

    def design_params(self) -> SamplingParams:
        """How a design is sampled (the policy's designs, revisions and the fidelity check's)."""
        return SamplingParams(self.temperature, self.top_p, self.max_new_tokens, top_k=self.top_k)

    def hint_params(self) -> SamplingParams:
        """How a hint is sampled: its own temperature and top-p (reference code: 0.3 and the hint call's 0.9), no
        top-k."""
        return SamplingParams(self.hint_temperature, self.hint_top_p, self.hint_max_new_tokens,
                              timeout_s=self.hint_timeout_s)

    def screen_params(self, validation: ValidationConfig) -> SamplingParams:
        """How the tool-use LLM screen samples a verdict: validation.screen_temperature and screen_max_new_tokens,
        the hint's top-p and no top-k (reference code: the validator's call passes temperature and max tokens and
        keeps the call's top_p default 0.9, as the hint call does; spade/core/env_validator.py:166-172)."""
        return SamplingParams(validation.screen_temperature, self.hint_top_p, validation.screen_max_new_tokens,
                              timeout_s=validation.screen_timeout_s)


@dataclass(frozen=True)
class RewardConfig:
    regret_weight: float = option(0.4, "Weight of the floored regret in the designer reward (paper: 0.4).", min=0.0)
    plateau_weight: float = option(0.6, "Weight of the difficulty plateau (paper: 0.6).", min=0.0)
    regret_scale: float = option(0.15, "Regret normalisation scale (paper: 0.15).", min=1e-9)
    band_low: float = option(0.4, "Plateau band lower edge (paper: 0.4; 0.2 later in the 4B run).", min=0.0)
    band_high: float = option(0.6, "Plateau band upper edge (paper: 0.6; 0.4 later in the 4B run).", min=0.0)
    ramp: float = option(0.25, "Plateau ramp width on each side (paper: 0.25).", min=1e-9)
    plateau_input: str = option(
        "mean_return", "What the difficulty plateau reads over an environment's k-step window. 'mean_return' "
        "(reference code): the mean no-hint return R_A (clipped to [0, 1]). 'win_rate' (the paper's wording, before "
        "issue 14): the share of full wins. Equal on 0/1 returns; up to the whole plateau weight apart on partial "
        "rewards.", choices=PLATEAU_INPUTS)
    ema_g_fast: float = option(0.98, "EMA learning potential: fast rate g1, the weight of the new value in "
                               "mu <- (1-g) mu + g x (paper silent; reference code scripts: 0.98). The previous "
                               "default 0.5 remains available by setting the key.", min=0.0)
    ema_g_slow: float = option(0.85, "EMA learning potential: slow rate g2 < g1, same form (paper silent; reference "
                               "code scripts: 0.85). The previous default 0.1 remains available by setting the key.",
                               min=0.0)


@dataclass(frozen=True)
class TrainConfig:
    learning_rate: float = option(1e-6, "Constant learning rate (paper: 1e-6).", min=0.0)
    adam_beta1: float = option(0.9, "Adam beta1 (paper: 0.9).", min=0.0)
    adam_beta2: float = option(0.98, "Adam beta2 (paper: 0.98).", min=0.0)
    weight_decay: float = option(0.1, "AdamW weight decay (paper: 0.1).", min=0.0)
    eps_low: float = option(0.2, "Lower clip epsilon (paper: 0.20).", min=0.0)
    eps_high: float = option(0.28, "Upper clip epsilon (paper: 0.28).", min=0.0)
    kl_coef: float = option(0.0, "KL penalty (k3) against the initial policy (paper: 0; 0.005 for Qwen3-8B).", min=0.0)
    logprob_temperature: float | None = option(
        1.0, "Temperature of the log-probs the policy loss (and TIS, and the KL reference) is computed from: the "
        "logits are divided by it. 1.0 (reference code: samples at 0.6, takes training log-probs at the rollout "
        "temperature 1.0, train_spade_30b.sh:103, 114) trains the model's own distribution; null = the agent's "
        "sampling temperature (agent.temperature), the distribution the tokens were sampled from (ours before issue "
        "32; the paper does not say). Must be > 0.", min=0.0)
    loss_aggregation: str = option(
        "seq_mean_token_mean", "How the policy loss of an optimizer step is averaged: 'seq_mean_token_mean' (the "
        "reference code: each sample's token mean, summed, divided by the samples of the step) or 'token_mean' (the "
        "paper's words: the mean over every trained token of the step, where long samples weigh more).",
        choices=("seq_mean_token_mean", "token_mean"))  # = spade.core.losses.LOSS_AGGREGATIONS (torch-free here)
    tis: bool = option(True, "Truncated importance sampling (paper: on): each trained token's loss is weighted by "
                       "min(exp(training log-prob - rollout log-prob), tis_cap), the samples train.tis_samples names.")
    tis_samples: str = option(
        "all", "Which samples the local trainer weights with TIS. 'all' (reference code: slime's vanilla TIS, "
        "slime/backends/megatron_utils/loss.py:750-771, applied to every sample by --use-tis in every script): fresh "
        "samples too, whose weight is not 1 when train.logprob_temperature differs from the sampling temperature (the "
        "rollout log-probs are the sampler's, at the sampling temperature 0.6; training log-probs at 1.0); 'delayed' "
        "(ours before issue 40): delayed designer samples only, every other sample weighs 1. OpenRLHF applies TIS to "
        "every sample ('delayed' is refused there).", choices=("all", "delayed"))
    tis_cap: float = option(2.0, "TIS cap C (not stated in the paper).", min=1.0)
    rollout_logprobs: str = option(
        "reference", "Which log-probs vLLM engines report for the tokens they sample (OpenRLHF's engines, the "
        "preflight's, the CPU run's, inference.backend vllm); TIS and OpenRLHF's vllm_kl compare them with the "
        "trainer's full softmax. 'reference': log_softmax(logits / T) over the whole vocabulary, the token still "
        "sampled after top-k/top-p (the reference's SGLang sampler; a patch of vLLM 0.29.0's samplers, "
        "spade.inference.vllm_logprobs, refused on other vLLM versions); 'processed': vLLM's own processed_logprobs, "
        "renormalised over the tokens top-k/top-p keep, which shrinks every TIS weight by the kept mass. The HF "
        "backend always reports the reference's value.", choices=("reference", "processed"))
    designer_upweight_cap: float = option(
        50.0, "Cap of the designer-sample up-weighting factor min(agent samples / designer samples * k, cap) "
        "(reference: 50, reached by tool use: 192 / 24 * 8 = 64; games give 192 / 24 * 4 = 32).", min=1.0)
    designer_upweight_count: str = option(
        "returned", "The agent samples N_RA of the up-weight with selfplay.batch_structure 'global_batch': "
        "'returned' (reference code, spade_rollout.py:598-603) counts the no-hint plays that came back with tokens, "
        "before the batch is trimmed (failed plays dropped), so designer samples mature after the step's plays; "
        "'planned' (before issue 32) counts the plays planned (plays per environment x valid environments) when "
        "the step begins.", choices=("returned", "planned"))
    global_batch: int = option(192, "Samples per optimizer step (paper: 192).", min=1)
    micro_batch: int = option(4, "Samples per forward/backward pass at most (gradient accumulation); the step's samples, "
                             "sorted by length, start a new micro batch where one is over twice as long as its micro "
                             "batch's first (spade.train.trainer.micro_batch_groups).", min=1)
    max_grad_norm: float = option(1.0, "Gradient clipping norm (not stated in the paper).", min=0.0)
    frozen: list = option(
        [], "Weights the local trainer keeps fixed (ours; every paper config leaves it []: every weight trains, as in "
        "the paper). Allowed entries: 'embeddings' (the input token embeddings). The mechanism runs freeze them "
        "(issue 48): at the toy's learning rate 2e-3 AdamW moves every embedding entry by about 2e-3 a step, some 7% "
        "of the tiny model's entries (about 0.03), whatever the gradient's size; the tokens only the 2.8k-token "
        "design prompt holds got a designer-only push each design step, the one-token design position's state "
        "turned over within 10 steps and every digit fell below the rest of the vocabulary (all designs invalid, "
        "no slot filled, the run stalled; seeds 0 and 2 at step 9). The OpenRLHF backend refuses a non-empty list.")
    deterministic: bool = option(
        True, "Run the local trainer with torch's deterministic kernels (torch.use_deterministic_algorithms), so that "
        "one config gives the same metrics, weights and tables bit for bit on one machine and thread count. Why: on the "
        "CPU the backward of indexing with repeated indices (index_put with accumulate; sequence_logprobs' shared "
        "forward pass of a design prompt makes one) adds with atomics from every thread in whatever order they "
        "arrive, so two runs of one config parted in the last bits from their first training step (issue 48); the "
        "deterministic kernel adds in order. On cuda an op without a "
        "deterministic kernel warns instead of stopping the run. false: torch's defaults.")
    device: str = option(
        "auto", "Where the local trainer (`spade train`) runs: its model, batches, KL reference model, HF generation "
        "backend and the checkpoints it resumes from (loaded onto this device whichever device wrote them). "
        "'cuda': one GPU (an error when torch sees none); 'cpu'; 'auto': cuda when torch sees a GPU, else the CPU.",
        choices=TRAIN_DEVICES)
    dtype: str = option(
        "auto", "Weight dtype of the local trainer's model (forward, backward and HF generation). 'auto': bfloat16 on "
        "cuda, float32 on the CPU. Why bfloat16 on a GPU: its tensor cores run bf16 matmuls many times faster than "
        "fp32 (H100/H200 datasheet: 989 dense bf16 vs 67 fp32 TFLOP/s) and weights and KV cache take half the memory "
        "and bandwidth; bf16 keeps fp32's exponent range, so no loss scaling is needed (float16, which needs it, is "
        "not offered). Below float32 the optimizer keeps float32 master weights (saved with each checkpoint): an AdamW "
        "step of lr 1e-6 is far below bf16's resolution (neighbouring bf16 values lie 0.4-0.8% of a weight apart) and "
        "would be rounded away. Why float32 on the CPU: bf16 matmuls were no faster there (our 2-core machine, "
        "1024 x 1024: 66 vs 71 ms), so fp32 costs nothing and keeps the toy runs' numbers.", choices=TRAIN_DTYPES)

    def __post_init__(self):
        if self.logprob_temperature is not None and not self.logprob_temperature > 0:
            raise ValueError(f"config key 'train.logprob_temperature' must be > 0 or null (the agent's sampling "
                             f"temperature), got {self.logprob_temperature!r}")


@dataclass(frozen=True)
class PaperConfig:
    """Which of our runs stands for which row, curve and quoted number of the paper (relative paths are
    taken from the repository root). The defaults map the paper-scale runs; configs/default.yaml points at
    paper/toy/, where the toy run stands in for the SPADE rows so that every artifact renders from it."""

    table_runs: str = option("paper/table_runs.yaml", "Run mapping of the paper tables (see the file's header).")
    figure_runs: str = option("paper/figure_runs.yaml", "Run mapping of the paper figures (see the file's header).")
    number_runs: str = option("paper/number_runs.yaml", "Run mapping of the numbers quoted in the paper's text.")
    comparison_runs: str = option("paper/comparison_runs.yaml", "Run mapping of the environment-source comparison "
                                  "(ours, not in the paper: which run stands for which source; see the file's header).")
    latex_engine: str = option("latexmk", "LaTeX driver for paper/main.tex: 'latexmk' (pdflatex via latexmk), "
                               "'pdflatex' (run twice) or 'tectonic'.", choices=("latexmk", "pdflatex", "tectonic"))


@dataclass(frozen=True)
class SpadeConfig:
    run_name: str = option("run", "Name of the run; outputs go to <results_dir>/runs/<run_name>.")
    recipe: str = option("games", "Recipe file under configs/recipes/ that the run starts from.")
    model_card: str = option("smollm2-135m", "Model card file under configs/models/ (loaded into 'model').")
    seed: int = option(0, "Master seed; every random choice of a run derives from it.")
    results_dir: str = option("results", "Folder of all generated outputs (git-ignored).")
    model: ModelCard = option(ModelCard(), "The policy model (one model plays both roles).")
    selfplay: SelfPlayConfig = option(SelfPlayConfig(), "The self-play loop (Algorithm 1).")
    designer: DesignerConfig = option(DesignerConfig(), "The environment designer role.")
    agent: AgentConfig = option(AgentConfig(), "The reasoning agent role.")
    reward: RewardConfig = option(RewardConfig(), "Designer reward shaping (spec 4).")
    train: TrainConfig = option(TrainConfig(), "The GRPO update (spec 6, Table 5).")
    corpus: CorpusConfig = option(CorpusConfig(), "Grounding documents for the designer.")
    memory: MemoryConfig = option(MemoryConfig(), "The environment memory.")
    eval: EvalConfig = option(EvalConfig(), "Evaluation of checkpoints: the benchmark suite (spec 9).")
    sandbox: SandboxConfig = option(SandboxConfig(), "The sandbox that runs generated code.")
    validation: ValidationConfig = option(ValidationConfig(), "Checks a candidate environment must pass.")
    designer_feedback: DesignerFeedbackConfig = option(
        DesignerFeedbackConfig(), "Feedback revisions of rejected design candidates (issue 7; off = paper).")
    library_check: LibraryCheckConfig = option(LibraryCheckConfig(), "The built-in library's oracle/random check.")
    paper: PaperConfig = option(PaperConfig(), "The paper's tables, figures and quoted numbers (rules/paper_*.smk).")
    inference: InferenceConfig = option(InferenceConfig(), "Generation backend of evaluation and local training "
                                        "(hf or vllm) and the vLLM engine settings.")
    openrlhf: OpenRLHFConfig = option(OpenRLHFConfig(), "GPU training through OpenRLHF: placement and engines "
                                      "(docs/OPENRLHF.md, Launcher); presets in configs/openrlhf/<model_card>.yaml.")
    baseline: BaselineConfig = option(BaselineConfig(), "Environment source: SPADE's designer or a fixed-environment "
                                      "baseline (spade.core.env_source).")
    logging: LoggingConfig = option(LoggingConfig(), "Live metrics of training: TensorBoard event files and offline "
                                    "W&B runs in the run folder (spade.train.live_metrics).")
    toy_ablations: dict = option({}, "Workflow only (`snakemake toy_ablations`): run name -> settings laid over this "
                                 "config, one extra run per entry (rules/common.smk). A run itself ignores it.")
    learning_check: dict = option({}, "Workflow only (the default target): run name -> settings laid over this "
                                  "config, one extra main run per entry, the toy's learning check (one per seed; rules/common.smk). "
                                  "A run itself ignores it.")
    mechanism_check: dict = option({}, "Workflow only (the default target): run name -> settings laid over this "
                                   "config, one extra run per entry, the mechanism check of SPADE's own loop (issue 39: "
                                   "trained designer and control, one per seed; rules/common.smk, docs/MECHANISM_CHECK.md)"
                                   ". A run itself ignores it.")
    toy_tool_use: dict = option({}, "Workflow only (`snakemake toy_tool_use`): run name -> settings laid over this "
                                "config, or the YAML file holding them (configs/toy_tool_use.yaml): the tool-use toy "
                                "(rules/common.smk). A run itself ignores it.")

    def __post_init__(self):
        for key in ("toy_ablations", "learning_check", "mechanism_check", "toy_tool_use"):
            for name, overlay in getattr(self, key).items():
                if not isinstance(overlay, (dict, str)):
                    raise ConfigError(f"config key '{key}.{name}' must be a mapping of the settings the run "
                                      f"changes, or the path of a YAML file holding one, got {overlay!r:.120}")
        for name in self.train.frozen:
            if name not in TRAIN_FROZEN:
                raise ConfigError(f"config key 'train.frozen' has {name!r}; allowed entries: {list(TRAIN_FROZEN)}")
        seeds = self.validation.seeds
        if len(seeds) != 2 or len(set(seeds)) != 2 or not all(isinstance(s, int) for s in seeds):
            raise ConfigError(f"config key 'validation.seeds' must be two different integers, got {seeds!r}")
        if not 0.0 <= self.reward.band_low <= self.reward.band_high <= 1.0:
            raise ConfigError(
                f"config keys 'reward.band_low'/'reward.band_high' must satisfy 0 <= low <= high <= 1, "
                f"got {self.reward.band_low!r}/{self.reward.band_high!r}"
            )
        if self.logging.wandb and self.openrlhf.wandb_project:
            raise ConfigError(f"config keys 'logging.wandb' (true: offline W&B runs in the run folder) and "
                              f"'openrlhf.wandb_project' ({self.openrlhf.wandb_project!r}: OpenRLHF logs online) "
                              "exclude each other; set openrlhf.wandb_project: '' to log offline (`wandb sync` "
                              "uploads the runs later), or logging.wandb: false to log online")
        if self.reward.ema_g_fast <= self.reward.ema_g_slow:
            raise ConfigError("config key 'reward.ema_g_fast' must be larger than 'reward.ema_g_slow' "
                              f"(got {self.reward.ema_g_fast!r} <= {self.reward.ema_g_slow!r})")
        if self.designer.response_prefix and self.designer.response_template:
            raise ConfigError(f"config keys 'designer.response_prefix' ({self.designer.response_prefix!r:.40}) and "
                              f"'designer.response_template' ({self.designer.response_template!r}) both open the design "
                              "reply; set one of them to ''")
        for key in ("response_prefix", "response_template"):
            served = key == "response_prefix" and self.baseline.external_serve  # our server opens it (--reply-prefix)
            if getattr(self.designer, key) and self.baseline.mode == EXTERNAL_MODE and not served:
                raise ConfigError(f"config key 'designer.{key}' is {getattr(self.designer, key)!r:.60}, but "
                                  f"baseline.mode {EXTERNAL_MODE!r} designs through an external model's chat API, "
                                  f"which cannot be given an opened reply (only our own server, "
                                  f"baseline.external_serve, opens a response_prefix); set designer.{key}: ''")
        if self.designer.response_template:
            from spade.envs.checks import template_source

            template_source(self.designer.response_template, "designer.response_template")
        warmed = self.model.format_warmup
        if warmed.env and warmed.prompt_style != self.agent.prompt_style:
            raise ConfigError(f"config key 'agent.prompt_style' is {self.agent.prompt_style!r}, but model card "
                              f"{self.model_card!r} learned its reply format on prompts of style "
                              f"{warmed.prompt_style!r} (model.format_warmup.prompt_style); set agent.prompt_style: "
                              f"{warmed.prompt_style}")
        if warmed.design_alphabet and (self.designer.response_template != warmed.env or
                                       not set(self.selfplay.skills) <= set(warmed.design_skills)):
            raise ConfigError(f"model card {self.model_card!r} warmed its designer up on the design prompts of skills "
                              f"{list(warmed.design_skills)} opened by template {warmed.env!r} "
                              "(model.format_warmup.design_skills, .env), but this run has designer.response_template "
                              f"{self.designer.response_template!r} and selfplay.skills {list(self.selfplay.skills)}; "
                              "set them to match")
        if self.selfplay.active_skills > len(self.selfplay.skills):
            raise ConfigError(f"config key 'selfplay.active_skills' ({self.selfplay.active_skills}) exceeds the "
                              f"number of skills in 'selfplay.skills' ({len(self.selfplay.skills)})")
        from spade.designer.skills import get_skill

        for skill in self.selfplay.skills:
            try:
                get_skill(skill)
            except (KeyError, ValueError) as exc:
                raise ConfigError(f"config key 'selfplay.skills' has unknown skill {skill!r}: {exc}") from None


def _layer(name: str, folder: str, key: str, config_dir: Path) -> dict:
    path = config_dir / folder / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (config_dir / folder).glob("*.yaml"))
        raise ConfigError(f"config key '{key}' names {name!r}, but {path} does not exist; known: {known}")
    return load_yaml(path)


def resolve_layers(run: dict, config_dir: Path = CONFIG_DIR) -> dict:
    """Merge recipe < model card < run settings into one plain dict (not yet validated)."""
    recipe = run.get("recipe", "games")
    card = run.get("model_card", "smollm2-135m")
    merged = deep_merge(_layer(recipe, "recipes", "recipe", config_dir), {"model": _layer(card, "models", "model_card", config_dir)})
    preset = config_dir / "openrlhf" / f"{card}.yaml"
    if preset.is_file():  # this backbone's GPU placement; a run file's `openrlhf:` keys still win
        merged = deep_merge(merged, {"openrlhf": load_yaml(preset)})
    return deep_merge(merged, run)


def load_config(*paths: str | Path, overrides: dict | None = None, layered: bool = True) -> SpadeConfig:
    """Merge the YAML files in order (later wins) and ``overrides``; resolve layers; validate."""
    data: dict = {}
    for path in paths:
        data = deep_merge(data, load_yaml(path))
    data = deep_merge(data, overrides or {})
    return from_dict(SpadeConfig, resolve_layers(data) if layered else data)


def logprob_temperature(config: SpadeConfig) -> float:
    """The temperature training log-probs are taken at (``train.logprob_temperature``; null = agent.temperature)."""
    value = config.train.logprob_temperature
    return config.agent.temperature if value is None else value


# The switches of docs/FIDELITY.md that set the reference's behaviour where the paper is silent (issues 32, 40); the
# OpenRLHF dry run prints their values, so a paper run file shows what it runs
FIDELITY_KEYS = (
    "agent.top_p", "agent.top_k", "designer.top_p", "designer.top_k", "designer.hint_top_p",
    "train.logprob_temperature", "train.loss_aggregation", "train.designer_upweight_count",
    "agent.cut_turns", "agent.turn_limit", "agent.truncated_episodes", "agent.turn_samples",
    "validation.llm_screen", "validation.screen_unclear", "validation.reset_gate", "memory.examples", "selfplay.top_up",
    "agent.tool_format", "eval.bfcl_multi_turn.tool_format", "eval.tau2.tool_format",
    # issue 40
    "agent.tool_call_syntax", "train.tis_samples", "agent.enable_thinking", "designer.enable_thinking",
    "designer.reward", "selfplay.total_steps", "eval.livecodebench.problems", "eval.tau2.evaluation_type",
    "eval.tau2.user_model", "eval.tau2.user_max_tokens", "designer.hint_timeout_s", "validation.screen_timeout_s",
    # issue 46
    "train.rollout_logprobs",
)


def describe_fidelity(config: SpadeConfig) -> list[str]:
    """One line per ``FIDELITY_KEYS`` entry: ``key = value`` of ``config`` (dry runs)."""
    lines = ["fidelity switches (docs/FIDELITY.md):"]
    for key in FIDELITY_KEYS:
        value = config
        for part in key.split("."):
            value = getattr(value, part)
        lines.append(f"  {key} = {'null' if value is None else value}")
    return lines
