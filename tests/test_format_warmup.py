"""The learning check's base model (issue 30): the reply-format warm-up teaches the tiny random model to write two
letters of symbol_copy's alphabet, drawn without looking at the prompt, so the warmed-up model starts at chance on the
task (spade.inference.format_warmup)."""

from __future__ import annotations

import random

import pytest
import torch

from spade.config import load_config
from spade.configtools import ConfigError, from_dict, load_yaml
from spade.inference.format_warmup import FormatWarmup, draw_rows, letter_tokens
from spade.inference.models import ModelCard, build_tiny_tokenizer, load_model, prepare_model
from test_learning_check import load_module, symbol_copy

CARD_FILE = "configs/models/tiny-random-copy.yaml"


def card():
    return from_dict(ModelCard, load_yaml(CARD_FILE), "model")


def test_the_card_draws_symbol_copys_letters_and_prompts():
    warmup = card().format_warmup
    module = load_module("symbol_copy")
    assert (warmup.env, warmup.alphabet, warmup.reply_length) == ("symbol_copy", module["ALPHABET"], 2)
    assert warmup.prompt_style == "bare"


def test_the_replies_ignore_the_prompts():
    """The same generator state draws the same replies whatever the prompts show; the replies cover the alphabet
    about evenly."""
    tokens = {letter: 100 + i for i, letter in enumerate("BCDGHJKL")}
    shown = [[1, 2, tokens[a], tokens[b]] for a in "BCD" for b in "GHJ"]
    other = [[7, 7, tokens[a], tokens[b]] for a in "KL" for b in "BC"] * 2 + [[3]]
    first = draw_rows(random.Random(5), shown, tokens, 2, 2000)
    second = draw_rows(random.Random(5), other, tokens, 2, 2000)
    assert [reply for _, reply in first] == [reply for _, reply in second]
    counts = [sum(reply[0] == tokens[letter] for _, reply in first) for letter in tokens]
    assert min(counts) > 2000 / 8 * 0.8 and max(counts) < 2000 / 8 * 1.2

    def copies(rng, prompts, tokens, length, count):  # the mutation the check catches: replies that copy the prompt
        return [(prompt, prompt[-length:]) for prompt in (prompts[rng.randrange(len(prompts))] for _ in range(count))]
    assert [r for _, r in copies(random.Random(5), shown, tokens, 2, 50)] != \
        [r for _, r in copies(random.Random(5), other, tokens, 2, 50)]


def test_a_letter_that_is_not_one_token_is_refused():
    tokenizer = build_tiny_tokenizer(512)
    assert len(letter_tokens(tokenizer, "BCDGHJKL")) == 8
    with pytest.raises(ConfigError, match=r"'model.format_warmup.alphabet': character 'é' is 2 tokens"):
        letter_tokens(tokenizer, "Bé")


def test_the_card_and_the_runs_must_agree_on_the_prompt_style():
    with pytest.raises(ConfigError, match=r"agent.prompt_style.*'paper'.*tiny-random-copy.*'bare'"):
        load_config(overrides={"model_card": "tiny-random-copy"})
    config = load_config(overrides={"model_card": "tiny-random-copy", "agent": {"prompt_style": "bare"}})
    assert config.model.format_warmup.env == "symbol_copy"
    with pytest.raises(ValueError, match="format_warmup applies to source 'tiny-random' only"):
        ModelCard(format_warmup=FormatWarmup(env="symbol_copy", alphabet="BC"))


def replies(model, tokenizer, prompts, seed=0):
    """One two-token reply per prompt, sampled at temperature 1 (left padding, positions counted from each prompt's
    first token, as the episode runner's backend does)."""
    from spade.core.agent import ChatTokens

    chat = ChatTokens(tokenizer)
    rows = [chat.first_prompt([{"role": "user", "content": text}]) for text in prompts]
    width = max(map(len, rows))
    ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    generator = torch.Generator().manual_seed(seed)
    for _ in range(2):
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0)).logits
        token = torch.multinomial(torch.softmax(logits[:, -1].float(), -1), 1, generator=generator)
        ids, mask = torch.cat([ids, token], 1), torch.cat([mask, torch.ones_like(token)], 1)
    return ["".join(tokenizer.decode(row[width:]).split()).upper() for row in ids]


def test_the_warmed_up_model_writes_letters_at_chance(tmp_path, tiny_model):
    """After the warm-up, replies sampled at temperature 1 are two letters of the alphabet far more often than the plain
    random model's (measured: 0.14 against 0.004 of 256), and the held-out win rate stays near chance (1/64 for a
    prompt-blind reply): the format, not the task."""
    folder = prepare_model(card(), tmp_path / "copy")
    model, tokenizer = load_model(folder)
    alphabet = load_module("symbol_copy")["ALPHABET"]
    env = symbol_copy("heldout")
    shown = [env.reset(seed)[0] for seed in range(256)]
    answers = [text[-2:] for text in shown]
    warmed = replies(model, tokenizer, shown)
    plain = replies(*tiny_model, shown)

    def formatted(texts):
        return sum(len(t) == 2 and set(t) <= set(alphabet) for t in texts) / len(texts)
    assert formatted(warmed) > 0.08 and formatted(plain) < 0.02, (formatted(warmed), formatted(plain))
    assert sum(r == a for r, a in zip(warmed, answers)) / len(shown) < 0.08
