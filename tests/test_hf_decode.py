"""spade.inference.hf_decode: grouped attention without key/value copies and the preallocated cache, against the stock paths."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from spade.inference.generation import SamplingParams
from spade.inference.generation_hf import HFBackend
from spade.inference.hf_decode import ATTENTION_NAME, PreallocatedLayer, grouped_attention, grouped_sdpa, preallocated_cache
from spade.inference.models import TINY_RANDOM, chat_prompt_ids, load_model, prepare_model


class Module(torch.nn.Module):
    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True


def padding_mask(batch: int, q_len: int, k_len: int, pad: list[int]) -> torch.Tensor:
    """Boolean SDPA mask [B, 1, Q, K]: causal over the last Q positions, row b's first pad[b] keys hidden."""
    keys = torch.arange(k_len)
    queries = torch.arange(k_len - q_len, k_len)
    mask = (keys[None, :] <= queries[:, None])[None, None].repeat(batch, 1, 1, 1)
    for row, n in enumerate(pad):
        mask[row, :, :, :n] = False
    return mask


@pytest.mark.parametrize("q_len", [1, 5])
@pytest.mark.parametrize("masked", [True, False])
def test_grouped_sdpa_matches_stock_sdpa(q_len, masked):
    torch.manual_seed(0)
    batch, kv_heads, groups, k_len, dim = 3, 2, 3, 9, 8
    query = torch.randn(batch, kv_heads * groups, q_len, dim)
    key, value = torch.randn(batch, kv_heads, k_len, dim), torch.randn(batch, kv_heads, k_len, dim)
    if not masked and q_len > 1:
        key, value = key[:, :, :q_len], value[:, :, :q_len]  # unmasked prefill: causal over the query itself
    mask = padding_mask(batch, q_len, key.shape[2], [0, 2, 4]) if masked else None
    module = Module(groups).eval()
    ours, _ = grouped_sdpa(module, query, key, value, mask, scaling=dim ** -0.5)
    stock, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=dim ** -0.5)
    assert ours.shape == stock.shape == (batch, q_len, kv_heads * groups, dim)
    torch.testing.assert_close(ours, stock, rtol=1e-5, atol=1e-6)


def test_grouped_sdpa_reads_each_groups_own_head():
    """Query head j * g + r must read key/value head j: give each kv head a constant value and check the output."""
    batch, kv_heads, groups, dim = 1, 3, 2, 4
    query = torch.randn(batch, kv_heads * groups, 1, dim)
    key = torch.randn(batch, kv_heads, 5, dim)
    value = torch.arange(kv_heads, dtype=torch.float32).view(1, kv_heads, 1, 1).expand(batch, kv_heads, 5, dim)
    out, _ = grouped_sdpa(Module(groups).eval(), query, key, value, None)
    expected = torch.tensor([0.0, 0.0, 1.0, 1.0, 2.0, 2.0])
    torch.testing.assert_close(out[0, 0, :, 0], expected)


def test_grouped_sdpa_rejects_uneven_heads():
    with pytest.raises(ValueError, match="5 query heads"):
        grouped_sdpa(Module(1), torch.zeros(1, 5, 1, 4), torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4), None)


def test_preallocated_layer_equals_concatenation():
    torch.manual_seed(1)
    ours, plain = PreallocatedLayer(capacity=6), DynamicLayer()
    for length in (4, 1, 1, 3):  # the last write passes the capacity: the buffer grows
        k, v = torch.randn(2, 3, length, 5), torch.randn(2, 3, length, 5)
        got, want = ours.update(k, v), plain.update(k, v)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert ours.get_seq_length() == plain.get_seq_length()
    assert ours._keys.shape[2] == 12  # doubled once
    ours.crop(-2)
    plain.crop(-2)
    assert ours.get_seq_length() == 7
    k, v = torch.randn(2, 3, 1, 5), torch.randn(2, 3, 1, 5)
    torch.testing.assert_close(ours.update(k, v)[0], plain.update(k, v)[0], rtol=0, atol=0)
    ours.batch_select_indices(torch.tensor([1]))
    plain.batch_select_indices(torch.tensor([1]))
    torch.testing.assert_close(ours.keys, plain.keys, rtol=0, atol=0)
    with pytest.raises(ValueError, match="capacity"):
        PreallocatedLayer(0)


@pytest.fixture(scope="module")
def gqa_model(tmp_path_factory):
    """A random Llama with grouped-query attention (4 query heads over 2 key/value heads) and the tiny tokenizer."""
    _, tokenizer = load_model(prepare_model(TINY_RANDOM, tmp_path_factory.mktemp("models") / "tiny"))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         attn_implementation="sdpa")
    return LlamaForCausalLM(config).eval(), tokenizer


def test_grouped_attention_switches_and_restores(gqa_model):
    model, _ = gqa_model
    with grouped_attention(model):
        assert model.config._attn_implementation == ATTENTION_NAME
    assert model.config._attn_implementation == "sdpa"
    model.set_attn_implementation("eager")
    try:
        with grouped_attention(model):  # not the stock sdpa: left alone
            assert model.config._attn_implementation == "eager"
    finally:
        model.set_attn_implementation("sdpa")


def test_backend_matches_stock_generate(gqa_model):
    """Padded batch, greedy: the backend (grouped attention, preallocated cache, prefix reuse on the second call)
    gives the tokens and log-probs of stock ``generate`` (sdpa with repeat_kv, DynamicCache) run row by row."""
    model, tokenizer = gqa_model
    prompts = [chat_prompt_ids(tokenizer, [{"role": "user", "content": q}])
               for q in ("Hi", "What is 2+3? Answer in one word.", "Name a colour and a number between 1 and 9.")]
    params = SamplingParams(temperature=0.0, max_new_tokens=10)
    backend = HFBackend(model, tokenizer, batch_size=3, prefix_cache_tokens=4096)
    eos = backend.eos_token_ids
    for turn in range(2):
        out = backend.generate(prompts, params, seed=0)
        for prompt, generation in zip(prompts, out):
            with torch.no_grad():
                stock = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=10, do_sample=False,
                                       eos_token_id=eos, pad_token_id=backend.pad_token_id, output_logits=True,
                                       return_dict_in_generate=True, past_key_values=DynamicCache(config=model.config))
            ids = stock.sequences[0, len(prompt):].tolist()[:len(generation.completion_ids)]
            assert generation.completion_ids == ids
            want = [torch.log_softmax(stock.logits[t][0].float(), -1)[i].item() for t, i in enumerate(ids)]
            assert generation.logprobs == pytest.approx(want, abs=1e-4)
        # the next turn continues every conversation: its prompts start with the processed sequences
        prompts = [p + g.completion_ids + chat_prompt_ids(tokenizer, [{"role": "user", "content": "More."}])
                   for p, g in zip(prompts, out)]
    assert backend.totals["prefill_tokens"] < backend.totals["prompt_tokens"]


def test_preallocated_cache_holds_given_layers(gqa_model):
    model, _ = gqa_model
    layers = [(torch.randn(2, 2, 3, 16), torch.randn(2, 2, 3, 16)) for _ in range(2)]
    cache = preallocated_cache(model, 8, layers)
    assert cache.get_seq_length() == 3
    assert all(isinstance(layer, PreallocatedLayer) and layer._keys.shape[2] == 8 for layer in cache.layers)
    torch.testing.assert_close(cache.layers[1].keys, layers[1][0], rtol=0, atol=0)


def test_backend_splits_prefill_and_decode_time(gqa_model):
    """``generate``'s time before the first token's logits is the prefill, the rest decoding; both within the call."""
    model, tokenizer = gqa_model
    backend = HFBackend(model, tokenizer)
    prompts = [chat_prompt_ids(tokenizer, [{"role": "user", "content": "Count to five."}])]
    backend.generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=8), seed=0)
    totals = backend.totals
    assert totals["prefill_seconds"] > 0 and totals["decode_seconds"] > 0
    assert totals["prefill_seconds"] + totals["decode_seconds"] <= totals["seconds"]
