"""A real vLLM engine in a process of its own, driven by ``tests/test_vllm_loader.py`` over a pipe.

The real vLLM lives outside the venv (``spade.rlhf.vllm_cpu``), so the tests start it here, in a fresh interpreter
that puts it on ``sys.path`` and asks for AMX first, and leave the pytest process without it. Requests and replies
are tuples pickled by value (no shared-memory handles); ``("error", type, message)`` answers a request that raised.

    python tests/vllm_loader_host.py <read fd> <write fd>
"""

from __future__ import annotations

import pickle
import sys
from multiprocessing.connection import Connection

from spade.rlhf import vllm_cpu


def _receive(worker, name, tensor, last, hooks):
    """One ``update_weight`` call of OpenRLHF's sync, run on the worker: the receive buffer of the announced dtype
    and shape (the broadcast's copy), then ``weight_sync.receive`` with the ``hooks`` named (of
    ``vllm_cpu.RELOAD_HOOKS``)."""
    import torch

    from spade.rlhf import weight_sync

    buffer = torch.empty(tuple(tensor.shape), dtype=tensor.dtype)
    buffer.copy_(tensor)
    chosen = {key: value for key, value in vllm_cpu.RELOAD_HOOKS.items() if key in hooks}
    return weight_sync.receive(worker, name, buffer, last=last, dtype=tensor.dtype, shape=tuple(tensor.shape),
                               **chosen)


def _raw_load(worker, name, tensor):
    """OpenRLHF 0.11.2's own engine-side load (``vllm_worker_wrap.py:48``): the model's ``load_weights``, raw."""
    return sorted(worker.model_runner.model.load_weights(weights=[(name, tensor)]))


def _parameter_names(worker):
    return [name for name, _ in worker.model_runner.model.named_parameters()]


class Host:
    def __init__(self):
        self.llm = None

    def start(self, folder: str, max_model_len: int):
        import vllm
        from vllm import LLM

        self.llm = LLM(model=folder, dtype="bfloat16", enforce_eager=True, seed=0, max_model_len=max_model_len)
        return vllm.__version__, self.llm.collective_rpc(_parameter_names)[0]

    def sync(self, named: list, hooks: tuple = ("before", "after")):
        """A whole sync, one ``update_weight`` per tensor in order (the last flagged), then the prefix-cache reset
        OpenRLHF asks for with every sync (``ppo_actor.py:410-416``)."""
        report = None
        try:
            for index, (name, tensor) in enumerate(named):
                last = index == len(named) - 1
                report = self.llm.collective_rpc(_receive, args=(name, tensor, last, hooks))[0]
        finally:
            self.llm.reset_prefix_cache()
        return report

    def raw_load(self, named: list):
        loaded = []
        for name, tensor in named:
            loaded += self.llm.collective_rpc(_raw_load, args=(name, tensor))[0]
        return loaded

    def generate(self, prompts: list, max_tokens: int):
        """Greedy completions: (token ids, log-prob of each) per prompt."""
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, logprobs=0, ignore_eos=True)
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        result = []
        for output in outputs:
            completion = output.outputs[0]
            tokens = list(completion.token_ids)
            result.append((tokens, [step[t].logprob for step, t in zip(completion.logprobs, tokens)]))
        return result


def main(read_fd: int, write_fd: int) -> None:
    vllm_cpu.activate()
    requests, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    host = Host()
    while True:
        try:
            command, args = pickle.loads(requests.recv_bytes())
        except EOFError:
            return
        if command == "exit":
            return
        try:
            reply = ("ok", getattr(host, command)(*args))
        except Exception as error:  # the test reads it; the engine stays up for the next request
            reply = ("error", type(error).__name__, str(error))
        replies.send_bytes(pickle.dumps(reply))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
