"""The engine half of ``tests/test_generation_vllm.py::test_real_vllm_matches_hf_backend``, run as a script.

The test runs this file in a fresh interpreter, so its own process never imports vllm (the test suite's
interpreter has none on a CPU machine; other tests rely on that). With ``"cpu": true`` in the request (the test then
passes ``spade.rlhf.vllm_cpu.environment()``) ``vllm_cpu.activate()`` makes the vllm-cpu build that setup.sh
installs importable and asks for the AMX tile state; otherwise the interpreter's own vllm (the GPU image's) is used.
Then ``VLLMBackend`` does the whole scenario the test checks:

1. an engine on ``models[0]``; greedy generation of ``prompts``;
2. ``reload_weights(models[1])``; greedy generation again;
3. temperature-``sampled_temperature`` generation of all prompts with ``seeds``, and of the last prompt alone with
   its own seed (a row must depend on its seed only);
4. a backend over the same engine whose eos is the first greedy token of prompt 0: it must stop there;
5. ``reload_weights(models[0])`` (a second reload, into layers vLLM's CPU kernels have repacked); greedy again.

Usage: ``python tests/vllm_engine_run.py '<request JSON>'`` (its keys are read in ``scenario``). stdout carries
exactly one JSON object, the generations of each step (``greedy``: one list per weights loaded, ``models[0]``,
``models[1]``, ``models[0]``); everything the engine prints goes to stderr (file descriptor 1 points at 2 while it
runs), so the test parses stdout as it is.
"""

from __future__ import annotations

import dataclasses
import json
import sys

from json_reply import reply


def scenario(request: dict) -> dict:
    if request["cpu"]:
        from spade.rlhf import vllm_cpu

        vllm_cpu.activate()
    import vllm

    from spade.inference.generation import SamplingParams
    from spade.inference.generation_vllm import InferenceConfig, VLLMBackend

    def rows(generations):
        return [dataclasses.asdict(g) for g in generations]

    first, second = request["models"]
    prompts = request["prompts"]
    backend = VLLMBackend.from_model_dir(first, InferenceConfig(**request["config"]))
    greedy = SamplingParams(temperature=0.0, max_new_tokens=request["greedy_tokens"])
    result = {"vllm_version": vllm.__version__, "vllm_file": vllm.__file__,
              "greedy": [rows(backend.generate(prompts, greedy, seed=0))]}
    backend.reload_weights(second)
    after = backend.generate(prompts, greedy, seed=0)
    result["greedy"].append(rows(after))
    sampled = SamplingParams(temperature=request["sampled_temperature"], max_new_tokens=request["sampled_tokens"])
    seeds = request["seeds"]
    result["together"] = rows(backend.generate(prompts, sampled, seed=seeds))
    result["alone"] = rows(backend.generate(prompts[-1:], sampled, seed=seeds[-1:]))
    stop_id = after[0].completion_ids[0]
    forced = VLLMBackend(backend.llm, backend.tokenizer, eos_token_id=[stop_id])
    result["stop_id"] = stop_id
    result["stopped"] = rows(forced.generate(prompts[:1], greedy, seed=0))[0]
    backend.reload_weights(first)
    result["greedy"].append(rows(backend.generate(prompts, greedy, seed=0)))
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    request = json.loads(argv[1])
    return reply(lambda: scenario(request))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
