"""The reply-format warm-up of the learning check's base model (issue 30; model card tiny-random-copy).

Why it exists: GRPO from a randomly initialised tiny model never learned ``symbol_copy`` (spade.envs.checks). The
random model's replies are almost never two letters of the alphabet. The first rewards it earns come from its
merged-letter tokens ("ck", "ll"), and the policy settles on one reply for every prompt. Once it does, every sample
of a prompt is the same, so the gradient vanishes. This was measured with the same GRPO update, lr 3e-4 to 3e-2,
batches of 64 to 256, up to 400 steps (issue 30 notes). A real RL run starts from a model that already writes its
answers in the asked format. This warm-up gives the tiny model that format and nothing else.

What it teaches: cross-entropy on the environment's own training prompts (rendered as the agent sees them: the chat
template, ``prompt_style``), each followed by ``reply_length`` characters drawn uniformly from ``alphabet``. The
draw ignores the prompt, so the best the model can learn is to write a random pair of letters. It learns nothing
of which pair a prompt asks for. tests/test_format_warmup.py checks that the warmed-up model's held-out win rate
stays at chance. The prompts come from the environment inside the sandbox (its ``reset``), like every episode's.
"""

from __future__ import annotations

import ast
import logging
import random
from dataclasses import dataclass

from spade.configtools import ConfigError, option
from spade.designer.prompts import AGENT_PROMPT_STYLES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FormatWarmup:
    env: str = option("", "Learning-check environment (spade.envs.checks) whose training prompts the warm-up shows; "
                      "'' = no warm-up (the plain random model). Source 'tiny-random' only.")
    alphabet: str = option("", "Characters each reply is drawn from, uniformly and without looking at the prompt "
                           "(symbol_copy: its ALPHABET). Each must be one token of the tiny tokenizer.")
    reply_length: int = option(2, "Characters per reply (symbol_copy: 2, one token each).", min=1)
    steps: int = option(30, "Optimizer steps. After 30 at lr 1e-3, 1 in 7 replies sampled at temperature 1 is two "
                        "letters of the alphabet (the plain random model: 1 in 256), enough for GRPO to take over.",
                        min=1)
    batch_size: int = option(64, "Prompts per step.", min=1)
    learning_rate: float = option(1.0e-3, "AdamW learning rate (betas 0.9/0.98, weight decay 0.1, as train.*).",
                                  min=0.0)
    prompts: int = option(256, "Seeds of the environment's training split whose first observations are the warm-up's "
                          "prompts (symbol_copy shows 32 distinct ones).", min=1)
    prompt_style: str = option("bare", "How each prompt starts, as agent.prompt_style of the runs on this card "
                               "(config validation keeps the two equal).", choices=AGENT_PROMPT_STYLES)
    design_alphabet: str = option("", "The mechanism run's designer warm-up (issue 39): characters the design reply "
                                  "is taught to write, uniformly and whatever the prompt says (the loss is the "
                                  "cross-entropy to the uniform distribution over them; copy_span: the NEED "
                                  "digits). Needs an env with a template (spade.envs.checks TEMPLATE_MARKERS): the "
                                  "design prompts end with its template, as designer.response_template renders them, "
                                  "and the agent's prompts are the template completed with each of these characters. "
                                  "'' = no designer warm-up.")
    design_skills: tuple = option(("pattern_recognition",), "Game skills whose design prompts (no document, no "
                                  "memory, flavour 'game') the designer warm-up shows; the runs on this card must "
                                  "design for these only (checked when a config loads).")


def training_codes(warmup: FormatWarmup) -> list:
    """The environment modules whose observations the agent's warm-up prompts are: ``warmup.env``'s file, or with a
    designer warm-up its template completed with each character of ``design_alphabet`` (every difficulty the
    designer may write)."""
    from spade.envs.checks import check_source, template_source

    if not warmup.design_alphabet:
        return [check_source(warmup.env, "model.format_warmup.env")]
    opening = template_source(warmup.env, "model.format_warmup.env")
    return [opening + char + "\n" for char in warmup.design_alphabet]


def training_observations(warmup: FormatWarmup) -> list:
    """First observations of ``warmup.env``'s training split for seeds 0 .. prompts-1 (of each module of
    ``training_codes``), from the sandbox."""
    from spade.analysis.code_stats import environment_class
    from spade.sandbox.config import SandboxConfig
    from spade.sandbox.pool import SandboxPool

    observations = []
    with SandboxPool(SandboxConfig(workers=1)) as pool:
        for code in training_codes(warmup):
            class_name = environment_class(ast.parse(code)).name
            with pool.open(code, class_name, 0, {"max_turns": 1}) as episode:
                if not episode.opened.ok:
                    raise RuntimeError(f"format warm-up: {warmup.env} did not open in the sandbox: "
                                       f"{episode.opened.describe()}")
                for seed in range(warmup.prompts):
                    outcome = episode.reset(seed)
                    if not outcome.ok:
                        raise RuntimeError(f"format warm-up: {warmup.env}.reset({seed}) failed: {outcome.describe()}")
                    observations.append(outcome.value[0])
    return observations


def design_prompts(tokenizer, warmup: FormatWarmup) -> list:
    """The design prompts of the designer warm-up, token ids as ``SelfPlay`` renders them under
    ``designer.response_template``: one per skill of ``design_skills`` (flavour 'game', no document, no memory), each
    ending with the template's tokens."""
    from spade.core.agent import ChatTokens
    from spade.designer.prompts import design_prompt
    from spade.envs.checks import template_source

    chat = ChatTokens(tokenizer)
    opening = chat.encode(template_source(warmup.env, "model.format_warmup.env"))
    return [chat.first_prompt(design_prompt("game", skill, None, [], None)) + opening for skill in warmup.design_skills]


def letter_tokens(tokenizer, alphabet: str, key: str = "alphabet") -> dict:
    """Each character of ``alphabet`` (config key ``model.format_warmup.<key>``) -> its single token id; a character
    that is not one token is refused."""
    ids = {}
    for char in alphabet:
        encoded = tokenizer(char, add_special_tokens=False)["input_ids"]
        if len(encoded) != 1:
            raise ConfigError(f"config key 'model.format_warmup.{key}': character {char!r} is {len(encoded)} "
                              f"tokens of this tokenizer, not 1; use characters the tokenizer keeps whole")
        ids[char] = encoded[0]
    return ids


def draw_rows(rng: random.Random, prompts: list, tokens: dict, reply_length: int, count: int) -> list:
    """``count`` (prompt ids, reply ids) rows: a prompt drawn from ``prompts`` and a reply of ``reply_length``
    tokens drawn uniformly from ``tokens`` (character -> id). The reply draws never read the prompt, so the same
    ``rng`` state gives the same replies whatever the prompts say."""
    letters = sorted(tokens)
    rows = []
    for _ in range(count):
        reply = [tokens[rng.choice(letters)] for _ in range(reply_length)]
        rows.append((prompts[rng.randrange(len(prompts))], reply))
    return rows


def _reply_loss(model, rows: list, pad: int, device):
    """Mean cross-entropy of the reply tokens of ``rows`` ((prompt ids, reply ids), left padded into one batch)."""
    import torch

    width = max(len(p) + len(r) for p, r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)  # [B, T], left padded
    mask = torch.zeros_like(ids)  # [B, T]
    labels = torch.full_like(ids, -100)  # [B, T]: the reply tokens only
    for row, (prompt, reply) in enumerate(rows):
        sequence = torch.tensor(prompt + reply)
        ids[row, width - len(sequence):] = sequence
        mask[row, width - len(sequence):] = 1
        labels[row, width - len(reply):] = torch.tensor(reply)
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    return model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                 labels=labels.to(device)).loss


def _uniform_reply_loss(model, prompts: list, targets: list, device):
    """Mean over ``prompts`` of the cross-entropy between the next-token distribution after each prompt and the
    uniform distribution over ``targets`` (token ids): the expected loss of a reply drawn uniformly from them, without
    drawing (each distinct design prompt once; they are the same in every step, so a drawn batch would only add
    noise). Each prompt is a forward pass of its own, unpadded."""
    import torch

    losses = []
    for prompt in prompts:
        logits = model(input_ids=torch.tensor([prompt], device=device)).logits[0, -1]  # [V]
        losses.append(-torch.log_softmax(logits.float(), dim=-1)[targets].mean())
    return torch.stack(losses).mean()


def warm_up(model, tokenizer, warmup: FormatWarmup, seed: int) -> dict:
    """Train ``model`` (in place, on its device) on prompt-blind replies; returns provenance details."""
    import torch
    from tqdm import tqdm

    from spade.core.agent import ChatTokens
    from spade.designer.prompts import agent_prompt
    from spade.seeding import derive_seed

    if not warmup.alphabet:
        raise ConfigError("config key 'model.format_warmup.alphabet' is empty; give the characters replies are "
                          "drawn from (symbol_copy: its ALPHABET)")
    tokens = letter_tokens(tokenizer, warmup.alphabet)
    chat = ChatTokens(tokenizer)
    opening = agent_prompt("game", warmup.prompt_style)
    prompts = [chat.first_prompt(opening + [{"role": "user", "content": text}])
               for text in training_observations(warmup)]
    designing = bool(warmup.design_alphabet)
    if designing:
        design_tokens, designs = letter_tokens(tokenizer, warmup.design_alphabet, "design_alphabet"), \
            design_prompts(tokenizer, warmup)
    rng = random.Random(derive_seed(seed, "format_warmup"))
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=warmup.learning_rate, betas=(0.9, 0.98), weight_decay=0.1)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    losses, design_losses = [], []
    model.train()
    for _ in tqdm(range(warmup.steps), desc="format warm-up", mininterval=5):
        optimizer.zero_grad(set_to_none=True)
        loss = _reply_loss(model, draw_rows(rng, prompts, tokens, warmup.reply_length, warmup.batch_size), pad, device)
        loss.backward()
        losses.append(float(loss.detach()))
        if designing:  # the designer's part of the step's loss, a forward pass of its own: padded together with the
            # agent's short rows, every row would be as long as a design prompt
            loss = _uniform_reply_loss(model, designs, sorted(design_tokens.values()), device)
            loss.backward()
            design_losses.append(float(loss.detach()))
        optimizer.step()
    model.eval()
    log.info("format warm-up on %s: %d steps, loss %.3f -> %.3f", warmup.env, warmup.steps, losses[0], losses[-1])
    return {"format_warmup": {"env": warmup.env, "distinct_prompts": len(set(map(tuple, prompts))),
                              "design_prompts": len(designs) if designing else 0,
                              "design_loss": [design_losses[0], design_losses[-1]] if designing else None,
                              "first_loss": losses[0], "last_loss": losses[-1]}}
