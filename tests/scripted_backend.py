"""A scripted generation backend for benchmark tests: known replies in, known scores out.

``ScriptedBackend(tokenizer, reply)`` answers every prompt with ``reply(prompt_text, seed)``, where
``prompt_text`` is the decoded prompt (chat template included). Completion ids are the reply's tokens
plus eos, so token counts are real. It records every call for assertions. ``RoleBackend`` answers by SPADE role
(the tool-use LLM screen's verdict is yes unless a test scripts it);
``BudgetBackend`` too, and cuts a reply at ``max_new_tokens`` as a real backend does (finish_reason "length").
``TurnBackend(tokenizer, texts)`` answers the agent's turns with fixed texts, in order, and keeps every prompt's ids.
"""

from __future__ import annotations

from spade.inference.generation import Generation


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


class TurnBackend:
    """Answers every prompt with the next of ``texts`` (tokens: the text's, then eos; log-prob -0.5 each)."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts, self.prompts = tokenizer, list(texts), []

    def generate(self, prompts, params, seed):
        out = []
        for prompt in prompts:
            self.prompts.append(list(prompt))
            text = self.texts.pop(0)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            out.append(Generation(text, ids, [-0.5] * len(ids), "stop"))
        return out


def role_of(text: str) -> str:
    """Which SPADE role a decoded prompt is for: "screen" (the tool-use LLM screen), "design", "hint" or "agent"."""
    return ("screen" if "You audit tool-use environments" in text else
            "design" if "You are an environment designer" in text else
            "hint" if "write one short hint" in text else "agent")


class RoleBackend:
    """A stand-in model (no weights) that answers by role: ``design_text`` for the designer, a fixed hint,
    ``answer`` for the agent and ``screen`` for the tool-use LLM screen. Records (role, temperature, max_new_tokens)
    of every prompt in ``calls``."""

    def __init__(self, tokenizer, design_text: str, hint: str = "<hint>Count carefully.</hint>",
                 answer: str = "\\boxed{0}", screen: str = "Every criterion is reachable. \\boxed{yes}"):
        self.tokenizer = tokenizer
        self.replies = {"design": design_text, "hint": hint, "agent": answer, "screen": screen}
        self.calls: list = []
        self.truncation: list = []  # (role, top_p, top_k) of every prompt

    def generate(self, prompts, params, seed):
        out = []
        for prompt in prompts:
            role = role_of(self.tokenizer.decode(prompt))
            self.calls.append((role, params.temperature, params.max_new_tokens))
            self.truncation.append((role, params.top_p, params.top_k))
            ids = self.tokenizer(self.replies[role], add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            out.append(Generation(self.replies[role], ids, [-0.1] * len(ids), "stop"))
        return out

    def roles(self) -> list:
        return [role for role, _, _ in self.calls]

    def of(self, role: str) -> list:
        """(temperature, max_new_tokens) of every prompt of ``role``."""
        return [(t, n) for r, t, n in self.calls if r == role]


class BudgetBackend:
    """A stand-in model that answers by role (``role_of``) and keeps to ``max_new_tokens`` as a real backend does.

    ``replies[role]`` is a text, a callable ``prompt_text -> text``, or a list of texts answered in turn. A reply
    within the budget ends with eos (finish_reason "stop"); a longer one is cut to ``max_new_tokens`` tokens,
    without eos, with finish_reason "length" and its text decoded from the kept tokens."""

    def __init__(self, tokenizer, replies: dict):
        replies = {"screen": "\\boxed{yes}", **replies}  # the tool-use LLM screen passes unless a test scripts it
        self.tokenizer, self.replies = tokenizer, {role: list(r) if isinstance(r, list) else r
                                                   for role, r in replies.items()}

    def _reply(self, text: str) -> str:
        reply = self.replies[role_of(text)]
        if isinstance(reply, list):
            return reply.pop(0)
        return reply(text) if callable(reply) else reply

    def generate(self, prompts, params, seed):
        out = []
        for prompt in prompts:
            reply = self._reply(self.tokenizer.decode(prompt))
            ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"]
            if len(ids) > params.max_new_tokens:
                ids = ids[: params.max_new_tokens]
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                out.append(Generation(text, ids, [-0.1] * len(ids), "length"))
            else:
                ids = ids + [self.tokenizer.eos_token_id]
                out.append(Generation(reply, ids, [-0.1] * len(ids), "stop"))
        return out
