"""Toy-only reply prefixes (agent.response_prefix, designer.response_prefix): the prefix's tokens end every prompt
(never trained, loss mask 0) and its text opens the reply that the action parser or intake reads; rewards are the
environment's own."""

from __future__ import annotations

import pytest

from scripted_backend import ScriptedBackend, role_of
from spade.config import ConfigError, load_config
from spade.core.agent import AgentConfig, EpisodeJob, EpisodeRunner
from spade.envs.intake import intake
from spade.envs.library.registry import get_env
from spade.inference.generation import Generation

SYSTEM = {"game": "You play games.", "tool_use": "You use tools."}
BOX = "\\boxed{"


def _crt_answer(pool, seed: int) -> str:
    code = intake(get_env("crt_residue_puzzle").source())
    episode = pool.open(code.code, code.class_name, seed=seed, env_kwargs={"max_turns": 3})
    episode.reset(seed)
    answer = episode.solution().value.splitlines()[0]
    episode.close()
    return answer


def _play(pool, tokenizer, prefix: str, replies: list):
    backend = ScriptedBackend(tokenizer, lambda text, seed: replies.pop(0))
    config = AgentConfig(max_turns=2, max_new_tokens=16, max_context_tokens=4096, response_prefix=prefix)
    code = intake(get_env("crt_residue_puzzle").source())
    (record,) = EpisodeRunner(backend, pool, config, SYSTEM).run(
        [EpisodeJob("crt", code.code, code.class_name, "game", 7)], seed=0)
    return backend, record


def test_agent_prefix_opens_every_turn_untrained_and_reaches_the_parser(pool, tiny_model):
    """Two turns of one episode with prefix '\\boxed{': the model writes '1}' (wrong), then '<answer>}' (right). Each
    turn's prompt ends with the prefix's tokens, which are never trained; the parser reads prefix + reply, so the
    second turn wins. Without the prefix the same replies are no boxed answer and the episode is not won."""
    _, tokenizer = tiny_model
    answer = _crt_answer(pool, 7)
    replies = ["1}", answer + "}"]
    backend, record = _play(pool, tokenizer, BOX, list(replies))
    prefix_ids = tokenizer(BOX, add_special_tokens=False)["input_ids"]
    texts = [call[0][0] for call in backend.calls]
    assert len(texts) == 2 and all(text.endswith("<|im_start|>assistant\n" + BOX) for text in texts)
    assert record.won and record.final_return == 1.0 and record.turns == 2 and record.rewards == [0.0, 1.0]
    # the sequence: prompt + prefix (mask 0), reply 1 (mask 1), glue + observation + prompt + prefix (mask 0), reply 2
    reply_ids = [tokenizer(r, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for r in replies]
    sampled = [t for t, m in zip(record.token_ids, record.loss_mask) if m]
    assert sampled == reply_ids[0] + reply_ids[1] and record.generated_tokens == len(sampled)
    first_reply = record.loss_mask.index(1)
    assert record.token_ids[first_reply - len(prefix_ids):first_reply] == prefix_ids
    second_reply = len(record.token_ids) - len(reply_ids[1])
    assert record.loss_mask[second_reply - 1] == 0 and record.loss_mask[second_reply] == 1
    assert record.token_ids[second_reply - len(prefix_ids):second_reply] == prefix_ids
    # the second prompt is the episode so far, prefix included, token for token
    prompt_2 = tokenizer(texts[1], add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(record.token_ids[:second_reply]) == tokenizer.decode(prompt_2)
    # the mutation: the same replies without the prefix are not a boxed answer
    _, plain = _play(pool, tokenizer, "", list(replies))
    assert not plain.won and plain.final_return == 0.0


def _design_core(pool, tokenizer, prefix: str, design_reply: str):
    from spade.core.selfplay import SelfPlay
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.validate import Validator

    config = load_config(overrides={"model_card": "tiny-random", "designer": {"response_prefix": prefix},
                                    "selfplay": {"active_skills": 1, "envs_per_skill": 1, "design_attempts": 1},
                                    "corpus": {"enabled": False}})

    def reply(text: str, seed: int) -> str:
        return design_reply if role_of(text) == "design" else "<hint>Count.</hint>"

    backend = ScriptedBackend(tokenizer, reply)
    return SelfPlay(config, backend, Validator(pool), EnvironmentMemory(config.memory), None), backend


def test_designer_prefix_is_prompt_tokens_and_part_of_the_validated_code(pool, tiny_model):
    """The prefix opens the fence and writes the module's first import; the designer writes the rest (the knapsack
    environment without that import). Intake reads prefix + reply: valid, and the designer sample trains the reply
    only. Without the prefix the same reply lacks 'import itertools' and fails validation."""
    _, tokenizer = tiny_model
    source = get_env("knapsack_selection").source()
    assert "import itertools\n" in source
    prefix = "```python\nimport itertools\n"
    reply = source.replace("import itertools\n", "", 1) + "```\n"
    core, backend = _design_core(pool, tokenizer, prefix, reply)
    (slot,), invalid = core.design(0)
    assert slot.valid and not invalid and slot.code.startswith("import itertools\n")
    design_text = [text for text in backend.calls[0][0]]
    assert design_text[0].endswith("<|im_start|>assistant\n" + prefix)
    sample = slot.designer_sample
    prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"]
    first = sample["loss_mask"].index(1)
    assert sample["token_ids"][first - len(prefix_ids):first] == prefix_ids and not any(sample["loss_mask"][:first])
    assert sample["token_ids"][first:] == tokenizer(reply, add_special_tokens=False)["input_ids"] + [
        tokenizer.eos_token_id]
    # hints get no prefix
    core.write_hints([slot], 0)
    assert slot.hint == "Count." and not backend.calls[-1][0][0].endswith(prefix)
    # the mutation: without the prefix the reply is rejected (itertools undefined)
    plain, _ = _design_core(pool, tokenizer, "", reply)
    (plain_slot,), plain_invalid = plain.design(0)
    assert not plain_slot.valid and len(plain_invalid) == 1


def test_an_external_designer_refuses_a_designer_prefix_unless_our_server_opens_it():
    """An external model's chat API cannot be given an opened reply, so baseline.mode fixed_external_designer over
    external_base_url refuses designer.response_prefix; our own server (baseline.external_serve, spade serve-designer
    --reply-prefix) opens it, so there the prefix is allowed; a response_template is refused either way."""
    served = {"baseline": {"mode": "fixed_external_designer", "external_serve": "base_model", "pool_size": 4},
              "selfplay": {"train_designer": False}}
    remote = {"baseline": {"mode": "fixed_external_designer", "external_serve": "",
                           "external_base_url": "http://127.0.0.1:9/v1", "external_model": "m", "pool_size": 4},
              "selfplay": {"train_designer": False}}
    prefix = {"designer": {"response_prefix": "```python\n"}}
    load_config("configs/default.yaml", overrides=remote)  # fine without a prefix
    config = load_config("configs/default.yaml", overrides={**served, **prefix})
    assert config.designer.response_prefix == "```python\n"
    with pytest.raises(ConfigError, match="designer.response_prefix.*fixed_external_designer.*set designer"):
        load_config("configs/default.yaml", overrides={**remote, **prefix})
    with pytest.raises(ConfigError, match="designer.response_template.*fixed_external_designer.*set designer"):
        load_config("configs/default.yaml", overrides={**served, "designer": {"response_template": "copy_span"}})


def test_paper_configs_leave_the_prefixes_off():
    """Every paper run file keeps both prefixes at the paper's '' (the toy's configs/default.yaml alone sets them)."""
    from pathlib import Path

    paths = sorted(Path("configs/paper").glob("*.yaml"))
    assert len(paths) >= 20
    for path in paths:
        config = load_config(path)
        assert (config.agent.response_prefix, config.designer.response_prefix) == ("", ""), path


def test_agent_prefix_in_the_asynchronous_path_of_the_openrlhf_executor(pool, tiny_model):
    """``EpisodeRunner.run_one`` (what spade.rlhf.executor plays through) sends the same prompts, prefix included,
    and parses prefix + reply: the same two replies win there too."""
    import asyncio

    _, tokenizer = tiny_model
    replies = ["1}", _crt_answer(pool, 7) + "}"]
    backend = ScriptedBackend(tokenizer, lambda text, seed: replies.pop(0))
    config = AgentConfig(max_turns=2, max_new_tokens=16, max_context_tokens=4096, response_prefix=BOX)
    runner = EpisodeRunner(backend, pool, config, SYSTEM)
    code = intake(get_env("crt_residue_puzzle").source())

    async def agenerate(prompt_ids, params, seed):
        return backend.generate([prompt_ids], params, seed)[0]

    record = asyncio.run(runner.run_one(EpisodeJob("crt", code.code, code.class_name, "game", 7), agenerate))
    assert record.won and record.turns == 2
    assert all(call[0][0].endswith("<|im_start|>assistant\n" + BOX) for call in backend.calls)
