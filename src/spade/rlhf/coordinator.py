"""The SPADE coordinator: one object that owns the self-play core for every vLLM engine of a run.

On GPUs it is a named Ray actor (``spade-coordinator``, created by the first executor that needs it);
in tests it is a plain in-process object. Executors talk to it through three coroutines:

- ``settings()``: the run's ``SpadeConfig`` (agent, sandbox and flavour settings for local play);
- ``assign(label, engine, template)``: what response ``g`` of ticket ``label`` means at the current
  step. The first ticket of a step opens the step: the coordinator runs ``SelfPlay.begin_step`` (close
  the old set, design, hints, hint arm) in a worker thread, generating through the registered engines,
  and every assignment of that step waits for it. So design always precedes agent play in a step.
  With 'global_batch' the slots cut from the batch are then played here, also through the engines.
- ``report(step, role, g, summary)``: an agent episode's outcome. When the n episodes of a slot are in,
  the core's ``record_play`` books them and returns the z-scored advantages; every waiting episode of
  the slot then gets its own (None for a dropped play, which the executor answers with padding). At the
  run's last step the designer packs wait until every play is booked: then the core closes the set
  (``SelfPlay.flush``) and its designer samples fill them. With ``train.designer_upweight_count`` 'returned' (the
  reference's) packs wait for the plays at every step: their up-weight counts the plays that came back. After the step's last response the coordinator
  ends the step (``SelfPlay.end_step``), appends one line to ``metrics.jsonl`` (and the same metrics to TensorBoard
  and offline W&B, ``spade.train.live_metrics``), archives closed sets and checkpoints the core state.

Nothing here trains. The hint arm is played here and never reaches OpenRLHF's batch.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from spade.core.agent import EpisodeJob, EpisodeRecord
from spade.io import atomic_write_json
from spade.train.live_metrics import LiveMetrics
from spade.rlhf.engine import EngineBackend
from spade.rlhf.config import step_wait_seconds
from spade.rlhf.plan import TicketPlan, pack_designer_samples, parse_ticket, ticket_plan

log = logging.getLogger("spade.rlhf")
COORDINATOR_NAME = "spade-coordinator"
KEEP_STATES = 3  # SPADE states kept on disk: OpenRLHF keeps --ckpt.max_num 2 checkpoints
RUN_SPEC = "rlhf_run.json"


@dataclass
class Assignment:
    """What one executor call must return."""

    kind: str  # "agent" (play job), "designer" (replay entry) or "pad"
    step: int
    role: int  # ticket role within the step (see _Step.layout)
    index: int  # g, 0 <= g < n
    job: EpisodeJob | None = None
    entry: dict | None = None  # designer pack entry {"sample": Sample, "reward": float}


@dataclass
class _Step:
    number: int
    ready: asyncio.Future  # resolves when begin_step is done
    slots: list = None
    matured: list = None  # designer samples of this step (the final step adds its flushed set's)
    closed: list = None
    metrics: dict = None
    layout: list = None  # role -> ("pack", p) or ("slot", j) (spade.rlhf.plan)
    packs: list = None  # [P][n] designer pack entries
    n_packs: int = 0
    trimmed: list = None  # valid slots cut from the batch, played here ('global_batch')
    trimmed_done: bool = False
    final: bool = False  # the run's last step: the set is closed after its plays, its designer samples train now
    designer_ready: asyncio.Event = None  # packs are filled: at once, or after every play (_packs_wait_for_plays)
    finished: asyncio.Event = None  # the step is booked, logged and archived
    tickets: dict = None  # ticket number -> role
    claims: list = None  # [roles] responses handed out
    reports: dict = None  # role -> {g: EpisodeRecord}
    advantages: dict = None  # role -> {g: advantage or None (dropped play)}
    events: dict = None  # role -> asyncio.Event
    trained_agent: int = 0  # agent responses that train (kept plays with sampled tokens)
    trimmed_returned: int = 0  # kept plays with sampled tokens of the slots cut from the batch (designer up-weight)
    served: int = 0
    done: bool = False


class SpadeCoordinator:
    """See the module docstring. ``core`` is a ready ``SelfPlay`` whose backend is ``backend``."""

    def __init__(self, config, core, backend: EngineBackend, run_dir, start_step: int = 0, engines_expected: int = 1,
                 engine_wait_s: float = 60.0, barrier_timeout_s: float | None = None):
        self.config, self.core, self.backend = config, core, backend
        self.plan: TicketPlan = ticket_plan(config)
        self.core.plays_override = self.plan.group_size  # every slot ticket returns n responses
        self.run_dir = Path(run_dir)
        self.next_step = start_step
        if barrier_timeout_s is None:
            barrier_timeout_s = step_wait_seconds(config)
        self.engines_expected, self.engine_wait_s, self.barrier_timeout_s = engines_expected, engine_wait_s, barrier_timeout_s
        self.current: _Step | None = None
        self.lock = asyncio.Lock()
        self.records: list = []  # no-hint episode summaries of the current step (metrics)
        # our SPADE metrics beside OpenRLHF's own loggers: <run_dir>/tensorboard/ (and offline W&B), one point per line
        # of metrics.jsonl; a resumed run rewrites from start_step on, as metrics.jsonl
        self.live = LiveMetrics(config, self.run_dir, first_step=start_step)

    # ----- the executor-facing coroutines --------------------------------------------------------------
    async def settings(self):
        return self.config

    async def assign(self, label, engine, template) -> Assignment:
        ticket = parse_ticket(label)
        async with self.lock:
            if self.backend.add_engine(engine):
                log.info("engine %d registered", len(self.backend.engines))
            if self.backend.template is None:
                self.backend.bind(asyncio.get_running_loop(), template)
            step = self.current
            if step is None or (ticket not in step.tickets and len(step.tickets) >= self.plan.tickets_per_step):
                if step is not None and not step.done:
                    if step.served < self.plan.responses_per_step:
                        raise RuntimeError(f"ticket {label!r} opens step {step.number + 1} before step {step.number} "
                                           "finished; asynchronous generation (--train.async_enable, "
                                           "--rollout.vllm_generate_batch_size > --rollout.batch_size) is not supported")
                    # every response is back; the slots cut from the batch are still being played and booked
                    await self._barrier(step.finished.wait(), f"step {step.number}'s bookkeeping")
                step = self._open(self.next_step)
                self.next_step += 1
            if ticket not in step.tickets:
                step.tickets[ticket] = len(step.tickets)
            role = step.tickets[ticket]
            g = step.claims[role]
            if g >= self.plan.group_size:
                raise RuntimeError(f"ticket {label!r} asked for more than --rollout.n_samples_per_prompt="
                                   f"{self.plan.group_size} responses")
            step.claims[role] += 1
        await step.ready
        if step.layout[role][0] == "pack":  # packs may wait for the step's plays (_packs_wait_for_plays)
            await step.designer_ready.wait()
        return self._assignment(step, role, g)

    async def report(self, step_number: int, role: int, g: int, summary: dict):
        """Book an agent episode; returns its advantage, None for a play dropped for an environment failure."""
        step = self.current
        if step is None or step.number != step_number:
            raise RuntimeError(f"report for step {step_number} while step {step and step.number} is open")
        step.reports.setdefault(role, {})[g] = EpisodeRecord(**summary)
        event = step.events.setdefault(role, asyncio.Event())
        if len(step.reports[role]) == self.plan.group_size:
            self._book(step, role)
            event.set()
        try:
            await asyncio.wait_for(event.wait(), self.barrier_timeout_s)
        except asyncio.TimeoutError:  # lost episodes: book the slot with those that arrived
            log.warning("step %d role %d: %d of %d episodes after %.0f s (openrlhf.step_wait_s); booking what arrived",
                        step_number, role, len(step.reports[role]), self.plan.group_size, self.barrier_timeout_s)
            if role not in step.advantages:
                self._book(step, role)
                event.set()
        advantage = step.advantages[role].get(g, 0.0)
        self._served(step)
        return advantage

    async def wait_finished(self, step_number: int) -> None:
        """Returns once step ``step_number`` is booked, logged and archived, including the slots cut from the batch,
        which the coordinator plays through the engines: an executor holds its response until then, so OpenRLHF's
        generation phase ends only after the last engine call of the step (with ``--vllm.enable_sleep`` it then
        puts the engines to sleep, and a later call would find them asleep)."""
        step = self.current
        if step is None or step.number != step_number:
            raise RuntimeError(f"wait_finished for step {step_number} while step {step and step.number} is open")
        await self._barrier(step.finished.wait(), f"step {step_number}'s bookkeeping")

    async def _barrier(self, waiting, what: str) -> None:
        """Wait for ``waiting`` at most ``barrier_timeout_s``; a timeout names the config key that sets it."""
        try:
            await asyncio.wait_for(waiting, self.barrier_timeout_s)
        except asyncio.TimeoutError:
            raise RuntimeError(f"waited {self.barrier_timeout_s:.0f} s for {what}; raise config key "
                               "'openrlhf.step_wait_s' if this run's episodes are that slow (0 sizes it from "
                               "agent.max_turns and agent.max_new_tokens)") from None

    # ----- step bookkeeping ---------------------------------------------------------------------------
    def _open(self, number: int) -> _Step:
        loop = asyncio.get_running_loop()
        roles = self.plan.tickets_per_step
        step = _Step(number, loop.create_future(), tickets={}, claims=[0] * roles, reports={}, advantages={}, events={},
                     designer_ready=asyncio.Event(), finished=asyncio.Event())
        self.current, self.records = step, []
        loop.create_task(self._begin(step))
        return step

    def _layout(self, step: _Step) -> None:
        """Roles of this step (spade.rlhf.plan): 'global_batch' gives the first P roles to designer packs and the
        rest to slots in slot order, valid ones first; the valid slots left over are cut from the batch."""
        plan, slots = self.plan, step.slots
        if plan.structure != "global_batch":
            step.layout = [("slot", j) for j in range(plan.slots)] + [("pack", p) for p in range(step.n_packs)]
            step.trimmed = []
            return
        if step.n_packs > plan.slots:
            raise RuntimeError(f"step {step.number}: {step.n_packs} designer packs exceed the {plan.slots} tickets of "
                               "one global batch")
        order = [j for j in range(plan.slots) if slots[j].valid] + [j for j in range(plan.slots) if not slots[j].valid]
        kept = order[:plan.slots - step.n_packs]
        step.layout = [("pack", p) for p in range(step.n_packs)] + [("slot", j) for j in kept]
        step.trimmed = [j for j in order[len(kept):] if slots[j].valid]

    async def _begin(self, step: _Step) -> None:
        try:
            waited = 0.0
            while len(self.backend.engines) < self.engines_expected and waited < self.engine_wait_s:
                await asyncio.sleep(0.5)
                waited += 0.5
            slots, matured, closed, metrics = await asyncio.to_thread(self.core.begin_step, step.number)
            if len(slots) != self.plan.slots:
                raise RuntimeError(f"the core returned {len(slots)} slots; the ticket plan expects {self.plan.slots}")
            step.slots, step.matured, step.closed, step.metrics = slots, matured, closed, metrics
            step.final = self.core.is_final(step.number)
            pending = self.core.pending_designer_groups(slots) if step.final else []
            step.n_packs = self.plan.packs_for(list(Counter(s.group for s in matured).values()) + pending)
            self._layout(step)
            if not self._packs_wait_for_plays(step):
                self._fill_packs(step)
            step.ready.set_result(True)
        except Exception as exc:  # every waiting executor call sees the failure
            log.exception("step %d could not begin", step.number)
            step.ready.set_exception(exc)
            return
        if step.trimmed:
            asyncio.get_running_loop().create_task(self._play_trimmed(step))
        else:
            step.trimmed_done = True
            self._after_booking(step)

    async def _play_trimmed(self, step: _Step) -> None:
        """Play the slots cut from the batch (their statistics count; nothing of them trains)."""
        chosen = [step.slots[j] for j in step.trimmed]
        try:
            played = await asyncio.to_thread(self.core.play, chosen, step.number, "no_hint", self.plan.group_size)
        except Exception as exc:  # the step goes on without their statistics, and says so in its metrics
            log.exception("step %d: the %d slots cut from the batch could not be played", step.number, len(chosen))
            step.metrics["trimmed_play_error"] = f"{type(exc).__name__}: {exc}"[:500]
            played = {}
        for slot in chosen:
            records = played.get(slot.env_id, [])
            advantages = self.core.record_play(slot, records, step.number)
            step.trimmed_returned += sum(a is not None and r.generated_tokens > 0 for r, a in zip(records, advantages))
            self.records += records
        step.metrics["trimmed_agent_samples"] = sum(len(played.get(s.env_id, [])) for s in chosen)
        step.trimmed_done = True
        self._after_booking(step)
        self._maybe_finish(step)

    def _assignment(self, step: _Step, role: int, g: int) -> Assignment:
        kind, index = step.layout[role]
        if kind == "slot":
            slot = step.slots[index]
            if not slot.valid:
                self._served(step)
                return Assignment("pad", step.number, role, g)
            seed = self.core.episode_seeds(step.number, slot, "no_hint", self.plan.group_size)[g]
            return Assignment("agent", step.number, role, g, job=self.core.job(slot, seed, "no_hint", step.number))
        entry = step.packs[index][g]
        self._served(step)
        if entry["sample"] is None:
            return Assignment("pad", step.number, role, g)
        return Assignment("designer", step.number, role, g, entry=entry)

    def _book(self, step: _Step, role: int) -> None:
        slot = step.slots[step.layout[role][1]]
        arrived = sorted(step.reports[role])
        records = [step.reports[role][g] for g in arrived]
        advantages = self.core.record_play(slot, records, step.number)
        step.advantages[role] = dict(zip(arrived, advantages))
        step.trained_agent += sum(a is not None and r.generated_tokens > 0 for r, a in zip(records, advantages))
        self.records += records
        self._after_booking(step)

    def _packs_wait_for_plays(self, step: _Step) -> bool:
        """Whether the step's designer packs are filled only after every play is booked: at the final step (the set
        is flushed then), and whenever the up-weight counts the plays that came back
        (``train.designer_upweight_count`` 'returned', the reference's)."""
        returned = self.config.train.designer_upweight_count == "returned" and self.plan.structure == "global_batch"
        return step.final or (returned and step.n_packs > 0)

    def _after_booking(self, step: _Step) -> None:
        """Once every play of a step whose packs wait for them is booked: at the final step close the set (flush);
        weigh the designer samples by the plays that came back; fill the designer packs."""
        if not self._packs_wait_for_plays(step) or step.designer_ready.is_set() or not step.trimmed_done:
            return
        agent_roles = [r for r, (kind, j) in enumerate(step.layout) if kind == "slot" and step.slots[j].valid]
        if any(r not in step.advantages for r in agent_roles):
            return
        if step.final:
            flushed, rows, final_metrics = self.core.flush(step.number, step.slots)
            step.matured, step.closed = step.matured + flushed, step.closed + rows
            step.metrics.update({(f"final_{k}" if k in step.metrics else k): v for k, v in final_metrics.items()})
        if self.config.train.designer_upweight_count == "returned":
            self.core.weigh_designer(step.matured, step.slots, returned=step.trained_agent + step.trimmed_returned)
        self._fill_packs(step)

    def _fill_packs(self, step: _Step) -> None:
        step.packs, shift = pack_designer_samples(step.matured, self.plan, step.n_packs)
        step.metrics["designer_pack_shift"] = shift
        step.designer_ready.set()

    def _served(self, step: _Step) -> None:
        step.served += 1
        self._maybe_finish(step)

    def _maybe_finish(self, step: _Step) -> None:
        if step.served == self.plan.responses_per_step and step.trimmed_done and not step.done:
            self._finish(step)

    def _finish(self, step: _Step) -> None:
        from spade.train.trainer import write_archives

        metrics = self.core.end_step(step.number, step.slots, self.records, step.matured, step.metrics)
        # the core's own phases (design, validation, hints, rewards) since the previous step finished; generation
        # and the optimizer run in OpenRLHF's engines and actors, which log their own timings
        metrics.update(self.core.clock.metrics())
        self.core.clock.start_step()
        metrics["samples"] = step.trained_agent + len(step.matured)
        metrics.update(sent_reward_stats(self._sent_rewards(step)))
        metrics.setdefault("trimmed_agent_samples", 0)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with (self.run_dir / "metrics.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(metrics, sort_keys=True, default=str) + "\n")
        self.live.log(metrics)
        if step.number + 1 == self.config.selfplay.total_steps:
            self.live.close()  # the run's last step: W&B finishes its offline run
        write_archives(self.run_dir, step.closed)
        if step.number + 1 in self.config.selfplay.checkpoint_steps():
            self.save_state(step.number + 1)
        step.done = True
        step.finished.set()

    def _sent_rewards(self, step: _Step) -> list:
        """The ``reward`` of every response of the step, as the executors return them: an agent its advantage (a
        dropped play's pad 0), an empty slot's pads 0, a designer pack its entries' rewards."""
        rewards = []
        for role, (kind, index) in enumerate(step.layout):
            if kind == "pack":
                rewards += [entry["reward"] for entry in step.packs[index]]
            elif step.slots[index].valid:
                rewards += [step.advantages[role].get(g) or 0.0 for g in range(self.plan.group_size)]
            else:
                rewards += [0.0] * self.plan.group_size
        return rewards

    def save_state(self, next_step: int) -> Path:
        """Core state and memory after ``next_step`` completed steps, in ``spade_state/step_<next_step>/`` (weights and
        optimizer are OpenRLHF's checkpoint ``global_step<next_step>``, written only after that step trains: a resume
        takes the state of the step OpenRLHF resumes from, ``build_coordinator``). The newest KEEP_STATES are kept."""
        folder = state_folder(self.run_dir, next_step)
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self.core.memory.save(tmp / "memory.json")
        atomic_write_json(tmp / "state.json", {"next_step": next_step, "selfplay": asdict(self.core.state)})
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
        for old in sorted(folder.parent.glob("step_[0-9]*"))[:-KEEP_STATES]:
            shutil.rmtree(old, ignore_errors=True)
        return folder


# ----- construction ---------------------------------------------------------------------------------------
def write_run_spec(run_dir, config, model_dir, corpus_path=None, engines: int = 1) -> Path:
    """The file the coordinator is built from (``<run_dir>/rlhf_run.json``)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return atomic_write_json(run_dir / RUN_SPEC, {"config": asdict(config), "model_dir": str(model_dir),
                                                   "corpus_path": str(corpus_path) if corpus_path else None,
                                                   "engines": int(engines)})


def state_folder(run_dir, next_step: int) -> Path:
    return Path(run_dir) / "spade_state" / f"step_{next_step:06d}"


def openrlhf_resume_step(run_dir) -> int:
    """Completed steps of the weights OpenRLHF resumes from: the tag DeepSpeed wrote to ``<ckpt>/_actor/latest``
    (``global_step<N>``, saved after step N trained; OpenRLHF loads that tag with --ckpt.load_enable); 0 when none."""
    from spade.rlhf.command import run_paths

    latest = run_paths(run_dir)["ckpt"] / "_actor" / "latest"
    if not latest.is_file():
        return 0
    tag = latest.read_text(encoding="utf-8").strip()
    match = re.fullmatch(r"global_step(\d+)", tag)
    if match is None:
        raise RuntimeError(f"{latest} names checkpoint {tag!r}, not OpenRLHF's global_step<N>: cannot tell which SPADE "
                           "state matches the weights it resumes from")
    return int(match.group(1))


def build_coordinator(config, tokenizer, pool, run_dir, corpus_path=None, engines: int = 1, **options) -> SpadeCoordinator:
    """A coordinator over a fresh self-play core, or one resumed at the step OpenRLHF's weights resume from
    (``openrlhf_resume_step``), with that step's saved state; a state saved for a later step (generation ended,
    training did not) is not used. ``metrics.jsonl`` is cut back to the steps before it (they are written again)."""
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.validate import Validator
    from spade.core.backend_setup import corpus_sampler, fresh_memory
    from spade.core.selfplay import SelfPlay, SelfPlayState
    from spade.train.trainer import _cut_metrics

    run_dir = Path(run_dir)
    state, start = None, openrlhf_resume_step(run_dir)
    if start:
        saved = state_folder(run_dir, start)
        if not (saved / "state.json").is_file():
            found = sorted(p.name for p in (run_dir / "spade_state").glob("step_*"))
            raise RuntimeError(f"OpenRLHF resumes from global_step{start} but {saved} holds no SPADE state (found: "
                               f"{found or 'none'}); the self-play state would not match the weights. Check that "
                               "selfplay.checkpoint_every equals --ckpt.save_steps, or start the run afresh")
        data = json.loads((saved / "state.json").read_text())
        state = SelfPlayState(**data["selfplay"])
        memory = EnvironmentMemory.load(saved / "memory.json", config.memory)
    else:
        memory = fresh_memory(config)
    _cut_metrics(run_dir / "metrics.jsonl", start)
    backend = EngineBackend(tokenizer)
    core = SelfPlay(config, backend, Validator(pool, config.validation), memory, corpus_sampler(config, corpus_path),
                    state, rejected_dir=run_dir / "rejected", pool_dir=run_dir)
    return SpadeCoordinator(config, core, backend, run_dir, start, engines, **options)


class _RayCoordinatorHost:
    """What the Ray actor runs: loads the run spec, owns a sandbox pool, forwards to the coordinator."""

    def __init__(self, run_dir: str):
        from spade.config import SpadeConfig
        from spade.configtools import from_dict
        from spade.sandbox.pool import SandboxPool
        from transformers import AutoTokenizer

        spec = json.loads((Path(run_dir) / RUN_SPEC).read_text())
        config = from_dict(SpadeConfig, spec["config"])
        tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"])
        self.pool = SandboxPool(config.sandbox)
        self.coordinator = build_coordinator(config, tokenizer, self.pool, run_dir, spec["corpus_path"], spec["engines"])

    async def settings(self):
        return await self.coordinator.settings()

    async def assign(self, label, engine, template):
        return await self.coordinator.assign(label, engine, template)

    async def report(self, step, role, g, summary):
        return await self.coordinator.report(step, role, g, summary)

    async def wait_finished(self, step):
        return await self.coordinator.wait_finished(step)


def sent_reward_stats(rewards: list) -> dict:
    """What OpenRLHF logs of a rollout's rewards (``ppo_trainer.py`` ``_compute_rollout_stats``: mean, unbiased
    std, count), from the rewards we sent: the integration run checks the two agree step by step."""
    import statistics

    return {"openrlhf_reward_mean": statistics.fmean(rewards) if rewards else 0.0,
            "openrlhf_reward_std": statistics.stdev(rewards) if len(rewards) > 1 else 0.0,
            "openrlhf_num_samples": len(rewards)}


def ray_coordinator(run_dir):
    """The run's coordinator actor, created on first use (CPU only; async so calls interleave). The first executor
    call creates it from inside a vLLM engine actor, which OpenRLHF places in a placement group bundle with child
    capture on; outside any group (``placement_group=None``) it takes a free CPU of the node instead of waiting
    forever for the one the engine holds."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    actor = ray.remote(_RayCoordinatorHost).options(
        name=COORDINATOR_NAME, get_if_exists=True, num_cpus=1, max_concurrency=100_000,
        scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=None))
    return actor.remote(str(run_dir))
