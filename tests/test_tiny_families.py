"""The tiny random stand-ins of the paper's backbone families (model cards tiny-qwen3-4b, tiny-qwen3-8b,
tiny-qwen3-30b-a3b): their models, tokenizers and our Qwen3-style chat templates (spade.inference.models)."""

from __future__ import annotations

import json

import pytest
import torch

from spade.config import load_config
from spade.configtools import ConfigError, from_dict
from spade.core import tool_calls
from spade.core.agent import ChatTokens
from spade.inference.models import (
    QWEN3_ADDED_TOKENS,
    TINY_RANDOM,
    ModelCard,
    TinySizes,
    build_tiny_tokenizer,
    load_model,
    prepare_model,
    read_provenance,
    weights_sha256,
)

# card -> (model class, model_type, query heads, KV heads, tied, experts, thinking)
CARDS = {
    "tiny-qwen3-4b": ("Qwen3ForCausalLM", "qwen3", 2, 1, True, None, "none"),
    "tiny-qwen3-8b": ("Qwen3ForCausalLM", "qwen3", 2, 1, False, None, "hybrid"),
    "tiny-qwen3-30b-a3b": ("Qwen3MoeForCausalLM", "qwen3_moe", 2, 1, False, 8, "none"),
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {name: prepare_model(load_config(overrides={"model_card": name}).model, root / name) for name in CARDS}


@pytest.mark.parametrize("name", sorted(CARDS))
def test_card_prepares_and_loads(prepared, name):
    model_class, model_type, heads, kv_heads, tied, experts, thinking = CARDS[name]
    card = load_config(overrides={"model_card": name}).model
    assert (card.name, card.source, card.dtype, card.eos_token) == (name, "tiny-random", "bfloat16", "<|im_end|>")
    assert card.tiny.thinking == thinking
    model, tokenizer = load_model(prepared[name])
    config = model.config
    assert type(model).__name__ == model_class and config.model_type == model_type
    assert model.dtype == torch.bfloat16
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (heads, kv_heads, 64)
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (128, 2, 512) == (
        config.hidden_size, config.num_hidden_layers, len(tokenizer))
    assert config.tie_word_embeddings is tied
    shared = model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert shared is tied
    if experts:
        assert (config.num_experts, config.num_experts_per_tok, config.moe_intermediate_size) == (experts, 2, 64)
        assert config.norm_topk_prob and config.mlp_only_layers == [] and config.decoder_sparse_step == 1
        mlp = model.model.layers[0].mlp
        assert type(mlp).__name__ == "Qwen3MoeSparseMoeBlock" and mlp.experts.gate_up_proj.shape[0] == experts
    else:
        assert not hasattr(config, "num_experts")
    # norm weights noised (moe_check.noise_norms), so a weight sync that drops one is seen
    norm = model.model.layers[0].self_attn.q_norm.weight
    assert not torch.equal(norm, torch.ones_like(norm))
    # Qwen3's token set: the three specials at ids 0-2, eos <|im_end|>, pad <|endoftext|>, no bos
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == 2
    assert tokenizer.pad_token == "<|endoftext|>" and tokenizer.pad_token_id == 0 and tokenizer.bos_token is None
    assert tokenizer.convert_ids_to_tokens([0, 1, 2]) == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert tokenizer.convert_tokens_to_ids(list(QWEN3_ADDED_TOKENS)) == list(range(506, 512))
    generation = json.loads((prepared[name] / "generation_config.json").read_text())
    assert (generation["eos_token_id"], generation["pad_token_id"], config.eos_token_id) == (2, 0, 2)
    provenance = read_provenance(prepared[name])
    assert (provenance["eos_token_id"], provenance["pad_token_id"]) == (2, 0)
    # HF generation runs
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 2+3?"}], add_generation_prompt=True,
                                           tokenize=False)
    ids = torch.tensor([tokenizer(prompt, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                             do_sample=False)
    assert out.shape == (1, ids.shape[1] + 4)


@pytest.mark.parametrize("name", sorted(CARDS))
def test_special_tokens_are_single_ids(prepared, name):
    _, tokenizer = load_model(prepared[name])
    text = "<|im_start|>assistant\n<think>\nx\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>\n<|endoftext|>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    for token in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
                  "</tool_call>"):
        assert tokenizer.convert_tokens_to_ids(token) in ids, token
    tags = tokenizer("<tool_response>\nok\n</tool_response>", add_special_tokens=False)["input_ids"]
    assert tags[0] == tokenizer.convert_tokens_to_ids("<tool_response>")
    assert tags[-1] == tokenizer.convert_tokens_to_ids("</tool_response>")
    assert tokenizer.decode(ids) == text
    # as in Qwen3's tokenizer the tags are not special: a decode that skips special tokens (vLLM's default) keeps them
    assert tokenizer.decode(ids, skip_special_tokens=True) == "assistant\n<think>\nx\n</think>\n\n<tool_call>\n{}\n</tool_call>\n"


def test_card_is_deterministic_and_reused(prepared, tmp_path):
    name = "tiny-qwen3-30b-a3b"
    card = load_config(overrides={"model_card": name}).model
    again = prepare_model(card, tmp_path / "again")
    assert weights_sha256(again) == weights_sha256(prepared[name])
    assert (again / "tokenizer.json").read_bytes() == (prepared[name] / "tokenizer.json").read_bytes()
    before = (again / "model.safetensors").stat().st_mtime_ns
    assert prepare_model(card, again) == again and (again / "model.safetensors").stat().st_mtime_ns == before


def test_folder_prepared_before_the_new_keys_is_reused(tmp_path):
    """A provenance card written before tiny.architecture & co. existed counts those keys at their defaults."""
    folder = prepare_model(TINY_RANDOM, tmp_path / "tiny")
    path = folder / "provenance.json"
    provenance = json.loads(path.read_text())
    for key in ("architecture", "num_kv_heads", "head_dim", "num_experts", "num_experts_per_tok",
                "moe_intermediate_size", "tie_word_embeddings", "thinking"):
        del provenance["card"]["tiny"][key]
    path.write_text(json.dumps(provenance))
    before = (folder / "model.safetensors").stat().st_mtime_ns
    assert prepare_model(TINY_RANDOM, folder) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == before
    with pytest.raises(FileExistsError, match="overwrite"):  # a key that differs from its default still counts
        prepare_model(ModelCard(name="tiny-random", source="tiny-random", tiny=TinySizes(tie_word_embeddings=True)),
                      folder)


# ------------------------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize("tiny, message", [
    ({"architecture": "mistral"}, r"'model.tiny.architecture' has value 'mistral'.*\['llama', 'qwen3', 'qwen3_moe'\]"),
    ({"thinking": "always"}, r"'model.tiny.thinking' has value 'always'.*\['none', 'hybrid'\]"),
    ({"thinking": "hybrid"}, r"tiny.thinking 'hybrid' needs a Qwen3-family tiny.architecture"),
    ({"architecture": "qwen3", "num_experts": 8}, r"tiny.num_experts applies to tiny.architecture 'qwen3_moe' only"),
    ({"moe_intermediate_size": 64}, r"tiny.moe_intermediate_size applies to .*'qwen3_moe' only, not 'llama'"),
    ({"architecture": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2},
     r"'qwen3_moe' needs tiny.moe_intermediate_size set"),
    ({"architecture": "qwen3_moe"}, r"needs tiny.num_experts, tiny.num_experts_per_tok, tiny.moe_intermediate_size"),
    ({"architecture": "qwen3_moe", "num_experts": 2, "num_experts_per_tok": 4, "moe_intermediate_size": 8},
     r"tiny.num_experts_per_tok 4 exceeds tiny.num_experts 2"),
    ({"num_heads": 4, "num_kv_heads": 3}, r"tiny.num_kv_heads 3 does not divide tiny.num_heads 4"),
    ({"head_dim": -1}, r"'model.tiny.head_dim' has value -1; it must be >= 0"),
    ({"architecture": "qwen3", "vocab_size": 260}, r"tiny.vocab_size 260 is too small .* >= 265"),
    ({"hidden_size": 100, "num_heads": 3}, r"tiny.hidden_size 100 is not divisible by tiny.num_heads 3"),
])
def test_tiny_sizes_validation(tiny, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(ModelCard, {"name": "t", "source": "tiny-random", "tiny": tiny}, "model")


def test_tiny_sizes_validation_without_from_dict():
    with pytest.raises(ValueError, match=r"tiny.architecture 'gpt2' is not one of \['llama', 'qwen3', 'qwen3_moe'\]"):
        TinySizes(architecture="gpt2")
    with pytest.raises(ValueError, match=r"tiny.thinking 'on' is not one of \['none', 'hybrid'\]"):
        TinySizes(architecture="qwen3", thinking="on")
    # with head_dim set, hidden_size need not be a multiple of the heads (Qwen3-4B: 2560 = 32 x 80, head_dim 128)
    ModelCard(source="tiny-random", tiny=TinySizes(architecture="qwen3", hidden_size=96, num_heads=2, head_dim=64))


# ------------------------------------------------------------------------------------------------------------
# the chat templates

TOOLS = [{"type": "function", "function": {"name": "get_balance", "description": "Balance of an account.",
                                            "parameters": {"type": "object", "properties": {
                                                "account_id": {"type": "integer"}}, "required": ["account_id"]}}}]
TOOL_JSON = ('{"type": "function", "function": {"name": "get_balance", "description": "Balance of an account.", '
             '"parameters": {"type": "object", "properties": {"account_id": {"type": "integer"}}, '
             '"required": ["account_id"]}}}')
TOOLS_TURN_BODY = (
    "# Tools\n\nThese functions are available to help with the request. Each line between <tools> and </tools> is the "
    "JSON signature of one of them:\n<tools>\n" + TOOL_JSON + "\n</tools>\n\nTo use a function, reply with its name "
    "and a JSON object of arguments between <tool_call> and </tool_call>, one block per call:\n<tool_call>\n"
    '{"name": <function name>, "arguments": <arguments object>}\n</tool_call><|im_end|>\n')
CALL = {"type": "function", "function": {"name": "get_balance", "arguments": {"account_id": 7}}}


@pytest.fixture(scope="module")
def none_tokenizer():
    return build_tiny_tokenizer(512, "qwen3", "none")


@pytest.fixture(scope="module")
def hybrid_tokenizer():
    return build_tiny_tokenizer(512, "qwen3", "hybrid")


def render(tokenizer, messages, **kwargs):
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)


PLAIN = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"}]
PLAIN_TEXT = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"
              "<|im_start|>assistant\n")


def test_template_plain_turn(none_tokenizer, hybrid_tokenizer):  # (a)
    assert render(none_tokenizer, PLAIN) == PLAIN_TEXT
    assert render(hybrid_tokenizer, PLAIN) == PLAIN_TEXT  # enable_thinking defaults to true: nothing added
    closed = none_tokenizer.apply_chat_template(PLAIN + [{"role": "assistant", "content": "5"}], tokenize=False)
    assert closed == PLAIN_TEXT + "5<|im_end|>\n"


@pytest.mark.parametrize("flavour", ["none", "hybrid"])
def test_template_tools_call_and_result(none_tokenizer, hybrid_tokenizer, flavour):  # (b)
    tokenizer = none_tokenizer if flavour == "none" else hybrid_tokenizer
    messages = [{"role": "user", "content": "Balance of 7?"},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "content": "42.0"}]
    text = render(tokenizer, messages, tools=TOOLS, enable_thinking=False)
    empty_thought = "<think>\n\n</think>\n\n" if flavour == "hybrid" else ""
    assert text == ("<|im_start|>system\n" + TOOLS_TURN_BODY
                    + "<|im_start|>user\nBalance of 7?<|im_end|>\n"
                    + '<|im_start|>assistant\n<tool_call>\n{"name": "get_balance", "arguments": {"account_id": 7}}\n'
                      "</tool_call><|im_end|>\n"
                    + "<|im_start|>user\n<tool_response>\n42.0\n</tool_response><|im_end|>\n"
                    + "<|im_start|>assistant\n" + empty_thought)


def test_template_system_text_calls_and_results(none_tokenizer):  # (b), the rest of the tool rendering
    second = {"type": "function", "function": {"name": "get_balance", "arguments": '{"account_id": 8}'}}
    messages = [{"role": "system", "content": "You are a bank assistant."},
                {"role": "user", "content": "Balances of 7 and 8?"},
                {"role": "assistant", "content": "Checking both.", "tool_calls": [CALL, second]},
                {"role": "tool", "content": "42.0"}, {"role": "tool", "content": "3.5"}]
    assert render(none_tokenizer, messages, tools=TOOLS) == (
        "<|im_start|>system\nYou are a bank assistant.\n\n" + TOOLS_TURN_BODY
        + "<|im_start|>user\nBalances of 7 and 8?<|im_end|>\n"
        + '<|im_start|>assistant\nChecking both.\n<tool_call>\n{"name": "get_balance", "arguments": {"account_id": 7}}'
          '\n</tool_call>\n<tool_call>\n{"name": "get_balance", "arguments": {"account_id": 8}}\n</tool_call>'
          "<|im_end|>\n"
        + "<|im_start|>user\n<tool_response>\n42.0\n</tool_response>\n<tool_response>\n3.5\n</tool_response>"
          "<|im_end|>\n"
        + "<|im_start|>assistant\n")
    # without tools the system message is an ordinary turn and no tools turn is written
    assert render(none_tokenizer, messages[:2]) == ("<|im_start|>system\nYou are a bank assistant.<|im_end|>\n"
                                                    "<|im_start|>user\nBalances of 7 and 8?<|im_end|>\n"
                                                    "<|im_start|>assistant\n")


HISTORY = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>\nGreet back.\n</think>\n\nHello!"},
           {"role": "user", "content": "2+3?"}]
HISTORY_TEXT = ("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                "<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n")


def test_template_hybrid_thinking(hybrid_tokenizer):  # (c)
    assert render(hybrid_tokenizer, HISTORY, enable_thinking=False) == HISTORY_TEXT + "<think>\n\n</think>\n\n"
    assert render(hybrid_tokenizer, HISTORY, enable_thinking=True) == HISTORY_TEXT
    assert render(hybrid_tokenizer, HISTORY) == HISTORY_TEXT
    # the turns after the last user message (the current tool loop) keep their reasoning, as in Qwen3
    loop = HISTORY + [{"role": "assistant", "content": "<think>Use the tool.</think>\n\nLet me call it.",
                       "tool_calls": [CALL]}, {"role": "tool", "content": "42.0"}]
    assert render(hybrid_tokenizer, loop) == (
        HISTORY_TEXT + '<think>Use the tool.</think>\n\nLet me call it.\n<tool_call>\n{"name": "get_balance", '
        '"arguments": {"account_id": 7}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n42.0\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


def test_template_none_ignores_enable_thinking(none_tokenizer):  # (d)
    as_written = HISTORY_TEXT.replace("Hello!", "<think>\nGreet back.\n</think>\n\nHello!")
    for kwargs in ({}, {"enable_thinking": False}, {"enable_thinking": True}):
        assert render(none_tokenizer, HISTORY, **kwargs) == as_written, kwargs


@pytest.mark.parametrize("flavour", ["none", "hybrid"])
def test_native_tool_format_is_supported(none_tokenizer, hybrid_tokenizer, flavour):
    tokenizer = none_tokenizer if flavour == "none" else hybrid_tokenizer
    assert tool_calls.template_support(tokenizer) == tool_calls.TemplateSupport(tools=True, tool_role=True)
    # an episode's continuation after a tool call is the template's own text, tokens for tokens
    chat = ChatTokens(tokenizer, {"enable_thinking": False})
    messages = [{"role": "user", "content": "Balance of 7?"},
                {"role": "assistant", "content": '<tool_call>\n{"name": "get_balance", "arguments": {"account_id": 7}}'
                                                 "\n</tool_call>"}]
    replies = [{"role": "tool", "content": "42.0"}]
    ids = chat.continuation(messages, replies, ended_with_eos=True, tools=TOOLS)
    assert tokenizer.decode(ids) == ("\n<|im_start|>user\n<tool_response>\n42.0\n</tool_response><|im_end|>\n"
                                     "<|im_start|>assistant\n" + ("<think>\n\n</think>\n\n" if flavour == "hybrid"
                                                                 else ""))
    reply = messages[1]["content"]
    assert tool_calls.parse_calls(reply) == [{"name": "get_balance", "arguments": {"account_id": 7}}]


def test_a_moe_checkpoint_saved_with_router_logits_on_generates_in_a_padded_batch(prepared, tmp_path):
    """OpenRLHF's actor saves its MoE checkpoints with output_router_logits true (openrlhf/models/actor.py:202-204).
    load_model switches it off: with it on, a padded batch's forward pass fails in transformers' load-balancing loss
    (found by the rehearsal: every evaluation of a 30B checkpoint failed). The mutation, keeping it on, raises."""
    import json
    import shutil

    import torch

    folder = tmp_path / "checkpoint"
    shutil.copytree(prepared["tiny-qwen3-30b-a3b"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "output_router_logits": True}))
    model, tokenizer = load_model(folder)
    assert model.config.output_router_logits is False
    batch = tokenizer(["a b c d e f", "a"], return_tensors="pt", padding=True)
    settings = {"max_new_tokens": 3, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    with torch.no_grad():
        assert model.generate(**batch, **settings).shape[1] == batch["input_ids"].shape[1] + 3
        model.config.output_router_logits = True  # the mutation
        with pytest.raises(RuntimeError, match="must match the size of tensor b"):  # a decode step with the cache
            model.generate(**batch, **settings)
