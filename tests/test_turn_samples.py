"""agent.turn_samples: one token sequence per episode, or one sample per turn on re-rendered prompts (the reference's
thinking actor), under a chat template that drops the <think> blocks of turns before the last user message (Qwen3)."""

from __future__ import annotations

import copy

import pytest

from spade.config import load_config
from spade.core.agent import AgentConfig, EpisodeJob, EpisodeRunner
from spade.core.selfplay import Sample, SelfPlay, fan_out
from scripted_backend import TurnBackend

# Qwen3-style, written here (no Qwen3 tokenizer is installed): an assistant turn before the last user message loses
# everything up to its </think>; the last one keeps its thinking
STRIPPING = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for m in messages -%}{%- set content = m.content -%}"
    "{%- if m.role == 'assistant' and loop.index0 < ns.last_user and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip() -%}{%- endif -%}"
    "{{ '<|im_start|>' + m.role + '\\n' + content + EOS + '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)
COUNTER = '''
class Counter:
    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.turn = 0
        return "Say a number.", {}

    def step(self, action):
        self.turn += 1
        won = action.strip() == "\\\\boxed{3}"
        return f"Observation {self.turn}.", float(won), won, self.turn >= self.max_turns, {}
'''
REPLIES = ["<think>first idea</think>\\boxed{1}", "<think>second idea</think>\\boxed{2}", "\\boxed{3}"]


@pytest.fixture
def stripping(tiny_model):
    tokenizer = copy.deepcopy(tiny_model[1])
    tokenizer.chat_template = STRIPPING.replace("EOS", repr(tokenizer.eos_token))
    return tokenizer


def _play(pool, tokenizer, mode):
    backend = TurnBackend(tokenizer, REPLIES)
    config = AgentConfig(max_turns=3, max_new_tokens=32, max_context_tokens=4096, turn_samples=mode)
    runner = EpisodeRunner(backend, pool, config, {"game": [{"role": "system", "content": "Play."}]})
    (record,) = runner.run([EpisodeJob("c", COUNTER, "Counter", "game", 0)], seed=0)
    return record, backend


def test_per_turn_prompts_are_the_templates_rendering_without_earlier_thinking(pool, stripping):
    record, backend = _play(pool, stripping, "per_turn")
    assert record.won and record.turns == 3 and len(record.turn_records) == 3
    second = stripping.decode(backend.prompts[1])
    assert "first idea" not in second and "\\boxed{1}" in second  # the template dropped the earlier thinking
    messages = [{"role": "system", "content": "Play."}, {"role": "user", "content": "Say a number."},
                {"role": "assistant", "content": REPLIES[0]}, {"role": "user", "content": "Observation 1."}]
    assert backend.prompts[1] == stripping(stripping.apply_chat_template(messages, tokenize=False,
                                                                         add_generation_prompt=True),
                                           add_special_tokens=False)["input_ids"]
    for turn, prompt in zip(record.turn_records, backend.prompts):
        assert turn["prompt_ids"] == prompt and turn["output_ids"][-1] == stripping.eos_token_id
        assert turn["logprobs"] == [-0.5] * len(turn["output_ids"])
    last = record.turn_records[-1]  # the record's own sequence is the last turn's prompt and reply
    assert record.token_ids == last["prompt_ids"] + last["output_ids"]
    assert sum(record.loss_mask) == len(last["output_ids"])


def test_one_sequence_per_episode_keeps_the_sampled_thinking(pool, stripping):
    """'episode': the template re-renders the earlier turn without its thinking once an observation follows, so
    the continuation is taken from the end-of-turn token before the observation; the sequence keeps the reply
    exactly as sampled (it held 'first idea')."""
    record, backend = _play(pool, stripping, "episode")
    assert record.won and record.turn_records == []
    text = stripping.decode(record.token_ids)
    assert "first idea" in text and "second idea" in text
    assert backend.prompts[1] == record.token_ids[:len(backend.prompts[1])]  # one growing sequence
    sampled = [t for t, m in zip(record.token_ids, record.loss_mask) if m]
    assert sampled == [t for reply in REPLIES
                       for t in stripping(reply, add_special_tokens=False)["input_ids"] + [stripping.eos_token_id]]


def test_fan_out_turns_one_episode_into_one_sample_per_turn(pool, stripping):
    import types

    record, _ = _play(pool, stripping, "per_turn")
    config = load_config(overrides={"agent": {"turn_samples": "per_turn"}})
    episode = SelfPlay.agent_sample(types.SimpleNamespace(config=config), record, 0.75)
    designer = Sample("designer", [1, 2], [0, 1], [0.0, -1.0], 0.5, 32.0, True)
    samples = fan_out([designer, episode])
    assert samples[0] is designer and len(samples) == 4
    for sample, turn in zip(samples[1:], record.turn_records):
        assert sample.token_ids == turn["prompt_ids"] + turn["output_ids"] and sample.advantage == 0.75
        assert sample.loss_mask == [0] * len(turn["prompt_ids"]) + [1] * len(turn["output_ids"])
        assert sample.rollout_logprobs == [0.0] * len(turn["prompt_ids"]) + turn["logprobs"]


def test_a_fanned_out_rollout_is_still_one_optimizer_step(tiny_model):
    from spade.train.trainer import LocalTrainer

    model, tokenizer = tiny_model
    config = load_config(overrides={"model_card": "tiny-random", "train": {"global_batch": 2, "micro_batch": 2}})
    samples = [Sample("agent", [1, 2, 3], [0, 1, 1], [0.0, -1.0, -1.0], a) for a in (1.0, -1.0, 0.5, -0.5)]
    trainer = LocalTrainer(config, copy.deepcopy(model), tokenizer.pad_token_id or 0)
    assert trainer.update(samples, one_step=True)["optimizer_steps"] == 1
    assert trainer.update(samples)["optimizer_steps"] == 2


def test_openrlhf_refuses_per_turn_samples(tmp_path):
    from spade.configtools import ConfigError
    from spade.rlhf.command import openrlhf_command

    config = load_config(overrides={"agent": {"turn_samples": "per_turn"}, "corpus": {"enabled": False}})
    with pytest.raises(ConfigError, match="'agent.turn_samples' is 'per_turn'.*allowed with --backend openrlhf"):
        openrlhf_command(config, tmp_path / "run", tmp_path / "model")


@pytest.mark.parametrize("replies", [["\\boxed{1}", "\\boxed{2}", "\\boxed{3}"], REPLIES])
def test_the_real_qwen3_template_in_both_modes(pool, tiny_model, replies):
    """The hybrid Qwen3 template (as bfcl-eval quotes it) re-renders an earlier assistant turn once a user message
    follows (an empty think block is dropped, a full one too): 'episode' continues from the end-of-turn token before
    the observation (before issue 32 it stopped: 'not a prefix'); 'per_turn' prompts are the template's own."""
    from test_tool_calls import qwen3_template

    tokenizer = copy.deepcopy(tiny_model[1])
    tokenizer.chat_template = qwen3_template()
    for mode in ("episode", "per_turn"):
        backend = TurnBackend(tokenizer, replies)
        config = AgentConfig(max_turns=3, max_new_tokens=32, max_context_tokens=4096, turn_samples=mode)
        runner = EpisodeRunner(backend, pool, config, {"game": []})
        (record,) = runner.run([EpisodeJob("c", COUNTER, "Counter", "game", 0)], seed=0)
        assert record.won and record.turns == 3, mode
        messages = [{"role": "user", "content": "Say a number."}]
        for turn, reply in enumerate(replies[:2], start=1):
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"Observation {turn}."}]
            canonical = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                                  add_special_tokens=False)["input_ids"]
            if mode == "per_turn":
                assert backend.prompts[turn] == canonical
            else:  # the sequence ends with the template's own text for the new observation and generation prompt
                suffix = tokenizer(f"\n<|im_start|>user\nObservation {turn}.<|im_end|>\n<|im_start|>assistant\n",
                                   add_special_tokens=False)["input_ids"]
                assert backend.prompts[turn][-len(suffix):] == suffix
