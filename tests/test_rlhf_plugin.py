"""Contract tests of the OpenRLHF plugin (spade.rlhf) against OpenRLHF's real agent base classes.

The vLLM engine is replaced by ``HFEngine``: the same ``generate(prompt_token_ids, sampling_params,
multi_modal_data=None)`` coroutine and a RequestOutput-shaped result (``outputs[0].token_ids``, ``.text``,
``.finish_reason``, ``.logprobs`` as one {token id: object with .logprob} dict per sampled token), built on
our HFBackend and the tiny random model. Designer prompts are answered with a fixed valid environment,
teacher-forced through the model so that its log-probs are real. The environment pays ``seed % 2``, so
every return, win rate, regret and designer reward can be computed by hand.

``plugin_run`` drives three SPADE steps of the 'groups' structure with k = 2, G = 2 and two slots of one
skill: step 0 designs and plays, step 1 plays, step 2 closes set 0 (its designer samples are replayed
with their stored tokens and log-probs) and designs set 1. ``global_run`` drives the default 'global_batch'
structure (the reference code's) over a whole 4-step run: every rollout is one global batch of 8, the
designer pack takes a slot ticket at step 2 and the slot cut from the batch is played by the coordinator,
and at the last step the set designed at step 2 is flushed into the batch.

A padding response is one token the engine samples after the ticket prompt (``HFEngine`` books those calls
under the role "pad"), with its real log-prob; every engine call records its seed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
from dataclasses import asdict, dataclass

import pytest
import torch

agent_base = pytest.importorskip("openrlhf.utils.agent", reason="openrlhf is not installed (pip install --no-deps openrlhf==0.11.2)")

from spade.config import load_config  # noqa: E402
from spade.inference.generation import SamplingParams  # noqa: E402
from spade.inference.generation_hf import HFBackend  # noqa: E402
from spade.rlhf.command import AGENT_FUNC_PATH  # noqa: E402
from spade.rlhf.coordinator import build_coordinator, state_folder  # noqa: E402
from spade.rlhf.launch import prepare_run  # noqa: E402
from spade.rlhf.plan import LOG_KEYS, TicketPlan, action_ranges, pack_designer_samples, parse_ticket  # noqa: E402
from spade.seeding import derive_seed  # noqa: E402
from spade.core.selfplay import Sample  # noqa: E402

SEEDED = '''
class Seeded:
    """One turn; the reward is the parity of the episode seed, whatever the answer."""

    def __init__(self, max_turns=1, **kwargs):
        self.reset()

    def reset(self, seed=None):
        self.seed = seed or 0
        return "Say anything in \\\\boxed{}.", {}

    def step(self, action):
        return "done", float(self.seed % 2), True, False, {}

    def solution(self):
        return "\\\\boxed{0}"
'''
DESIGN = "```python\n" + SEEDED + "```\n"
T = 0.6
MAX_LEN = 4096
STEPS = 3


# ----- the vLLM stand-in -------------------------------------------------------------------------------
@dataclass
class EngineParams:
    """The fields of vllm.SamplingParams that OpenRLHF's samples generator sets."""

    temperature: float = T
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = None
    min_tokens: int = 1
    skip_special_tokens: bool = False
    logprobs: int | None = 1
    seed: int | None = None


@dataclass
class Logprob:
    logprob: float


@dataclass
class CompletionOutput:
    token_ids: list
    text: str
    finish_reason: str
    logprobs: list


@dataclass
class RequestOutput:
    outputs: list


def forward_logprobs(model, ids: list, temperature: float) -> list:
    """[T] log_softmax(logits / T) of each token given the ones before it (position 0 gets 0)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
    lp = torch.log_softmax(logits / temperature, dim=-1).gather(1, torch.tensor(ids[1:])[:, None]).squeeze(1)
    return [0.0] + lp.tolist()


class HFEngine:
    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self.backend = HFBackend(model, tokenizer)
        self.calls: list = []  # (role, prompt ids, completion ids, logprobs, seed)

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        prompt = list(prompt_token_ids)
        text = self.tokenizer.decode(prompt)
        temperature = sampling_params.temperature
        if "You are an environment designer" in text:
            role = "design"
            ids = self.tokenizer(DESIGN, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            logprobs = forward_logprobs(self.model, prompt + ids, temperature)[len(prompt):]
            reason = "stop"
        else:
            # a padding response samples one token after the ticket prompt ({"spade_run": <run folder>})
            role = "pad" if "spade_run" in text else "hint" if "write one short hint" in text else "agent"
            params = SamplingParams(temperature, sampling_params.top_p, sampling_params.max_tokens)
            generation = self.backend.generate([prompt], params, [sampling_params.seed])[0]
            ids, logprobs, reason = generation.completion_ids, generation.logprobs, generation.finish_reason
        self.calls.append((role, prompt, ids, logprobs, sampling_params.seed))
        completion = CompletionOutput(ids, self.tokenizer.decode(ids), reason,
                                      [{token: Logprob(lp)} for token, lp in zip(ids, logprobs)])
        return RequestOutput([completion])


# ----- helpers -----------------------------------------------------------------------------------------
def load_agent_module():
    """Load agent_func.py the way OpenRLHF's _load_agent_executor does (module name agent_module)."""
    spec = importlib.util.spec_from_file_location("agent_module", AGENT_FUNC_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plateau(w, low=0.4, high=0.6, ramp=0.25):
    return max(0.0, 1.0 - max(low - w, w - high, 0.0) / ramp)


def zscores(values):
    m = sum(values) / len(values)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / len(values))
    return [(v - m) / (sd + 1e-8) for v in values]


def is_pack(group) -> bool:
    """A designer pack's ticket: no response of it is an agent episode (a dropped play's pad sits among agents)."""
    return not any(r["extra_logs"]["spade_agent"] for r in group)


def check_pads(run: dict, s: int, expected_seeds: set) -> list:
    """The padding responses of step ``s``: each is the ticket prompt's token ids plus the one token the engine
    sampled there, with that call's log-prob (recomputed from the model), the seed derive_seed(seed, "pad", step,
    role, g) & 0x7FFF_FFFF; ``expected_seeds`` must be among the pad calls' seeds. Returns the pad responses."""
    tokenizer, model, step = run["tokenizer"], run["model"], run["steps"][s]
    prompt_ids = tokenizer(run["tickets"][0]["prompt"], add_special_tokens=False)["input_ids"]
    pads = [r for g in step["groups"] for r in g if r["extra_logs"]["spade_pad"] == 1.0]
    calls = [c for c in step["calls"] if c[0] == "pad"]
    assert len(calls) == len(pads), s  # one engine call per pad, and no other call with the ticket prompt
    assert all(c[1] == prompt_ids and len(c[2]) == len(c[3]) == 1 for c in calls), s
    assert sorted((c[2][0], c[3][0]) for c in calls) == sorted((r["observation_tokens"][-1], r["rollout_log_probs"][-1])
                                                               for r in pads), s
    assert expected_seeds <= {c[4] for c in calls} and len({c[4] for c in calls}) == len(calls), s
    for r in pads:
        t = len(prompt_ids)
        assert r["observation_tokens"][:t] == prompt_ids and len(r["observation_tokens"]) == t + 1
        assert r["action_ranges"] == [(t, t + 1)] and r["rollout_log_probs"][:t] == [0.0] * t
        assert r["rollout_log_probs"][t] == pytest.approx(forward_logprobs(model, r["observation_tokens"], T)[t], abs=1e-4)
        assert r["scores"] == 0.0
    return pads


def check_sent_rewards(steps: list, lines: list, count: int) -> None:
    """openrlhf_reward_* of metrics.jsonl are the statistics of the rewards the step's responses carried (OpenRLHF's
    _compute_rollout_stats: mean, unbiased std, count); every group's mean is 0, so the step's mean is 0."""
    import statistics

    for step, metrics in zip(steps, lines):
        rewards = [r["reward"] for g in step["groups"] for r in g]
        assert metrics["openrlhf_num_samples"] == len(rewards) == count
        assert metrics["openrlhf_reward_mean"] == pytest.approx(statistics.fmean(rewards), abs=1e-9)
        assert metrics["openrlhf_reward_mean"] == pytest.approx(0.0, abs=1e-9)
        assert metrics["openrlhf_reward_std"] == pytest.approx(statistics.stdev(rewards), abs=1e-9)


def pad_seeds(config, step: int, role: int, indices) -> set:
    return {derive_seed(config.seed, "pad", step, role, g) & 0x7FFF_FFFF for g in indices}


def drive_plugin(config, model, tokenizer, pool, run_dir, steps: int) -> dict:
    """Run ``steps`` SPADE steps through the plugin as OpenRLHF's samples generator drives them: per step, the
    step's tickets (in reverse: the dataloader shuffles) x n concurrent ``execute`` calls against ``HFEngine``."""
    launch = prepare_run(config, run_dir, "unused-model-dir")
    tickets = [json.loads(line) for line in (run_dir / "tickets.jsonl").read_text().splitlines()]
    coordinator = build_coordinator(config, tokenizer, pool, run_dir, engine_wait_s=0.0)
    executor = load_agent_module().AgentExecutor(coordinator=coordinator, pool=pool)
    engine = HFEngine(model, tokenizer)
    per_step, n = launch["rollout_batch_size"], launch["n_samples_per_prompt"]

    async def drive():
        done = []
        for s in range(steps):
            batch = tickets[s * per_step:(s + 1) * per_step][::-1]  # order does not matter (shuffled dataloader)
            calls_before = len(engine.calls)
            responses = await asyncio.gather(*[executor.execute(t["prompt"], t["label"], EngineParams(), MAX_LEN,
                                                                tokenizer, engine) for t in batch for _ in range(n)])
            metrics = run_dir / "metrics.jsonl"  # every executor waits for the step's end (wait_finished)
            logged = len(metrics.read_text().splitlines()) if metrics.is_file() else 0
            done.append({"groups": [responses[i * n:(i + 1) * n] for i in range(len(batch))],
                         "calls": engine.calls[calls_before:], "envs": [dict(e) for e in coordinator.core.state.envs],
                         "logged": logged})
        return done

    return {"config": config, "launch": launch, "steps": asyncio.run(drive()), "run_dir": run_dir,
            "coordinator": coordinator, "executor": executor, "tickets": tickets}


@pytest.fixture(scope="module")
def plugin_run(tiny_model, pool, tmp_path_factory):
    """Three steps through the plugin, as OpenRLHF's samples generator would drive them."""
    model, tokenizer = tiny_model
    config = load_config(overrides={
        "model_card": "tiny-random", "seed": 2,  # window win rates 1.0 and 0.5: distinct designer rewards
        "selfplay": {"active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2,
                     "design_attempts": 1, "backfill": False, "total_steps": STEPS + 1, "checkpoint_every": STEPS,
                     "batch_structure": "groups"},
        "agent": {"max_turns": 1, "max_new_tokens": 6, "max_context_tokens": 2048, "temperature": T,
                  "cut_turns": "continue"},  # the tiny model's 6-token replies are cut: they still step
        "train": {"logprob_temperature": None},  # the stand-in engine's template: T
        "designer": {"temperature": T, "max_new_tokens": 8, "hint_max_new_tokens": 6},
        "corpus": {"enabled": False}, "memory": {"enabled": False, "seed_library": False}})
    run = drive_plugin(config, model, tokenizer, pool, tmp_path_factory.mktemp("rlhf-run"), STEPS)
    return {**run, "tokenizer": tokenizer, "model": model}


# ----- tests -------------------------------------------------------------------------------------------
def test_agent_func_is_an_openrlhf_agent_executor():
    module = load_agent_module()
    assert issubclass(module.AgentExecutor, agent_base.AgentExecutorBase)
    module.AgentExecutor()  # OpenRLHF instantiates it without arguments, once per engine


def test_sandbox_work_runs_in_one_thread_per_pool_worker(plugin_run):
    """An engine's concurrent episodes step their environments in as many threads as its pool has workers (the
    fixture's pool: 2), not one thread for all of them."""
    executor = plugin_run["executor"]
    assert executor._threads._max_workers == len(executor._pool.workers) == 2


def test_locked_tokenizer_never_runs_two_calls_at_once():
    """The sandbox threads share the engine's tokenizer; its calls take turns (a fast tokenizer may raise "Already
    borrowed" otherwise), attributes pass through."""
    import threading
    import time

    from spade.rlhf.executor import _LockedTokenizer

    class Probe:
        eos_token_id = 7

        def __init__(self):
            self.active = self.most = 0

        def _work(self, *args, **kwargs):
            self.active += 1
            self.most = max(self.most, self.active)
            time.sleep(0.01)
            self.active -= 1
            return args

        __call__ = decode = _work

    probe = Probe()
    locked = _LockedTokenizer(probe)
    threads = [threading.Thread(target=lambda i=i: (locked(i), locked.decode([i]))) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert probe.most == 1 and locked.eos_token_id == 7 and locked.decode([3]) == ([3],)
    raw = Probe()  # the same calls without the lock do overlap: the probe can see it
    threads = [threading.Thread(target=raw, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert raw.most > 1


def test_tickets_and_plan(plugin_run):
    from spade.rlhf.plan import max_designer_packs, ticket_plan

    launch, tickets = plugin_run["launch"], plugin_run["tickets"]
    # B = 2 slots of one skill: a set's designer samples form one advantage group of <= 2; the last step 3 is not a
    # regeneration step ((4 - 1) % 2 = 1): one set -> D = 1 x 1 x ceil(2 / G 2) = 1; batch = 2 + 1 = 3 tickets, G = 2
    assert max_designer_packs(plugin_run["config"], 2) == 1
    assert ticket_plan(plugin_run["config"]) == TicketPlan(2, 1, 2, "groups")
    assert ticket_plan(plugin_run["config"]).packs_for([2]) == ticket_plan(plugin_run["config"]).packs_for([]) == 1
    assert (launch["rollout_batch_size"], launch["n_samples_per_prompt"]) == (3, 2)
    assert len(tickets) == (STEPS + 1) * 3 and len({t["label"] for t in tickets}) == len(tickets)  # total_steps 4
    assert [parse_ticket(t["label"]) for t in tickets] == list(range(len(tickets)))
    with pytest.raises(ValueError, match="not a SPADE ticket"):
        parse_ticket("What is 2 + 2?")


def test_designer_samples_count_every_penalised_generation():
    from spade.rlhf.plan import max_designer_samples

    def samples(**overrides):
        return max_designer_samples(load_config(overrides={"selfplay": {"active_skills": 2, "envs_per_skill": 3,
                                                                        "design_attempts": 4}, **overrides}))

    assert samples() == 6  # regret, invalid designs discarded: one sample per slot at most
    assert samples(designer={"reward": "calibration"}) == 6 * 4  # every attempt is trained (-1 when invalid)
    assert samples(designer={"reward": "calibration"}, designer_feedback={"revisions": 2}) == 6 * 4 * 3
    assert samples(designer_feedback={"revisions": 2}) == 6  # revisions add no sample when invalid ones are dropped
    assert samples(selfplay={"train_designer": False}) == 0
    # total_steps 5, k = 4: (5 - 1) % 4 = 0, the last step closes its previous set and (flush) its own: 2 x 6
    assert samples(selfplay={"active_skills": 2, "envs_per_skill": 3, "design_attempts": 4, "total_steps": 5}) == 12


def test_designer_packs_count_every_advantage_group():
    """sets x skills x ceil(per skill / n); 400 steps with k = 4: (400 - 1) % 4 = 3, one set closes at the end."""
    from spade.rlhf.plan import max_designer_packs

    def packs(n, **overrides):
        selfplay = {"active_skills": 2, "envs_per_skill": 3, "design_attempts": 4, **overrides.pop("selfplay", {})}
        return max_designer_packs(load_config(overrides={"selfplay": selfplay, **overrides}), n)

    assert packs(8) == 2 * 1  # 3 samples per skill fit one pack of 8
    assert packs(2) == 2 * 2  # ceil(3 / 2) = 2 packs per skill
    assert packs(8, designer={"reward": "calibration"}) == 2 * 2  # 3 x 4 attempts = 12 per skill: ceil(12 / 8)
    assert packs(8, designer={"reward": "calibration"}, designer_feedback={"revisions": 2}) == 2 * 5  # 36 -> 5
    assert packs(8, designer={"invalid": "penalty"}) == 2 * 2  # penalised invalid designs train: 12 per skill
    assert packs(8, designer_feedback={"revisions": 2}) == 2  # dropped invalid designs: revisions add nothing
    assert packs(8, selfplay={"total_steps": 5}) == 2 * 2 * 1  # (5 - 1) % 4 = 0: the last step closes two sets
    assert packs(8, selfplay={"total_steps": 1}) == 2  # a one-step run closes one set
    assert packs(8, selfplay={"train_designer": False}) == 0
    plan = TicketPlan(slots=24, designer_packs=3, group_size=8, structure="groups")
    assert plan.packs_for([]) == plan.packs_for([9, 9, 9]) == 3 and plan.tickets_per_step == 27  # fixed D
    batch = TicketPlan(slots=24, designer_packs=3, group_size=8, structure="global_batch")
    assert batch.tickets_per_step == 24 and batch.packs_for([]) == 0
    assert batch.packs_for([8, 8, 8]) == 3 and batch.packs_for([3, 2, 1]) == 1  # 3 + 2 + 1 = 6 <= 8: one bin
    assert batch.packs_for([5, 5, 3]) == 2  # FFD: [5, 3], [5]
    assert batch.packs_for([9]) == 2 and batch.packs_for([9, 3]) == 2  # chunks 5, 4 (+ 3): [5, 3], [4]


def _designer(advantage, group, weight=4.0):
    return Sample("designer", [1, 2], [0, 1], [0.0, -1.0], advantage=advantage, weight=weight, delayed=True,
                  group=group)


def test_pack_keeps_whole_groups_first_fit_decreasing():
    """Groups of 3 and 2 with n = 4: first-fit decreasing puts the 3 in pack 0 (1 free), the 2 does not fit there
    -> pack 1. Within a group samples are in advantage order; rewards = advantage x weight 4; pads reward 0."""
    plan = TicketPlan(slots=3, designer_packs=2, group_size=4, structure="global_batch")
    a = [_designer(x, "set0:logic") for x in (0.5, -0.25, -0.25)]  # sums to 0 (skill-centred)
    b = [_designer(x, "set0:games") for x in (0.1, -0.1)]
    packs, shift = pack_designer_samples(b + a, plan)  # arrival order does not matter: the bigger group goes first
    assert shift == 0.0 and len(packs) == 2 == plan.packs_for([3, 2])
    assert [[e["sample"] for e in p] for p in packs] == [[a[1], a[2], a[0], None], [b[1], b[0], None, None]]
    assert [[e["reward"] for e in p] for p in packs] == [
        [pytest.approx(-1.0), pytest.approx(-1.0), pytest.approx(2.0), 0.0],
        [pytest.approx(-0.4), pytest.approx(0.4), 0.0, 0.0]]
    assert all(abs(sum(e["reward"] for e in p)) < 1e-9 for p in packs)  # dr_grpo's pack mean is 0
    more, _ = pack_designer_samples(b + a, plan, 3)  # more packs planned: an all-pad pack is appended
    assert more[:2] == packs and more[2] == [{"sample": None, "reward": 0.0}] * 4
    with pytest.raises(ValueError, match="need 2 packs of 4; the step planned 1"):
        pack_designer_samples(b + a, plan, 1)
    # sizes 3, 2, 1: the 1 fills pack 0's free place (first fit, not next fit) -> 2 packs
    c = [_designer(0.0, "set0:tools")]
    packs, shift = pack_designer_samples(a + b + c, plan)
    assert shift == 0.0 and [[e["sample"] for e in p] for p in packs] == [[a[1], a[2], a[0], c[0]],
                                                                           [b[1], b[0], None, None]]
    assert pack_designer_samples([], plan) == ([], 0.0)
    assert pack_designer_samples([], plan, 2)[0] == [[{"sample": None, "reward": 0.0}] * 4] * 2
    assert action_ranges([0, 1, 1, 0, 0, 1, 0, 1]) == [(1, 3), (5, 6), (7, 8)]


def test_pack_splits_a_group_larger_than_n_and_recentres_each_chunk():
    """A group of 9 with n = 8: ceil(9 / 8) = 2 chunks dealt round robin over the advantage order
    [-8, -1, -1, -1, -1, -1, 3, 5, 5] (sum 0): chunk 0 = positions 0, 2, 4, 6, 8 = [-8, -1, -1, 3, 5],
    chunk 1 = positions 1, 3, 5, 7 = [-1, -1, -1, 5]. Weight 2: chunk 0 rewards [-16, -2, -2, 6, 10], mean -4 / 5
    = -0.8 -> [-15.2, -1.2, -1.2, 6.8, 10.8]; chunk 1 [-2, -2, -2, 10], mean 4 / 4 = 1 -> [-3, -3, -3, 9];
    shift = max(0.8, 1.0) = 1.0. FFD of sizes 5, 4 in packs of 8: 4 > 8 - 5 -> 2 packs, 3 and 4 pads."""
    plan = TicketPlan(slots=24, designer_packs=3, group_size=8, structure="global_batch")
    values = (5, -1, 3, -1, -8, -1, 5, -1, -1)
    group = [_designer(float(x), "set4:logic", weight=2.0) for x in values]
    packs, shift = pack_designer_samples(group, plan)
    assert shift == pytest.approx(1.0) and len(packs) == 2 == plan.packs_for([9])
    assert [[e["sample"] and e["sample"].advantage for e in p] for p in packs] == [
        [-8.0, -1.0, -1.0, 3.0, 5.0, None, None, None], [-1.0, -1.0, -1.0, 5.0, None, None, None, None]]
    assert [e["reward"] for e in packs[0]] == pytest.approx([-15.2, -1.2, -1.2, 6.8, 10.8, 0.0, 0.0, 0.0])
    assert [e["reward"] for e in packs[1]] == pytest.approx([-3.0, -3.0, -3.0, 9.0, 0.0, 0.0, 0.0, 0.0])
    assert all(abs(sum(e["reward"] for e in p)) < 1e-9 for p in packs)
    assert {id(e["sample"]) for p in packs for e in p if e["sample"]} == {id(x) for x in group}  # each sample once
    assert group[4].advantage == -8.0  # the samples themselves are left as they were


def test_pad_response_carries_one_sampled_token():
    """Ticket prompt ids [11, 12, 13] and the engine's token 42 (log-prob -1.5): tokens [11, 12, 13, 42], the action
    range [(3, 4)], log-probs [0, 0, 0, -1.5]; reward 0, or an episode's advantage under failed_plays 'zero'."""
    from spade.core.agent import EpisodeRecord
    from spade.rlhf.plan import agent_response, pad_response

    pad = pad_response("p", "spade-ticket:5", 3, [11, 12, 13], 42, -1.5)
    assert (pad["observation_tokens"], pad["action_ranges"], pad["rollout_log_probs"]) == (
        [11, 12, 13, 42], [(3, 4)], [0.0, 0.0, 0.0, -1.5])
    assert (pad["prompt"], pad["label"], pad["reward"], pad["scores"], pad["truncated"]) == (
        "p", "spade-ticket:5", 0.0, 0.0, False)
    assert pad["extra_logs"] == {"spade_step": 3.0, "spade_agent": 0.0, "spade_designer": 0.0, "spade_pad": 1.0,
                                 "spade_return": 0.0, "spade_won": 0.0}
    assert pad_response("p", "l", 3, [11], 7, -0.25, reward=-0.7)["reward"] == -0.7
    empty = EpisodeRecord("e", 1, "no_hint", outcome="env_failure", token_ids=[1, 2], loss_mask=[0, 0],
                          rollout_logprobs=[0.0, 0.0])
    with pytest.raises(ValueError, match="without sampled tokens"):
        agent_response("p", "l", 3, empty, 0.5, MAX_LEN)
    with pytest.raises(ValueError, match="without sampled tokens"):
        agent_response("p", "l", 3, EpisodeRecord("e", 1, "no_hint"), 0.5, MAX_LEN)


def test_executor_pads_sample_one_token_and_every_response_waits_for_the_step(tiny_model, tmp_path):
    """The executor against an in-process stand-in coordinator (settings/assign/report/wait_finished): a pad is one
    token generated after the ticket prompt with seed derive_seed(seed, "pad", step, role, g); a play dropped for an
    environment failure -> pad with reward 0; a play without sampled tokens that has an advantage ('zero') -> pad
    with that reward; a played episode -> its own tokens. No response returns before wait_finished(step) does."""
    from spade.core.agent import EpisodeRecord
    from spade.rlhf.coordinator import Assignment
    from spade.rlhf.plan import ticket_prompt

    model, tokenizer = tiny_model
    config = load_config(overrides={"model_card": "tiny-random", "seed": 5,
                                    "agent": {"max_context_tokens": 2048, "temperature": T},
                                    "train": {"logprob_temperature": None},  # the stand-in engine's template: T
                                    "designer": {"temperature": T}})
    prompt = ticket_prompt(tmp_path)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    seed = derive_seed(5, "pad", 7, 3, 1) & 0x7FFF_FFFF  # step 7, role 3, g 1 (the stand-in's assignment)

    class Coordinator:
        def __init__(self, kind, advantage):
            self.kind, self.advantage, self.reports, self.waited = kind, advantage, [], []
            self.finished = asyncio.Event()

        async def settings(self):
            return config

        async def assign(self, label, engine, template):
            return Assignment(self.kind, 7, 3, 1)

        async def report(self, step, role, g, summary):
            self.reports.append((step, role, g, summary["outcome"]))
            return self.advantage

        async def wait_finished(self, step):
            self.waited.append(step)
            await self.finished.wait()

    class Runner:
        def __init__(self, record):
            self.record = record

        async def run_one(self, job, agenerate, in_thread=None):
            return self.record

    played = EpisodeRecord("e", 1, "no_hint", turns=1, generated_tokens=2, rewards=[1.0], final_return=1.0, won=True,
                           outcome="terminated", token_ids=[1, 2, 3], loss_mask=[0, 1, 1],
                           rollout_logprobs=[0.0, -0.5, -0.25])
    failed = EpisodeRecord("e", 2, "no_hint", turns=1, generated_tokens=2, outcome="env_failure",
                           token_ids=[1, 2, 3], loss_mask=[0, 1, 1], rollout_logprobs=[0.0, -0.5, -0.25])
    unplayed = EpisodeRecord("e", 3, "no_hint", outcome="env_failure", token_ids=[1, 2], loss_mask=[0, 0],
                             rollout_logprobs=[0.0, 0.0])

    def execute(kind, advantage=None, record=None):
        coordinator, engine = Coordinator(kind, advantage), HFEngine(model, tokenizer)
        executor = load_agent_module().AgentExecutor(coordinator=coordinator)
        executor._episode_runner = lambda hf_tokenizer: Runner(record)

        async def go():
            task = asyncio.ensure_future(executor.execute(prompt, "spade-ticket:9", EngineParams(), MAX_LEN, tokenizer,
                                                          engine))
            for _ in range(50):
                await asyncio.sleep(0)
            assert not task.done() and coordinator.waited == [7]  # held until the step has ended
            coordinator.finished.set()
            return await task

        return asyncio.run(go()), coordinator, engine

    for kind, advantage, record, reward in (("pad", None, None, 0.0), ("agent", None, failed, 0.0),
                                            ("agent", -0.7, unplayed, -0.7)):
        out, coordinator, engine = execute(kind, advantage, record)
        assert coordinator.reports == ([] if kind == "pad" else [(7, 3, 1, "env_failure")])
        assert [c[0] for c in engine.calls] == ["pad"]
        _, ids, token, logprob, used = engine.calls[0]
        assert (ids, len(token), used) == (prompt_ids, 1, seed)
        t = len(prompt_ids)
        assert out["observation_tokens"] == prompt_ids + token and out["action_ranges"] == [(t, t + 1)]
        assert out["rollout_log_probs"] == [0.0] * t + logprob
        assert out["rollout_log_probs"][t] == pytest.approx(forward_logprobs(model, out["observation_tokens"], T)[t],
                                                            abs=1e-4)
        assert out["reward"] == reward and out["extra_logs"]["spade_pad"] == 1.0 and out["extra_logs"]["spade_step"] == 7
    out, coordinator, engine = execute("agent", 0.5, played)
    assert engine.calls == [] and coordinator.reports == [(7, 3, 1, "terminated")]
    assert (out["observation_tokens"], out["action_ranges"], out["rollout_log_probs"]) == ([1, 2, 3], [(1, 3)],
                                                                                         [0.0, -0.5, -0.25])
    assert (out["reward"], out["scores"], out["extra_logs"]["spade_agent"]) == (0.5, 1.0, 1.0)


def test_responses_have_openrlhf_shape_and_every_group_mean_is_zero(plugin_run):
    """dr_grpo subtracts each group's mean and nothing else: a zero mean keeps our rewards exactly. Every response
    has at least one action token (OpenRLHF divides its metrics by their count)."""
    for step in plugin_run["steps"]:
        assert len(step["groups"]) == 3  # 2 slot tickets + D = 1 designer pack
        for group in step["groups"]:
            assert abs(sum(r["reward"] for r in group) / len(group)) < 1e-6
            for r in group:
                assert set(r["extra_logs"]) == set(LOG_KEYS)
                assert len(r["observation_tokens"]) == len(r["rollout_log_probs"]) <= MAX_LEN
                assert r["action_ranges"] and all(b > a for a, b in r["action_ranges"])
                mask = [0] * len(r["observation_tokens"])
                for a, b in r["action_ranges"]:
                    mask[a:b] = [1] * (b - a)
                assert all(lp == 0.0 for lp, m in zip(r["rollout_log_probs"], mask) if not m)


def test_agent_tokens_logprobs_and_rewards(plugin_run):
    config, model = plugin_run["config"], plugin_run["model"]
    for s, step in enumerate(plugin_run["steps"]):
        envs = step["envs"]
        agent_groups = [g for g in step["groups"] if g[0]["extra_logs"]["spade_agent"] == 1.0]
        assert len(agent_groups) == 2  # one ticket per slot
        agent_calls = [c for c in step["calls"] if c[0] == "agent"]
        # the hint arm (regeneration steps) is played but never returned to OpenRLHF; pads are counted apart ("pad")
        assert len(agent_calls) == (8 if s % 2 == 0 else 4)
        by_tokens = {tuple(c[1] + c[2]): c for c in agent_calls}
        for group in agent_groups:
            returns = [r["scores"] for r in group]
            for r in group:
                prompt_len = r["action_ranges"][0][0]
                assert r["action_ranges"] == [(prompt_len, len(r["observation_tokens"]))]  # one turn
                call = by_tokens[tuple(r["observation_tokens"])]  # exactly what the engine produced
                assert r["rollout_log_probs"][prompt_len:] == pytest.approx(call[3], abs=1e-6)
                recomputed = forward_logprobs(model, r["observation_tokens"], T)
                assert r["rollout_log_probs"][prompt_len:] == pytest.approx(recomputed[prompt_len:], abs=1e-4)
            # hand-computed: returns are seed parities of the paired no-hint seeds; advantage = z-score
            seeds_by_slot = {e["env_id"]: [derive_seed(config.seed, "episode", s, e["env_id"], "no_hint", g)
                                           for g in range(2)] for e in envs}
            parities = {k: sorted(float(x % 2) for x in v) for k, v in seeds_by_slot.items()}
            assert sorted(returns) in parities.values()
            assert [r["reward"] for r in group] == pytest.approx(zscores(returns), abs=1e-6)


def test_delayed_designer_samples_are_replayed_with_stored_tokens_and_hand_computed_rewards(plugin_run):
    config, model = plugin_run["config"], plugin_run["model"]
    step0, step2 = plugin_run["steps"][0], plugin_run["steps"][2]
    designs = [c for c in step0["calls"] if c[0] == "design"]
    assert len(designs) == 2
    for s, step in enumerate(plugin_run["steps"][:2]):  # nothing has matured yet: the pack is padding only
        packs = [g for g in step["groups"] if is_pack(g)]
        assert len(packs) == 1 and all(r["extra_logs"]["spade_pad"] == 1.0 and r["reward"] == 0.0 for r in packs[0])
        # the pack is role 2 ('groups': slot roles 0, 1 first); its 2 pads sample with seeds ("pad", s, 2, g)
        pads = check_pads(plugin_run, s, pad_seeds(config, s, 2, range(2)))
        assert len(pads) == 2 and all(r in packs[0] for r in pads)
    replayed = [r for g in step2["groups"] for r in g if r["extra_logs"]["spade_designer"] == 1.0]
    assert len(replayed) == 2
    # set 0 as it was at the end of step 1 (window complete): wins over steps 0 and 1, G = 2 each
    envs = {e["env_id"]: e for e in step0["envs"]}
    window = {}
    for env_id in envs:
        seeds = [derive_seed(config.seed, "episode", s, env_id, "no_hint", g) for s in (0, 1) for g in range(2)]
        window[env_id] = sum(x % 2 for x in seeds) / 4
    rewards = {k: 0.4 * 0.0 + 0.6 * plateau(w) for k, w in window.items()}  # paired seeds: regret 0
    mean = sum(rewards.values()) / 2
    weight = min(2 * 2 / 2 * 2, 50.0)  # min(N_RA / N_envs * k, 50) with N_RA = 2 envs x G 2
    expected = sorted((rewards[k] - mean) * weight for k in rewards)
    assert expected == pytest.approx([-1.2, 1.2])  # 0.6 * plateau: 0 (win rate 1.0) and 0.6 (0.5); x weight 4
    assert sorted(r["reward"] for r in replayed) == pytest.approx(expected, abs=1e-6)
    stored = {tuple(c[1] + c[2]): c for c in designs}
    for r in replayed:
        call = stored[tuple(r["observation_tokens"])]  # the tokens generated two steps earlier
        start = len(call[1])
        assert r["action_ranges"] == [(start, len(r["observation_tokens"]))]
        assert r["rollout_log_probs"][start:] == pytest.approx(call[3], abs=1e-6)
        recomputed = forward_logprobs(model, r["observation_tokens"], T)
        assert r["rollout_log_probs"][start:] == pytest.approx(recomputed[start:], abs=1e-4)
    # the two samples form one (set 0, skill) group of 2 = G: one pack holds both, rewards -1.2 + 1.2 = 0, no pad
    packs = [g for g in step2["groups"] if is_pack(g)]
    assert len(packs) == 1 and all(r["extra_logs"]["spade_designer"] == 1.0 for r in packs[0])
    assert check_pads(plugin_run, 2, set()) == []  # and no pad anywhere at step 2 (every play kept)


def test_metrics_and_state(plugin_run):
    run_dir = plugin_run["run_dir"]
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [0, 1, 2]
    assert lines[0]["regenerated"] and lines[0]["mean_regret"] == 0.0 and lines[2]["closed_set_step"] == 0
    assert [step["logged"] for step in plugin_run["steps"]] == [1, 2, 3]  # each step ended before its responses came
    check_sent_rewards(plugin_run["steps"], lines, 3 * 2)  # 3 tickets x G 2
    # steps 0 and 1 by hand: a slot whose 2 seeds differ in parity sends z-scores +-1, else 0, 0; the pack 2 zeros.
    # Mean 0, so the unbiased std is sqrt(2 x (slots with +-1) / (6 - 1))
    config = plugin_run["config"]
    for s in (0, 1):
        split = sum(len({derive_seed(config.seed, "episode", s, e["env_id"], "no_hint", g) % 2 for g in range(2)}) == 2
                    for e in plugin_run["steps"][s]["envs"])
        assert lines[s]["openrlhf_reward_std"] == pytest.approx(math.sqrt(2 * split / 5), abs=1e-6), s
    assert [m["designer_pack_shift"] for m in lines] == [0.0, 0.0, 0.0]  # no group larger than G = 2
    assert (run_dir / "envs" / "set_00000.json").is_file()
    assert (state_folder(run_dir, STEPS) / "state.json").is_file()  # checkpoint_every = STEPS


def test_resume_takes_the_state_of_the_step_openrlhf_resumes_from(plugin_run, pool, tmp_path):
    """A run killed after step 5's generation but before its training: the coordinator saved states for steps 3 and 6,
    OpenRLHF's last checkpoint is global_step3. The resume takes step 3's state and cuts metrics.jsonl back to steps
    0-2; with no OpenRLHF checkpoint the core starts afresh; a checkpoint with no matching state stops the run."""
    import shutil

    config, tokenizer = plugin_run["config"], plugin_run["tokenizer"]
    run_dir = tmp_path / "run"
    shutil.copytree(plugin_run["run_dir"], run_dir)
    saved = json.loads((state_folder(run_dir, 3) / "state.json").read_text())
    ahead = state_folder(run_dir, 6)
    shutil.copytree(state_folder(run_dir, 3), ahead)
    (ahead / "state.json").write_text(json.dumps({**saved, "next_step": 6}))
    metrics = run_dir / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + "".join(json.dumps({"step": s}) + "\n" for s in (3, 4, 5)))
    latest = run_dir / "openrlhf" / "ckpt" / "_actor" / "latest"
    latest.parent.mkdir(parents=True)
    latest.write_text("global_step3")
    resumed = build_coordinator(config, tokenizer, pool, run_dir, engine_wait_s=0.0)
    assert resumed.next_step == 3 and asdict(resumed.core.state) == saved["selfplay"]
    assert [json.loads(line)["step"] for line in metrics.read_text().splitlines()] == [0, 1, 2]
    latest.write_text("global_step2")  # no state was saved for step 2
    with pytest.raises(RuntimeError, match="resumes from global_step2 but .*step_000002 holds no SPADE state"):
        build_coordinator(config, tokenizer, pool, run_dir, engine_wait_s=0.0)
    latest.unlink()  # killed before OpenRLHF's first checkpoint: everything starts again
    fresh = build_coordinator(config, tokenizer, pool, run_dir, engine_wait_s=0.0)
    assert fresh.next_step == 0 and fresh.core.state.envs == [] and metrics.read_text() == ""


# ----- the default structure: one global batch per rollout (issue 14) ------------------------------------------------
GLOBAL_STEPS = 4


@pytest.fixture(scope="module")
def global_run(tiny_model, pool, tmp_path_factory):
    """A whole 4-step run with selfplay.batch_structure 'global_batch': 2 slots, global batch 8 -> 2 tickets of
    m = 4 responses, G = 2 hinted plays, k = 2 (sets at steps 0 and 2; step 3 is the last)."""
    model, tokenizer = tiny_model
    config = load_config(overrides={
        "model_card": "tiny-random", "seed": 2,
        "selfplay": {"active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2,
                     "design_attempts": 1, "backfill": False, "total_steps": GLOBAL_STEPS},
        "train": {"global_batch": 8, "logprob_temperature": None},  # None: the stand-in engine's template is T
        "agent": {"max_turns": 1, "max_new_tokens": 6, "max_context_tokens": 2048, "temperature": T,
                  "cut_turns": "continue"},  # the tiny model's 6-token replies are cut: they still step
        "designer": {"temperature": T, "max_new_tokens": 8, "hint_max_new_tokens": 6},
        "corpus": {"enabled": False}, "memory": {"enabled": False, "seed_library": False}})
    run = drive_plugin(config, model, tokenizer, pool, tmp_path_factory.mktemp("rlhf-global"), GLOBAL_STEPS)
    return {**run, "tokenizer": tokenizer, "model": model}


def _kinds(group) -> str:
    return "pack" if is_pack(group) else "agent"


def test_global_batch_every_rollout_is_one_optimizer_step(global_run):
    launch = global_run["launch"]
    assert (launch["rollout_batch_size"], launch["n_samples_per_prompt"]) == (2, 4)  # 2 x 4 = global batch 8
    for s, step in enumerate(global_run["steps"]):
        responses = [r for g in step["groups"] for r in g]
        assert len(responses) == 8, s
        assert all(abs(sum(r["reward"] for r in g)) < 1e-6 for g in step["groups"])  # dr_grpo keeps our rewards
        # steps 2 and 3 train 2 designer samples, one (set, skill) group of 2: one pack of m = 4 (the 2 samples, then
        # 2 pads) takes a ticket, one slot is cut
        assert sorted(_kinds(g) for g in step["groups"]) == (["agent", "pack"] if s >= 2 else ["agent", "agent"])
        # every step plays 2 slots x 4 no-hint episodes (the cut slot through the engine, by the coordinator),
        # plus the hint arm (2 x G 2) at the regeneration steps; pads are engine calls of their own ("pad")
        assert sum(c[0] == "agent" for c in step["calls"]) == 8 + (4 if s % 2 == 0 else 0), s
        if s >= 2:
            pack = next(g for g in step["groups"] if is_pack(g))
            assert [r["extra_logs"]["spade_designer"] for r in pack] == [1.0, 1.0, 0.0, 0.0], s
            assert [r["reward"] for r in pack[2:]] == [0.0, 0.0], s
            # 'global_batch': the pack is role 0; its pads are entries 2 and 3 (seeds ("pad", s, 0, g)); a play dropped
            # for a sandbox failure would add a pad of its own
            check_pads(global_run, s, pad_seeds(global_run["config"], s, 0, (2, 3)))
        else:
            check_pads(global_run, s, set())
    lines = [json.loads(x) for x in (global_run["run_dir"] / "metrics.jsonl").read_text().splitlines()]
    assert [m["episodes"] for m in lines] == [8] * 4 and not any("trimmed_play_error" in m for m in lines)
    assert [m["trimmed_agent_samples"] for m in lines] == [0, 0, 4, 4]
    assert [m["designer_samples"] for m in lines] == [0, 0, 2, 2] and lines[3]["final_set_closed"]
    assert [m["samples"] for m in lines] == [8, 8, 6, 6]  # 2 designer + 4 agent at steps 2 and 3
    # every executor returned after its step ended, the cut slot's plays included (wait_finished)
    assert [step["logged"] for step in global_run["steps"]] == [1, 2, 3, 4]
    check_sent_rewards(global_run["steps"], lines, 8)  # one global batch
    assert [m["designer_pack_shift"] for m in lines] == [0.0] * 4  # a group of 2 fits a pack of 4


def test_global_batch_final_step_flushes_the_last_set(global_run):
    """Step 3 replays the designs of step 2, rewarded over their window (steps 2 and 3, 4 + 4 plays each):
    returns are seed parities, regret 0 (paired seeds), reward 0.6 * plateau(mean return), centred over the
    skill, times min(4 plays x 2 slots / 2 designer samples x k 2, 50) = 8."""
    config, steps = global_run["config"], global_run["steps"]
    designs = [c for c in steps[2]["calls"] if c[0] == "design"]
    replayed = [r for g in steps[3]["groups"] for r in g if r["extra_logs"]["spade_designer"] == 1.0]
    assert len(designs) == 2 and len(replayed) == 2
    assert {tuple(r["observation_tokens"]) for r in replayed} == {tuple(c[1] + c[2]) for c in designs}
    archive = json.loads((global_run["run_dir"] / "envs" / "set_00002.json").read_text())["environments"]
    window = {}
    for row in archive:  # both slots' plays count, the one cut from the batch (played by the coordinator) too
        seeds = [derive_seed(config.seed, "episode", s, row["env_id"], "no_hint", g) for s in (2, 3) for g in range(4)]
        assert row["episodes"] + row["dropped"] == 8
        if not row["dropped"]:  # a sandbox timeout on a loaded machine drops a play (agent.failed_plays)
            assert row["return_sum"] == sum(x % 2 for x in seeds)
        window[row["env_id"]] = row["return_sum"] / row["episodes"]
    rewards = {k: 0.6 * plateau(w) for k, w in window.items()}
    mean = sum(rewards.values()) / 2
    expected = sorted((rewards[k] - mean) * 8.0 for k in rewards)
    assert sorted(r["reward"] for r in replayed) == pytest.approx(expected, abs=1e-6)
    assert sorted(row["designer_reward"] for row in archive) == pytest.approx(sorted(rewards.values()), abs=1e-9)


def test_engine_requests_carry_our_truncation_and_seed():
    from spade.rlhf.engine import to_engine_params

    template = EngineParams(temperature=1.0, top_p=1.0, top_k=-1, max_tokens=None, seed=None)
    out = to_engine_params(template, SamplingParams(0.6, 0.95, 64, top_k=20), 7)
    assert (out.temperature, out.top_p, out.top_k, out.max_tokens, out.seed, out.logprobs) == (0.6, 0.95, 20, 64, 7, 1)
    assert to_engine_params(template, SamplingParams(0.6, 1.0, 64), 7).top_k == -1  # 0 = off: vLLM's -1
    assert template.top_k == -1 and template.seed is None  # a copy: OpenRLHF's own object is left alone


def test_executor_checks_the_log_prob_temperature_openrlhf_trains_at():
    """--rollout.temperature is where OpenRLHF's actor takes its log-probs: it must be train.logprob_temperature
    (reference 1.0), while the requests sample at each role's own temperature; with null (the sampling temperature)
    every role must sample at one temperature."""
    from spade.rlhf.executor import SpadeAgentExecutor

    def check(template_t, **overrides):
        executor = SpadeAgentExecutor(coordinator=object())
        executor._config = load_config(overrides={"model_card": "tiny-random", **overrides})
        executor._check(EngineParams(temperature=template_t), executor._config.agent.max_context_tokens)

    check(1.0, agent={"temperature": 0.6}, designer={"temperature": 0.7})  # reference: roles may differ
    with pytest.raises(ValueError, match="--rollout.temperature 0.6 differs from train.logprob_temperature 1.0"):
        check(0.6, agent={"temperature": 0.6})
    check(0.6, agent={"temperature": 0.6}, train={"logprob_temperature": None})
    with pytest.raises(ValueError, match="designer.temperature 0.7 differs from agent.temperature 0.6"):
        check(0.6, agent={"temperature": 0.6}, designer={"temperature": 0.7}, train={"logprob_temperature": None})
