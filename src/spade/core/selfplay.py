"""The SPADE self-play step (spec section 3, Algorithm 1), independent of the training backend.

``SelfPlay.rollout(step)`` decides what is generated and how it is rewarded; it returns the training
samples of that step and its metrics. A backend (the local trainer here, OpenRLHF on GPUs) only turns
samples into a policy update. Per step ``s`` with regeneration interval ``k``:

1. if ``s % k == 0``: close the previous environment set (window win rates, regret, designer rewards,
   memory update; its designer samples mature now, k steps late), design a new set (round-robin
   skills, corpus document and memory seeds per attempt, intake + sandboxed validation, up to
   ``design_attempts`` tries per slot, optional backfill from the built-in library), write one hint
   per environment, and play the hint arm (G episodes, used only to measure regret);
2. play the no-hint arm, the agent's training data: m episodes per valid environment, m = ceil(global
   batch / valid environments) (``selfplay.batch_structure`` 'global_batch', the reference code: 192 / 24
   = 8) or G ('groups');
3. agent advantages: z-score within each environment's kept returns of the step (spec 6; plays that end
   in an environment failure are dropped, ``agent.failed_plays``);
4. assemble one optimizer step: the matured designer samples first, then the agent samples, cut at
   ``train.global_batch`` ('global_batch'); at the run's last step the current set is closed after its
   plays (``flush``), so its designer samples train too.

``baseline.mode`` (spade.core.baselines) switches the environment source: 'spade' is the above; the pool
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
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from spade.core import baselines
from spade.core.advantages import designer_advantages, designer_upweight, grpo_advantages
from spade.core.agent import EpisodeJob, EpisodeRunner
from spade.config import SpadeConfig
from spade.configtools import ConfigError
from spade.designer.feedback import revision_chat
from spade.designer.memory import EnvironmentMemory, MemoryRecord
from spade.designer.prompts import agent_prompt, design_prompt, extract_hint, hint_prompt
from spade.designer.skills import active_skills, sample_domain, sample_variant
from spade.envs.library.registry import level_kwargs, library
from spade.envs.validate import Validator, store_rejection
from spade.inference.generation import SamplingParams
from spade.core.phases import PhaseClock, timed
from spade.seeding import derive_seed
from spade.core.rewards import (
    EMAState, calibration_band_reward, designer_reward, ema_update, invalid_candidate_reward, learning_potential, regret,
)


log = logging.getLogger(__name__)

POOL_FILE = "env_pool.json"  # a designed pool, written once into the run folder (SelfPlay pool_dir)


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


@dataclass
class EnvSlot:
    """One environment of the current set, with everything the archive and the rewards need."""

    env_id: str
    skill: str
    step: int  # regeneration step that produced it (fixed modes: start of the current bookkeeping window)
    source: str  # "designer", "backfill:<library name>", or a fixed pool's "library:<name>" / "rlve:<identifier>"
    code: str = ""
    class_name: str = ""
    kind: str = "game"
    valid: bool = False
    attempts: int = 0
    reports: list = field(default_factory=list)  # validation report of every attempt (no code)
    hint: str = ""
    hint_returns: list = field(default_factory=list)  # [G] returns with hint at the regeneration step
    paired_returns: list = field(default_factory=list)  # [m] no-hint returns of the regeneration step (kept plays)
    wins: int = 0  # no-hint wins over the window
    episodes: int = 0  # no-hint episodes over the window
    return_sum: float = 0.0  # sum of the no-hint returns R_A over the window (plateau input, ema_lp)
    dropped: int = 0  # no-hint plays over the window left out for an environment failure (agent.failed_plays)
    regen_positive: int = 0  # regeneration-step no-hint plays with a return > 0 (memory.win_rate 'regen_positive')
    regen_episodes: int = 0  # regeneration-step no-hint plays booked (memory.win_rate 'regen_positive')
    hint_seeds: list = field(default_factory=list)  # [G] episode seed of each entry of hint_returns
    paired_seeds: list = field(default_factory=list)  # episode seed of each entry of paired_returns
    distinct_rewards: list = field(default_factory=list)  # reward values observed (figure 16)
    designer_sample: dict | None = None  # token ids / mask / log-probs of the generation that made it
    env_kwargs: dict = field(default_factory=dict)  # constructor arguments besides max_turns (a backfilled level)
    regret: float | None = None
    designer_reward: float | None = None

    @property
    def win_rate(self) -> float | None:
        return self.wins / self.episodes if self.episodes else None

    @property
    def mean_return(self) -> float | None:
        return self.return_sum / self.episodes if self.episodes else None


@dataclass
class SelfPlayState:
    """Everything a resumed run needs besides weights and optimizer (JSON-serialisable)."""

    envs: list = field(default_factory=list)  # [EnvSlot as dict] of the current set
    invalid_samples: list = field(default_factory=list)  # designer samples of invalid candidates (penalty mode)
    ema: dict = field(default_factory=lambda: {"fast": {}, "slow": {}})
    rlve: dict = field(default_factory=dict)  # baseline.mode 'rlve': identifier -> {"top", "episodes", "correct"}
    rlve_excluded: dict = field(default_factory=dict)  # RLVE identifier -> why its file failed validation
    # a pool designed before training (baselines.designs_pool): one dict per valid environment, in generation
    # order ("env_id" = pool id, "designed_as", "skill", "source", "code", "class_name", "kind", "attempts")
    pool: list = field(default_factory=list)
    pool_info: dict = field(default_factory=dict)  # how that pool was made: counts and its generation's metrics


class SelfPlay:
    def __init__(self, config: SpadeConfig, backend, validator: Validator, memory: EnvironmentMemory,
                 corpus_sampler, state: SelfPlayState | None = None, rejected_dir=None, pool_dir=None):
        self.config, self.backend, self.validator = config, backend, validator
        self.rejected_dir = rejected_dir  # rejected candidates are kept here with their report (spec 5)
        self.pool_dir = pool_dir  # a designed pool is also written here (env_pool.json) and reused from it
        self.memory, self.corpus = memory, corpus_sampler
        self.state = state or SelfPlayState()
        prompts = {kind: agent_prompt(kind, config.agent.prompt_style) for kind in ("game", "tool_use")}
        self.runner = EpisodeRunner(backend, validator.pool, config.agent, prompts)
        self.clock = PhaseClock(backend)  # where each step's time goes (spade.core.phases); the trainer reads it
        heldout = set(config.eval.heldout_library.environments)
        self.backfill_pool = [e for e in library() if e.name not in heldout and
                              (e.flavour == "tool_use") == (config.selfplay.flavour == "tool_use") and
                              config.selfplay.library_level in e.levels]
        if config.selfplay.backfill and not self.backfill_pool:
            raise ConfigError(f"config key 'selfplay.library_level': no library environment outside "
                              f"eval.heldout_library.environments has level {config.selfplay.library_level!r} "
                              f"for flavour {config.selfplay.flavour!r}")
        baselines.check_config(config)
        self.mode = baselines.baseline_of(config).mode
        self.designer_backend = None  # designs and hints through self.backend unless an external model writes them
        self.plays_override: int | None = None  # no-hint plays per environment fixed by the backend (OpenRLHF)
        self._pool_source = None  # the fixed-pool source, made on first use (RLVE lists its set in a child process)
        self._reports: dict = {}  # environment file -> its validation report (a redrawn RLVE file is not re-run)
        self._excluded_now: dict = {}  # RLVE identifiers excluded since the last step's metrics -> why
        # environments fixed before training (set once, or a pool designed at step 0): begin_step's fixed branch
        self.fixed = self.mode in baselines.FIXED_MODES or baselines.designs_pool(config)
        self._pool_draws: list = []  # cached draws of the designed pool (baselines.pool_draws)
        if self.mode == baselines.EXTERNAL_MODE:
            from spade.designer.external import ExternalDesignerBackend

            self.designer_backend = ExternalDesignerBackend.from_config(config)

    # ----- helpers -------------------------------------------------------------------------------
    def _generate(self, chats: list, max_new_tokens: int, seed: int, temperature: float | None = None):
        """Designer-model generations of ``chats``; ``temperature`` None = designer.temperature (designs)."""
        temperature = self.config.designer.temperature if temperature is None else temperature
        params = SamplingParams(temperature, 1.0, max_new_tokens)
        if self.designer_backend is not None:  # external designer: text only, no prompt tokens, never trained
            return [[] for _ in chats], self.designer_backend.generate_chats(chats, params, seed)
        prompts = [self.runner.chat.first_prompt(chat) for chat in chats]
        generations = self.backend.generate(prompts, params, seed)
        return prompts, generations

    @staticmethod
    def _sample_dict(prompt: list, generation) -> dict:
        return {
            "token_ids": list(prompt) + list(generation.completion_ids),
            "loss_mask": [0] * len(prompt) + [1] * len(generation.completion_ids),
            "rollout_logprobs": [0.0] * len(prompt) + list(generation.logprobs),
        }

    def _envs(self) -> list:
        return [EnvSlot(**data) for data in self.state.envs]

    def _store(self, envs: list) -> None:
        self.state.envs = [asdict(env) for env in envs]

    # ----- design --------------------------------------------------------------------------------
    @timed("design")
    def design(self, step: int, memory: bool = True) -> tuple[list, list]:
        """Design a new environment set; returns (slots, designer samples of invalid candidates).
        ``memory`` False leaves the memory seeds out of every prompt (the offline fixed-ED pool)."""
        cfg = self.config
        round_index = step // cfg.selfplay.regen_interval
        skills = active_skills(round_index, tuple(cfg.selfplay.skills), cfg.selfplay.active_skills)
        slots = [EnvSlot(f"s{step:05d}-{skill}-{i}", skill, step, "designer")
                 for skill in skills for i in range(cfg.selfplay.envs_per_skill)]
        invalid = []
        for attempt in range(cfg.selfplay.design_attempts):
            todo = [slot for slot in slots if not slot.valid]
            if not todo:
                break
            chats = [self._design_chat(slot, step, attempt, memory) for slot in todo]
            prompts, generations = self._generate(chats, cfg.designer.max_new_tokens,
                                                  derive_seed(cfg.seed, "design", step, attempt))
            pending = [(slot, chat, generation, self._judge(slot, prompt, generation, invalid, 0))
                       for slot, chat, prompt, generation in zip(todo, chats, prompts, generations)]
            feedback = cfg.designer_feedback
            for revision in range(1, feedback.revisions + 1):  # feedback mode (issue 7, 2b); 0 = paper
                pending = [(slot, chat, generation, report) for slot, chat, generation, report in pending
                           if not report.valid]
                if not pending:
                    break
                chats = [revision_chat(chat, generation.text, report.to_dict(), revision, feedback.revisions,
                                       feedback.answer_chars, feedback.report_chars)
                         for _, chat, generation, report in pending]
                prompts, generations = self._generate(chats, cfg.designer.max_new_tokens,
                                                      derive_seed(cfg.seed, "design-revision", step, attempt, revision))
                pending = [(slot, chat, generation, self._judge(slot, prompt, generation, invalid, revision))
                           for (slot, *_), chat, prompt, generation in zip(pending, chats, prompts, generations)]
        if cfg.selfplay.backfill:
            self._backfill(slots, step)
        return slots, invalid

    @timed("validation")
    def _validate(self, code: str):
        """The validator's report on ``code`` (its time is the step's validation phase)."""
        return self.validator.validate(code)

    def _judge(self, slot: EnvSlot, prompt: list, generation, invalid: list, revision: int):
        """Validate one designer generation for ``slot`` (``revision`` 0 = first answer, 1.. = feedback
        revisions) and book it: the report, the designer sample, a kept rejection."""
        slot.attempts += 1
        report = self._validate(generation.text)
        tokens = getattr(generation, "completion_tokens", None)  # an external designer reports its usage
        slot.reports.append({**report.to_dict(),
                             "generated_tokens": len(generation.completion_ids) if tokens is None else tokens,
                             "revision": revision})
        sample = None if self.designer_backend is not None else self._sample_dict(prompt, generation)
        if report.valid:
            slot.valid, slot.code, slot.class_name, slot.kind = True, report.code, report.class_name, report.kind
            slot.designer_sample = sample
        elif sample is not None:
            invalid.append({**sample, "skill": slot.skill})
            if self.rejected_dir is not None:
                store_rejection(self.rejected_dir, generation.text, report)
        return report

    def _design_chat(self, slot: EnvSlot, step: int, attempt: int, memory: bool = True) -> list:
        cfg = self.config
        rng = random.Random(derive_seed(cfg.seed, "design-context", slot.env_id, attempt))
        document = self.corpus.sample(step, slot.env_id, attempt).text if cfg.corpus.enabled and self.corpus else None
        positives, negative = [], None
        if cfg.memory.enabled and memory:
            positives = [r.code for r in self.memory.positive_seeds(slot.skill, rng=rng)]
            worst = self.memory.negative_seed(slot.skill, rng=rng)
            negative = worst.code if worst else None
        domain = variant = None
        if cfg.selfplay.flavour == "tool_use":
            domain, variant = sample_domain(rng), sample_variant(rng)
        return design_prompt(cfg.selfplay.flavour, slot.skill, document, positives, negative, domain, variant)

    def _backfill(self, slots: list, step: int) -> None:
        """Fill empty slots from the built-in library (toy runs with weak designers; logged)."""
        rng = random.Random(derive_seed(self.config.seed, "backfill", step))
        for slot in slots:
            if slot.valid or not self.backfill_pool:
                continue
            same_skill = [e for e in self.backfill_pool if e.skill == slot.skill] or self.backfill_pool
            entry = rng.choice(same_skill)
            report = self._validate(entry.source())
            if report.valid:
                slot.valid, slot.code, slot.class_name, slot.kind = True, report.code, report.class_name, report.kind
                slot.source = f"backfill:{entry.name}"
                slot.env_kwargs = level_kwargs(entry, self.config.selfplay.library_level, "selfplay.library_level")

    @timed("hints")
    def write_hints(self, slots: list, step: int) -> None:
        live = [slot for slot in slots if slot.valid]
        if not live:
            return
        chats = [hint_prompt(slot.code, self.config.selfplay.flavour) for slot in live]
        # hints sample at designer.hint_temperature (reference code 0.3), not the design temperature
        _, generations = self._generate(chats, self.config.designer.hint_max_new_tokens,
                                        derive_seed(self.config.seed, "hint", step),
                                        temperature=self.config.designer.hint_temperature)
        for slot, generation in zip(live, generations):
            slot.hint = extract_hint(generation.text)

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

    def play(self, slots: list, step: int, arm: str, count: int | None = None) -> dict:
        """Play ``count`` episodes (default G) per valid slot; returns {env_id: [EpisodeRecord]}."""
        jobs = [EpisodeJob(slot.env_id, slot.code, slot.class_name, slot.kind, seed, arm, slot.hint, slot.env_kwargs)
                for slot in slots if slot.valid for seed in self.episode_seeds(step, slot, arm, count)]
        with self.clock.phase(f"{arm}_arm"):
            records = self.runner.run(jobs, derive_seed(self.config.seed, "play", step, arm))
        grouped: dict = {}
        for record in records:
            grouped.setdefault(record.env_id, []).append(record)
        return grouped

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
            elif cfg.designer.reward == "calibration":
                slot.designer_reward = calibration_band_reward(True, slot.win_rate or 0.0, rcfg.band_low, rcfg.band_high)
        for slot in slots:
            if slot.valid and slot.source == "designer":
                self.memory.add(MemoryRecord(slot.env_id, slot.code, slot.skill, cfg.selfplay.flavour,
                                             self.memory_win_rate(slot), slot.regret, slot.step))
        rewards = [(s.designer_sample, s.designer_reward, s.skill) for s in designed]
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
    def weigh_designer(self, samples: list, slots: list) -> float | None:
        """'global_batch': the reference's designer up-weight (spec 6), min(agent samples / designer samples * k,
        cap), with this step's planned agent samples (m plays x valid environments of ``slots``) before trimming:
        192 / 24 * 4 = 32 for games, 192 / 24 * 8 = 64 -> 50 for tool use. Sets every sample's weight; returns it."""
        if not samples or self.config.selfplay.batch_structure == "groups":
            return samples[0].weight if samples else None
        cfg = self.config
        n_agent = self.no_hint_plays(slots) * sum(slot.valid for slot in slots)
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
        sizes = Counter(slot.skill for slot in slots if slot.valid and slot.source == "designer")
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
        return samples, [asdict(s) for s in slots], {"final_set_closed": True, **self._closed_metrics(slots)}

    # ----- one step ------------------------------------------------------------------------------
    def rollout(self, step: int) -> tuple[list, dict, list]:
        """Run step ``step``; returns (samples, metrics, archive rows of any closed set)."""
        slots, designer, closed, metrics = self.begin_step(step)
        played = self.play(slots, step, "no_hint", self.no_hint_plays(slots))
        agent = []
        for slot in slots:
            records = played.get(slot.env_id, [])
            advantages = self.record_play(slot, records, step)
            agent += [Sample("agent", r.token_ids, r.loss_mask, r.rollout_logprobs, a)
                      for r, a in zip(records, advantages) if a is not None and sum(r.loss_mask)]
        if self.is_final(step):  # the last set closes now: its designer samples train in this step
            flushed, rows, final_metrics = self.flush(step, slots)
            designer, closed = designer + flushed, closed + rows
            metrics.update({(f"final_{k}" if k in metrics else k): v for k, v in final_metrics.items()})
        self.end_step(step, slots, [r for records in played.values() for r in records], designer, metrics)
        samples, batch_metrics = self.assemble(designer, agent)
        metrics.update(batch_metrics)
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
                closed = [asdict(s) for s in slots]
                metrics.update(self._closed_metrics(slots))
            slots, invalid = self.design(step)
            self.state.invalid_samples = invalid
            self.weigh_designer(samples, slots)
            self.write_hints(slots, step)
            hinted = self.play(slots, step, "hint")
            for slot in slots:
                slot.hint_returns = [r.final_return for r in hinted.get(slot.env_id, [])]
                slot.hint_seeds = [r.seed for r in hinted.get(slot.env_id, [])]
            metrics.update(self._design_metrics(slots))
            if self.designer_backend is not None:
                metrics["env_source"] = self.mode
        return slots, samples, closed, metrics

    def _begin_fixed(self, step: int, slots: list, metrics: dict) -> tuple[list, list, list, dict]:
        """``begin_step`` of a fixed mode: the set is made once (step 0, or the first step of a run that
        has none) and kept; every k steps its window closes and the next opens on the same environments.
        A designed pool (fixed_env_grpo, the offline fixed external designer) goes to ``_begin_designed_pool``."""
        if baselines.designs_pool(self.config):
            return self._begin_designed_pool(step, slots, metrics)
        closed = []
        if not slots:
            slots = self.fill_pool(step)
            metrics.update(self._design_metrics(slots))
            metrics["env_source"] = self.mode
        elif step % self.config.selfplay.regen_interval == 0:
            closed = [asdict(s) for s in slots]
            metrics.update(self._closed_metrics(slots))
            if self.mode == "rlve" and baselines.baseline_of(self.config).rlve_redraw:  # a new draw from RLVE's set
                slots = self.fill_pool(step)
                metrics.update(self._design_metrics(slots))
                metrics["env_source"] = self.mode
                return slots, [], closed, metrics
            # a new window on the same environments (ids unchanged; code too, but RLVE raises): window statistics
            # start again, the environment itself is kept
            slots = [_reopened(slot, step) for slot in slots]
        return slots, [], closed, metrics

    # ----- a pool designed before training (fixed_env_grpo, offline fixed external designer) ------------
    def _begin_designed_pool(self, step: int, slots: list, metrics: dict) -> tuple[list, list, list, dict]:
        """The pool is designed once, at the run's first step (step 0: base policy, before any update), or
        taken from the state of a resumed run; then each step plays a set drawn from it. ``pool_redraw``
        'step' (reference): a new draw every step, and the previous step's set closes (archive, closed_*
        metrics); 'window': a new draw every k steps, when the window's set closes."""
        cfg, base = self.config, baselines.baseline_of(self.config)
        k = cfg.selfplay.regen_interval
        made = not self.state.pool
        if made:
            metrics.update(self._make_pool())
        per_step = base.pool_redraw == "step"
        closed = []
        if slots and (made or per_step or step % k == 0):
            closed = [asdict(s) for s in slots]
            metrics.update(self._closed_metrics(slots))
        if made or not slots or per_step or step % k == 0:
            slots = self._draw_pool(step if per_step else step // k, step)
            self.state.invalid_samples = []  # never rewarded: the designer is not trained
            if base.hint_arm and step == 0:  # regret of step 0's set, measurement only
                self.write_hints(slots, step)
                hinted = self.play(slots, step, "hint")
                for slot in slots:
                    slot.hint_returns = [r.final_return for r in hinted.get(slot.env_id, [])]
                    slot.hint_seeds = [r.seed for r in hinted.get(slot.env_id, [])]
        metrics["pool_size"] = len(self.state.pool)
        metrics["pool_draw"] = [slot.env_id for slot in slots if slot.valid]
        return slots, [], closed, metrics

    def _make_pool(self) -> dict:
        """Fill ``state.pool``: reuse ``<pool_dir>/env_pool.json`` when it was made for this config, else design
        rounds of one slot set each through ``design`` (round r as SPADE's regeneration r: its skills, seeds and
        corpus draws; the offline external designer without memory seeds) until ``pool_size`` valid environments
        are in or ``pool_max_rounds`` rounds are spent, then write that file. Returns the metrics of the
        generation (those of a reused file as it logged them, plus ``pool_from_file``)."""
        cfg = self.config
        fingerprint = self._pool_fingerprint()
        saved = self._read_pool_file(fingerprint)
        if saved is not None:
            self.state.pool, self.state.pool_info = saved["entries"], saved["info"]
            return {**saved["info"]["metrics"], "pool_from_file": True}
        wanted, max_rounds = baselines.pool_size_of(cfg), baselines.pool_max_rounds(cfg)
        memory = self.mode != baselines.EXTERNAL_MODE  # paper: the fixed ED pool is memory-free
        generated, entries, rounds = [], [], 0
        while len(entries) < wanted and rounds < max_rounds:
            designed, _ = self.design(rounds * cfg.selfplay.regen_interval, memory=memory)
            rounds += 1
            for slot in designed:
                generated.append(slot)
                if slot.valid and len(entries) < wanted:
                    entries.append({"env_id": f"p{len(entries):05d}-{slot.skill}", "designed_as": slot.env_id,
                                    "skill": slot.skill, "source": slot.source, "code": slot.code,
                                    "class_name": slot.class_name, "kind": slot.kind, "attempts": slot.attempts,
                                    **({"env_kwargs": slot.env_kwargs} if slot.env_kwargs else {})})
        if not entries:
            raise RuntimeError(f"baseline.mode {self.mode!r}: the designed pool holds no valid environment after "
                               f"{rounds} design rounds of {baselines.pool_slots(cfg)} slots (the limit, config key "
                               f"'baseline.pool_round_factor' = {baselines.baseline_of(cfg).pool_round_factor}, for "
                               f"baseline.pool_size {wanted}); reasons: "
                               f"{json.dumps(_count(r['reason'] for s in generated for r in s.reports))[:1500]}")
        metrics = {**self._design_metrics(generated), "slots": baselines.pool_slots(cfg), "env_source": self.mode,
                   "pool_wanted": wanted, "pool_rounds": rounds, "pool_max_rounds": max_rounds,
                   "pool_generated_slots": len(generated), "pool_valid": len(entries),
                   "pool_short": wanted - len(entries), "pool_memory_seeds": memory and cfg.memory.enabled}
        self.state.pool = entries
        self.state.pool_info = {"fingerprint": fingerprint, "metrics": metrics}
        if self.pool_dir is not None:
            from spade.io import atomic_write_json

            atomic_write_json(Path(self.pool_dir) / POOL_FILE, {
                "info": self.state.pool_info, "entries": entries,
                "generated": [{k: v for k, v in asdict(s).items() if k != "designer_sample"} for s in generated]})
        return metrics

    def _pool_fingerprint(self) -> dict:
        """What a designed pool depends on; a pool file made under another fingerprint is not reused."""
        cfg, base = self.config, baselines.baseline_of(self.config)
        return {"mode": self.mode, "seed": cfg.seed, "pool_size": baselines.pool_size_of(cfg),
                "max_rounds": baselines.pool_max_rounds(cfg), "slots": baselines.pool_slots(cfg),
                "skills": list(cfg.selfplay.skills), "active_skills": cfg.selfplay.active_skills,
                "flavour": cfg.selfplay.flavour, "design_attempts": cfg.selfplay.design_attempts,
                "backfill": cfg.selfplay.backfill, "corpus": cfg.corpus.enabled, "memory": cfg.memory.enabled,
                "designer": base.external_model if self.mode == baselines.EXTERNAL_MODE else cfg.model.name}

    def _read_pool_file(self, fingerprint: dict) -> dict | None:
        """The pool of ``<pool_dir>/env_pool.json`` when it exists and was made under ``fingerprint``."""
        if self.pool_dir is None or not (Path(self.pool_dir) / POOL_FILE).is_file():
            return None
        path = Path(self.pool_dir) / POOL_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("designed pool %s is unreadable (%s); designing the pool again", path, exc)
            return None
        if data.get("info", {}).get("fingerprint") != fingerprint or not data.get("entries"):
            log.warning("designed pool %s was made for other settings; designing the pool again", path)
            return None
        return data

    def _draw_pool(self, index: int, step: int) -> list:
        """Draw ``index`` of the designed pool as the slots of a set opened at ``step`` (baselines.pool_draws, order
        seeded by baselines.pool_order_seed). A pool shorter than the slot count leaves the last slots empty."""
        cfg, pool = self.config, self.state.pool
        n_slots = baselines.pool_slots(cfg)
        if index >= len(self._pool_draws):  # every draw a run of total_steps makes, at once
            count = max(index + 1, cfg.selfplay.total_steps)
            self._pool_draws = baselines.pool_draws(len(pool), n_slots, count, baselines.pool_order_seed(cfg))
        slots = [EnvSlot(entry["env_id"], entry["skill"], step, entry["source"], code=entry["code"],
                         class_name=entry["class_name"], kind=entry["kind"], valid=True, attempts=entry["attempts"],
                         env_kwargs=dict(entry.get("env_kwargs", {})))
                 for entry in (pool[i] for i in self._pool_draws[index])]
        return slots + [EnvSlot(f"s{step:05d}-empty-{i}", "", step, "pool:empty") for i in range(len(slots), n_slots)]

    def fill_pool(self, step: int) -> list:
        """The slots of a fixed procedural pool ('fixed_pool', 'rlve'): the source's environments sampled
        (seeded) into the run's slot count, each validated in the sandbox like a designed candidate. A pool
        environment that fails validation stops the run, except in 'rlve', where it is excluded from the set for
        the rest of the run (the reason kept in the state and logged once in the metric ``rlve_newly_excluded``)
        and the draw is made again without it. RLVE's files are rendered at each environment's current curriculum level."""
        cfg = self.config
        base = baselines.baseline_of(cfg)
        if self._pool_source is None:
            self._pool_source = baselines.make_source(cfg, pool=self.validator.pool)
        n_slots = cfg.selfplay.active_skills * cfg.selfplay.envs_per_skill
        while True:
            entries = self._pool_source.entries()
            if self.mode == "rlve":
                entries = [replace(e, code=baselines.render_rlve(base, e.name, self._rlve_top(e.name)))
                           for e in entries if e.name not in self.state.rlve_excluded]
                if not entries:
                    raise RuntimeError(f"baseline.mode 'rlve': every environment failed validation in the sandbox: "
                                       f"{json.dumps(self.state.rlve_excluded)[:3000]}")
            chosen = baselines.assign_entries(entries, n_slots, baselines.pool_seed(cfg, step))
            failed = [(entry, self._validated(entry.code)) for entry in chosen]
            failed = [(entry, report) for entry, report in failed if not report.valid]
            if not failed:
                break
            if self.mode == "rlve" and len(failed) == len(chosen) and not any(r.valid for r in self._reports.values()):
                entry, report = failed[0]  # nothing has loaded at all: the setup, not one environment, is wrong
                raise RuntimeError(f"baseline.mode 'rlve': no RLVE environment passed validation in the sandbox; the "
                                   f"first, {entry.origin}, failed with {report.reason}: {report.message[:1500]}\n"
                                   "Check that baseline.rlve_import_paths holds the packages RLVE's environments "
                                   "import (numpy, networkx, sympy) and that sandbox.read_only_paths covers it and "
                                   "baseline.rlve_path (docs/BASELINES.md)")
            for entry, report in failed:
                if self.mode != "rlve":
                    raise RuntimeError(f"baseline.mode {self.mode!r}: environment {entry.origin} failed validation in "
                                       f"the sandbox ({report.reason}): {report.message[:1500]}")
                self.state.rlve_excluded[entry.name] = f"{report.reason}: {report.message[:300]}"
                self._excluded_now[entry.name] = self.state.rlve_excluded[entry.name]
        slots = []
        for i, entry in enumerate(chosen):
            report = self._validated(entry.code)
            slot = EnvSlot(f"s{step:05d}-{entry.name}-{i}", entry.skill, step, entry.origin, valid=True,
                           code=report.code, class_name=report.class_name, kind=report.kind)
            slot.reports.append({**report.to_dict(), **({"pool_entry": entry.provenance} if entry.provenance else {})})
            slots.append(slot)
        return slots

    def _validated(self, code: str):
        """The validation report of an environment file, validated in the sandbox once per run."""
        if code not in self._reports:
            self._reports[code] = self._validate(code)
        return self._reports[code]

    def _rlve_top(self, identifier: str) -> int:
        level = self.state.rlve.get(identifier)
        return baselines.baseline_of(self.config).rlve_difficulty if level is None else level["top"]

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
        advantages = iter(grpo_advantages(returns, [0] * len(returns)).tolist())
        return [None if self.dropped(r) else next(advantages) for r in records]

    def _advance_rlve(self, slots: list, records: list) -> dict:
        """RLVE's curriculum after play (baseline.rlve_curriculum 'adaptive'): each environment's episodes at its top
        difficulty (known from the episode seed: baselines.rlve_problem_difficulty) update its level
        (baselines.rlve_curriculum_step); a raised level re-renders the environment's slots, validated in the sandbox
        first. A file that fails validation at the new level is not used: the level stays, and the metric
        ``rlve_raise_rejected`` names the environment and the reason. Sandbox failures do not count as answers."""
        base = baselines.baseline_of(self.config)
        identifier_of = {s.env_id: s.source.removeprefix("rlve:") for s in slots if s.source.startswith("rlve:")}
        levels = self.state.rlve
        for identifier in identifier_of.values():
            levels.setdefault(identifier, {"top": self._rlve_top(identifier), "episodes": 0, "correct": 0.0})
        rejected = {}
        if base.rlve_curriculum == "adaptive":
            window = baselines.rlve_window(base)
            at_top: dict = {}
            for record in records:
                identifier = identifier_of.get(record.env_id)
                if identifier is None or record.outcome == "env_failure":
                    continue
                if baselines.rlve_problem_difficulty(record.seed, levels[identifier]["top"], window) == \
                        levels[identifier]["top"]:
                    at_top.setdefault(identifier, []).append(record.final_return)
            for identifier, accuracies in sorted(at_top.items()):
                level = baselines.rlve_curriculum_step(levels[identifier], accuracies, base.rlve_check_episodes,
                                                       base.rlve_raise_accuracy)
                if level["top"] > levels[identifier]["top"]:
                    report = self._validated(baselines.render_rlve(base, identifier, level["top"]))
                    if report.valid:
                        for slot in slots:
                            if slot.source == f"rlve:{identifier}":
                                slot.code, slot.class_name, slot.kind = report.code, report.class_name, report.kind
                    else:
                        rejected[identifier] = f"level {level['top']}: {report.reason}"
                        level = {**level, "top": levels[identifier]["top"]}
                levels[identifier] = level
        metrics = {"rlve_top_difficulty": {i: levels[i]["top"] for i in sorted(set(identifier_of.values()))}}
        if rejected:
            metrics["rlve_raise_rejected"] = rejected
        metrics["rlve_excluded"] = len(self.state.rlve_excluded)  # environments left out of the set so far
        if self._excluded_now:
            metrics["rlve_newly_excluded"], self._excluded_now = self._excluded_now, {}
        return metrics

    @timed("rewards")
    def end_step(self, step: int, slots: list, records: list, delayed: list, metrics: dict) -> dict:
        """Store the set after play and add the play metrics of step ``step`` to ``metrics``."""
        if self.mode == "rlve":
            metrics.update(self._advance_rlve(slots, records))
        self._store(slots)
        metrics.update(self._play_metrics(slots, records, delayed))
        if slots and step == slots[0].step:
            metrics["mean_regret"] = _mean([s.regret for s in slots if s.regret is not None])
        return metrics

    # ----- metrics -------------------------------------------------------------------------------
    def _design_metrics(self, slots: list) -> dict:
        attempts = [] if self.mode in baselines.POOL_MODES else [report for slot in slots for report in slot.reports]
        designed_valid = sum(s.valid and s.source == "designer" for s in slots)
        return {
            "regenerated": True,
            "slots": len(slots),
            "design_attempts": len(attempts),
            "designer_valid": designed_valid,
            "valid_env_rate": designed_valid / len(attempts) if attempts else 0.0,
            "design_generated_tokens": sum(r.get("generated_tokens", 0) for r in attempts),
            "backfilled_share": sum(s.source.startswith("backfill") for s in slots) / len(slots) if slots else 0.0,
            "empty_share": sum(not s.valid for s in slots) / len(slots) if slots else 0.0,
            "reject_reasons": _count(r["reason"] for r in attempts if not r["valid"]),
        }

    def _closed_metrics(self, slots: list) -> dict:
        """Metrics of the set closed at this step (its window is complete)."""
        valid = [s for s in slots if s.valid]
        rates = [s.win_rate for s in valid if s.win_rate is not None]
        return {
            "closed_set_step": slots[0].step,
            "closed_mean_win_rate": _mean(rates),
            "closed_mean_regret": _mean([s.regret for s in valid if s.regret is not None]),
            "closed_mean_designer_reward": _mean([s.designer_reward for s in valid if s.designer_reward is not None]),
            # learnable share (figure 6): slots whose window win rate is in [0.2, 0.8]; empty slots count 0
            "closed_learnable_share": sum(0.2 <= r <= 0.8 for r in rates) / len(slots) if slots else 0.0,
            "closed_distinct_rewards": _mean([len(s.distinct_rewards) for s in valid]),
            "closed_partial_rewards": _mean([sum(0 < r < 1 for r in s.distinct_rewards) for s in valid]),
        }

    def _play_metrics(self, slots: list, records: list, delayed: list) -> dict:
        dropped = sum(self.dropped(r) for r in records)
        failures = sum(r.outcome == "env_failure" for r in records)
        records = [r for r in records if not self.dropped(r)]
        groups: dict = {}  # env_id -> returns of this step's kept no-hint episodes (one GRPO group)
        for record in records:
            groups.setdefault(record.env_id, []).append(record.final_return)
        by_skill: dict = {}
        for slot in slots:
            if slot.episodes:
                by_skill.setdefault(slot.skill, []).append(slot.win_rate)
        return {
            "episodes": len(records),
            "agent_groups": len(groups),
            "useful_groups": sum(max(g) - min(g) > 0 for g in groups.values()),  # non-zero reward variance
            "agent_win_rate": _mean([float(r.won) for r in records]),
            "agent_mean_return": _mean([r.final_return for r in records]),
            "agent_return_sd": _sd([r.final_return for r in records]),  # sample sd: the interval of the mean return
            "agent_returns": [r.final_return for r in records],  # [episodes] for the bootstrap of the learning signal
            "mean_turns": _mean([r.turns for r in records]),
            "mean_generated_tokens": _mean([r.generated_tokens for r in records]),
            "env_failures": failures,
            "win_rate_by_skill": {k: _mean(v) for k, v in by_skill.items()},
            "env_win_rates": {s.env_id: s.win_rate for s in slots if s.episodes},
            "filled_slots": sum(s.valid for s in slots),
            "designer_samples": len(delayed),
            "designer_weight": delayed[0].weight if delayed else None,
            "dropped_plays": dropped,
            "no_hint_plays": self.no_hint_plays(slots),
        }


_IDENTITY = ("env_id", "skill", "source", "code", "class_name", "kind", "valid", "attempts", "reports", "hint",
             "designer_sample", "env_kwargs")  # what an environment keeps when a fixed set's next window opens


def _reopened(slot: EnvSlot, step: int) -> EnvSlot:
    """``slot``'s environment in a new bookkeeping window opened at ``step``: statistics start again."""
    return EnvSlot(step=step, **{key: getattr(slot, key) for key in _IDENTITY})


def _mean(values: list):
    return sum(values) / len(values) if values else None


def _sd(values: list):
    """Sample standard deviation (n - 1); None below two values."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def _count(values) -> dict:
    counts: dict = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


# ----- setup shared by the backends (local trainer, spade.rlhf coordinator) ---------------------------
def fresh_memory(config: SpadeConfig) -> EnvironmentMemory:
    """A new environment memory, seeded from the built-in library (held-out environments excluded) when
    ``memory.seed_library`` is set."""
    memory = EnvironmentMemory(config.memory)
    if config.memory.seed_library:
        heldout = set(config.eval.heldout_library.environments)
        memory.seed_from_library([e for e in library() if e.name not in heldout])
    return memory


def corpus_sampler(config: SpadeConfig, corpus_path):
    """The grounding-document sampler of a run, or None when the corpus is off or absent."""
    if not (config.corpus.enabled and corpus_path):
        return None
    from spade.designer.corpus import CorpusSampler, load_corpus

    kind = "tool_use" if config.selfplay.flavour == "tool_use" else "games"
    return CorpusSampler(load_corpus(corpus_path), config.seed + config.corpus.seed_offset,
                         config.corpus.max_words_for(kind))

