"""The SPADE self-play step (spec section 3, Algorithm 1), independent of the training backend.

``SelfPlay.rollout(step)`` decides what is generated and how it is rewarded; it returns the training
samples of that step and its metrics. A backend (the local trainer here, OpenRLHF on GPUs) only turns
samples into a policy update. Per step ``s`` with regeneration interval ``k``:

1. if ``s % k == 0``: close the previous environment set (window win rates, regret, designer rewards,
   memory update; its designer samples mature now, k steps late), design a new set (round-robin
   skills, corpus document and memory seeds per attempt, intake + sandboxed validation, up to
   ``design_attempts`` tries per slot, optional backfill from the built-in library), write one hint
   per environment, and play the hint arm (G episodes, used only to measure regret);
2. play the no-hint arm (G episodes per environment, the agent's training data);
3. agent advantages: z-score within each environment's G returns (spec 6).

``baseline.mode`` (spade.baselines) switches the environment source: 'spade' is the above; the fixed
modes ('fixed_env_grpo', 'fixed_pool', 'rlve') fill the set once at step 0 and keep it for the whole
run; every k steps they only close the bookkeeping window (archive, window metrics) and open the next
one on the same environments, with no designer call, no designer reward and no designer sample.
'fixed_external_designer' runs the loop above, but designs and hints come from an external model
(spade.designer.external) that is never trained: no designer samples; its designer reward is computed
and logged only.

All randomness derives from ``(config.seed, step, ...)``, so a resumed run repeats exactly.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field, replace

from spade import baselines
from spade.advantages import designer_advantages, designer_upweight, grpo_advantages
from spade.agent import EpisodeJob, EpisodeRunner
from spade.config import SpadeConfig
from spade.designer.feedback import revision_chat
from spade.designer.memory import EnvironmentMemory, MemoryRecord
from spade.designer.prompts import agent_system_prompt, design_prompt, extract_hint, hint_prompt
from spade.designer.skills import active_skills, sample_domain, sample_variant
from spade.envs.library import library
from spade.envs.validate import Validator, store_rejection
from spade.generation import SamplingParams
from spade.seeding import derive_seed
from spade.rewards import (
    EMAState, calibration_band_reward, designer_reward, ema_update, invalid_penalty, learning_potential, regret,
)


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
    paired_returns: list = field(default_factory=list)  # [G] no-hint returns on the same seeds
    wins: int = 0  # no-hint wins over the window
    episodes: int = 0  # no-hint episodes over the window
    return_sum: float = 0.0  # sum of the no-hint returns R_A over the window (mean R_A for designer.reward ema_lp)
    distinct_rewards: list = field(default_factory=list)  # reward values observed (figure 16)
    designer_sample: dict | None = None  # token ids / mask / log-probs of the generation that made it
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


class SelfPlay:
    def __init__(self, config: SpadeConfig, backend, validator: Validator, memory: EnvironmentMemory,
                 corpus_sampler, state: SelfPlayState | None = None, rejected_dir=None):
        self.config, self.backend, self.validator = config, backend, validator
        self.rejected_dir = rejected_dir  # rejected candidates are kept here with their report (spec 5)
        self.memory, self.corpus = memory, corpus_sampler
        self.state = state or SelfPlayState()
        prompts = {kind: agent_system_prompt(kind) for kind in ("game", "tool_use")}
        self.runner = EpisodeRunner(backend, validator.pool, config.agent, prompts)
        heldout = set(config.eval.heldout_library.environments)
        self.backfill_pool = [e for e in library() if e.name not in heldout and
                              (e.flavour == "tool_use") == (config.selfplay.flavour == "tool_use")]
        baselines.check_config(config)
        self.mode = baselines.baseline_of(config).mode
        self.designer_backend = None  # designs and hints through self.backend unless an external model writes them
        self._pool_source = None  # the fixed-pool source, made on first use (RLVE lists its set in a child process)
        self._reports: dict = {}  # environment file -> its validation report (a redrawn RLVE file is not re-run)
        self._excluded_now: dict = {}  # RLVE identifiers excluded since the last step's metrics -> why
        if self.mode == baselines.EXTERNAL_MODE:
            from spade.designer.external import ExternalDesignerBackend

            self.designer_backend = ExternalDesignerBackend.from_config(config)

    # ----- helpers -------------------------------------------------------------------------------
    def _generate(self, chats: list, max_new_tokens: int, seed: int):
        params = SamplingParams(self.config.designer.temperature, 1.0, max_new_tokens)
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
    def design(self, step: int) -> tuple[list, list]:
        """Design a new environment set; returns (slots, designer samples of invalid candidates)."""
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
            chats = [self._design_chat(slot, step, attempt) for slot in todo]
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

    def _judge(self, slot: EnvSlot, prompt: list, generation, invalid: list, revision: int):
        """Validate one designer generation for ``slot`` (``revision`` 0 = first answer, 1.. = feedback
        revisions) and book it: the report, the designer sample, a kept rejection."""
        slot.attempts += 1
        report = self.validator.validate(generation.text)
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

    def _design_chat(self, slot: EnvSlot, step: int, attempt: int) -> list:
        cfg = self.config
        rng = random.Random(derive_seed(cfg.seed, "design-context", slot.env_id, attempt))
        document = self.corpus.sample(step, slot.env_id, attempt).text if cfg.corpus.enabled and self.corpus else None
        positives, negative = [], None
        if cfg.memory.enabled:
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
            report = self.validator.validate(entry.source())
            if report.valid:
                slot.valid, slot.code, slot.class_name, slot.kind = True, report.code, report.class_name, report.kind
                slot.source = f"backfill:{entry.name}"

    def write_hints(self, slots: list, step: int) -> None:
        live = [slot for slot in slots if slot.valid]
        if not live:
            return
        chats = [hint_prompt(slot.code, self.config.selfplay.flavour) for slot in live]
        _, generations = self._generate(chats, self.config.designer.hint_max_new_tokens,
                                        derive_seed(self.config.seed, "hint", step))
        for slot, generation in zip(live, generations):
            slot.hint = extract_hint(generation.text)

    # ----- play ----------------------------------------------------------------------------------
    def episode_seeds(self, step: int, slot: EnvSlot, arm: str) -> list:
        """G environment seeds; the hint arm reuses the no-hint seeds when arms are paired."""
        key = "no_hint" if arm == "hint" and self.config.agent.paired_arms else arm
        return [derive_seed(self.config.seed, "episode", step, slot.env_id, key, g)
                for g in range(self.config.selfplay.group_size)]

    def play(self, slots: list, step: int, arm: str) -> dict:
        """Play G episodes per valid slot; returns {env_id: [EpisodeRecord]}."""
        jobs = [EpisodeJob(slot.env_id, slot.code, slot.class_name, slot.kind, seed, arm, slot.hint)
                for slot in slots if slot.valid for seed in self.episode_seeds(step, slot, arm)]
        records = self.runner.run(jobs, derive_seed(self.config.seed, "play", step, arm))
        grouped: dict = {}
        for record in records:
            grouped.setdefault(record.env_id, []).append(record)
        return grouped

    # ----- rewards -------------------------------------------------------------------------------
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
                slot.designer_reward = designer_reward(slot.regret or 0.0, slot.win_rate or 0.0, rcfg.regret_weight,
                                                       rcfg.plateau_weight, rcfg.regret_scale, rcfg.band_low,
                                                       rcfg.band_high, rcfg.ramp)
            elif cfg.designer.reward == "calibration":
                slot.designer_reward = calibration_band_reward(True, slot.win_rate or 0.0, rcfg.band_low, rcfg.band_high)
        for slot in slots:
            if slot.valid and slot.source == "designer":
                self.memory.add(MemoryRecord(slot.env_id, slot.code, slot.skill, cfg.selfplay.flavour,
                                             slot.win_rate, slot.regret, slot.step))
        rewards = [(s.designer_sample, s.designer_reward, s.skill) for s in designed]
        penalty = (-1.0 if cfg.designer.reward == "calibration"
                   else invalid_penalty(cfg.designer.invalid, cfg.designer.invalid_penalty))
        if penalty is not None:
            rewards += [(sample, penalty, sample["skill"]) for sample in self.state.invalid_samples]
        if not rewards or not cfg.selfplay.train_designer or self.designer_backend is not None:
            return []
        advantages = designer_advantages([r for _, r, _ in rewards], [skill for _, _, skill in rewards])
        # spec 6: min(N_RA_samples / N_envs * k, cap), with N_RA_samples the agent samples of one step
        n_envs = max(sum(s.valid for s in slots), 1)
        weight = designer_upweight(n_envs * cfg.selfplay.group_size, n_envs, cfg.selfplay.regen_interval,
                                   cfg.train.designer_upweight_cap)
        return [Sample("designer", s["token_ids"], s["loss_mask"], s["rollout_logprobs"], float(a), weight, True)
                for (s, _, _), a in zip(rewards, advantages.tolist())]

    # ----- one step ------------------------------------------------------------------------------
    def rollout(self, step: int) -> tuple[list, dict, list]:
        """Run step ``step``; returns (samples, metrics, archive rows of any closed set)."""
        slots, samples, closed, metrics = self.begin_step(step)
        played = self.play(slots, step, "no_hint")
        agent = []
        for slot in slots:
            records = played.get(slot.env_id, [])
            advantages = self.record_play(slot, records, step)
            agent += [Sample("agent", r.token_ids, r.loss_mask, r.rollout_logprobs, a)
                      for r, a in zip(records, advantages) if sum(r.loss_mask)]
        self.end_step(step, slots, [r for records in played.values() for r in records], samples, metrics)
        return agent + samples, metrics, closed

    def begin_step(self, step: int) -> tuple[list, list, list, dict]:
        """Everything of step ``step`` that precedes the agent's no-hint play.

        At a regeneration step: close the previous set (its designer samples mature now), design the
        new set, write hints and play the hint arm (measurement only). Returns (slots of the current
        set, matured designer samples, archive rows of the closed set, metrics so far).
        """
        cfg = self.config
        slots, samples, closed, metrics = self._envs(), [], [], {"step": step}
        if self.mode in baselines.FIXED_MODES:
            return self._begin_fixed(step, slots, metrics)
        if step % cfg.selfplay.regen_interval == 0:
            if slots:
                samples += self.close_set(slots)
                closed = [asdict(s) for s in slots]
                metrics.update(self._closed_metrics(slots))
            slots, invalid = self.design(step)
            self.state.invalid_samples = invalid
            self.write_hints(slots, step)
            hinted = self.play(slots, step, "hint")
            for slot in slots:
                slot.hint_returns = [r.final_return for r in hinted.get(slot.env_id, [])]
            metrics.update(self._design_metrics(slots))
            if self.designer_backend is not None:
                metrics["env_source"] = self.mode
        return slots, samples, closed, metrics

    def _begin_fixed(self, step: int, slots: list, metrics: dict) -> tuple[list, list, list, dict]:
        """``begin_step`` of a fixed mode: the set is made once (step 0, or the first step of a run that
        has none) and kept; every k steps its window closes and the next opens on the same environments."""
        closed = []
        if not slots:
            if self.mode == "fixed_env_grpo":
                slots, _ = self.design(step)  # the same design + validation path, the same slot count
                self.state.invalid_samples = []  # never rewarded: the designer is not trained
                if baselines.baseline_of(self.config).hint_arm:
                    self.write_hints(slots, step)
                    hinted = self.play(slots, step, "hint")
                    for slot in slots:
                        slot.hint_returns = [r.final_return for r in hinted.get(slot.env_id, [])]
            else:
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
            for slot in slots:  # a new window on the same environments (ids unchanged; code too, but RLVE raises)
                slot.step, slot.wins, slot.episodes, slot.distinct_rewards = step, 0, 0, []
                slot.return_sum = 0.0
                slot.hint_returns, slot.paired_returns, slot.regret, slot.designer_reward = [], [], None, None
        return slots, [], closed, metrics

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
            self._reports[code] = self.validator.validate(code)
        return self._reports[code]

    def _rlve_top(self, identifier: str) -> int:
        level = self.state.rlve.get(identifier)
        return baselines.baseline_of(self.config).rlve_difficulty if level is None else level["top"]

    def record_play(self, slot: EnvSlot, records: list, step: int) -> list:
        """Book one slot's no-hint episodes of step ``step`` (window wins, regret at the regeneration
        step, distinct rewards); returns the agent advantage of each record, in order (spec 6: z-score
        within the slot's G returns). Records without sampled tokens still count in the z-score."""
        if not records:
            return []
        returns = [r.final_return for r in records]
        if step == slot.step:  # the regeneration step: both arms played, regret measured (Eq. 3)
            slot.paired_returns = returns
            if slot.hint_returns:
                slot.regret = regret(slot.hint_returns, returns, paired=self.config.agent.paired_arms)
        slot.wins += sum(r.won for r in records)
        slot.return_sum += sum(returns)
        slot.episodes += len(records)
        slot.distinct_rewards = sorted(set(slot.distinct_rewards) | {r.rewards[-1] for r in records if r.rewards})
        return grpo_advantages(returns, [0] * len(returns)).tolist()

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
        groups: dict = {}  # env_id -> returns of this step's no-hint episodes (one GRPO group)
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
            "mean_turns": _mean([r.turns for r in records]),
            "mean_generated_tokens": _mean([r.generated_tokens for r in records]),
            "env_failures": sum(r.outcome == "env_failure" for r in records),
            "win_rate_by_skill": {k: _mean(v) for k, v in by_skill.items()},
            "env_win_rates": {s.env_id: s.win_rate for s in slots if s.episodes},
            "filled_slots": sum(s.valid for s in slots),
            "designer_samples": len(delayed),
        }


def _mean(values: list):
    return sum(values) / len(values) if values else None


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

