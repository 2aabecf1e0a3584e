"""Rollout log-probs as the reference computes them: a small patch of vLLM 0.29.0's samplers (``train.rollout_logprobs``).

What the patch changes. For each sampled token, a patched engine reports ``log_softmax(logits / T_request)[token]``
over the full vocabulary, the sampled token still being drawn from the top-k/top-p distribution. The tokens it samples
are the stock engine's, draw for draw (``tests/test_vllm_logprobs.py`` compares both).

Why. The importance weights of truncated importance sampling compare the trainer's recomputed log-probs with the
sampler's. The trainer takes the full softmax (OpenRLHF 0.11.2 ``models/actor.py:266-271``, our ``LocalTrainer``; the
reference's slime ``backends/megatron_utils/loss.py:78-79, 151-158``), and the reference's sampler, SGLang
v0.5.12.post1, returns log-probs after temperature and before top-k/top-p, not renormalised (SGLang PR #5961). vLLM
0.29 has no mode for that quantity:

- ``raw_logprobs`` (its default) is the softmax of the logits before temperature;
- ``processed_logprobs``, which OpenRLHF asks for whenever its correction is on (``cli/train_ppo_ray.py:78``), masks
  the tokens outside top-k/top-p with -inf and renormalises over the rest (``v1/sample/ops/topk_topp_sampler.py``,
  ``v1/worker/gpu/sample/sampler.py``). Each kept token's log-prob is raised by -log S_t, S_t the kept mass, so every
  TIS weight exp(train - rollout) is shrunk by S_t and OpenRLHF's ``vllm_kl`` is biased by E[-log S_t].

How. Two samplers exist in vLLM 0.29 and both are patched, on import of their modules:

- the V1 sampler (``vllm.v1.sample.sampler.Sampler``, CPU and GPU model runner V1): ``Sampler.sample`` applies the
  temperature and hands the tempered logits to ``TopKTopPSampler``, whose ``forward`` masks them in place and samples.
  ``_patch_topk_topp`` wraps that ``forward`` so that, in ``processed_logprobs`` mode, it takes the ``log_softmax`` of
  the tempered logits before the mask and returns it in place of the renormalised one. A batch of greedy requests
  (T 0) never reaches it and keeps the untempered full ``log_softmax``, as before;
- Model Runner V2's sampler (``vllm.v1.worker.gpu.sample.sampler.Sampler``, the GPU default): ``sample`` calls
  ``apply_sampling_params(..., skip_top_k_top_p=True)`` (penalties, temperature, min-p), then masks top-k/top-p and
  samples; ``__call__`` computes the reported log-probs from what ``sample`` returns. ``_patch_mrv2`` keeps a copy of
  the tempered logits before the mask and has ``sample`` return it, so ``__call__`` reports their full ``log_softmax``.
  Its ``return_sampling_mask`` (which reads the masked logits from the same value) is refused.

Both samplers are built in ``processed_logprobs`` mode under the patch, whatever ``logprobs_mode`` the engine was given
(``raw_logprobs`` drops the temperature; ``raw_logits``/``processed_logits`` are left as they are). min-p, which none
of our configs sets, stays applied before the log-softmax.

Where it is installed. ``spade.import_hooks.add_patches`` runs the patches of ``patches_for(mode)`` on import of their
modules, in every process whose ``sitecustomize`` calls it: the paper runs' (``spade/rlhf/engine_site``, put on the
launch script's PYTHONPATH with ``MODE_ENV``; it installs the GPU weight sync's patch too), the preflight's and the CPU
integration run's (their own site folders add these patches to theirs); ``VLLMBackend.from_model_dir`` installs them
in its own process and puts ``engine_site`` on the PYTHONPATH of the engine processes it starts.

The patch is written against vLLM 0.29.0's code and refuses any other version (``UnsupportedVllm``), naming itself and
the switch: another version's samplers must be read again before the patch is ported.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

MODES = ("reference", "processed")
MODE_ENV = "SPADE_ROLLOUT_LOGPROBS"  # the mode in the engine processes' environment (set by the launch script)
SUPPORTED_VLLM = (0, 29, 0)
PATCH_NAME = "spade.inference.vllm_logprobs"
SITE = Path(__file__).resolve().parents[1] / "rlhf" / "engine_site"  # sitecustomize of GPU runs' processes
PATCHED = "_spade_reference_logprobs"  # marks a patched class or forward, so a patch applies once


class UnsupportedVllm(RuntimeError):
    """The engine runs a vLLM whose samplers this patch was not written for."""


def check_mode(mode: str, where: str = "config key 'train.rollout_logprobs'") -> str:
    if mode not in MODES:
        raise ValueError(f"{where} is {mode!r}; allowed: {list(MODES)}")
    return mode


def check_version(version: str) -> None:
    """Refuse a vLLM other than 0.29.0 (a local suffix such as ``+cu129`` or ``+cpu`` is allowed)."""
    release = tuple(int(part) for part in version.split("+")[0].split(".")[:3] if part.isdigit())
    if release != SUPPORTED_VLLM:
        raise UnsupportedVllm(
            f"{PATCH_NAME} (train.rollout_logprobs: reference) patches vLLM {'.'.join(map(str, SUPPORTED_VLLM))}'s "
            f"samplers and this engine runs vLLM {version}: read that version's samplers and port the patch, or set "
            f"train.rollout_logprobs: processed (vLLM's own truncated, renormalised log-probs; biased TIS weights, "
            f"docs/FIDELITY.md)")


def _require_supported_vllm() -> None:
    import vllm

    check_version(vllm.__version__)


def _processed_mode(logprobs_mode):
    """The mode a patched sampler is built in: ``processed_logprobs`` for both log-prob modes (the patch then
    replaces what it returns); a logits mode is left alone."""
    return "processed_logprobs" if str(logprobs_mode) in ("raw_logprobs", "processed_logprobs") else logprobs_mode


def _build_in_processed_mode(cls, then=None) -> None:
    """Patch ``cls.__init__(self, logprobs_mode, ...)`` (a V1 sampler class) to build in processed mode (see
    ``_processed_mode``), then run ``then(self)``; once per class."""
    _require_supported_vllm()
    if getattr(cls, PATCHED, False):
        return
    real = cls.__init__

    @functools.wraps(real)
    def __init__(self, logprobs_mode="raw_logprobs", *args, **kwargs):
        real(self, _processed_mode(logprobs_mode), *args, **kwargs)
        if then is not None:
            then(self)

    cls.__init__ = __init__
    setattr(cls, PATCHED, True)


def _patch_v1_sampler(module) -> None:
    """``vllm.v1.sample.sampler.Sampler`` built in processed mode."""
    _build_in_processed_mode(module.Sampler)


def reference_forward(chosen):
    """``TopKTopPSampler.forward`` (the implementation vLLM chose, ``chosen``) returning, in place of the processed
    log-probs, the full ``log_softmax`` of the tempered logits it was given, taken before the top-k/top-p mask that
    ``chosen`` applies in place. Shapes: logits [num_requests, vocab] -> (sampled [num_requests], log-probs
    [num_requests, vocab] float32)."""
    import torch

    @functools.wraps(chosen)
    def forward(logits, generators, k, p):
        full = logits.log_softmax(dim=-1, dtype=torch.float32)  # log_softmax(logits / T): the reference's quantity
        sampled, _processed = chosen(logits, generators, k, p)
        return sampled, full

    setattr(forward, PATCHED, True)
    return forward


def _patch_topk_topp(module) -> None:
    """``TopKTopPSampler``: after vLLM picked its ``forward`` (an instance attribute set in ``__init__``), a sampler
    in processed mode reports the reference's log-probs (``reference_forward``)."""
    def report_reference(sampler) -> None:
        if sampler.logprobs_mode == "processed_logprobs" and not getattr(sampler.forward, PATCHED, False):
            sampler.forward = reference_forward(sampler.forward)

    _build_in_processed_mode(module.TopKTopPSampler, report_reference)


def _patch_mrv2(module) -> None:
    """Model Runner V2's ``Sampler`` (see the module docstring)."""
    _require_supported_vllm()
    cls = module.Sampler
    if getattr(cls, PATCHED, False):
        return
    real_init, real_apply, real_sample = cls.__init__, cls.apply_sampling_params, cls.sample

    @functools.wraps(real_init)
    def __init__(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.logprobs_mode = _processed_mode(self.logprobs_mode)
        if self.return_sampling_mask:
            raise UnsupportedVllm(f"{PATCH_NAME}: Model Runner V2's return_sampling_mask reads the masked logits that "
                                  "the patch replaces with the tempered ones; set train.rollout_logprobs: processed "
                                  "to use it")

    @functools.wraps(real_apply)
    def apply_sampling_params(self, *args, skip_top_k_top_p=False, **kwargs):
        logits = real_apply(self, *args, skip_top_k_top_p=skip_top_k_top_p, **kwargs)
        if skip_top_k_top_p:  # sample(): the tempered logits, before the mask that may be applied to them in place
            self._spade_tempered = logits.clone()
        return logits

    @functools.wraps(real_sample)
    def sample(self, *args, return_logprobs=False, **kwargs):
        self._spade_tempered = None
        sampled, processed = real_sample(self, *args, return_logprobs=return_logprobs, **kwargs)
        tempered, self._spade_tempered = self._spade_tempered, None
        if return_logprobs and self.logprobs_mode == "processed_logprobs":
            if tempered is None:
                raise UnsupportedVllm(f"{PATCH_NAME}: Model Runner V2's Sampler.sample did not call "
                                      "apply_sampling_params(skip_top_k_top_p=True) as vLLM 0.29.0's does")
            return sampled, tempered  # __call__ takes the log_softmax of these for the reported log-probs
        return sampled, processed

    cls.__init__, cls.apply_sampling_params, cls.sample = __init__, apply_sampling_params, sample
    setattr(cls, PATCHED, True)


PATCHES = {
    "vllm.v1.sample.sampler": _patch_v1_sampler,
    "vllm.v1.sample.ops.topk_topp_sampler": _patch_topk_topp,
    "vllm.v1.worker.gpu.sample.sampler": _patch_mrv2,
}


def patches_for(mode: str) -> dict:
    """{module: patch} for ``spade.import_hooks.add_patches``: ``PATCHES`` for ``reference``, none for ``processed``."""
    return dict(PATCHES) if check_mode(mode) == "reference" else {}


def patches_from_env(environ=None) -> dict:
    """``patches_for`` the mode in ``MODE_ENV``; none when the variable is unset (a process outside our runs)."""
    mode = (os.environ if environ is None else environ).get(MODE_ENV)
    return {} if not mode else patches_for(check_mode(mode, f"environment variable {MODE_ENV}"))


def engine_environment(mode: str, base: dict | None = None) -> dict:
    """What a process that starts engines sets for them: ``MODE_ENV`` and ``SITE`` at the end of ``PYTHONPATH``. The
    site folder installs the patches of ``mode`` and, in an OpenRLHF engine, the GPU weight sync's
    (``spade.rlhf.weight_sync.SYNC_PATCHES``); a site folder earlier on the path (the preflight's, the CPU run's)
    shadows it and installs what its run needs itself."""
    paths = [p for p in (base or {}).get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE)]
    return {MODE_ENV: check_mode(mode), "PYTHONPATH": os.pathsep.join(paths + [str(SITE)])}


def install_in_process(mode: str) -> None:
    """Patch this process (modules already imported, and those imported later) and the engine processes it starts
    (``engine_environment`` into ``os.environ``): what ``VLLMBackend.from_model_dir`` does before building its engine."""
    from spade.import_hooks import add_patches

    os.environ.update(engine_environment(mode, dict(os.environ)))
    add_patches(patches_for(mode))
