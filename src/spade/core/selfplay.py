"""The SPADE self-play step (spec section 3, Algorithm 1), independent of the training backend.

``SelfPlay.rollout(step)`` decides what is generated and how it is rewarded; it returns the training
samples of that step and its metrics. A backend (the local trainer here, OpenRLHF on GPUs) only turns
samples into a policy update. Per step ``s`` with regeneration interval ``k``:

1. if ``s % k == 0``: close the previous environment set (window win rates, regret, designer rewards,
   memory update; its designer samples mature now, k steps late), design a new set (round-robin
   skills, corpus document and memory seeds per attempt, intake + sandboxed validation, up to
   ``design_attempts`` tries per slot, optional backfill from the built-in library), write one hint
   per environment, and play the hint arm (G episodes, used only to measure regret); at the other steps,
   design again for the set's still-empty slots (``selfplay.top_up`` 'window', the reference's top-up);
2. play the no-hint arm, the agent's training data: m episodes per valid environment, m = ceil(global
   batch / valid environments) (``selfplay.batch_structure`` 'global_batch', the reference code: 192 / 24
   = 8) or G ('groups');
3. agent advantages: z-score within each environment's kept returns of the step (spec 6; plays that end
   in an environment failure are dropped, ``agent.failed_plays``);
4. assemble one optimizer step: the matured designer samples first, then the agent samples, cut at
   ``train.global_batch`` ('global_batch'); at the run's last step the current set is closed after its
   plays (``flush``), so its designer samples train too.

``baseline.mode`` (spade.core.env_source) switches the environment source: 'spade' is the above; the pool
modes ('fixed_pool', 'rlve') fill the set once at step 0 and keep it for the whole run; every k steps
they only close the bookkeeping window (archive, window metrics) and open the next one on the same
environments, with no designer call, no designer reward and no designer sample. 'fixed_env_grpo' and
'fixed_external_designer' with ``baseline.external_pool: offline`` design a pool at step 0, before any
update, through ``design`` (``SelfPlay._begin_designed_pool``), and each step plays a set drawn from it
(``baseline.pool_redraw``), again with no further designer call. 'fixed_external_designer' with
``external_pool: online`` runs the loop above, but designs and hints come from an external model
(spade.designer.external) that is never trained: no designer samples; its designer reward is computed
and logged only.

All randomness derives from ``(config.seed, step, ...)``, so a resumed run repeats exactly.

``SelfPlay`` holds the step itself: play, rewards, the batch and the resumable state. It is composed of three
mixins: :class:`spade.core.design.EnvironmentDesign` (design, validation, backfill, hints),
:class:`spade.core.fixed_envs.FixedEnvironments` (the fixed modes and designed pools) and
:class:`spade.core.step_metrics.StepMetrics` (the step's metrics); its environment slots are
:class:`spade.core.slots.EnvSlot`. The setup a backend does before the first step (memory, corpus) is in
:mod:`spade.core.backend_setup`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

from spade.config import SpadeConfig
from spade.configtools import ConfigError
from spade.core import env_source
from spade.core.advantages import designer_advantages, designer_upweight, grpo_advantages
from spade.core.agent import ChatTokens, EpisodeJob, EpisodeRunner, loss_masked, template_kwargs
from spade.core.design import EnvironmentDesign
from spade.core.failures import cause_counts, summed
from spade.core.fixed_envs import FixedEnvironments
from spade.core.phases import PhaseClock, timed
from spade.core.rewards import (
    EMAState, calibration_band_reward, designer_reward, ema_update, invalid_candidate_reward, learning_potential, regret,
    window_regret_reward,
)
from spade.core.slots import EnvSlot, slot_dict
from spade.core.step_metrics import StepMetrics, mean_or_none
from spade.designer.memory import EnvironmentMemory, MemoryRecord
from spade.designer.prompts import agent_prompt
from spade.envs.library.registry import library
from spade.envs.validate import Validator
from spade.seeding import derive_seed


@dataclass
class Sample:
    """One training sequence for the policy update."""

    role: str  # "agent" or "designer"
    token_ids: list  # [T]
    loss_mask: list  # [T] 1 on sampled tokens
    rollout_logprobs: list  # [T] sampling log-probs (0 off-mask)
    advantage: float = 0.0
    weight: float = 1.0  # designer up-weighting (spec 6)
    delayed: bool = False  # generated k steps before its update: TIS applies
    group: str = ""  # designer: "set<design step>:<skill>", the samples whose advantages sum to 0 (spec 6)
    turns: list = field(default_factory=list)  # agent.turn_samples 'per_turn': [(token_ids, loss_mask,
    # rollout_logprobs)] of each turn, which replace this episode-level sample once the batch is cut (fan_out)


def fan_out(samples: list) -> list:
    """Every sample with ``turns`` becomes one sample per turn with its advantage, weight and role (the reference
    fans thinking episodes out after the batch is cut, so the cut counts episodes; spade_rollout.py:879-911)."""
    out = []
    for sample in samples:
        if not sample.turns:
            out.append(sample)
            continue
        out += [Sample(sample.role, ids, mask, logprobs, sample.advantage, sample.weight, sample.delayed, sample.group)
                for ids, mask, logprobs in sample.turns]
    return out


@dataclass
class SelfPlayState:
    """Everything a resumed run needs besides weights and optimizer (JSON-serialisable)."""

    envs: list = field(default_factory=list)  # [EnvSlot as dict] of the current set
    invalid_samples: list = field(default_factory=list)  # designer samples of invalid candidates (penalty mode)
    ema: dict = field(default_factory=lambda: {"fast": {}, "slow": {}})
    rlve: dict = field(default_factory=dict)  # baseline.mode 'rlve': identifier -> {"top", "episodes", "correct"}
    rlve_excluded: dict = field(default_factory=dict)  # RLVE identifier -> why its file failed validation
    # a pool designed before training (env_source.designs_pool): one dict per valid environment, in generation
    # order ("env_id" = pool id, "designed_as", "skill", "source", "code", "class_name", "kind", "attempts")
    pool: list = field(default_factory=list)
    pool_info: dict = field(default_factory=dict)  # how that pool was made: counts and its generation's metrics


@dataclass(frozen=True)
class CheckBackfill:
    """A learning-check environment (spade.envs.checks) in the shape backfill draws library entries in."""

    name: str
    skill: str
    code: str
    levels: tuple = ("standard",)

    def source(self) -> str:
        return self.code


def check_backfill_pool(names: list) -> list:
    """The backfill pool of ``selfplay.backfill_checks``; an unknown name raises ``ConfigError`` naming the key."""
    from spade.envs.checks import CHECKS, check_source

    return [CheckBackfill(name, CHECKS.get(name, "check"), check_source(name, "selfplay.backfill_checks"))
            for name in names]


def backfill_pool(config) -> list:
    """What an empty slot is filled from (``selfplay.backfill``): ``selfplay.backfill_checks``, else the library's
    environments of the run's flavour and ``selfplay.library_level`` outside ``eval.heldout_library.environments``."""
    if config.selfplay.backfill_checks:
        return check_backfill_pool(config.selfplay.backfill_checks)
    heldout = set(config.eval.heldout_library.environments)
    return [e for e in library() if e.name not in heldout and
            (e.flavour == "tool_use") == (config.selfplay.flavour == "tool_use") and
            config.selfplay.library_level in e.levels]


class SelfPlay(EnvironmentDesign, FixedEnvironments, StepMetrics):
    """One SPADE self-play step per ``rollout(step)``: what is generated, played and rewarded (module docstring)."""

    def __init__(self, config: SpadeConfig, backend, validator: Validator, memory: EnvironmentMemory,
                 corpus_sampler, state: SelfPlayState | None = None, rejected_dir=None, pool_dir=None):
        self.config, self.backend, self.validator = config, backend, validator
        self.rejected_dir = rejected_dir  # rejected candidates are kept here with their report (spec 5)
        self.pool_dir = pool_dir  # a designed pool is also written here (env_pool.json) and reused from it
        self.memory, self.corpus = memory, corpus_sampler
        self.state = state or SelfPlayState()
        prompts = {kind: agent_prompt(kind, config.agent.prompt_style) for kind in ("game", "tool_use")}
        self.runner = EpisodeRunner(backend, validator.pool, config.agent, prompts)
        # designs, revisions, hints and the screen render with the designer's template variables (enable_thinking)
        self.designer_chat = ChatTokens(backend.tokenizer, template_kwargs(config.designer.enable_thinking))
        self.clock = PhaseClock(backend)  # where each step's time goes (spade.core.phases); the trainer reads it
        self.backfill_pool = backfill_pool(config)
        if config.selfplay.backfill and not self.backfill_pool:
            raise ConfigError(f"config key 'selfplay.library_level': no library environment outside "
                              f"eval.heldout_library.environments has level {config.selfplay.library_level!r} "
                              f"for flavour {config.selfplay.flavour!r}")
        env_source.check_config(config)
        self.mode = env_source.baseline_of(config).mode
        self.designer_backend = None  # designs and hints through self.backend unless an external model writes them
        self.plays_override: int | None = None  # no-hint plays per environment fixed by the backend (OpenRLHF)
        self._pool_source = None  # the fixed-pool source, made on first use (RLVE lists its set in a child process)
        self._reports: dict = {}  # environment file -> its validation report (a redrawn RLVE file is not re-run)
        self._excluded_now: dict = {}  # RLVE identifiers excluded since the last step's metrics -> why
        # environments fixed before training (set once, or a pool designed at step 0): begin_step's fixed branch
        self.fixed = self.mode in env_source.FIXED_MODES or env_source.designs_pool(config)
        self._pool_draws: list = []  # cached draws of the designed pool (designed_pool.pool_draws)
        if self.mode == env_source.EXTERNAL_MODE:
            from spade.designer.external import ExternalDesignerBackend

            self.designer_backend = ExternalDesignerBackend.from_config(config)

    # ----- the current set ---------------------------------------------------------------------
    def _envs(self) -> list:
        return [EnvSlot(**data) for data in self.state.envs]

    def _store(self, envs: list) -> None:
        self.state.envs = [slot_dict(env) for env in envs]

    # ----- play ----------------------------------------------------------------------------------
    def no_hint_plays(self, slots: list) -> int:
        """No-hint plays m per valid environment of a step (``selfplay.batch_structure``): 'global_batch'
        (reference code) spreads one global batch over the valid environments, m = ceil(global_batch / valid)
        (192 / 24 = 8); 'groups' plays G. A backend with a fixed response count per environment (OpenRLHF's
        ``n_samples_per_prompt``) sets ``plays_override``."""
        if self.plays_override is not None:
            return self.plays_override
        if self.config.selfplay.batch_structure == "groups":
            return self.config.selfplay.group_size
        valid = sum(slot.valid for slot in slots)
        return math.ceil(self.config.train.global_batch / valid) if valid else 0

    def episode_seeds(self, step: int, slot: EnvSlot, arm: str, count: int | None = None) -> list:
        """The seeds of ``count`` episodes (default G). Seed g does not depend on ``count``; with paired
        arms the hint arm's seed g is the no-hint arm's seed g, so the two arms share their first
        min(G, m) seeds (regret pairs those, see ``slot_regret``)."""
        key = "no_hint" if arm == "hint" and self.config.agent.paired_arms else arm
        count = self.config.selfplay.group_size if count is None else count
        return [derive_seed(self.config.seed, "episode", step, slot.env_id, key, g) for g in range(count)]

    def job(self, slot: EnvSlot, seed: int, arm: str, step: int) -> EpisodeJob:
        """One episode of ``slot`` at ``step``: a designer-written class keeps its own turn limit under
        ``agent.turn_limit`` 'own' (the reference, both arms); library and RLVE classes get the runner's budget.
        Under ``selfplay.same_problem`` every play of the slot at this step resets with one seed."""
        own = self.config.agent.turn_limit == "own" and slot.source == "designer"
        problem = derive_seed(self.config.seed, "problem", step, slot.env_id) if self.config.selfplay.same_problem \
            else None
        return EpisodeJob(slot.env_id, slot.code, slot.class_name, slot.kind, seed, arm, slot.hint, slot.env_kwargs,
                          own_turn_limit=own, reset_seed=problem)

    def play(self, slots: list, step: int, arm: str, count: int | None = None) -> dict:
        """Play ``count`` episodes (default G) per valid slot; returns {env_id: [EpisodeRecord]}."""
        jobs = [self.job(slot, seed, arm, step) for slot in slots if slot.valid
                for seed in self.episode_seeds(step, slot, arm, count)]
        with self.clock.phase(f"{arm}_arm"):
            records = self.runner.run(jobs, derive_seed(self.config.seed, "play", step, arm))
        grouped: dict = {}
        for record in records:
            grouped.setdefault(record.env_id, []).append(record)
        return grouped

    def play_hint_arm(self, slots: list, step: int) -> dict:
        """Play the hint arm (G per valid slot, measurement only) and book its returns, seeds and causes on the
        slots; returns the step metric 'hint_causes' (spade.core.failures)."""
        hinted = self.play([slot for slot in slots if not slot.hint_failed], step, "hint")  # a failed hint: no arm
        for slot in slots:
            records = hinted.get(slot.env_id, [])
            slot.hint_returns, slot.hint_seeds = [r.final_return for r in records], [r.seed for r in records]
            slot.hint_causes = cause_counts(records)
        return {"hint_causes": cause_counts([r for records in hinted.values() for r in records])}

    # ----- rewards -------------------------------------------------------------------------------
    @timed("rewards")
    def close_set(self, slots: list) -> list:
        """Designer rewards of a finished set (spec 4); returns the matured designer samples."""
        cfg, rcfg = self.config, self.config.reward
        designed = [s for s in slots if s.valid and s.source == "designer"]
        if cfg.designer.reward == "ema_lp" and designed:
            means = {}  # Eqs. 4-6 use the mean return R_A, which differs from the win rate under partial rewards
            for slot in designed:
                means.setdefault(slot.skill, []).append(slot.mean_return or 0.0)
            state = ema_update(EMAState(**self.state.ema), {k: sum(v) / len(v) for k, v in means.items()},
                               rcfg.ema_g_fast, rcfg.ema_g_slow)
            self.state.ema = {"fast": dict(state.fast), "slow": dict(state.slow)}
            potentials = learning_potential([s.mean_return or 0.0 for s in designed], [s.skill for s in designed],
                                            state.slow)
            for slot, value in zip(designed, potentials):
                slot.designer_reward = value
        for slot in designed:
            if cfg.designer.reward == "regret":
                slot.designer_reward = designer_reward(slot.regret or 0.0, self.plateau_input(slot), rcfg.regret_weight,
                                                       rcfg.plateau_weight, rcfg.regret_scale, rcfg.band_low,
                                                       rcfg.band_high, rcfg.ramp)
            elif cfg.designer.reward == "regret_window":  # the reference's regret_based: no plateau, no scale
                slot.designer_reward = window_regret_reward(slot.hint_returns, slot.mean_return or 0.0)
            elif cfg.designer.reward == "calibration":
                slot.designer_reward = calibration_band_reward(True, slot.win_rate or 0.0, rcfg.band_low, rcfg.band_high)
        for slot in slots:
            if slot.valid and slot.source == "designer":
                win_rate = self.memory_win_rate(slot)
                if slot.filled_step is not None and win_rate is None:
                    continue  # a top-up slot has no regeneration-step plays to measure (the reference never records it)
                self.memory.add(MemoryRecord(slot.env_id, slot.code, slot.skill, cfg.selfplay.flavour,
                                             win_rate, slot.regret, slot.step))
        # a top-up's designer sample (selfplay.top_up) does not train: the reference rewards it once, at its fill
        # step, with no regret measured (0) centred among that step's top-ups (env_rewards.py:205;
        # spade_rollout.py:549-597 never recomputes it), so it carries no gradient there either
        rewards = [(s.designer_sample, s.designer_reward, s.skill) for s in designed if s.filled_step is None]
        penalty = invalid_candidate_reward(cfg.designer)
        if penalty is not None:
            rewards += [(sample, penalty, sample["skill"]) for sample in self.state.invalid_samples]
        if not rewards or not cfg.selfplay.train_designer or self.designer_backend is not None:
            return []
        advantages = designer_advantages([r for _, r, _ in rewards], [skill for _, _, skill in rewards])
        # 'groups' weight: min(N_envs * G / N_envs * k, cap) = min(G * k, cap); 'global_batch' sets it once the
        # step's agent plays are known (weigh_designer)
        n_envs = max(sum(s.valid for s in slots), 1)
        weight = designer_upweight(n_envs * cfg.selfplay.group_size, n_envs, cfg.selfplay.regen_interval,
                                   cfg.train.designer_upweight_cap)
        set_step = slots[0].step if slots else 0
        return [Sample("designer", s["token_ids"], s["loss_mask"], s["rollout_logprobs"], float(a), weight, True,
                       group=f"set{set_step}:{skill}")
                for (s, _, skill), a in zip(rewards, advantages.tolist())]

    def plateau_input(self, slot: EnvSlot) -> float:
        """What the plateau reads over the window (``reward.plateau_input``): the mean no-hint return
        (reference code, clipped to [0, 1]; a negative mean is as far below the band as 0) or the win rate."""
        value = slot.mean_return if self.config.reward.plateau_input == "mean_return" else slot.win_rate
        return min(1.0, max(0.0, value or 0.0))

    def memory_win_rate(self, slot: EnvSlot) -> float | None:
        """The win rate a memory record stores (``memory.win_rate``): the share of the regeneration step's
        kept no-hint plays with a return > 0 (reference code), or the window's share of full wins."""
        if self.config.memory.win_rate == "regen_positive":
            return slot.regen_positive / slot.regen_episodes if slot.regen_episodes else None
        return slot.win_rate

    def slot_regret(self, slot: EnvSlot) -> float | None:
        """Eq. 3 at the regeneration step. Paired arms (ours): the mean of hint - no-hint over the seeds both arms
        played (G = 16 hinted, m = 8 no-hint at paper scale: the 8 shared seeds; the other hinted plays count in
        the hint arm's own statistics only). Unpaired (reference code): the mean of all G hinted returns minus the
        mean of the regeneration step's no-hint returns."""
        if not slot.hint_returns or not slot.paired_returns:
            return None
        if not self.config.agent.paired_arms:
            return regret(slot.hint_returns, slot.paired_returns, paired=False)
        hint_seeds = slot.hint_seeds or list(range(len(slot.hint_returns)))  # a state written before seeds were kept
        no_hint_seeds = slot.paired_seeds or list(range(len(slot.paired_returns)))
        hinted = dict(zip(hint_seeds, slot.hint_returns))
        pairs = [(hinted[seed], r) for seed, r in zip(no_hint_seeds, slot.paired_returns) if seed in hinted]
        if not pairs:
            return None
        return regret([h for h, _ in pairs], [r for _, r in pairs], paired=True)

    @timed("rewards")
    def weigh_designer(self, samples: list, slots: list, returned: int | None = None) -> float | None:
        """'global_batch': the reference's designer up-weight (spec 6), min(agent samples / designer samples * k,
        cap), with this step's agent samples before trimming: ``returned`` (the plays that came back, under
        ``train.designer_upweight_count`` 'returned'), else the planned ones (m plays x valid environments of
        ``slots``): 192 / 24 * 4 = 32 for games, 192 / 24 * 8 = 64 -> 50 for tool use. Sets every sample's weight;
        returns it."""
        if not samples or self.config.selfplay.batch_structure == "groups":
            return samples[0].weight if samples else None
        cfg = self.config
        n_agent = returned if returned is not None else self.no_hint_plays(slots) * sum(slot.valid for slot in slots)
        # no agent sample at all this step: the batch is designer-only and a uniform weight only scales it
        weight = designer_upweight(n_agent, len(samples), cfg.selfplay.regen_interval,
                                   cfg.train.designer_upweight_cap) if n_agent else 1.0
        for sample in samples:
            sample.weight = weight
        return weight

    @timed("rewards")
    def assemble(self, designer: list, agent: list) -> tuple[list, dict]:
        """The training samples of one rollout (``selfplay.batch_structure``). 'global_batch' (reference code):
        one optimizer step of at most ``train.global_batch`` samples, designer samples first, the agent samples
        after them in slot order (each slot's plays in seed order), the surplus cut from the tail. 'groups': every
        agent sample, then the designer samples."""
        if self.config.selfplay.batch_structure == "groups":
            return agent + designer, {"trimmed_agent_samples": 0}
        batch = self.config.train.global_batch
        kept_designer = designer[:batch]
        room = batch - len(kept_designer)
        metrics = {"trimmed_agent_samples": max(0, len(agent) - room)}
        if len(designer) > batch:
            metrics["trimmed_designer_samples"] = len(designer) - batch
        return kept_designer + agent[:room], metrics

    def pending_designer_groups(self, slots: list) -> list:
        """The sizes of the advantage groups (one per skill) of the designer samples ``close_set(slots)`` will
        return: the OpenRLHF coordinator plans the final step's designer packs before that step's plays."""
        cfg = self.config
        if self.fixed or not cfg.selfplay.train_designer or self.designer_backend is not None:
            return []
        sizes = Counter(slot.skill for slot in slots
                        if slot.valid and slot.source == "designer" and slot.filled_step is None)
        if invalid_candidate_reward(cfg.designer) is not None:
            sizes.update(sample["skill"] for sample in self.state.invalid_samples)
        return list(sizes.values())

    def is_final(self, step: int) -> bool:
        return step == self.config.selfplay.total_steps - 1

    def flush(self, step: int, slots: list) -> tuple[list, list, dict]:
        """Close the current set at the run's last step, after its plays (the reference flushes it at the final
        rollout): designer rewards over the window so far, memory update, archive rows; its designer samples
        train in this same step. Returns (designer samples, archive rows, metrics)."""
        if not slots:
            return [], [], {}
        samples = [] if self.fixed else self.close_set(slots)
        self.weigh_designer(samples, slots)
        return samples, [slot_dict(s) for s in slots], {"final_set_closed": True, **self._closed_metrics(slots)}

    # ----- one step ------------------------------------------------------------------------------
    def rollout(self, step: int) -> tuple[list, dict, list]:
        """Run step ``step``; returns (samples, metrics, archive rows of any closed set)."""
        slots, designer, closed, metrics = self.begin_step(step)
        played = self.play(slots, step, "no_hint", self.no_hint_plays(slots))
        agent = []
        for slot in slots:
            records = played.get(slot.env_id, [])
            advantages = self.record_play(slot, records, step)
            agent += [self.agent_sample(r, a) for r, a in zip(records, advantages) if a is not None and sum(r.loss_mask)]
        if self.is_final(step):  # the last set closes now: its designer samples train in this step
            flushed, rows, final_metrics = self.flush(step, slots)
            designer, closed = designer + flushed, closed + rows
            metrics.update({(f"final_{k}" if k in metrics else k): v for k, v in final_metrics.items()})
        if self.config.train.designer_upweight_count == "returned":  # the plays that came back, before trimming
            self.weigh_designer(designer, slots, returned=len(agent))
        self.end_step(step, slots, [r for records in played.values() for r in records], designer, metrics)
        samples, batch_metrics = self.assemble(designer, agent)
        metrics.update(batch_metrics)
        trained = [sample for sample in samples if sample.role == "designer"]
        if trained:  # what the designer's update of this step carries (the mechanism check, issue 39, reads it)
            metrics["designer_batch_sets"] = sorted({int(s.group.split(":")[0][3:]) for s in trained if s.group})
            metrics["designer_batch_nonzero"] = sum(s.advantage != 0 and s.weight != 0 for s in trained)
        if self.config.agent.turn_samples == "per_turn":  # after the cut, which counts episodes (reference)
            samples = fan_out(samples)
            metrics["turn_samples"] = sum(s.role == "agent" for s in samples)
        return samples, metrics, closed

    def begin_step(self, step: int) -> tuple[list, list, list, dict]:
        """Everything of step ``step`` that precedes the agent's no-hint play.

        At a regeneration step: close the previous set (its designer samples mature now), design the
        new set, write hints and play the hint arm (measurement only). Returns (slots of the current
        set, matured designer samples, archive rows of the closed set, metrics so far).
        """
        cfg = self.config
        slots, samples, closed, metrics = self._envs(), [], [], {"step": step}
        if self.fixed:
            return self._begin_fixed(step, slots, metrics)
        if step % cfg.selfplay.regen_interval == 0:
            if slots:
                samples += self.close_set(slots)
                closed = [slot_dict(s) for s in slots]
                metrics.update(self._closed_metrics(slots))
            slots, invalid = self.design(step)
            self.state.invalid_samples = invalid
            self.weigh_designer(samples, slots)
            metrics.update(self.write_hints(slots, step))
            metrics.update(self.play_hint_arm(slots, step))
            metrics.update(self._design_metrics(slots))
            if self.designer_backend is not None:
                metrics["env_source"] = self.mode
        elif cfg.selfplay.top_up == "window":  # reference code: empty slots are designed again later in the window
            top_up_metrics, invalid = self.top_up(slots, step)
            self.state.invalid_samples = self.state.invalid_samples + invalid
            metrics.update(top_up_metrics)
        return slots, samples, closed, metrics

    def agent_sample(self, record, advantage: float) -> Sample:
        """The training sample of one no-hint play; under ``agent.truncated_episodes`` 'mask' an episode the
        environment did not terminate keeps its place in the batch (and its advantage in the z-score) with its
        loss mask zeroed, as the reference's compact filter. With per-turn records (``agent.turn_samples``
        'per_turn') it carries one (prompt + reply) sequence per turn, for ``fan_out``."""
        masked = loss_masked(record, self.config.agent)
        mask = [0] * len(record.loss_mask) if masked else record.loss_mask
        turns = [(t["prompt_ids"] + t["output_ids"],
                  [0] * len(t["prompt_ids"]) + [int(not masked and t.get("trained", True))] * len(t["output_ids"]),
                  [0.0] * len(t["prompt_ids"]) + t["logprobs"]) for t in record.turn_records]
        return Sample("agent", record.token_ids, mask, record.rollout_logprobs, advantage, turns=turns)

    def dropped(self, record) -> bool:
        """A play left out of the z-score, the statistics and the batch (``agent.failed_plays`` 'drop')."""
        return self.config.agent.failed_plays == "drop" and record.outcome == "env_failure"

    @timed("rewards")
    def record_play(self, slot: EnvSlot, records: list, step: int) -> list:
        """Book one slot's no-hint episodes of step ``step`` (window statistics, regret at the regeneration
        step, distinct rewards); returns the agent advantage of each record, in order (spec 6: z-score
        within the slot's kept returns of this step), None for a dropped play (environment failure,
        ``agent.failed_plays`` 'drop'). Records without sampled tokens still count in the z-score."""
        kept = [r for r in records if not self.dropped(r)]
        slot.dropped += len(records) - len(kept)
        returns = [r.final_return for r in kept]
        if step == slot.step:  # the regeneration step: both arms played, regret measured (Eq. 3)
            slot.paired_returns, slot.paired_seeds = returns, [r.seed for r in kept]
            slot.regen_positive += sum(x > 0 for x in returns)
            slot.regen_episodes += len(kept)
            slot.regret = self.slot_regret(slot)
        slot.wins += sum(r.won for r in kept)
        slot.return_sum += sum(returns)
        slot.episodes += len(kept)
        slot.distinct_rewards = sorted(set(slot.distinct_rewards) | {r.rewards[-1] for r in kept if r.rewards})
        slot.causes = summed([slot.causes, cause_counts(records)])  # dropped plays too (cause 'env_failure')
        advantages = iter(grpo_advantages(returns, [0] * len(returns)).tolist())
        return [None if self.dropped(r) else next(advantages) for r in records]

    @timed("rewards")
    def end_step(self, step: int, slots: list, records: list, delayed: list, metrics: dict) -> dict:
        """Store the set after play and add the play metrics of step ``step`` to ``metrics``."""
        if self.mode == "rlve":
            metrics.update(self._advance_rlve(slots, records))
        self._store(slots)
        metrics.update(self._play_metrics(slots, records, delayed))
        if slots and step == slots[0].step:
            metrics["mean_regret"] = mean_or_none([s.regret for s in slots if s.regret is not None])
        return metrics
