"""Generation backends behind one interface: token-id prompts in, sampled tokens and log-probs out.

The self-play core never calls a model directly. It renders chats to token ids itself (so multi-turn
episodes are one exact token sequence) and hands a batch of prompts to a ``GenerationBackend``:

- ``HFBackend`` (``spade.inference.generation_hf``): Hugging Face ``transformers`` batched sampling on a CPU or
  one GPU; it shares its model object with the local trainer, so weights are always in sync.
- a vLLM engine (GPU issue) implements the same two methods.

Log-probs are those of the sampled token under the *sampling* distribution: logits divided by the
temperature, then log-softmax (top-p/top-k truncation is not applied to the reported value). The
trainer computes its own log-probs the same way, so the ratio pi_theta / pi_rollout is consistent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol, Sequence

from spade.configtools import option


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = option(0.6, "Sampling temperature (paper: 0.6 for both roles).", min=0.0)
    top_p: float = option(1.0, "Nucleus sampling mass; 1.0 disables it.", min=0.0)
    max_new_tokens: int = option(256, "Most tokens generated per call (paper: ED 16,384, RA 8,192).", min=1)
    min_new_tokens: int = option(0, "Tokens sampled before an eos may end the reply (vLLM's min_tokens; OpenRLHF's "
                                    "rollouts ask for 1). The eos is then masked out of the reported log-probs too.",
                                 min=0)
    top_k: int = option(0, "Sample among the k most likely tokens only; 0 = off. Like top_p, it shapes the draws, not "
                           "the reported log-probs.", min=0)
    timeout_s: float = option(0.0, "Wall-clock seconds a request may take, counted from the generate call; 0 = no "
                                   "limit. A request past it comes back with finish_reason 'timeout' and no tokens "
                                   "(the reference's asyncio.wait_for on hint and screen calls). Backends that cannot "
                                   "stop a request refuse it.", min=0.0)


@dataclass
class Generation:
    """One sampled completion."""

    text: str  # decoded completion, special tokens removed
    completion_ids: list = field(default_factory=list)  # [C] sampled token ids, including a final eos
    logprobs: list = field(default_factory=list)  # [C] log-prob of each sampled token (see module doc)
    finish_reason: str = "stop"  # "stop" (eos), "length" (max_new_tokens reached) or "timeout" (params.timeout_s)


def timed_out() -> Generation:
    """What a request past its ``timeout_s`` returns: no text, no tokens, finish_reason 'timeout'."""
    return Generation(text="", completion_ids=[], logprobs=[], finish_reason="timeout")


def cut_to_limit(generation: Generation, limit: int, tokenizer) -> Generation:
    """``generation`` cut to at most ``limit`` tokens (text re-decoded), for a row whose own budget is smaller
    than the batch's ``max_new_tokens``; unchanged when it already fits."""
    if len(generation.completion_ids) <= limit:
        return generation
    ids = generation.completion_ids[:limit]
    return replace(generation, text=tokenizer.decode(ids, skip_special_tokens=True), completion_ids=ids,
                   logprobs=generation.logprobs[:limit], finish_reason="length")


def generation_stats(results: Sequence[Generation], seconds: float) -> dict:
    """A backend's ``last_stats`` after one ``generate`` call: prompts, new tokens, seconds, tokens per second."""
    new_tokens = sum(len(g.completion_ids) for g in results)
    return {"prompts": len(results), "new_tokens": new_tokens, "seconds": seconds,
            "tokens_per_s": new_tokens / seconds if seconds > 0 else float("nan")}


class GenerationBackend(Protocol):
    """What the self-play core needs from an inference engine."""

    tokenizer: object  # a transformers tokenizer with a chat template

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 seed: int | Sequence[int]) -> list[Generation]:
        """Sample one completion per prompt (token ids), reproducibly for a given ``seed``.

        ``seed`` is one int for the whole call, or a list with one seed per prompt; with a list, each
        prompt's sample depends only on its own seed (evaluation relies on this).
        """
        ...
