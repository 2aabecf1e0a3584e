"""The ablation switches of the self-play core (issue 7, item 1; Tables 3 and 6): each changes what it
names and nothing else.

One short self-play run per setting (5 steps, k = 2: regenerations at steps 0, 2, 4, sets closing at
steps 2 and 4), driven by a scripted backend whose replies depend only on the role of the prompt (and,
for designs, on the design seed), never on the prompt's content: a change in a design prompt can
therefore not reach the environments, the agent's play or the rewards. Every design answers the same
coin environment (a hidden bit drawn from the episode seed; the agent always answers 0: a win returns 1,
a miss returns 0.5), so win rates differ between environments and mean return = (1 + win rate) / 2.
The very first design attempt (step 0, attempt 0) is unusable text, so every run also has one invalid
candidate per slot (``design_attempts: 2``).

The default run ("base") has corpus grounding (a three-document corpus), the environment memory seeded
from the built-in library, designer training and the hint-regret designer reward. Each ablation is the
same run with its switch; the test asserts (a) the intended difference and (b) that everything outside
it is identical: design prompts after removing the ablated section, the environment sets, the agent's
samples and advantages, the designer's generations, rewards and metrics.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
from scripted_backend import ScriptedBackend

from spade.config import SpadeConfig, resolve_layers
from spade.configtools import deep_merge, from_dict
from spade.designer.memory import EnvironmentMemory
from spade.designer.prompts import DESIGNER_SYSTEM, HINT_SYSTEM
from spade.designer.skills import GAME_SKILLS, SKILLS
from spade.envs.library.registry import library
from spade.envs.validate import Validator
from spade.seeding import derive_seed
from spade.core.backend_setup import corpus_sampler
from spade.core.selfplay import SelfPlay

COIN = r'''
import random
import re


class CoinBit:
    """A hidden bit; the agent names it. Right: reward 1. Wrong: reward 0.5 (partial credit)."""

    def __init__(self, max_turns=2, **kwargs):
        self.max_turns = max_turns
        self.reset()

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.bit = self.rng.randint(0, 1)
        self.turn = 0
        return "A hidden bit is 0 or 1. Name it as \\boxed{b}.", {"turn": 0}

    def step(self, action):
        self.turn += 1
        match = re.search(r"\\boxed\{([^{}]*)\}", action)
        if match is None:
            return "Answer as \\boxed{b}.", 0.0, False, self.turn >= self.max_turns, {"turn": self.turn}
        if match.group(1).strip() == str(self.bit):
            return "Right.", 1.0, True, False, {"turn": self.turn}
        return "Wrong bit.", 0.5, True, False, {"turn": self.turn}

    def solution(self):
        return str(self.bit)
'''
DESIGN = "Here is the module.\n```python\n" + COIN + "```\n"
UNUSABLE = "I would rather describe the environment in words than write it."
SIX = list(GAME_SKILLS)
TWO = ["mathematical_reasoning", "logical_deduction"]

BASE = {
    "model_card": "tiny-random",
    "selfplay": {"skills": SIX, "active_skills": 2, "envs_per_skill": 2, "group_size": 4, "regen_interval": 2,
                 "design_attempts": 2, "backfill": False},
    "designer": {"hint_max_new_tokens": 16},
    "agent": {"max_turns": 2, "max_new_tokens": 8},
    "train": {"global_batch": 16},  # 16 / 4 slots = 4 no-hint plays per environment, as G
    # the coin pays 0.5 for a miss, so every play has a return > 0: the reference's memory win rate would make each
    # played coin a negative example; full wins over the window keep them in the positive band for these tests
    "memory": {"win_rate": "window_win"},
    "corpus": {"enabled": True, "games_max_words": 40},
    "eval": {"heldout_library": {"environments": ["crt_residue_puzzle"], "episodes": 2}},
}
STEPS = 5
DOCUMENTS = ["Bayes rule updates a prior with a likelihood; posterior odds equal prior odds times the ratio.",
             "A greedy choice by value density solves the fractional knapsack but not the 0/1 one.",
             "Modus tollens: from 'if P then Q' and 'not Q' conclude 'not P'."]


def config_with(*layers: dict) -> SpadeConfig:
    data: dict = {}
    for layer in (BASE,) + layers:
        data = deep_merge(data, layer)
    return from_dict(SpadeConfig, resolve_layers(data))


class CountingMemory(EnvironmentMemory):
    """The environment memory, counting how often a design prompt consults it."""

    consulted = 0

    def positive_seeds(self, *args, **kwargs):
        self.consulted += 1
        return super().positive_seeds(*args, **kwargs)

    def negative_seed(self, *args, **kwargs):
        self.consulted += 1
        return super().negative_seed(*args, **kwargs)


class RecordingSelfPlay(SelfPlay):
    """The core, recording every chat it sends to the designer (designs and hints) with its seed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.chats: list = []  # [(chat, seed)] in call order

    def _generate(self, chats, params, seed, prefix=""):
        self.chats += [(chat, seed) for chat in chats]
        return super()._generate(chats, params, seed, prefix)


@dataclass
class Run:
    config: SpadeConfig
    core: RecordingSelfPlay
    memory: CountingMemory
    steps: list  # [(samples, metrics, closed rows)] per step

    def design_texts(self) -> list:
        return [chat[1]["content"] for chat, _ in self.core.chats if chat[0]["content"] == DESIGNER_SYSTEM.strip()]

    def hint_chats(self) -> list:
        return [chat for chat, _ in self.core.chats if chat[0]["content"] == HINT_SYSTEM.strip()]

    def samples(self, role: str) -> list:
        """Per step: (token ids, loss mask, advantage, weight, delayed) of the samples of ``role``."""
        return [[(s.token_ids, s.loss_mask, s.advantage, s.weight, s.delayed) for s in samples if s.role == role]
                for samples, _, _ in self.steps]

    def designer_generations(self) -> list:
        """Per step: the sampled tokens of each designer sample (the design, without its prompt)."""
        return [[[t for t, m in zip(s.token_ids, s.loss_mask) if m] for s in samples if s.role == "designer"]
                for samples, _, _ in self.steps]

    def sets(self) -> list:
        """Every environment set of the run (closed at steps 2 and 4, then the open one), rows without the
        designer's token-level sample."""
        rows = [closed for _, _, closed in self.steps if closed] + [[vars(e) for e in self.core._envs()]]
        return [[{k: ([drop_time(r) for r in v] if k == "reports" else v) for k, v in row.items()
                  if k != "designer_sample"} for row in group] for group in rows]

    def metrics(self) -> list:
        return [metrics for _, metrics, _ in self.steps]


def reply_for(config: SpadeConfig):
    unusable_seed = derive_seed(config.seed, "design", 0, 0)

    def reply(text: str, seed: int) -> str:
        if "You are an environment designer" in text:
            return UNUSABLE if seed == unusable_seed else DESIGN
        if "write one short hint" in text:
            return "<hint>Zero is a fine first guess.</hint>"
        return "\\boxed{0}"

    return reply


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": f"doc{i}", "text": text}) + "\n" for i, text in enumerate(DOCUMENTS)))
    return path


@pytest.fixture(scope="module")
def play(pool, tiny_model, corpus_file):
    """``play(*layers)``: the 5-step run of BASE + layers (cached: each setting runs once per module)."""
    _, tokenizer = tiny_model
    cache: dict = {}

    def run(*layers: dict) -> Run:
        key = json.dumps(layers, sort_keys=True)
        if key not in cache:
            config = config_with(*layers)
            memory = CountingMemory(config.memory)  # as spade.core.backend_setup.fresh_memory: seeded from the library
            heldout = set(config.eval.heldout_library.environments)
            memory.seed_from_library([e for e in library() if e.name not in heldout])
            # the same sampler whatever corpus.enabled says: the switch alone must keep documents out
            sampler = corpus_sampler(config_with({"corpus": {"enabled": True}}), corpus_file)
            core = RecordingSelfPlay(config, ScriptedBackend(tokenizer, reply_for(config)), Validator(pool), memory,
                                     sampler)
            cache[key] = Run(config, core, memory, [core.rollout(step) for step in range(STEPS)])
        return cache[key]

    return run


# ----- shared helpers ------------------------------------------------------------------------------------
MEMORY_SECTION = re.compile(  # memory.examples 'full' and 'reference' (a header; the negative named on one line)
    r"\n\n(?:Good example \d+[: ].*?</good_example>|Example to avoid: the agent won .*?</bad_example>"
    r"|Example to avoid: the earlier environment [^\n]*)", re.S)
DOCUMENT_SECTION = re.compile(r"Build the environment around one concrete concept from this document\.\n"
                              r"<document>\n.*?\n</document>", re.S)
NO_DOCUMENT = "No document is given: choose the concept yourself from mathematics or science."


def without_memory(text: str) -> str:
    return MEMORY_SECTION.sub("", text)


def target_skills(texts: list) -> list:
    names = {info.name: skill for skill, info in SKILLS.items()}
    return [names[re.match(r"Target skill: (.*?)\. ", text).group(1)] for text in texts]


def window_rates(row: dict) -> tuple[float, float]:
    """(win rate, mean return) of a closed environment over its window: each coin episode returns 1 or 0.5."""
    wins, episodes = row["wins"], row["episodes"]
    return wins / episodes, (wins + 0.5 * (episodes - wins)) / episodes


def drop_time(report: dict) -> dict:
    """A validation report without its wall-clock time (the only field two identical runs may differ in)."""
    return {k: v for k, v in report.items() if k != "elapsed_ms"}


DESIGNER_BATCH = ("designer_batch_sets", "designer_batch_nonzero")  # what a step's designer update trained on: its
# sets and how many of its samples had a nonzero advantage (issue 39); they change with the designer's advantages


def drop(items: list, *keys: str) -> list:
    return [{k: v for k, v in item.items() if k not in keys} for item in items]


def check_base_run(base: Run) -> None:
    """The reference run exercises what the ablations remove (otherwise their tests could not fail)."""
    texts = base.design_texts()
    assert len(texts) == 4 + 4 + 4 + 4  # step 0: 4 slots x 2 attempts (the first unusable), steps 2 and 4: 4 slots
    assert all("<document>" in text for text in texts)
    assert all("<good_example>" in text for text in texts)  # library examples: every skill has some
    assert base.memory.consulted == 2 * len(texts)  # positive and negative seeds per prompt
    assert [len(d) for d in base.designer_generations()] == [0, 0, 4, 0, 4]
    closed = [row for group in base.sets()[:2] for row in group]
    assert len(closed) == 8 and all(row["valid"] and row["episodes"] == 8 for row in closed)
    assert len({row["wins"] for row in closed}) > 1  # win rates differ between environments
    for metrics in base.metrics():  # every episode terminates: return 1 (win) or 0.5 (miss)
        assert metrics["agent_mean_return"] == pytest.approx(0.5 + 0.5 * metrics["agent_win_rate"])
        p, n = metrics["agent_win_rate"], metrics["episodes"]  # two values 0.5 apart: sd = 0.5 sqrt(p(1-p) n/(n-1))
        assert metrics["agent_return_sd"] == pytest.approx(0.5 * (p * (1 - p) * n / (n - 1)) ** 0.5)


# ----- the ablations -----------------------------------------------------------------------------------------
def test_without_memory_only_the_memory_examples_leave_the_design_prompts(play):
    """Checked on the default rotation (library examples only: no skill repeats within 5 steps) and on the
    2-skill curriculum, where the prompts of steps 2 and 4 show environments the agent has played."""
    check_base_run(play())
    no_memory = {"memory": {"enabled": False}}
    measured = f"<good_example>\n{COIN.strip()}\n</good_example>"  # a played coin environment as an example
    two = {"selfplay": {"skills": TWO}}
    assert not any(measured in t for t in play().design_texts()[:8] + play(two).design_texts()[:8])
    assert all(measured in t for t in play(two).design_texts()[8:])
    for base, ablated in ((play(), play(no_memory)), (play(two), play(two, no_memory))):
        texts = ablated.design_texts()
        # (a) no example environment in any design prompt; the memory is never consulted
        assert not any("<good_example>" in t or "<bad_example>" in t or "Good example" in t for t in texts)
        assert ablated.memory.consulted == 0 and base.memory.consulted == 2 * len(texts)
        # (b) the same prompts once the memory section is cut out: corpus document, skill, rules unchanged
        assert [without_memory(t) for t in base.design_texts()] == texts
        assert ablated.hint_chats() == base.hint_chats()
        assert ablated.samples("agent") == base.samples("agent")
        assert ablated.designer_generations() == base.designer_generations()
        assert [[a[2:] for a in step] for step in ablated.samples("designer")] == \
            [[b[2:] for b in step] for step in base.samples("designer")]  # advantages, weights, delay
        assert ablated.sets() == base.sets() and ablated.metrics() == base.metrics()


def test_without_corpus_only_the_document_leaves_the_design_prompts(play):
    base, ablated = play(), play({"corpus": {"enabled": False}})
    check_base_run(base)
    texts = ablated.design_texts()
    # (a) no corpus document in any design prompt (the interactive flavour then asks for a concept instead)
    assert not any("<document>" in t or any(doc[:30] in t for doc in DOCUMENTS) for t in texts)
    assert all(NO_DOCUMENT in t for t in texts)
    assert all(any(doc in t for t in base.design_texts()) for doc in DOCUMENTS)  # each document was drawn
    # (b) the same prompts with the document section replaced: memory examples and skills unchanged
    assert [DOCUMENT_SECTION.sub(NO_DOCUMENT, t) for t in base.design_texts()] == texts
    assert ablated.memory.consulted == base.memory.consulted
    assert ablated.hint_chats() == base.hint_chats()
    assert ablated.samples("agent") == base.samples("agent")
    assert ablated.designer_generations() == base.designer_generations()
    assert [[a[2:] for a in step] for step in ablated.samples("designer")] == \
        [[b[2:] for b in step] for step in base.samples("designer")]
    assert ablated.sets() == base.sets() and ablated.metrics() == base.metrics()
    assert ablated.memory.records == base.memory.records


def test_without_designer_training_and_memory_trains_only_the_agent(play):
    base, ablated = play(), play({"selfplay": {"train_designer": False}, "memory": {"enabled": False}})
    check_base_run(base)
    # (a) no designer sample ever reaches the batch; no memory example in any prompt, the memory unread
    assert ablated.samples("designer") == [[]] * STEPS
    assert [m["designer_samples"] for m in ablated.metrics()] == [0] * STEPS
    assert [m["designer_samples"] for m in base.metrics()] == [0, 0, 4, 0, 4]
    assert ablated.memory.consulted == 0
    assert not any("<good_example>" in t or "<bad_example>" in t for t in ablated.design_texts())
    # (b) the designer still writes the same environments and hints, from the same prompts less the memory
    # section; the agent plays the same episodes with the same advantages; its designer reward is still logged.
    # One global batch per step (selfplay.batch_structure 'global_batch'): where the base run trains 4 designer
    # samples, they take the batch's first places and the last 4 agent samples are cut; without designer
    # training every agent sample stays
    assert [without_memory(t) for t in base.design_texts()] == ablated.design_texts()
    assert ablated.hint_chats() == base.hint_chats()
    trained_designer = [len(step) for step in base.samples("designer")]
    assert [len(step) for step in ablated.samples("agent")] == [16] * STEPS
    assert [a[:16 - d] for a, d in zip(ablated.samples("agent"), trained_designer)] == base.samples("agent")
    assert ablated.sets() == base.sets()
    batch_keys = ("designer_samples", "designer_weight", "trimmed_agent_samples", *DESIGNER_BATCH)
    assert drop(ablated.metrics(), *batch_keys) == drop(base.metrics(), *batch_keys)
    assert [m["trimmed_agent_samples"] for m in base.metrics()] == trained_designer


def test_two_skill_curriculum_designs_only_its_two_skills(play):
    base, ablated = play(), play({"selfplay": {"skills": TWO}})
    check_base_run(base)
    # (a) only the two skills are ever active, designed, played or remembered
    assert target_skills(base.design_texts())[8:] == ["spatial_reasoning"] * 2 + ["pattern_recognition"] * 2 + \
        ["optimization"] * 2 + ["causal_inference"] * 2  # the default rotates through all six
    assert set(target_skills(ablated.design_texts())) == set(TWO)
    assert target_skills(ablated.design_texts())[8:] == (TWO[:1] * 2 + TWO[1:] * 2) * 2
    assert all(row["skill"] in TWO for group in ablated.sets() for row in group)
    assert {r.skill for r in ablated.memory.records if r.step >= 0} == set(TWO)
    assert all(set(m["win_rate_by_skill"]) <= set(TWO) for m in ablated.metrics())
    # (b) the same slot count and sample counts at every step; round 0 (the same two skills in both runs)
    # is identical down to the token: prompts, environments, agent samples, designer rewards
    assert [len(group) for group in ablated.sets()] == [len(group) for group in base.sets()] == [4, 4, 4]
    assert [[len(s) for s in ablated.samples(r)] for r in ("agent", "designer")] == \
        [[len(s) for s in base.samples(r)] for r in ("agent", "designer")]
    assert ablated.design_texts()[:8] == base.design_texts()[:8]
    assert ablated.samples("agent")[:2] == base.samples("agent")[:2]
    assert ablated.sets()[0] == base.sets()[0]
    assert ablated.samples("designer")[2] == base.samples("designer")[2]  # set 0's designer samples, matured
    assert ablated.metrics()[:2] == base.metrics()[:2]


def learning_potential_by_hand(groups: list, g_fast: float, g_slow: float) -> tuple[list, dict, dict]:
    """Eqs. 4-6 from the logged window counts: per closed set, rho(e) = |mean R_A(e) - mu_slow(skill)| with
    mu_slow updated by this set's skill means first (a new skill starts at its mean); r_LP(e) = rho(e) -
    mean rho over the set's environments of the skill."""
    fast: dict = {}
    slow: dict = {}
    rewards = []
    for group in groups:
        returns = {row["env_id"]: window_rates(row)[1] for row in group}
        by_skill: dict = {}
        for row in group:
            by_skill.setdefault(row["skill"], []).append(returns[row["env_id"]])
        for skill, values in by_skill.items():
            mean = sum(values) / len(values)
            fast[skill] = (1 - g_fast) * fast[skill] + g_fast * mean if skill in fast else mean
            slow[skill] = (1 - g_slow) * slow[skill] + g_slow * mean if skill in slow else mean
        rho = {row["env_id"]: abs(returns[row["env_id"]] - slow[row["skill"]]) for row in group}
        mean_rho = {skill: sum(rho[r["env_id"]] for r in group if r["skill"] == skill) / len(values)
                    for skill, values in by_skill.items()}
        rewards.append([rho[row["env_id"]] - mean_rho[row["skill"]] for row in group])
    return rewards, fast, slow


def test_ema_learning_potential_replaces_only_the_designer_reward(play):
    """Compared on the 2-skill curriculum, where each skill's EMA is updated at both closes (steps 2, 4)."""
    reference, ablated = play({"selfplay": {"skills": TWO}}), play({"selfplay": {"skills": TWO},
                                                                      "designer": {"reward": "ema_lp"}})
    rcfg = ablated.config.reward
    assert (rcfg.ema_g_fast, rcfg.ema_g_slow) == (0.98, 0.85)  # schema defaults (reference code)
    closed = ablated.sets()[:2]
    expected, fast, slow = learning_potential_by_hand(closed, rcfg.ema_g_fast, rcfg.ema_g_slow)
    # (a) the designer reward of every environment is its learning potential (mean return, not win rate)
    assert all(row["return_sum"] == pytest.approx(window_rates(row)[1] * row["episodes"]) for g in closed for row in g)
    got = [[row["designer_reward"] for row in group] for group in closed]
    assert got == [pytest.approx(values, abs=1e-12) for values in expected]
    assert any(abs(v) > 1e-3 for values in expected for v in values)
    assert ablated.core.state.ema == {"fast": pytest.approx(fast), "slow": pytest.approx(slow)}
    assert [sum(values) for values in expected] == [pytest.approx(0.0, abs=1e-12)] * 2  # centred per skill
    regret_rewards = [[row["designer_reward"] for row in group] for group in reference.sets()[:2]]
    assert regret_rewards != got
    # the rewards reach the designer's advantages: same generations, other advantages
    assert ablated.designer_generations() == reference.designer_generations()
    assert [[s[2] for s in step] for step in ablated.samples("designer")] != \
        [[s[2] for s in step] for step in reference.samples("designer")]
    # (b) nothing else: agent samples and advantages, prompts, environments, windows, memory, metrics
    assert ablated.samples("agent") == reference.samples("agent")
    assert [[s[:2] + s[3:] for s in step] for step in ablated.samples("designer")] == \
        [[s[:2] + s[3:] for s in step] for step in reference.samples("designer")]
    assert ablated.design_texts() == reference.design_texts() and ablated.hint_chats() == reference.hint_chats()
    assert drop([row for g in ablated.sets() for row in g], "designer_reward") == \
        drop([row for g in reference.sets() for row in g], "designer_reward")
    assert ablated.memory.records == reference.memory.records
    assert drop(ablated.metrics(), "closed_mean_designer_reward", "designer_batch_nonzero") == \
        drop(reference.metrics(), "closed_mean_designer_reward", "designer_batch_nonzero")


def test_calibration_band_reward(play):
    base, ablated = play(), play({"designer": {"reward": "calibration"}})
    check_base_run(base)
    rcfg = ablated.config.reward
    closed = ablated.sets()[:2]
    # (a) +1 inside [band_low, band_high] = [0.4, 0.6] of window win rate, -0.25 outside, -1 per invalid candidate
    for group in closed:
        for row in group:
            rate = window_rates(row)[0]
            assert row["designer_reward"] == (1.0 if rcfg.band_low <= rate <= rcfg.band_high else -0.25), row
    rewards = {row["designer_reward"] for group in closed for row in group}
    assert rewards == {1.0, -0.25}
    # set 0's four unusable first attempts are designer samples now (reward -1); the paper's default
    # ('discard') drops them: 4 + 4 samples where the base run has 4
    assert [len(s) for s in ablated.samples("designer")] == [0, 0, 8, 0, 4]
    # designer advantages (spec 6): reward minus the mean over the set's samples of the same skill; set 0
    # has per skill its 2 valid environments and 2 invalid candidates (-1 each)
    rewards = [row["designer_reward"] for row in closed[0]] + [-1.0] * 4
    skills = [row["skill"] for row in closed[0]] * 2
    mean = {k: sum(r for r, s in zip(rewards, skills) if s == k) / 4 for k in set(skills)}
    assert [s[2] for s in ablated.samples("designer")[2]] == \
        [pytest.approx(r - mean[k], abs=1e-6) for r, k in zip(rewards, skills)]
    rewards = [row["designer_reward"] for row in closed[1]]
    mean = {row["skill"]: sum(r["designer_reward"] for r in closed[1] if r["skill"] == row["skill"]) / 2
            for row in closed[1]}
    assert [s[2] for s in ablated.samples("designer")[4]] == \
        [pytest.approx(r - mean[row["skill"]], abs=1e-6) for r, row in zip(rewards, closed[1])]
    # (b) nothing else; the 4 extra designer samples of step 2 take 4 more agent places of the global batch
    assert [a == b[:len(a)] and len(a) == 16 - d for a, b, d in
            zip(ablated.samples("agent"), base.samples("agent"), [0, 0, 8, 0, 4])] == [True] * STEPS
    assert ablated.design_texts() == base.design_texts() and ablated.hint_chats() == base.hint_chats()
    assert drop([row for g in ablated.sets() for row in g], "designer_reward") == \
        drop([row for g in base.sets() for row in g], "designer_reward")
    assert ablated.memory.records == base.memory.records
    batch_keys = ("closed_mean_designer_reward", "designer_samples", "designer_weight", "trimmed_agent_samples",
                  *DESIGNER_BATCH)
    assert drop(ablated.metrics(), *batch_keys) == drop(base.metrics(), *batch_keys)
    # min(16 agent plays / 8 designer samples x k 2, 50) = 4 at step 2, where the base run has 16 / 4 x 2 = 8
    assert [m["designer_weight"] for m in ablated.metrics()][2:] == [4.0, None, 8.0]
