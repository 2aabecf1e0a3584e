"""The local trainer: GRPO updates of one Hugging Face model on a CPU or one GPU, with exact resume.

``train_run(config, model_dir, corpus_path, run_dir)`` drives the backend-agnostic ``SelfPlay`` core
step by step: rollout, one policy update per step (one optimizer step of at most ``train.global_batch``
samples with ``selfplay.batch_structure`` 'global_batch'; 'groups' takes optimizer steps of
``train.global_batch``; each accumulated over micro-batches of ``train.micro_batch``), one metrics line per step
(also written to TensorBoard and, with ``logging.wandb``, offline W&B: ``spade.train.live_metrics``),
an archive of every closed environment set, and checkpoints. A run killed at any point restarts from
its last checkpoint and produces the same metrics as an uninterrupted run: all sampling seeds derive
from (seed, step), training has no other randomness, and the metrics file is cut back to the
checkpoint before the run continues.

Device and dtype. ``train.device`` places the model, every batch, the KL reference model and the HF generation
backend (``train_device``); ``train.dtype`` is the model's weight dtype (``train_dtype``: bfloat16 on cuda, float32
on the CPU by default). Below float32 the optimizer steps float32 master copies of the weights and writes them back
rounded (``LocalTrainer``; checkpoints keep the masters, ``master_weights.safetensors``). Checkpoints load onto the
configured device whichever device wrote them. Same seed, same device and dtype: the same metrics; on a GPU this
holds only as far as its kernels are deterministic (``spade bench gpu`` checks two runs there).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import torch

from spade.config import SpadeConfig, logprob_temperature
from spade.configtools import ConfigError
from spade.io import atomic_write_json
from spade.core.losses import chunked_token_logprobs, grpo_loss, tis_weights, token_logprobs
from spade.provenance import stamp

log = logging.getLogger("spade.train.trainer")
MASTER_WEIGHTS = "master_weights.safetensors"  # a checkpoint's float32 master weights (train.dtype below float32)


def train_device(train_config) -> torch.device:
    """The device ``train.device`` names: 'auto' is cuda when torch sees a GPU, else the CPU."""
    name = train_config.device
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"config key 'train.device' is 'cuda', but torch sees no CUDA device (torch "
                          f"{torch.__version__}, built for CUDA {torch.version.cuda}); set it to 'auto' or 'cpu'")
    if name not in ("cpu", "cuda"):
        raise ConfigError(f"config key 'train.device' is {name!r}; allowed: auto, cpu, cuda")
    return torch.device(name)


def train_dtype(train_config, device: torch.device) -> torch.dtype:
    """The model's weight dtype ``train.dtype`` names on ``device``: 'auto' is bfloat16 on cuda, float32 elsewhere."""
    name = train_config.dtype
    if name == "auto":
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    if name not in ("float32", "bfloat16"):
        raise ConfigError(f"config key 'train.dtype' is {name!r}; allowed: auto, float32, bfloat16")
    return getattr(torch, name)


def use_deterministic_kernels(enabled: bool, device: torch.device) -> None:
    """``train.deterministic``: torch's deterministic kernels for this process, or its defaults.

    On the CPU the one kernel of our step that is not deterministic is index_put with accumulate, the backward of
    ``hidden[inverse, :-1]`` in ``sequence_logprobs`` (several samples read one row): with more than one thread it
    adds with atomics in arrival order (ATen ``IndexKernel.cpp``, taken only when deterministic algorithms are off).
    Found by hashing every aten op's output in two runs of one config: the first op that differed. cuBLAS needs
    its workspace fixed for repeatable matmuls before CUDA starts; on cuda an op with no deterministic kernel warns
    (``warn_only``) rather than stopping a run that the CPU tests cannot reach."""
    if enabled and device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(enabled, warn_only=enabled and device.type != "cpu")


def _pad(rows: list, value) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [value] * (width - len(r)) for r in rows])


PLAIN_HEAD_MODELS = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
                     "MistralForCausalLM")  # logits = lm_head(last hidden state): no soft-capping, no scale


def plain_head(model) -> bool:
    """Whether ``model``'s logits are exactly its output projection of the decoder's last hidden states."""
    head = model.get_output_embeddings()
    return (type(model).__name__ in PLAIN_HEAD_MODELS and getattr(head, "bias", None) is None
            and not getattr(model.config, "logit_scale", None))


def cast_parameters(model, dtype: torch.dtype) -> None:
    """Cast ``model``'s parameters (tied ones once) to ``dtype`` in place, leaving its buffers as they are:
    ``model.to(dtype)`` would also round the rotary embedding's float32 frequencies, which ``from_pretrained(...,
    dtype=...)`` keeps in float32."""
    for param in model.parameters():
        if param.is_floating_point() and param.dtype != dtype:
            param.data = param.data.to(dtype)


def sequence_logprobs(model, ids: torch.Tensor, attention: torch.Tensor, mask: torch.Tensor,
                      temperature: float) -> torch.Tensor:
    """[B, T] log-prob of token t given tokens < t where ``mask`` [B, T] marks a trained token, 0 elsewhere (and
    at position 0): the loss, TIS and the KL read the trained tokens only.

    Two savings, neither of which changes a number: samples that differ in their last token only share one
    forward pass; a model whose logits are its output projection of the last hidden states (``plain_head``:
    Llama, Qwen, ...) puts only the trained positions' hidden states through the head, in chunks
    (``chunked_token_logprobs``; the head, [V, D] with V the vocabulary, is much of a small model's step, and a
    design sample's prompt of thousands of tokens trains only its reply). Any other model goes through its own
    forward."""
    temperature = max(temperature, 1e-6)
    # samples that differ in their last token only (one-token design replies to one design prompt) read the same
    # logits at every position (the last token is no position's input): one forward pass of one of them serves
    # all, [G] distinct rows, and ``inverse`` [B] maps each sample to its row
    _, inverse = torch.unique(torch.cat([ids[:, :-1], attention[:, :-1]], dim=1), dim=0, return_inverse=True)
    distinct = int(inverse.max()) + 1
    if distinct < len(ids):
        first = torch.zeros(distinct, dtype=torch.long, device=ids.device).scatter_(
            0, inverse, torch.arange(len(ids), device=ids.device))
        forward_ids, forward_attention = ids[first], attention[first]
    else:
        forward_ids, forward_attention, inverse = ids, attention, None
    if plain_head(model):
        hidden = model.get_decoder()(input_ids=forward_ids, attention_mask=forward_attention).last_hidden_state
        hidden = hidden[:, :-1] if inverse is None else hidden[inverse, :-1]
        rows, cols = torch.nonzero(mask[:, 1:] > 0, as_tuple=True)
        picked = chunked_token_logprobs(hidden[rows, cols][None], model.get_output_embeddings().weight,
                                        ids[:, 1:][rows, cols][None], temperature)[0]
        lp = torch.zeros(hidden.shape[:2], dtype=picked.dtype, device=picked.device).index_put((rows, cols), picked)
    else:
        logits = model(input_ids=forward_ids, attention_mask=forward_attention).logits
        logits = logits[:, :-1] if inverse is None else logits[inverse, :-1]
        lp = token_logprobs(logits.float(), ids[:, 1:], temperature) * (mask[:, 1:] > 0)
    return torch.cat([torch.zeros_like(lp[:, :1]), lp], dim=1)


def micro_batch_groups(lengths: list, size: int, split_lengths: bool = True) -> list:
    """Index groups of at most ``size`` samples, in order, for a step's samples sorted by length (``lengths``).
    ``split_lengths``: a sample more than twice as long as its group's first starts a new group, so that a few short
    agent samples never share a micro batch with design samples of a 3k-token prompt: padded to that length, each
    would cost a whole forward and backward of it (the shared pass of ``sequence_logprobs`` serves identical
    prompts only). The step's gradient is the sum over groups either way; only the order of float additions
    changes. False: fixed groups of ``size`` (before issue 48)."""
    groups = []
    for index, length in enumerate(lengths):
        if not groups or len(groups[-1]) == size or (split_lengths and length > 2 * lengths[groups[-1][0]]):
            groups.append([])
        groups[-1].append(index)
    return groups


def freeze_weights(model, frozen) -> None:
    """Keep the weights ``train.frozen`` names fixed: no gradient, no optimizer state ('embeddings': the input token
    embeddings; config.TRAIN_FROZEN)."""
    if "embeddings" in frozen:
        model.get_input_embeddings().weight.requires_grad_(False)


class LocalTrainer:
    """GRPO on one model (spec 6): token-level asymmetric clipping, optional k3 KL, TIS (``train.tis_samples``).

    The trainer works on the device the model is on (``train_run`` puts it on ``train.device``) and casts the model
    to ``train.dtype``. Below float32 the optimizer holds float32 master weights (``masters``, taken from the weights
    before the cast): each micro-batch's gradients are summed into them in float32, AdamW steps them, and the model's
    weights become their rounded copies, so steps smaller than the model dtype's resolution still accumulate."""

    def __init__(self, config: SpadeConfig, model, pad_id: int):
        self.config, self.model, self.pad_id = config, model, pad_id
        tc = config.train
        self.device = next(model.parameters()).device
        freeze_weights(model, tc.frozen)
        dtype = train_dtype(tc, self.device)
        self.names = [name for name, p in model.named_parameters() if p.requires_grad]
        self.masters = None
        if dtype != torch.float32:
            self.masters = [p.detach().float().clone().requires_grad_() for p in model.parameters() if p.requires_grad]
        cast_parameters(model, dtype)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.masters or self.params, lr=tc.learning_rate,
                                           betas=(tc.adam_beta1, tc.adam_beta2), weight_decay=tc.weight_decay)
        self.reference = None
        if tc.kl_coef > 0:
            import copy

            self.reference = copy.deepcopy(model).eval().requires_grad_(False)
        self.temperature = logprob_temperature(config)
        self.split_lengths = True  # micro_batch_groups: spade bench step times False, the fixed groups, against it

    def _gather_gradients(self) -> None:
        """Add the model's gradients (model dtype) to the float32 masters' and free them (no-op in float32)."""
        if self.masters is None:
            return
        for param, master in zip(self.params, self.masters):
            if param.grad is not None:
                if master.grad is None:
                    master.grad = param.grad.float()
                else:
                    master.grad.add_(param.grad)
                param.grad = None

    def _publish(self) -> None:
        """Write the float32 masters into the model's weights, rounded to its dtype (no-op in float32)."""
        if self.masters is not None:
            with torch.no_grad():
                for param, master in zip(self.params, self.masters):
                    param.copy_(master)

    def _logprobs(self, model, ids: torch.Tensor, attention: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``sequence_logprobs`` at the trainer's log-prob temperature."""
        return sequence_logprobs(model, ids, attention, mask, self.temperature)

    def _batch(self, samples: list) -> dict:
        """The padded tensors of ``samples``, on the model's device."""
        ids = _pad([s.token_ids for s in samples], self.pad_id)
        tensors = {
            "ids": ids,
            "attention": _pad([[1] * len(s.token_ids) for s in samples], 0),
            "mask": _pad([s.loss_mask for s in samples], 0).float(),
            "rollout": _pad([s.rollout_logprobs for s in samples], 0.0).float(),
            "advantages": torch.tensor([s.advantage for s in samples], dtype=torch.float32),
            "weights": torch.tensor([s.weight for s in samples], dtype=torch.float32),
            "delayed": torch.tensor([s.delayed for s in samples]),
        }
        return {key: value.to(self.device) for key, value in tensors.items()}

    def update(self, samples: list, one_step: bool = False) -> dict:
        """One rollout's policy update; returns averaged statistics. Optimizer steps of ``train.global_batch``
        samples, or ONE step over all of them with ``one_step`` ('global_batch' structure, where a rollout is one
        step even after per-turn samples fanned out past the global batch)."""
        tc = self.config.train
        stats = {"loss": 0.0, "clip_frac": 0.0, "kl_mean": 0.0, "tokens": 0, "optimizer_steps": 0, "grad_norm": 0.0,
                 "forward_tokens": 0, "padded_tokens": 0,  # sequence tokens through forward/backward, with padding
                 # samples that needed no forward/backward (advantage 0 without KL, or no trained token)
                 "skipped_zero_advantage": 0}
        if not samples:
            return stats
        micro_batches = 0
        size = len(samples) if one_step else tc.global_batch
        for start in range(0, len(samples), size):
            chunk = samples[start : start + size]
            total_tokens = sum(sum(s.loss_mask) for s in chunk)
            total_samples = len(chunk)  # before the zero-advantage samples leave: they count in both means
            if total_tokens == 0:
                continue
            self.optimizer.zero_grad(set_to_none=True)
            # without a KL term a sample of advantage 0 adds exactly 0 to the loss and its gradient (Eq. 2: -min(r A,
            # clip(r) A) = 0), and a sample without trained tokens (agent.truncated_episodes 'mask') adds 0 in any
            # case: both still count in the step's denominators above (tokens, samples), but need no forward or
            # backward
            idle = [s.advantage == 0 and tc.kl_coef == 0 or not any(s.loss_mask) for s in chunk]
            stats["skipped_zero_advantage"] += sum(idle)
            chunk = [s for s, skip in zip(chunk, idle) if not skip]
            # micro batches of similar lengths pad little; the step's gradient is their sum either way
            chunk = sorted(chunk, key=lambda sample: len(sample.token_ids))
            for group in micro_batch_groups([len(s.token_ids) for s in chunk], tc.micro_batch, self.split_lengths):
                batch = self._batch([chunk[i] for i in group])
                stats["forward_tokens"] += int(batch["attention"].sum())
                stats["padded_tokens"] += batch["ids"].numel()
                with torch.no_grad():
                    ref = self._logprobs(self.reference, batch["ids"], batch["attention"], batch["mask"]) \
                        if self.reference else None
                self.model.train()
                logprobs = self._logprobs(self.model, batch["ids"], batch["attention"], batch["mask"])
                # pi_old is the policy of the weights this optimizer step starts from, i.e. pi_theta itself (one
                # optimizer step per chunk, no epochs), so its log-probs are these, detached: no second forward pass
                old = logprobs.detach()
                # TIS (train.tis_samples): every sample (reference), or the delayed designer samples only
                tis = None
                if tc.tis and (tc.tis_samples == "all" or bool(batch["delayed"].any())):
                    tis = tis_weights(old, batch["rollout"], tc.tis_cap)
                    if tc.tis_samples == "delayed":
                        tis = torch.where(batch["delayed"][:, None], tis, torch.ones_like(tis))
                loss, info = grpo_loss(logprobs, old, batch["advantages"], batch["mask"], tc.eps_low, tc.eps_high,
                                       tc.kl_coef, ref, tis, batch["weights"], tc.loss_aggregation)
                # each micro batch's mean, weighted so that the step's loss is its mean over the whole step
                if tc.loss_aggregation == "token_mean":
                    share = float(batch["mask"].sum()) / total_tokens
                else:
                    share = len(batch["advantages"]) / total_samples
                (loss * share).backward()
                self._gather_gradients()
                stats["loss"] += float(loss.detach()) * share
                stats["clip_frac"] += float(info["clip_frac"])
                stats["kl_mean"] += float(info["kl_mean"])
                micro_batches += 1
            stepped = self.masters or self.params
            if not chunk:  # every sample skipped: the step still runs (weight decay, Adam's moments) on the zero
                for param in stepped:  # gradient the backward passes would have given
                    param.grad = torch.zeros_like(param)
            norm = torch.nn.utils.clip_grad_norm_(stepped, tc.max_grad_norm or float("inf"))
            self.optimizer.step()
            self._publish()
            stats["grad_norm"] = float(norm)
            stats["optimizer_steps"] += 1
            stats["tokens"] += total_tokens
        self.model.eval()
        if micro_batches:
            stats["clip_frac"] /= micro_batches
            stats["kl_mean"] /= micro_batches
            stats["loss"] /= max(stats["optimizer_steps"], 1)
        return stats

    # ----- checkpoints ---------------------------------------------------------------------------
    def save(self, folder: Path, tokenizer, extra: dict) -> None:
        """Write a checkpoint atomically: model, tokenizer, optimizer (and float32 master weights below float32)
        and the self-play state."""
        from safetensors.torch import save_file

        from spade.inference.models import save_model

        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_model(self.model, tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        if self.masters is not None:
            save_file({name: master.detach() for name, master in zip(self.names, self.masters)}, tmp / MASTER_WEIGHTS)
        atomic_write_json(tmp / "trainer_state.json", extra)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)

    def load_state(self, folder: Path) -> None:
        """The optimizer state and, when the checkpoint has them, the float32 master weights of checkpoint ``folder``,
        onto the model's device whichever device wrote them (the optimizer's state is read on the CPU and moved to
        its parameters' device by ``load_state_dict``; its step counts stay on the CPU, as in a fresh optimizer).
        Masters saved by a run below float32 become this trainer's masters, or its weights when it trains in float32;
        a float32 checkpoint's weights are its masters already (the model was loaded from them)."""
        from safetensors.torch import load_file

        self.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True, map_location="cpu"))
        if (folder / MASTER_WEIGHTS).is_file():
            saved = load_file(folder / MASTER_WEIGHTS, device=str(self.device))
            with torch.no_grad():
                for name, target in zip(self.names, self.masters or self.params):
                    target.copy_(saved[name])
            self._publish()


def resume_key(config, model_dir) -> dict:
    """What a checkpoint must match to be resumed: the config (except selfplay.total_steps, which a user may raise to
    train on) and the base model's weights."""
    from dataclasses import asdict

    from spade.inference.models import read_provenance
    from spade.provenance import settings_hash

    settings = asdict(config)
    settings["selfplay"].pop("total_steps")
    provenance = read_provenance(model_dir) or {}
    return {"config_sha256": settings_hash(settings), "base_weights_sha256": provenance.get("weights_sha256")}


def _clear_run(run_dir: Path) -> None:
    """Empty a run folder whose checkpoints belong to another run. The folder itself stays, and so does eval/: it
    holds other jobs' results (the base model's evaluations are still valid), and an evaluation does not reuse item
    records of another model (spade.evals.base.model_identity)."""
    for path in run_dir.iterdir():
        if path.name == "eval":
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _latest_checkpoint(run_dir: Path):
    folders = sorted(p for p in (run_dir / "checkpoints").glob("step_*") if (p / "trainer_state.json").is_file())
    return folders[-1] if folders else None


def _cut_metrics(path: Path, before_step: int, last: dict | None = None) -> None:
    """Keep only metric lines of steps < ``before_step`` (a resumed run rewrites the rest); ``last``, the line of step
    ``before_step - 1`` that the checkpoint kept, is put back when the file lacks it (the process died between
    writing the checkpoint and appending the line)."""
    from spade.io import atomic_write_text

    text = path.read_text() if path.exists() else ""
    lines = [ln for ln in text.splitlines() if ln.strip() and json.loads(ln)["step"] < before_step]
    if last is not None and not any(json.loads(ln)["step"] == last["step"] for ln in lines):
        lines.append(json.dumps(last, sort_keys=True))
    if lines or path.exists():
        atomic_write_text(path, "".join(ln + "\n" for ln in lines))


def train_run(config: SpadeConfig, model_dir: str | Path, corpus_path: str | Path | None, run_dir: str | Path,
              stop_after: int | None = None) -> dict:
    """Run (or resume) the self-play training of ``config``; returns the run summary.

    ``stop_after``: stop once that many steps have run in this call (used by the resume test).
    """
    from rich.progress import Progress

    from spade.designer.memory import EnvironmentMemory
    from spade.designer.serve import local_designer
    from spade.envs.validate import Validator
    from spade.inference.generation_vllm import VLLMBackend, build_backend
    from spade.train.live_metrics import LiveMetrics, require_backends
    from spade.inference.models import load_model, save_model
    from spade.sandbox.pool import SandboxPool
    from spade.core.backend_setup import corpus_sampler, fresh_memory
    from spade.core.selfplay import SelfPlay, SelfPlayState

    run_dir = Path(run_dir)
    require_backends(config)  # a missing tensorboard/wandb package stops the run here, before any model loads
    device = train_device(config.train)  # a 'cuda' without a GPU stops the run here
    torch.manual_seed(config.seed)
    use_deterministic_kernels(config.train.deterministic, device)
    key = resume_key(config, model_dir)
    latest = _latest_checkpoint(run_dir)
    saved = json.loads((latest / "trainer_state.json").read_text()) if latest is not None else None
    if saved is not None and saved.get("resume_key") != key:
        # Snakemake reruns a train job when its config or model changed; like its own outputs, the old run goes
        log.warning("%s holds checkpoints of another config or base model (latest %s); starting the run over",
                    run_dir, latest.name)
        _clear_run(run_dir)
        latest = saved = None
    (run_dir / "envs").mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_model(latest or model_dir, device=device)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    trainer = LocalTrainer(config, model, pad_id)  # casts the model to train.dtype
    state, start = SelfPlayState(), 0
    if latest is not None:
        trainer.load_state(latest)
        state, start = SelfPlayState(**saved["selfplay"]), saved["next_step"]
        memory = EnvironmentMemory.load(latest / "memory.json", config.memory)
        log.info("resuming %s from %s (step %d)", run_dir, latest.name, start)
    else:
        memory = fresh_memory(config)
    metrics_path = run_dir / "metrics.jsonl"
    _cut_metrics(metrics_path, start, saved.get("metrics") if saved is not None else None)
    sampler = corpus_sampler(config, corpus_path)
    # hf shares the trainer's model object (always in sync); vllm is an engine beside the trainer, weights pushed after
    # every update
    backend = build_backend(config.inference, latest or model_dir, model=model, tokenizer=tokenizer, device=device,
                            rollout_logprobs=config.train.rollout_logprobs)
    # baseline.external_serve: a frozen copy of the base model served on loopback for the designer (stopped on exit)
    # TensorBoard (and offline W&B) get each metrics line as it is written; a resumed run rewrites from `start` on
    with local_designer(config, model_dir, run_dir) as core_config, SandboxPool(config.sandbox) as pool, \
            LiveMetrics(config, run_dir, first_step=start) as live:
        core = SelfPlay(core_config, backend, Validator(pool, config.validation), memory, sampler, state,
                        rejected_dir=run_dir / "rejected", pool_dir=run_dir)
        ran = 0
        with Progress(transient=True) as progress:
            task = progress.add_task("self-play", total=config.selfplay.total_steps, completed=start)
            for step in range(start, config.selfplay.total_steps):
                core.clock.start_step()
                samples, metrics, closed = core.rollout(step)
                if getattr(backend, "cache", None) is not None:  # the update changes every weight: free the keys
                    backend.cache.clear()                        # and values now, before the optimizer needs memory
                with core.clock.phase("optimizer"):
                    one_step = config.selfplay.batch_structure == "global_batch"
                    metrics.update({f"train_{k}": v for k, v in trainer.update(samples, one_step).items()})
                    if isinstance(backend, VLLMBackend):  # the engine samples the next step from the updated policy
                        weights = run_dir / "rollout_weights"
                        save_model(model, weights)
                        backend.reload_weights(weights)
                metrics["samples"] = len(samples)
                write_archives(run_dir, closed)
                if step + 1 in config.selfplay.checkpoint_steps():
                    # the checkpoint keeps this step's metrics line (without the checkpoint's own time), which a run
                    # resumed from it restores if the process died before appending the line below
                    with core.clock.phase("checkpoint"):
                        folder = run_dir / "checkpoints" / f"step_{step + 1:06d}"
                        core.memory.save(run_dir / "memory.json")
                        trainer.save(folder, tokenizer, {"next_step": step + 1, "resume_key": key,
                                                         "selfplay": _state_dict(core.state),
                                                         "metrics": {**metrics, **core.clock.metrics()}})
                        shutil.copy(run_dir / "memory.json", folder / "memory.json")
                metrics.update(core.clock.metrics())
                with metrics_path.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(metrics, sort_keys=True) + "\n")
                live.log(metrics)
                log.info("step %d/%d: agent win rate %.3f, mean return %.3f, %d samples, loss %.4f, %.1f s",
                         step + 1, config.selfplay.total_steps, metrics["agent_win_rate"] or 0.0,
                         metrics["agent_mean_return"] or 0.0, len(samples), metrics["train_loss"],
                         metrics["step_seconds"])
                progress.advance(task)
                ran += 1
                if stop_after is not None and ran >= stop_after:
                    return {"stopped_at": step + 1}
    summary = {"run": config.run_name, "model_card": config.model_card, "steps": config.selfplay.total_steps,
               "checkpoints": [f"step_{s:06d}" for s in config.selfplay.checkpoint_steps()], "provenance": stamp(config)}
    atomic_write_json(run_dir / "summary.json", summary)
    return summary


def _state_dict(state) -> dict:
    from dataclasses import asdict

    return asdict(state)


def write_archives(run_dir: Path, rows: list) -> None:
    """Write ``envs/set_<step>.json`` for every environment set among the closed ``rows`` (a step can close two:
    the previous set at a regeneration step and, at the run's last step, the current one)."""
    by_set: dict = {}
    for row in rows:
        by_set.setdefault(row["step"], []).append(row)
    for set_step, members in by_set.items():
        atomic_write_json(Path(run_dir) / "envs" / f"set_{set_step:05d}.json", _archive(members))


def _archive(slots: list) -> dict:
    """The archive of one environment set: everything but the token-level designer samples."""
    rows = []
    for slot in slots:
        row = {k: v for k, v in slot.items() if k != "designer_sample"}
        row["win_rate"] = slot["wins"] / slot["episodes"] if slot.get("episodes") else None
        rows.append(row)
    return {"environments": rows}
