"""How the self-play core designs an environment set and writes its hints (Algorithm 1, regeneration step).

``EnvironmentDesign.design`` asks the designer for one environment per slot (round-robin skills, a corpus
document and memory seeds per attempt), checks each candidate (intake + sandboxed validation, then for tool use
the policy's LLM screen when ``validation.llm_screen`` is on), retries the empty slots up to
``selfplay.design_attempts`` times (with ``designer_feedback.revisions`` revisions that show the designer its
validation report), and backfills slots still empty from the built-in library when
``selfplay.backfill`` is set. ``top_up`` designs again for slots still empty at a later step of the window
(``selfplay.top_up``, the reference's behaviour). ``write_hints`` then writes one hint per valid environment. Designs and hints
come from the policy itself, or from an external, untrained model (``designer_backend``,
spade.designer.external), which yields no designer sample.

A mixin of :class:`spade.core.selfplay.SelfPlay`: it reads the core's ``config``, ``backend``,
``designer_backend``, ``runner``, ``designer_chat`` (the chat renderer of designs, hints and the screen,
``designer.enable_thinking``), ``validator``, ``memory``, ``corpus``, ``rejected_dir``, ``backfill_pool`` and ``clock``.
"""

from __future__ import annotations

import random
from dataclasses import replace

from spade.core.failures import design_stage, wrote_code
from spade.core.phases import timed
from spade.core.slots import EnvSlot
from spade.designer.feedback import revision_chat
from spade.designer.prompts import design_prompt, extract_hint, hint_prompt, screen_prompt, screen_verdict
from spade.designer.skills import active_skills, sample_domain, sample_variant
from spade.envs.library.registry import level_kwargs
from spade.envs.validate import screen_timed_out, screened, store_rejection
from spade.inference.generation import SamplingParams
from spade.seeding import derive_seed


HINT_REQUESTS = 3  # requests per hint when they time out (designer.hint_timeout_s; reference: max_retries 3)


class EnvironmentDesign:
    """The designer's side of a regeneration step: a new environment set, validated, and its hints."""

    # ----- designer generations ----------------------------------------------------------------
    def _generate(self, chats: list, params: SamplingParams, seed: int, prefix: str = ""):
        """Designer-model generations of ``chats`` (``params``: designer.design_params() or hint_params()).
        ``prefix`` (designer.opening(): response_prefix or response_template, designs only) opens the reply: its tokens
        end every prompt (never trained) and each generation's text starts with it, as intake reads it."""
        if self.designer_backend is not None:  # external designer: text only, no prompt tokens, never trained
            if prefix:  # SelfPlay refuses the combination; a chat API cannot be given an opened reply
                raise ValueError("designer.response_prefix applies to the policy's own designs only")
            return [[] for _ in chats], self.designer_backend.generate_chats(chats, params, seed)
        prefix_ids = self.designer_chat.encode(prefix) if prefix else []
        prompts = [self.designer_chat.first_prompt(chat) + prefix_ids for chat in chats]
        generations = self.backend.generate(prompts, params, seed)
        if prefix:
            generations = [replace(g, text=prefix + g.text) for g in generations]
        return prompts, generations

    @staticmethod
    def _sample_dict(prompt: list, generation) -> dict:
        return {
            "token_ids": list(prompt) + list(generation.completion_ids),
            "loss_mask": [0] * len(prompt) + [1] * len(generation.completion_ids),
            "rollout_logprobs": [0.0] * len(prompt) + list(generation.logprobs),
        }

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
        self._fill(slots, step, memory, invalid)
        if cfg.selfplay.backfill:
            self._backfill(slots, step)
        return slots, invalid

    @timed("design")
    def top_up(self, slots: list, step: int) -> tuple[dict, list]:
        """``selfplay.top_up`` 'window' (reference code: a step between regenerations generates again whenever
        fewer environments than slots exist, orchestrator.py:2299-2301, with 5 attempts each, spade_rollout.py:487):
        design again, up to ``design_attempts`` times, for the slots of the current set that are still empty at
        ``step``. A slot filled here keeps its skill, id and set (``step``), records ``filled_step``, gets no hint
        and no hint arm (the reference plays hints at regeneration steps only, orchestrator.py:2383-2386), so its
        regret stays unmeasured, and its designer sample does not train (``SelfPlay.close_set``). Returns (the step's top-up metrics, designer samples of invalid candidates)."""
        empty = [slot for slot in slots if not slot.valid]
        if not empty:
            return {}, []
        before = [len(slot.reports) for slot in empty]
        invalid = []
        self._fill(empty, step, True, invalid, top_up=True)
        for slot in empty:
            if slot.valid:
                slot.filled_step = step
        attempts = [report for slot, n in zip(empty, before) for report in slot.reports[n:]]
        return {"top_up_slots": len(empty), "top_up_filled": sum(slot.valid for slot in empty),
                "top_up_attempts": len(attempts),
                "top_up_generated_tokens": sum(r.get("generated_tokens", 0) for r in attempts)}, invalid

    def _fill(self, slots: list, step: int, memory: bool, invalid: list, top_up: bool = False) -> None:
        """Design attempts at ``step`` for the empty slots of ``slots``, each with up to
        ``designer_feedback.revisions`` revisions; rejected designer samples go to ``invalid``. A top-up draws its
        own sampling seeds and prompt contexts (``top_up``), so it never repeats the regeneration step's attempts."""
        cfg = self.config
        label = "top-up" if top_up else "design"
        screen = "top-up-screen" if top_up else "screen"
        for attempt in range(cfg.selfplay.design_attempts):
            todo = [slot for slot in slots if not slot.valid]
            if not todo:
                break
            chats = [self._design_chat(slot, step, attempt, memory, top_up) for slot in todo]
            prompts, generations = self._generate(chats, cfg.designer.design_params(),
                                                  derive_seed(cfg.seed, label, step, attempt),
                                                  prefix=cfg.designer.opening())
            reports = self._judge(todo, prompts, generations, invalid, 0, derive_seed(cfg.seed, screen, step, attempt),
                                  step)
            pending = list(zip(todo, chats, generations, reports))
            feedback = cfg.designer_feedback
            for revision in range(1, feedback.revisions + 1):  # feedback mode (issue 7, 2b); 0 = paper
                pending = [(slot, chat, generation, report) for slot, chat, generation, report in pending
                           if not report.valid]
                if not pending:
                    break
                chats = [revision_chat(chat, generation.text, report.to_dict(), revision, feedback.revisions,
                                       feedback.answer_chars, feedback.report_chars)
                         for _, chat, generation, report in pending]
                prompts, generations = self._generate(chats, cfg.designer.design_params(),
                                                      derive_seed(cfg.seed, f"{label}-revision", step, attempt, revision),
                                                      prefix=cfg.designer.opening())
                todo = [slot for slot, *_ in pending]
                reports = self._judge(todo, prompts, generations, invalid, revision,
                                      derive_seed(cfg.seed, f"{screen}-revision", step, attempt, revision), step)
                pending = list(zip(todo, chats, generations, reports))

    @timed("validation")
    def _validate(self, code: str, step: int | None = None):
        """The validator's report on ``code`` designed at ``step`` (its time is the step's validation phase)."""
        return self.validator.validate(code, step)

    def _judge(self, slots: list, prompts: list, generations: list, invalid: list, revision: int, seed: int,
               step: int) -> list:
        """Validate one design round made at ``step`` (``revision`` 0 = first answers, 1.. = feedback revisions): the
        sandbox checks, then the tool-use LLM screen over the candidates that passed them (one generate call), then
        book each."""
        reports = self._screen([self._validate(generation.text, step) for generation in generations], seed)
        return [self._book(slot, prompt, generation, report, invalid, revision)
                for slot, prompt, generation, report in zip(slots, prompts, generations, reports)]

    def _screen(self, reports: list, seed: int) -> list:
        """The tool-use LLM screen (``validation.llm_screen``; paper: the policy checks that every success criterion
        is reachable, not met at reset and derivable; reference code spade/core/env_validator.py:166-185, called at
        spade/core/orchestrator.py:1157-1176): the policy judges every tool-use candidate that passed the sandbox
        checks, at ``designer.screen_params``; a 'reject' verdict, or with ``validation.screen_unclear`` 'reject' an
        empty or unparsable one, turns its report into a rejection (``spade.envs.validate.screened``)."""
        cfg = self.config.validation
        todo = [i for i, report in enumerate(reports) if report.valid and report.kind == "tool_use"]
        if not cfg.llm_screen or not todo:
            return reports
        replies = self._screen_generate([reports[i].code for i in todo], seed)
        out = list(reports)
        for i, generation in zip(todo, replies):
            if generation.finish_reason == "timeout":  # validation.screen_timeout_s: the attempt fails
                out[i] = screen_timed_out(reports[i], cfg.screen_timeout_s)
            else:
                out[i] = screened(reports[i], screen_verdict(generation.text), generation.text, cfg.screen_unclear)
        return out

    @timed("screen")
    def _screen_generate(self, codes: list, seed: int) -> list:
        """The screen's replies, one per code, from the policy (the training model, also when an external model
        designs, as the reference's 'self' validator) in one generate call; its time is the step's screen phase."""
        prompts = [self.designer_chat.first_prompt(screen_prompt(code)) for code in codes]
        return self.backend.generate(prompts, self.config.designer.screen_params(self.config.validation), seed)

    def _book(self, slot: EnvSlot, prompt: list, generation, report, invalid: list, revision: int):
        """Book one judged designer generation for ``slot``: the report, the designer sample, a kept rejection."""
        slot.attempts += 1
        tokens = getattr(generation, "completion_tokens", None)  # an external designer reports its usage
        # where it broke (spade.core.failures): was the text cut at designer.max_new_tokens, did it begin any code
        cut, code = generation.finish_reason == "length", wrote_code(generation.text)
        stage = {"cut": cut, "wrote_code": code, "stage": design_stage(report.reason, cut, code)}
        slot.reports.append({**report.to_dict(), **stage,
                             "generated_tokens": len(generation.completion_ids) if tokens is None else tokens,
                             "revision": revision})
        sample = None if self.designer_backend is not None else self._sample_dict(prompt, generation)
        if report.valid:
            slot.valid, slot.code, slot.class_name, slot.kind = True, report.code, report.class_name, report.kind
            slot.designer_sample = sample
        elif sample is not None:
            invalid.append({**sample, "skill": slot.skill})
            if self.rejected_dir is not None:
                store_rejection(self.rejected_dir, generation.text, report, stage)
        return report

    def _design_chat(self, slot: EnvSlot, step: int, attempt: int, memory: bool = True, top_up: bool = False) -> list:
        cfg = self.config
        context = (slot.env_id, "top-up", step, attempt) if top_up else (slot.env_id, attempt)
        rng = random.Random(derive_seed(cfg.seed, "design-context", *context))
        document = self.corpus.sample(step, slot.env_id, attempt).text if cfg.corpus.enabled and self.corpus else None
        positives, negative = [], None
        if cfg.memory.enabled and memory:
            positives = self.memory.positive_seeds(slot.skill, rng=rng)
            negative = self.memory.negative_seed(slot.skill, rng=rng)
        domain = variant = None
        if cfg.selfplay.flavour == "tool_use":
            domain, variant = sample_domain(rng), sample_variant(rng)
        return design_prompt(cfg.selfplay.flavour, slot.skill, document, positives, negative, domain, variant,
                             examples=cfg.memory.examples, example_chars=cfg.memory.example_chars)

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
    def write_hints(self, slots: list, step: int) -> dict:
        """One hint per valid slot. A request past ``designer.hint_timeout_s`` is asked again, up to HINT_REQUESTS in
        all (reference: 3 tries of 120 s each); a slot whose every request timed out keeps no hint and is marked
        ``hint_failed`` (no hint arm, regret unmeasured, as the reference's failed hint). Returns the step metric
        'hint_timeouts' (timed-out requests) when a limit is set."""
        todo = [slot for slot in slots if slot.valid]
        timeouts = 0
        for request in range(HINT_REQUESTS):
            if not todo:
                break
            chats = [hint_prompt(slot.code, self.config.selfplay.flavour) for slot in todo]
            seed = derive_seed(self.config.seed, "hint", step) if request == 0 else \
                derive_seed(self.config.seed, "hint-retry", step, request)
            _, generations = self._generate(chats, self.config.designer.hint_params(), seed)
            late = []
            for slot, generation in zip(todo, generations):
                if getattr(generation, "finish_reason", "stop") == "timeout":
                    late.append(slot)
                else:
                    slot.hint = extract_hint(generation.text)
            timeouts += len(late)
            todo = late
        for slot in todo:
            slot.hint, slot.hint_failed = "", True
        return {"hint_timeouts": timeouts} if self.config.designer.hint_timeout_s > 0 else {}
