"""Live metrics: every step's metrics record (the line appended to ``metrics.jsonl``) also goes to TensorBoard and,
when asked, to Weights & Biases in offline mode, both inside the run folder.

- ``LoggingConfig``: the ``logging`` config section (``logging.tensorboard``, ``logging.wandb``,
  ``logging.wandb_project``).
- ``scalars(record)``: the one mapping of a metrics record to tags, shared by both backends and by both trainers
  (the local trainer, ``spade.train.trainer``, and the OpenRLHF coordinator, ``spade.rlhf.coordinator``). Tags are grouped
  by what they describe: ``agent/`` (return, win rate), ``designer/`` (regret, designer reward, valid-environment
  rate), ``train/`` (loss, KL, clip fraction), ``perf/`` (step time, per-phase seconds and tokens/s, spade.core.phases);
  any other number of the record keeps its key under ``other/``. Lists, strings, booleans and None are left out.
  Dict-valued keys of a small, stable set of names (``FAMILIES``) become one tag per entry, e.g. the causes of the
  no-hint plays ``agent/causes/<cause>`` and the failing stages of designs ``designer/fail_stages/<stage>``
  (spade.core.failures).
- ``LiveMetrics``: the writers of one training process; ``log(record)`` after each metrics line.
- ``require_backends(config)``: fails before any model loads when a switched-on backend cannot be imported.

Layout: ``<run>/tensorboard/`` holds the event files, so ``tensorboard --logdir results/runs`` lists every run (as
``<run>/tensorboard``); ``<run>/wandb/offline-run-*`` holds the W&B runs (``wandb sync`` uploads one later). The
x axis is the number of completed steps (``step + 1``), the count of OpenRLHF's ``global_step`` and of the checkpoint
names. A resumed run rewrites the steps after its checkpoint (``metrics.jsonl`` is cut back the same way): its
TensorBoard writer starts with ``purge_step`` at the first rewritten step, so TensorBoard shows each step once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from spade.configtools import ConfigError, option
from spade.core.phases import PHASES

TENSORBOARD_FOLDER = "tensorboard"
WANDB_VERSION = "0.31.0"  # the version of the GPU environment (containers/requirements-gpu.lock) and of the extra
WANDB_INSTALL = "pip install -e '.[wandb]'"


@dataclass(frozen=True)
class LoggingConfig:
    tensorboard: bool = option(
        True, "Write TensorBoard event files of every step's metrics to <run>/tensorboard/ (both trainers), and turn "
        "on OpenRLHF's own TensorBoard logger (<run>/openrlhf/tensorboard/<run_name>/) on the GPU path; "
        "`tensorboard --logdir results/runs` then shows every run. Keep it on: it costs a few kB per step. Turn it "
        "off only where the tensorboard package cannot be installed.")
    wandb: bool = option(
        False, "Also log every step to Weights & Biases, offline (no account, no network): the run is written to "
        "<run>/wandb/, named after run_name, and `wandb sync <run>/wandb/offline-run-*` uploads it later. On the "
        "OpenRLHF path OpenRLHF's own W&B logger is turned on too, offline, with the same run name and group. Needs "
        f"the wandb package ({WANDB_INSTALL}). Turn it on when you compare runs in W&B; TensorBoard alone needs "
        "nothing more. Exclusive with openrlhf.wandb_project, which logs OpenRLHF's metrics online instead.")
    wandb_project: str = option(
        "spade", "W&B project of the offline runs (logging.wandb). Choose one project per experiment family, so "
        "that the runs you compare sit together once synced.")

    def __post_init__(self):
        if not self.wandb_project.strip():
            raise ConfigError(f"config key 'logging.wandb_project' has value {self.wandb_project!r}; it must name a "
                              "W&B project (the default is 'spade')")


# metrics.jsonl key -> tag (module docstring); the phase keys of spade.core.phases are added below
TAGS = {
    # the agent's no-hint episodes of the step
    "agent_mean_return": "agent/return",
    "agent_return_sd": "agent/return_sd",
    "agent_win_rate": "agent/win_rate",
    "episodes": "agent/episodes",
    "no_hint_plays": "agent/no_hint_plays",
    "agent_groups": "agent/groups",
    "useful_groups": "agent/useful_groups",
    "mean_turns": "agent/turns",
    "mean_generated_tokens": "agent/generated_tokens",
    "env_failures": "agent/env_failures",
    "dropped_plays": "agent/dropped_plays",
    # why the no-hint plays earn nothing (spade.core.failures; the counts per cause are the family agent/causes)
    "agent_unearned_share": "agent/unearned_share",
    "agent_unparsed_turn_share": "agent/unparsed_turn_share",
    "agent_cut_turn_share": "agent/cut_turn_share",
    # the designer: the new set's regret at its regeneration step, the closed set's rewards at its close
    "mean_regret": "designer/regret",
    "closed_set_step": "designer/closed_set_step",
    "closed_mean_regret": "designer/regret_closed_set",
    "closed_mean_designer_reward": "designer/reward",
    "closed_mean_win_rate": "designer/win_rate_closed_set",
    "closed_learnable_share": "designer/learnable_share",
    "closed_distinct_rewards": "designer/distinct_rewards",
    "closed_partial_rewards": "designer/partial_rewards",
    "valid_env_rate": "designer/valid_env_rate",
    "design_attempts": "designer/attempts",
    "designer_valid": "designer/valid",
    "design_generated_tokens": "designer/generated_tokens",
    "designer_samples": "designer/samples",
    "designer_weight": "designer/sample_weight",
    "backfilled_share": "designer/backfilled_share",
    "empty_share": "designer/empty_share",
    "design_cut_share": "designer/cut_share",
    "filled_slots": "designer/filled_slots",
    "slots": "designer/slots",
    # selfplay.top_up: designs again for the set's empty slots at a step between regenerations
    "top_up_slots": "designer/top_up_slots",
    "top_up_filled": "designer/top_up_filled",
    "top_up_attempts": "designer/top_up_attempts",
    "top_up_generated_tokens": "designer/top_up_generated_tokens",
    # the policy update (spade.train.trainer.LocalTrainer.update)
    "train_loss": "train/loss",
    "train_kl_mean": "train/kl",
    "train_clip_frac": "train/clip_frac",
    "train_grad_norm": "train/grad_norm",
    "train_tokens": "train/tokens",
    "train_forward_tokens": "train/forward_tokens",
    "train_padded_tokens": "train/padded_tokens",
    "train_optimizer_steps": "train/optimizer_steps",
    "train_skipped_zero_advantage": "train/skipped_zero_advantage",
    "samples": "train/samples",
    "trimmed_agent_samples": "train/trimmed_agent_samples",
    "trimmed_designer_samples": "train/trimmed_designer_samples",
    # the OpenRLHF coordinator: the rewards it sent (OpenRLHF logs its own train/rollout/reward_* beside them)
    "openrlhf_reward_mean": "train/sent_reward_mean",
    "openrlhf_reward_std": "train/sent_reward_std",
    "openrlhf_num_samples": "train/sent_samples",
    # time
    "step_seconds": "perf/step_seconds",
}
PHASE_SUFFIXES = {"seconds": "seconds", "tokens_per_s": "tokens_per_s", "prompt_tokens": "prompt_tokens",
                  "prefill_tokens": "prefill_tokens", "decode_tokens": "decode_tokens"}
for _phase in (*PHASES, "other"):
    for _suffix, _name in PHASE_SUFFIXES.items():
        TAGS[f"phase_{_phase}_{_suffix}"] = f"perf/{_name}/{_phase}"
# dict-valued keys whose entries are numbers of a small, stable set of names
FAMILIES = {"win_rate_by_skill": "agent/win_rate_by_skill", "reject_reasons": "designer/rejects",
            "agent_causes": "agent/causes", "hint_causes": "agent/hint_causes",
            "design_fail_stages": "designer/fail_stages", "screen_verdicts": "designer/screen_verdicts"}
NOT_LOGGED = {"step"}  # the x axis


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def scalars(record: dict) -> dict:
    """``{tag: value}`` of one metrics record (module docstring): known keys under their tag, the per-skill win rates
    and reject reasons as families, every other number under ``other/<key>``."""
    out = {}
    for key, value in record.items():
        if key in NOT_LOGGED:
            continue
        if key in FAMILIES and isinstance(value, dict):
            for name, entry in value.items():
                number = _number(entry)
                if number is not None:
                    out[f"{FAMILIES[key]}/{name}"] = number
            continue
        number = _number(value)
        if number is not None:
            out[TAGS.get(key, f"other/{key}")] = number
    return out


def global_step(record: dict) -> int:
    """The x value of a record: completed steps (``step + 1``)."""
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"a metrics record needs a non-negative integer 'step', got {step!r}")
    return step + 1


def tensorboard_dir(run_dir) -> Path:
    return Path(run_dir) / TENSORBOARD_FOLDER


def _summary_writer():
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise ConfigError(f"config key 'logging.tensorboard' is true, but TensorBoard's writer cannot be imported "
                          f"({exc}); install it (pip install tensorboard==2.21.0, part of ./setup.sh) or set "
                          "logging.tensorboard: false") from None
    return SummaryWriter


def _wandb():
    try:
        import wandb
    except ImportError as exc:
        raise ConfigError(f"config key 'logging.wandb' is true, but the wandb package cannot be imported ({exc}); "
                          f"install it with `{WANDB_INSTALL}` (wandb=={WANDB_VERSION}; it pulls no torch), or set "
                          "logging.wandb: false") from None
    return wandb


def require_backends(config) -> None:
    """Raise ``ConfigError`` naming the config key when a switched-on backend cannot be imported (call it before
    loading any model)."""
    if config.logging.tensorboard:
        _summary_writer()
    if config.logging.wandb:
        _wandb()


class LiveMetrics:
    """The live writers of one training process (module docstring). ``first_step``: the first step this process
    writes (a resumed run's checkpoint step), from which TensorBoard forgets what an earlier process logged."""

    def __init__(self, config, run_dir, first_step: int = 0):
        cfg = config.logging
        run_dir = Path(run_dir)
        self.tensorboard = self.wandb = None
        if cfg.tensorboard:
            writer = _summary_writer()
            folder = tensorboard_dir(run_dir)
            folder.mkdir(parents=True, exist_ok=True)
            self.tensorboard = writer(str(folder), purge_step=first_step + 1 if first_step else None)
        if cfg.wandb:
            wandb = _wandb()
            run_dir.mkdir(parents=True, exist_ok=True)
            self.wandb = wandb.init(project=cfg.wandb_project, name=config.run_name, group=config.run_name,
                                    job_type="spade", dir=str(run_dir), mode="offline", config=asdict(config),
                                    reinit="create_new")

    def log(self, record: dict) -> dict:
        """Write one metrics record; returns its scalars."""
        step, values = global_step(record), scalars(record)
        if self.tensorboard is not None:
            for tag, value in values.items():
                self.tensorboard.add_scalar(tag, value, step)
            self.tensorboard.flush()
        if self.wandb is not None:
            self.wandb.log(values, step=step)
        return values

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
            self.tensorboard = None
        if self.wandb is not None:
            self.wandb.finish()
            self.wandb = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
