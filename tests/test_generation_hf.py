"""HFBackend on the tiny random model: reproducibility, batching, eos handling, log-probs, train mode."""

from __future__ import annotations

import pytest
import torch

from spade.inference.generation import Generation, SamplingParams
from spade.inference.generation_hf import HFBackend, batch_seed
from spade.inference.models import TINY_RANDOM, chat_prompt_ids, load_model, prepare_model

QUESTIONS = [
    "What is 2+3?",
    "Guess a digit between 0 and 9 and answer as \\boxed{d}.",
    "Hi",
    'Call a tool: {"name": "list_files", "arguments": {"path": "/home/user"}} and tell me what you find.',
    "Solve for x: 3x + 4 = 19.",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = prepare_model(TINY_RANDOM, tmp_path_factory.mktemp("models") / "tiny")
    return load_model(folder)


@pytest.fixture(scope="module")
def prompts(tiny):
    _, tokenizer = tiny
    return [chat_prompt_ids(tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS]


GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)
SAMPLED = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=12)


def forward_logprobs(model, prompt: list[int], completion: list[int], temperature: float) -> torch.Tensor:
    """log_softmax(logits / T) of each completion token, from one forward pass over prompt + completion."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
    if temperature > 0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def test_shapes_and_types(tiny, prompts):
    model, tokenizer = tiny
    out = HFBackend(model, tokenizer).generate(prompts, SAMPLED, seed=0)
    assert len(out) == len(prompts) and all(isinstance(g, Generation) for g in out)
    for g in out:
        assert len(g.completion_ids) == len(g.logprobs) <= SAMPLED.max_new_tokens
        assert all(isinstance(i, int) for i in g.completion_ids)
        assert all(lp <= 0 for lp in g.logprobs)
        assert g.finish_reason in ("stop", "length")
        assert g.text == tokenizer.decode(g.completion_ids, skip_special_tokens=True)


def test_same_seed_same_samples(tiny, prompts):
    model, tokenizer = tiny
    backend = HFBackend(model, tokenizer, batch_size=2)
    first = backend.generate(prompts, SAMPLED, seed=7)
    second = backend.generate(prompts, SAMPLED, seed=7)
    other = backend.generate(prompts, SAMPLED, seed=8)
    assert [g.completion_ids for g in first] == [g.completion_ids for g in second]
    assert [g.logprobs for g in first] == [g.logprobs for g in second]
    assert [g.completion_ids for g in first] != [g.completion_ids for g in other]


def test_global_rng_left_alone(tiny, prompts):
    model, tokenizer = tiny
    state = torch.get_rng_state()
    HFBackend(model, tokenizer).generate(prompts[:2], SAMPLED, seed=3)
    assert torch.equal(torch.get_rng_state(), state)


def test_batch_seeds_differ():
    assert len({batch_seed(s, b) for s in range(4) for b in range(4)}) == 16
    assert all(0 <= batch_seed(s, 0) < 2**63 for s in (0, -1, 2**70))


def test_greedy_batching_equals_one_by_one(tiny, prompts):
    model, tokenizer = tiny
    batched = HFBackend(model, tokenizer, batch_size=16).generate(prompts, GREEDY, seed=0)
    single = [HFBackend(model, tokenizer, batch_size=1).generate([p], GREEDY, seed=123)[0] for p in prompts]
    for a, b in zip(batched, single):
        assert a.completion_ids == b.completion_ids
        assert a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_results_follow_input_order(tiny, prompts):
    model, tokenizer = tiny
    backend = HFBackend(model, tokenizer, batch_size=2)
    forward = backend.generate(prompts, GREEDY, seed=0)
    backward = backend.generate(prompts[::-1], GREEDY, seed=0)
    assert [g.completion_ids for g in forward] == [g.completion_ids for g in backward[::-1]]
    assert backend.last_stats["prompts"] == len(prompts)
    assert backend.last_stats["new_tokens"] == sum(len(g.completion_ids) for g in backward)


def test_length_finish(tiny, prompts):
    model, tokenizer = tiny
    # The random model practically never emits <|im_end|> (p ~ 1/512 per token) within 5 tokens.
    out = HFBackend(model, tokenizer).generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=5), seed=0)
    assert all(g.finish_reason == "length" and len(g.completion_ids) == 5 for g in out)


def test_eos_cut_keeps_the_eos_token(tiny, prompts):
    model, tokenizer = tiny
    reference = HFBackend(model, tokenizer).generate(prompts, GREEDY, seed=0)
    # Declare a token the model emits greedily at position 3 of the first reply to be the stop token.
    stop_token = reference[0].completion_ids[3]
    backend = HFBackend(model, tokenizer, eos_token_id=[stop_token, tokenizer.eos_token_id])
    cut = backend.generate(prompts, GREEDY, seed=0)
    for full, short in zip(reference, cut):
        if stop_token in full.completion_ids:
            k = full.completion_ids.index(stop_token)
            assert short.finish_reason == "stop"
            assert short.completion_ids == full.completion_ids[:k + 1]
            assert short.completion_ids[-1] == stop_token
            assert short.logprobs == pytest.approx(full.logprobs[:k + 1], abs=1e-4)
        else:
            assert short.completion_ids == full.completion_ids and short.finish_reason == "length"
    assert cut[0].finish_reason == "stop" and len(cut[0].completion_ids) <= 4


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "T0.8-top_p0.95"])
def test_min_new_tokens_masks_the_eos_in_samples_and_logprobs(tiny, prompts, params):
    model, tokenizer = tiny
    first = [g.completion_ids[0] for g in HFBackend(model, tokenizer).generate(prompts, GREEDY, seed=0)]
    # each prompt's greedy first token declared the stop token: without min_new_tokens every greedy reply is it alone
    for prompt, token in zip(prompts, first):
        backend = HFBackend(model, tokenizer, eos_token_id=[token])
        plain = backend.generate([prompt], GREEDY, seed=0)[0]
        assert plain.completion_ids == [token] and plain.finish_reason == "stop"
        (kept,) = backend.generate([prompt], SamplingParams(params.temperature, params.top_p, 6, min_new_tokens=2),
                                   seed=[3])
        assert token not in kept.completion_ids[:2] and len(kept.completion_ids) >= 2
        expected = forward_logprobs(model, prompt, kept.completion_ids, params.temperature)
        ids = torch.tensor([prompt + kept.completion_ids[:1]])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, -2:].float()  # the positions of completion tokens 0 and 1
        logits[:, token] = float("-inf")
        if params.temperature > 0:
            logits = logits / params.temperature
        masked = torch.log_softmax(logits, -1).gather(1, torch.tensor(kept.completion_ids[:2])[:, None]).squeeze(1)
        assert torch.allclose(torch.tensor(kept.logprobs[:2]), masked, atol=1e-4)
        assert torch.allclose(torch.tensor(kept.logprobs[2:]), expected[2:], atol=1e-4)
        assert not torch.allclose(masked, expected[:2], atol=1e-4)  # the mask changed what is reported


@pytest.mark.parametrize("params", [SAMPLED, GREEDY, SamplingParams(temperature=1.3, top_p=1.0, max_new_tokens=10)],
                         ids=["T0.8-top_p0.95", "greedy", "T1.3"])
def test_logprobs_match_forward_pass(tiny, prompts, params):
    model, tokenizer = tiny
    out = HFBackend(model, tokenizer, batch_size=3).generate(prompts, params, seed=11)
    for prompt, g in zip(prompts, out):
        expected = forward_logprobs(model, prompt, g.completion_ids, params.temperature)
        assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4), (g.logprobs, expected.tolist())


def test_greedy_picks_argmax(tiny, prompts):
    model, tokenizer = tiny
    g = HFBackend(model, tokenizer).generate(prompts[:1], GREEDY, seed=0)[0]
    ids = torch.tensor([prompts[0] + g.completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompts[0]) - 1:-1]
    assert logits.argmax(-1).tolist() == g.completion_ids


def test_tiny_top_p_is_greedy(tiny, prompts):
    model, tokenizer = tiny
    backend = HFBackend(model, tokenizer)
    greedy = backend.generate(prompts, GREEDY, seed=0)
    nucleus = backend.generate(prompts, SamplingParams(temperature=1.0, top_p=1e-6, max_new_tokens=12), seed=5)
    assert [g.completion_ids for g in greedy] == [g.completion_ids for g in nucleus]


def test_restores_train_mode(tiny, prompts):
    model, tokenizer = tiny
    seen = []
    hook = model.register_forward_pre_hook(lambda module, args: seen.append(module.training))
    try:
        model.train()
        model.model.layers[0].eval()  # a mixed state must come back exactly
        HFBackend(model, tokenizer).generate(prompts[:2], SamplingParams(max_new_tokens=3), seed=0)
        assert seen and not any(seen)  # eval mode while generating
        assert model.training and model.model.training and not model.model.layers[0].training
        assert model.model.layers[1].training
        model.eval()
        HFBackend(model, tokenizer).generate(prompts[:1], SamplingParams(max_new_tokens=2), seed=0)
        assert not any(m.training for m in model.modules())
    finally:
        hook.remove()
        model.eval()


def test_generation_config_restored_and_no_grad(tiny, prompts):
    model, tokenizer = tiny
    config = model.generation_config
    out = HFBackend(model, tokenizer).generate(prompts[:1], SamplingParams(max_new_tokens=2), seed=0)
    assert model.generation_config is config
    assert all(p.grad is None for p in model.parameters())
    assert len(out[0].completion_ids) == 2


def test_bad_inputs(tiny, prompts):
    model, tokenizer = tiny
    backend = HFBackend(model, tokenizer)
    assert backend.generate([], GREEDY, seed=0) == []
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        backend.generate([prompts[0], []], GREEDY, seed=0)
    with pytest.raises(ValueError, match="batch_size"):
        HFBackend(model, tokenizer, batch_size=0)


def test_per_prompt_seeds_make_samples_independent_of_batch_and_order(tiny, prompts):
    model, tokenizer = tiny
    backend = HFBackend(model, tokenizer, batch_size=4)
    seeds = [101 + i for i in range(len(prompts))]
    together = backend.generate(prompts, SAMPLED, seed=seeds)
    reversed_ = backend.generate(prompts[::-1], SAMPLED, seed=seeds[::-1])[::-1]
    alone = [HFBackend(model, tokenizer, batch_size=1).generate([p], SAMPLED, seed=[s])[0]
             for p, s in zip(prompts, seeds)]
    assert [g.completion_ids for g in together] == [g.completion_ids for g in reversed_]
    assert [g.completion_ids for g in together] == [g.completion_ids for g in alone]
    other = backend.generate(prompts, SAMPLED, seed=[s + 1000 for s in seeds])
    assert [g.completion_ids for g in other] != [g.completion_ids for g in together]


def test_per_prompt_seed_count_must_match(tiny, prompts):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="seeds for"):
        HFBackend(model, tokenizer).generate(prompts, SAMPLED, seed=[1])


def test_row_seeded_gumbel_samples_the_tempered_softmax():
    import torch
    from spade.inference.generation_hf import RowSeededGumbel

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    counts = torch.zeros(4)
    processor = RowSeededGumbel([5], temperature=0.5, top_p=1.0)
    for _ in range(4000):
        counts[int(processor(None, logits).argmax())] += 1
    expected = torch.softmax(logits[0] / 0.5, dim=-1)
    assert torch.allclose(counts / 4000, expected, atol=0.03)
    nucleus = RowSeededGumbel([5], temperature=1.0, top_p=0.5)  # softmax(logits) top token has mass 0.64
    assert all(int(nucleus(None, logits).argmax()) == 0 for _ in range(200))
    # top-k 2: only the two largest logits are drawn, in proportion softmax([2, 1] / 0.5) = (0.881, 0.119)
    top_two = RowSeededGumbel([5], temperature=0.5, top_p=1.0, top_k=2)
    counts = torch.zeros(4)
    for _ in range(4000):
        counts[int(top_two(None, logits).argmax())] += 1
    assert counts[2:].sum() == 0
    assert torch.allclose(counts[:2] / 4000, torch.softmax(logits[0, :2] / 0.5, dim=-1), atol=0.03)
    # top-k before top-p: with k = 3 and p = 0.9 of softmax([2, 1, 0]) = (0.665, 0.245, 0.090), tokens 0 and 1 remain
    both = RowSeededGumbel([5], temperature=1.0, top_p=0.9, top_k=3)
    assert {int(both(None, logits).argmax()) for _ in range(400)} == {0, 1}


@pytest.mark.parametrize("seeded", [True, False], ids=["row-seeded", "generate's sampler"])
def test_top_k_one_is_greedy(tiny, prompts, seeded):
    model, tokenizer = tiny
    greedy = HFBackend(model, tokenizer).generate(prompts, GREEDY, seed=0)
    params = SamplingParams(temperature=1.3, top_p=1.0, max_new_tokens=GREEDY.max_new_tokens, top_k=1)
    sampled = HFBackend(model, tokenizer).generate(prompts, params, seed=[7] * len(prompts) if seeded else 7)
    assert [g.completion_ids for g in sampled] == [g.completion_ids for g in greedy]
    # the reported log-probs are those of the untruncated tempered softmax, as the trainer recomputes them
    for prompt, g in zip(prompts, sampled):
        expected = forward_logprobs(model, prompt, g.completion_ids, 1.3)
        assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4)


def test_token_budget_batches_keep_long_prompts_apart(tiny):
    model, tokenizer = tiny
    backend = HFBackend(model, tokenizer, batch_size=4, max_batch_tokens=100)
    prompts = [[1] * n for n in (10, 10, 10, 10, 10, 60, 90)]
    # widths with 8 new tokens: 18 (x5), 68, 98 -> [4 short], [1 short + nothing else fits with 68], [68], [98]
    assert backend._batches(list(range(7)), prompts, 8) == [[0, 1, 2, 3], [4], [5], [6]]
    assert HFBackend(model, tokenizer, batch_size=4)._batches(list(range(7)), prompts, 8) == [[0, 1, 2, 3], [4, 5, 6]]


# ----- prefix reuse (issue 17) -------------------------------------------------------------------------------
SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer briefly and put the final answer in "
                                       "\\boxed{}. Think about units and signs before you answer."}


def multi_turn_prompts(tokenizer, backend, params, seed):
    """Three turns of three conversations that share a system prompt: each next prompt is the previous prompt, the
    sampled reply and a new user message (as EpisodeRunner extends an episode)."""
    chats = [[SYSTEM, {"role": "user", "content": q}] for q in QUESTIONS[:3]]
    prompts = [chat_prompt_ids(tokenizer, chat) for chat in chats]
    turns = []
    for turn in range(3):
        out = backend.generate(prompts, params, seed=[seed + 10 * turn + i for i in range(len(prompts))])
        turns.append((prompts, out))
        prompts = [p + g.completion_ids + tokenizer(f"\nTurn {turn}: and now?\n", add_special_tokens=False)["input_ids"]
                   for p, g in zip(prompts, out)]
    return turns


def assert_same_samples_and_forward_logprobs(model, turns, reference, temperature):
    """``turns`` sampled the tokens of ``reference`` (both from ``multi_turn_prompts``), with the log-probs of one plain
    forward pass over each prompt and its completion."""
    for (prompts, a), (_, b) in zip(turns, reference):
        assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
        for prompt, g in zip(prompts, a):
            expected = forward_logprobs(model, prompt, g.completion_ids, temperature)
            assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4)


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "T0.8-top_p0.95"])
def test_prefix_cache_gives_the_samples_and_logprobs_of_a_full_prefill(tiny, params):
    """With the prefix cache, later turns prefill only their new tokens and the shared system prompt is prefilled
    once; the samples are those of the backend without it and the log-probs those of one plain forward pass."""
    model, tokenizer = tiny
    cached = HFBackend(model, tokenizer, batch_size=2, prefix_cache_tokens=100_000)
    plain = HFBackend(model, tokenizer, batch_size=2)
    with_cache = multi_turn_prompts(tokenizer, cached, params, seed=5)
    without = multi_turn_prompts(tokenizer, plain, params, seed=5)
    assert_same_samples_and_forward_logprobs(model, with_cache, without, params.temperature)
    assert cached.totals["prompt_tokens"] == plain.totals["prompt_tokens"]
    assert plain.totals["prefill_tokens"] == plain.totals["prompt_tokens"]
    # turns 2 and 3 prefill the reply tokens not yet cached and the new message only
    assert cached.totals["prefill_tokens"] < 0.5 * plain.totals["prefill_tokens"], cached.totals


def test_prefix_cache_is_emptied_when_the_weights_change(tiny, prompts):
    """Keys and values belong to the weights that computed them: an in-place parameter update (an optimizer step)
    empties the cache, so the next call prefills everything and samples from the new weights."""
    model, tokenizer = tiny
    backend = HFBackend(model, tokenizer, prefix_cache_tokens=100_000)
    backend.generate(prompts[:2], GREEDY, seed=0)
    assert backend.cache.entries
    weight = next(model.parameters())
    saved = weight.detach().clone()
    try:
        with torch.no_grad():
            weight.add_(0.05)
        before = backend.totals["prefill_tokens"]
        out = backend.generate(prompts[:2], GREEDY, seed=0)
        assert backend.totals["prefill_tokens"] - before == sum(len(p) for p in prompts[:2])
        assert [g.completion_ids for g in out] == [g.completion_ids for g in
                                                   HFBackend(model, tokenizer).generate(prompts[:2], GREEDY, seed=0)]
    finally:
        with torch.no_grad():
            weight.copy_(saved)


def test_prefix_cache_holds_at_most_its_token_budget(tiny, prompts):
    model, tokenizer = tiny
    budget = max(len(p) for p in prompts) + 2 * GREEDY.max_new_tokens
    backend = HFBackend(model, tokenizer, prefix_cache_tokens=budget)
    backend.generate(prompts, GREEDY, seed=0)
    assert 0 < backend.cache.held <= budget
    assert backend.cache.held == sum(len(e.tokens) for e in backend.cache.entries.values())
    with pytest.raises(ValueError, match="prefix_cache_tokens"):
        HFBackend(model, tokenizer, prefix_cache_tokens=-1)


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "T0.8-top_p0.95"])
@pytest.mark.parametrize("cache_tokens", [0, 100_000], ids=["no-cache", "prefix-cache"])
def test_row_prefill_pads_nothing_and_gives_the_samples_of_a_batched_prefill(tiny, params, cache_tokens):
    """Rows of unequal length prefilled one by one: no padded prefill slot, and the samples and log-probs of the
    batched prefill (over three turns, so later turns start from cached rows)."""
    model, tokenizer = tiny
    rows = HFBackend(model, tokenizer, batch_size=3, prefix_cache_tokens=cache_tokens, row_prefill=True)
    batched = HFBackend(model, tokenizer, batch_size=3, prefix_cache_tokens=cache_tokens)
    with_rows = multi_turn_prompts(tokenizer, rows, params, seed=7)
    without = multi_turn_prompts(tokenizer, batched, params, seed=7)
    assert_same_samples_and_forward_logprobs(model, with_rows, without, params.temperature)
    assert rows.totals["prefill_tokens"] == batched.totals["prefill_tokens"]
    assert batched.totals["padded_tokens"] > batched.totals["prefill_tokens"]  # the batched prefill did pad
    assert rows.totals["padded_tokens"] == rows.totals["prefill_tokens"], rows.totals  # row prefill did not


def test_row_prefill_follows_the_inference_config(tiny):
    from spade.inference.generation_vllm import InferenceConfig, build_backend

    model, tokenizer = tiny
    assert build_backend(InferenceConfig(), "unused", model=model, tokenizer=tokenizer).row_prefill  # auto: CPU
    assert not build_backend(InferenceConfig(row_prefill="never"), "unused", model=model, tokenizer=tokenizer).row_prefill
    assert not build_backend(InferenceConfig(), "unused", model=model, tokenizer=tokenizer,
                             device="cuda").row_prefill  # auto on a GPU: the batched prefill
    assert build_backend(InferenceConfig(row_prefill="always"), "unused", model=model, tokenizer=tokenizer,
                         device="cuda").row_prefill
