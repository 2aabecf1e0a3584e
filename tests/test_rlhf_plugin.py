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
from spade.generation import SamplingParams  # noqa: E402
from spade.generation_hf import HFBackend  # noqa: E402
from spade.rlhf import AGENT_FUNC_PATH, prepare_run  # noqa: E402
from spade.rlhf.coordinator import build_coordinator, state_folder  # noqa: E402
from spade.rlhf.plan import LOG_KEYS, TicketPlan, action_ranges, pack_designer_samples, parse_ticket  # noqa: E402
from spade.seeding import derive_seed  # noqa: E402
from spade.selfplay import Sample  # noqa: E402

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
        self.calls: list = []  # (role, prompt ids, completion ids, logprobs)

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
            role = "hint" if "write one short hint" in text else "agent"
            params = SamplingParams(temperature, sampling_params.top_p, sampling_params.max_tokens)
            generation = self.backend.generate([prompt], params, [sampling_params.seed])[0]
            ids, logprobs, reason = generation.completion_ids, generation.logprobs, generation.finish_reason
        self.calls.append((role, prompt, ids, logprobs))
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
            done.append({"groups": [responses[i * n:(i + 1) * n] for i in range(len(batch))],
                         "calls": engine.calls[calls_before:], "envs": [dict(e) for e in coordinator.core.state.envs]})
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
        "agent": {"max_turns": 1, "max_new_tokens": 6, "max_context_tokens": 2048, "temperature": T},
        "designer": {"temperature": T, "max_new_tokens": 8, "hint_max_new_tokens": 6},
        "corpus": {"enabled": False}, "memory": {"enabled": False, "seed_library": False}})
    run = drive_plugin(config, model, tokenizer, pool, tmp_path_factory.mktemp("rlhf-run"), STEPS)
    return {**run, "tokenizer": tokenizer, "model": model}


# ----- tests -------------------------------------------------------------------------------------------
def test_agent_func_is_an_openrlhf_agent_executor():
    module = load_agent_module()
    assert issubclass(module.AgentExecutor, agent_base.AgentExecutorBase)
    module.AgentExecutor()  # OpenRLHF instantiates it without arguments, once per engine


def test_tickets_and_plan(plugin_run):
    launch, tickets = plugin_run["launch"], plugin_run["tickets"]
    # B = 2 slots; designer samples <= 2, packs of G-1 = 1 -> D = 2; batch = 4 tickets, G = 2
    assert (launch["rollout_batch_size"], launch["n_samples_per_prompt"]) == (4, 2)
    assert len(tickets) == (STEPS + 1) * 4 and len({t["label"] for t in tickets}) == len(tickets)  # total_steps 4
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


def test_pack_balances_every_group():
    plan = TicketPlan(slots=3, designer_packs=2, group_size=3)
    samples = [Sample("designer", [1, 2], [0, 1], [0.0, -1.0], advantage=a, weight=4.0, delayed=True)
               for a in (0.5, -0.25, 0.1)]
    packs = pack_designer_samples(samples, plan)
    assert [[e["reward"] for e in p] for p in packs] == [
        [pytest.approx(2.0), pytest.approx(-1.0), pytest.approx(-1.0)],
        [pytest.approx(0.4), pytest.approx(-0.4), 0.0]]
    assert all(abs(sum(e["reward"] for e in p)) < 1e-9 for p in packs)
    assert action_ranges([0, 1, 1, 0, 0, 1, 0, 1]) == [(1, 3), (5, 6), (7, 8)]


def test_responses_have_openrlhf_shape_and_every_group_mean_is_zero(plugin_run):
    """dr_grpo subtracts each group's mean and nothing else: a zero mean keeps our rewards exactly."""
    for step in plugin_run["steps"]:
        assert len(step["groups"]) == 4
        for group in step["groups"]:
            assert abs(sum(r["reward"] for r in group) / len(group)) < 1e-6
            for r in group:
                assert set(r["extra_logs"]) == set(LOG_KEYS)
                assert len(r["observation_tokens"]) == len(r["rollout_log_probs"]) <= MAX_LEN
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
        # the hint arm (regeneration steps) is played but never returned to OpenRLHF
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
    for step in plugin_run["steps"][:2]:  # nothing has matured yet: designer packs are padding only
        packs = [g for g in step["groups"] if g[0]["extra_logs"]["spade_agent"] == 0.0]
        assert all(r["extra_logs"]["spade_pad"] == 1.0 and r["action_ranges"] == [] and r["reward"] == 0.0
                   for g in packs for r in g)
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
    # each pack: one replayed sample and one pad carrying minus its reward
    packs = [g for g in step2["groups"] if g[0]["extra_logs"]["spade_agent"] == 0.0]
    assert all(sorted(r["extra_logs"]["spade_pad"] for r in g) == [0.0, 1.0] for g in packs)


def test_metrics_and_state(plugin_run):
    run_dir = plugin_run["run_dir"]
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [0, 1, 2]
    assert lines[0]["regenerated"] and lines[0]["mean_regret"] == 0.0 and lines[2]["closed_set_step"] == 0
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
        "train": {"global_batch": 8},
        "agent": {"max_turns": 1, "max_new_tokens": 6, "max_context_tokens": 2048, "temperature": T},
        "designer": {"temperature": T, "max_new_tokens": 8, "hint_max_new_tokens": 6},
        "corpus": {"enabled": False}, "memory": {"enabled": False, "seed_library": False}})
    return drive_plugin(config, model, tokenizer, pool, tmp_path_factory.mktemp("rlhf-global"), GLOBAL_STEPS)


def _kinds(group) -> str:
    logs = group[0]["extra_logs"]
    return "agent" if logs["spade_agent"] else "pack"


def test_global_batch_every_rollout_is_one_optimizer_step(global_run):
    launch = global_run["launch"]
    assert (launch["rollout_batch_size"], launch["n_samples_per_prompt"]) == (2, 4)  # 2 x 4 = global batch 8
    for s, step in enumerate(global_run["steps"]):
        responses = [r for g in step["groups"] for r in g]
        assert len(responses) == 8, s
        assert all(abs(sum(r["reward"] for r in g)) < 1e-6 for g in step["groups"])  # dr_grpo keeps our rewards
        # steps 2 and 3 train 2 designer samples: one pack of m - 1 = 3 takes a ticket, one slot is cut
        assert sorted(_kinds(g) for g in step["groups"]) == (["agent", "pack"] if s >= 2 else ["agent", "agent"])
        # every step plays 2 slots x 4 no-hint episodes (the cut slot through the engine, by the coordinator),
        # plus the hint arm (2 x G 2) at the regeneration steps
        assert sum(c[0] == "agent" for c in step["calls"]) == 8 + (4 if s % 2 == 0 else 0), s
    lines = [json.loads(x) for x in (global_run["run_dir"] / "metrics.jsonl").read_text().splitlines()]
    assert [m["episodes"] for m in lines] == [8] * 4 and not any("trimmed_play_error" in m for m in lines)
    assert [m["trimmed_agent_samples"] for m in lines] == [0, 0, 4, 4]
    assert [m["designer_samples"] for m in lines] == [0, 0, 2, 2] and lines[3]["final_set_closed"]
    assert [m["samples"] for m in lines] == [8, 8, 6, 6]  # 2 designer + 4 agent at steps 2 and 3


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
