"""How far vLLM's CPU engine and the actor's torch computation disagree on one model folder when nothing was synced:
the noise floor of the engine-vs-actor checks (spade.rlhf.cpu.checks) for that model.

Samples 16 random prompts x 24 tokens with the recipe's sampling (T 0.6, top-k 20, top-p 0.95; the rollout log-prob
patch in 'reference' mode, as every engine of ours runs it), recomputes each sampled token's log-prob with
transformers in bf16 (sdpa, as OpenRLHF's actor) at the same temperature, and prints the per-token |gap| quantiles
as one JSON line. Both sides read the same weights from disk, so every gap is the two bf16 computations' own.

With a second folder (ACTOR_FOLDER: a checkpoint trained from MODEL_FOLDER) the actor reads those weights and the
engine keeps MODEL_FOLDER's: the gaps the checks see when a weight sync did not arrive, their signal.

Usage: .venv/bin/python scripts/engine_noise_floor.py MODEL_FOLDER [ACTOR_FOLDER]   (a prepared model, e.g.
results/rehearsal/models/tiny-qwen3-30b-a3b, and e.g. results/rehearsal/runs/spade_games_30b/checkpoints/step_000004;
one engine per process: vLLM's MoE layers cannot start a second one in the same process)
"""

import json
import random
import sys

PROMPTS, PROMPT_TOKENS, NEW_TOKENS, TEMPERATURE = 16, 12, 24, 0.6


def main(folder: str, actor_folder: str | None = None) -> dict:
    from spade.rlhf import vllm_cpu

    vllm_cpu.activate()
    from spade.inference.vllm_logprobs import install_in_process

    install_in_process("reference")
    import torch
    from transformers import AutoModelForCausalLM
    from vllm import LLM, SamplingParams

    llm = LLM(folder, dtype="bfloat16", enforce_eager=True, seed=0, max_model_len=1024, enable_prefix_caching=False)
    vocab = llm.get_tokenizer().vocab_size
    prompts = [[random.Random(s).randrange(vocab) for _ in range(PROMPT_TOKENS)] for s in range(PROMPTS)]
    params = SamplingParams(temperature=TEMPERATURE, top_k=20, top_p=0.95, max_tokens=NEW_TOKENS, logprobs=0, seed=1)
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], params)
    actor = AutoModelForCausalLM.from_pretrained(actor_folder or folder, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    gaps = []
    for prompt, output in zip(prompts, outputs):
        sample = output.outputs[0]
        with torch.no_grad():
            logits = actor(torch.tensor([prompt + list(sample.token_ids)])).logits[0].float() / TEMPERATURE
        logprobs = torch.log_softmax(logits, -1)
        for j, token in enumerate(sample.token_ids):
            gaps.append(abs(float(logprobs[len(prompt) + j - 1, token]) - sample.logprobs[j][token].logprob))
    gaps.sort()
    n = len(gaps)
    return {"model": folder, "actor": actor_folder or folder, "tokens": n, "mean": sum(gaps) / n, "median": gaps[n // 2], "p90": gaps[int(n * 0.9)],
            "p99": gaps[int(n * 0.99)], "max": gaps[-1], "over_0.02": sum(g > 0.02 for g in gaps)}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:3])))
