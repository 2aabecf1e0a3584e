"""A scripted generation backend for benchmark tests: known replies in, known scores out.

``ScriptedBackend(tokenizer, reply)`` answers every prompt with ``reply(prompt_text, seed)``, where
``prompt_text`` is the decoded prompt (chat template included). Completion ids are the reply's tokens
plus eos, so token counts are real. It records every call for assertions.
"""

from __future__ import annotations

from spade.generation import Generation


class ScriptedBackend:
    def __init__(self, tokenizer, reply):
        self.tokenizer = tokenizer
        self.reply = reply
        self.calls: list = []  # (prompt texts, params, seeds) per call

    def generate(self, prompts, params, seed):
        seeds = list(seed) if not isinstance(seed, int) else [seed] * len(prompts)
        texts = [self.tokenizer.decode(p) for p in prompts]
        self.calls.append((texts, params, seeds))
        out = []
        for text, row_seed in zip(texts, seeds):
            reply = self.reply(text, row_seed)
            ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"][: params.max_new_tokens]
            out.append(Generation(text=reply, completion_ids=ids + [self.tokenizer.eos_token_id],
                                  logprobs=[0.0] * (len(ids) + 1)))
        return out
