"""The OpenRLHF launcher: the typed config (recipe + model card + run file + ``openrlhf`` placement) becomes
the exact ``python -m openrlhf.cli.train_ppo_ray`` command of OpenRLHF 0.11.2, its Ray/vLLM/DeepSpeed
placement, and a launch script for a SLURM allocation (or an existing Ray cluster).

- ``OpenRLHFConfig``: the ``openrlhf`` config section (GPU placement and engine settings only; every
  training hyperparameter comes from the recipe/run sections, so the local and GPU trainers share them).
  Per-backbone presets live in ``configs/openrlhf/<model_card>.yaml``.
- ``placement``: GPUs per role, colocation and tensor parallelism, validated before anything starts.
- ``openrlhf_command``: the argv, a pure function of the config and three paths.
- ``launch_script``: bash text that starts Ray on the allocation (or submits to ``openrlhf.ray_address``)
  and runs the command.
- ``probe_parser`` / ``check_command``: run OpenRLHF's *own* argument parser (the ``__main__`` block of
  ``openrlhf/cli/train_ppo_ray.py``, which needs ray and vLLM to import) in a subprocess with those
  imports stubbed, parse our argv with it, and compare every flag with its parser entry.
- ``launch``: what ``spade train --backend openrlhf`` runs (GPU environment only).

Design and the flag table: docs/OPENRLHF.md ("Launcher").
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path

from spade.configtools import ConfigError, from_dict, load_yaml, option

OPENRLHF_VERSION = "0.11.2"
ENTRY_POINT = "openrlhf.cli.train_ppo_ray"
# the GPU training stack OpenRLHF 0.11.2 pins (its issue); the CPU environment has none of ray/vllm/deepspeed
GPU_STACK = ("openrlhf==0.11.2", "ray[default]==2.55.0", "vllm==0.29.0", "deepspeed==0.19.6", "transformers==5.15.0")
GPU_MODULES = ("ray", "vllm", "deepspeed", "openrlhf")
PRESET_DIR = Path(__file__).resolve().parents[3] / "configs" / "openrlhf"
WANDB_KEY = "${WANDB_API_KEY:?set WANDB_API_KEY for wandb logging}"  # expanded by the shell, never printed
# logging.wandb (offline W&B): OpenRLHF builds its W&B logger only when --logger.wandb.key is non-empty
# (openrlhf/trainer/ppo_trainer.py), and offline wandb never reads the key (wandb 0.31.0's wandb.login returns before
# using it when WANDB_MODE=offline, which logger_env sets): the flag carries this word as the switch
WANDB_OFFLINE_KEY = "offline"

# Flags the plugin needs off or unset (docs/OPENRLHF.md): extra_args may not set them.
FORBIDDEN_FLAGS = {
    "--train.async_enable": "the coordinator needs one synchronous batch per step",
    "--train.partial_rollout_enable": "the coordinator needs one synchronous batch per step",
    "--rollout.vllm_generate_batch_size": "one SPADE step is exactly one rollout batch",
    "--algo.dynamic_filtering_enable": "it would request replacement tickets",
    "--eval.dataset": "evaluation runs through our own pipeline (spade eval)",
    "--reward.normalize_enable": "rewards are our advantages already",
    "--reward.overlong_buffer_len": "rewards are our advantages already",
    "--reward.stop_properly_penalty_coef": "rewards are our advantages already",
    "--algo.advantage.no_std_norm": "irrelevant under dr_grpo",
    "--actor.entropy_coef": "not part of the paper's loss",
    "--actor.dual_clip": "not part of the paper's loss",
    "--data.apply_chat_template": "tickets are read verbatim",
    "--data.input_template": "tickets are read verbatim",
}
# Where the launcher takes a flag from (for the error when extra_args repeats one).
FLAG_SOURCES = {
    "--actor.adam.lr": "train.learning_rate", "--actor.adam.betas": "train.adam_beta1/adam_beta2",
    "--actor.adam.weight_decay": "train.weight_decay", "--actor.eps_clip_low_high": "train.eps_low/eps_high",
    "--algo.kl.init_coef": "train.kl_coef", "--train.batch_size": "train.global_batch",
    "--actor.max_norm": "train.max_grad_norm", "--train.seed": "seed",
    "--rollout.n_samples_per_prompt": "train.global_batch / slots (selfplay.group_size with batch_structure 'groups')", "--rollout.temperature": "agent.temperature",
    "--rollout.top_p": "agent.top_p", "--data.max_len": "openrlhf.max_len", "--ckpt.save_steps": "selfplay.checkpoint_every",
    "--algo.advantage.is_correction_threshold": "train.tis_cap",
}


# bytes of "/session_2026-12-02_06-50-40_123456_4194304/sockets/plasma_store" (Ray 2.55's session folder, a 7-digit
# pid) plus a margin of 10: what Ray appends to --temp-dir for its longest socket path
RAY_SOCKET_SUFFIX = 64 + 10


class LaunchError(RuntimeError):
    """The GPU launch cannot proceed; the message says what is missing and what to do."""


@dataclass(frozen=True)
class OpenRLHFConfig:
    enabled: bool = option(False, "Train with OpenRLHF on GPUs (true) or with the local trainer (false); "
                           "`spade train --backend` overrides it.")
    ray_address: str = option("", "Ray dashboard address of an existing cluster (e.g. http://head:8265): the run "
                              "is sent with `ray job submit`. Empty: start Ray on the SLURM allocation itself.")
    num_nodes: int = option(1, "Nodes of the allocation (SLURM --nodes).", min=1)
    gpus_per_node: int = option(8, "GPUs per node of the allocation.", min=1)
    actor_num_nodes: int = option(1, "Nodes of the DeepSpeed actor (--actor.num_nodes).", min=1)
    actor_num_gpus_per_node: int = option(8, "GPUs per node of the actor (--actor.num_gpus_per_node).", min=1)
    ref_num_nodes: int = option(1, "Nodes of the reference model, used only when train.kl_coef > 0.", min=1)
    ref_num_gpus_per_node: int = option(8, "GPUs per node of the reference model (train.kl_coef > 0 only).", min=1)
    vllm_num_engines: int = option(8, "vLLM engines (--vllm.num_engines); each runs one SandboxPool for episodes.",
                                   min=1)
    vllm_tensor_parallel_size: int = option(1, "GPUs per vLLM engine: choose the smallest that holds the bf16 "
                                            "weights plus the KV cache of 32k-token episodes.", min=1)
    vllm_gpu_memory_utilization: float = option(0.6, "Share of a GPU's memory vLLM may take; with colocation the "
                                                "DeepSpeed states need the rest while vLLM sleeps.", min=0.05)
    vllm_enable_prefix_caching: bool = option(True, "vLLM prefix caching: every agent turn resends the episode so far.")
    vllm_enforce_eager: bool = option(False, "Disable CUDA graphs in vLLM (debugging; slower).")
    colocate_all_models: bool = option(True, "Hybrid engine: actor, reference and vLLM share the same GPUs and take "
                                       "turns (vLLM and DeepSpeed sleep); needs engines x TP = actor GPUs.")
    colocate_actor_ref: bool = option(False, "Without the hybrid engine: actor and reference share GPUs.")
    zero_stage: int = option(3, "DeepSpeed ZeRO stage.", choices=(0, 1, 2, 3))
    param_dtype: str = option("bf16", "Training dtype (--ds.param_dtype).", choices=("bf16", "fp16"))
    gradient_checkpointing: bool = option(True, "Recompute activations in the backward pass (32k-token samples).")
    adam_offload: bool = option(False, "Keep Adam states in CPU memory (saves GPU memory, costs time).")
    ref_offload: bool = option(False, "Keep the reference model in CPU memory (train.kl_coef > 0 only).")
    packing_samples: bool = option(True, "Pack samples without padding (needs flash attention).")
    attn_implementation: str = option("flash_attention_2", "Attention kernel of the DeepSpeed models "
                                      "(flash_attention_2 needs the flash-attn package; sdpa does not).")
    train_micro_batch_size: int = option(1, "Samples per GPU per forward/backward of the update "
                                         "(--train.micro_batch_size).", min=1)
    rollout_micro_batch_size: int = option(1, "Samples per GPU per forward when log-probs are recomputed "
                                           "(--rollout.micro_batch_size).", min=1)
    max_len: int = option(0, "--data.max_len, the longest sequence and vLLM's max_model_len; 0 = "
                          "max(agent.max_context_tokens, design_prompt_tokens + designer.max_new_tokens).", min=0)
    design_prompt_tokens: int = option(16384, "Token budget assumed for a design prompt (corpus document + memory "
                                       "examples + instructions) when max_len is derived.", min=1)
    ckpt_max_num: int = option(2, "DeepSpeed resume checkpoints kept (--ckpt.max_num); the Hugging Face "
                               "checkpoints that evaluation reads are all kept.", min=1)
    wandb_project: str = option("", "Weights & Biases project; empty = TensorBoard only. The key is read from "
                                "$WANDB_API_KEY when the script runs.")
    network_interface: str = option("", "Network interface whose IPv4 address Ray uses on every node (e.g. ib0 "
                                    "for IP over InfiniBand); also NCCL's and gloo's socket interface unless "
                                    "NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME are set. Empty: the first non-loopback "
                                    "IPv4 address of `hostname -I`.")
    env: dict = option({}, "Environment variables exported to every Ray process on every node, e.g. {NCCL_IB_HCA: "
                       "mlx5, NCCL_DEBUG: WARN}: your cluster's NCCL/InfiniBand settings (its documentation lists "
                       "them); values are strings.")
    sandbox_workers_per_engine: int = option(6, "Sandboxed workers (and threads stepping them) per vLLM engine; an "
                                             "engine plays about rollout.batch_size x G / engines episodes at once. "
                                             "Keep engines x workers below the node's CPUs (8 per GPU in "
                                             "profiles/slurm) minus a few for Ray and the trainers.", min=1)
    extra_args: list = option([], "Further train_ppo_ray flags, e.g. ['--ds.experts_implementation', 'grouped_mm']; "
                              "checked against OpenRLHF's parser; flags the launcher sets or the plugin needs "
                              "off are refused.")

    def __post_init__(self):
        if self.vllm_gpu_memory_utilization > 1.0:
            raise ConfigError(f"config key 'openrlhf.vllm_gpu_memory_utilization' has value "
                              f"{self.vllm_gpu_memory_utilization!r}; it must be in (0, 1]")
        split_extra_args(self.extra_args)
        for name, value in self.env.items():
            if not (isinstance(name, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)):
                raise ConfigError(f"config key 'openrlhf.env' has variable name {name!r}; allowed: letters, digits "
                                  "and '_', not starting with a digit")
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ConfigError(f"config key 'openrlhf.env.{name}' has value {value!r}; write it as a string")
        if self.network_interface and not re.fullmatch(r"[A-Za-z0-9_.:@-]+", self.network_interface):
            raise ConfigError(f"config key 'openrlhf.network_interface' has value {self.network_interface!r}; "
                              "expected an interface name such as ib0 or eth0")


def split_extra_args(extra: list) -> list:
    """``extra_args`` as ``[(flag, [values...]), ...]``; every item must be a string and the first a flag."""
    groups = []
    for item in extra:
        if not isinstance(item, str):
            raise ConfigError(f"config key 'openrlhf.extra_args' must hold strings, got {item!r}")
        if item.startswith("--"):
            groups.append((item, []))
        elif not groups:
            raise ConfigError(f"config key 'openrlhf.extra_args' must start with a flag (--name), got {item!r}")
        else:
            groups[-1][1].append(item)
    return groups


def load_preset(model_card: str, preset_dir: Path = PRESET_DIR) -> dict:
    """The placement preset ``configs/openrlhf/<model_card>.yaml`` as a plain dict ({} when there is none)."""
    path = Path(preset_dir) / f"{model_card}.yaml"
    return load_yaml(path) if path.is_file() else {}


def resolve_openrlhf(config, overrides: dict | None = None) -> OpenRLHFConfig:
    """The run's ``openrlhf`` section: ``config.openrlhf`` once SpadeConfig has it; otherwise the model card's
    preset (merged with ``overrides``), validated the same way."""
    section = getattr(config, "openrlhf", None)
    if section is not None and not overrides:
        return section
    from spade.config import deep_merge

    base = asdict(section) if section is not None else load_preset(config.model_card)
    return from_dict(OpenRLHFConfig, deep_merge(base, overrides or {}), "openrlhf")


# ----- placement ------------------------------------------------------------------------------------------


def data_max_len(config, orl: OpenRLHFConfig) -> int:
    """``--data.max_len``: holds an agent episode and a design prompt plus its completion."""
    if orl.max_len:
        if orl.max_len < config.agent.max_context_tokens:
            raise ConfigError(f"config key 'openrlhf.max_len' ({orl.max_len}) is below agent.max_context_tokens "
                              f"({config.agent.max_context_tokens}); episodes would not fit (0 = derive it)")
        return orl.max_len
    return max(config.agent.max_context_tokens, orl.design_prompt_tokens + config.designer.max_new_tokens)


def _ticket_plan(config):
    from spade.rlhf.plan import ticket_plan

    try:
        return ticket_plan(config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def placement(config, orl: OpenRLHFConfig | None = None) -> dict:
    """GPUs per role, colocation and tensor parallelism; raises ``ConfigError`` naming the key when the
    placement cannot work (OpenRLHF would fail the same way, but only after Ray and the models started)."""
    orl = orl or resolve_openrlhf(config)
    key = "config key 'openrlhf."

    def role(name, nodes, per_node):
        if nodes > orl.num_nodes:
            raise ConfigError(f"{key}{name}_num_nodes' ({nodes}) exceeds openrlhf.num_nodes ({orl.num_nodes})")
        if per_node > orl.gpus_per_node:
            raise ConfigError(f"{key}{name}_num_gpus_per_node' ({per_node}) exceeds openrlhf.gpus_per_node "
                              f"({orl.gpus_per_node})")
        return {"nodes": nodes, "gpus_per_node": per_node, "gpus": nodes * per_node}

    actor = role("actor", orl.actor_num_nodes, orl.actor_num_gpus_per_node)
    kl = config.train.kl_coef > 0
    ref = role("ref", orl.ref_num_nodes, orl.ref_num_gpus_per_node) if kl else None
    tp = orl.vllm_tensor_parallel_size
    if tp > orl.gpus_per_node:
        raise ConfigError(f"{key}vllm_tensor_parallel_size' ({tp}) exceeds openrlhf.gpus_per_node "
                          f"({orl.gpus_per_node}); an engine must fit on one node")
    vllm = {"engines": orl.vllm_num_engines, "tensor_parallel_size": tp, "gpus": orl.vllm_num_engines * tp}
    shared_ref = orl.colocate_all_models or orl.colocate_actor_ref
    if ref and shared_ref and (ref["nodes"], ref["gpus_per_node"]) != (actor["nodes"], actor["gpus_per_node"]):
        raise ConfigError(f"{key}ref_num_nodes'/'ref_num_gpus_per_node' ({ref['nodes']} x {ref['gpus_per_node']}) "
                          f"must equal the actor's ({actor['nodes']} x {actor['gpus_per_node']}) when the reference "
                          "is colocated with the actor (train.kl_coef > 0)")
    if orl.colocate_all_models:
        if vllm["gpus"] != actor["gpus"]:
            raise ConfigError(f"{key}vllm_num_engines' x 'vllm_tensor_parallel_size' ({orl.vllm_num_engines} x {tp} "
                              f"= {vllm['gpus']}) must equal the actor's GPUs ({actor['gpus']}) with "
                              "openrlhf.colocate_all_models")
        used = actor["gpus"]
    else:
        used = actor["gpus"] + vllm["gpus"] + (ref["gpus"] if ref and not shared_ref else 0)
    available = orl.num_nodes * orl.gpus_per_node
    if used > available:
        raise ConfigError(f"the placement needs {used} GPUs but openrlhf.num_nodes x openrlhf.gpus_per_node is "
                          f"{orl.num_nodes} x {orl.gpus_per_node} = {available}")
    per_update = orl.train_micro_batch_size * actor["gpus"]
    if config.train.global_batch % per_update:
        raise ConfigError(f"config key 'train.global_batch' ({config.train.global_batch}) must be a multiple of "
                          f"openrlhf.train_micro_batch_size x actor GPUs ({per_update}) (DeepSpeed's batch rule)")
    plan = _ticket_plan(config)
    if plan.responses_per_step // orl.rollout_micro_batch_size < actor["gpus"]:
        raise ConfigError(f"{key}rollout_micro_batch_size' ({orl.rollout_micro_batch_size}) leaves fewer "
                          f"micro-batches than actor GPUs ({actor['gpus']}) for {plan.responses_per_step} responses")
    if orl.packing_samples and "flash_attention" not in orl.attn_implementation:
        raise ConfigError(f"{key}packing_samples' needs a flash_attention attn_implementation, got "
                          f"{orl.attn_implementation!r}")
    notes = []
    if plan.responses_per_step % config.train.global_batch:
        notes.append(f"{plan.responses_per_step} responses per step (incl. pads) are not a multiple of "
                     f"train.global_batch {config.train.global_batch}: the last optimizer step of a rollout is "
                     "completed with the next rollout's first samples (DeepSpeed gradient accumulation)")
    return {"nodes": orl.num_nodes, "gpus_per_node": orl.gpus_per_node, "gpus_available": available,
            "gpus_used": used, "colocate_all_models": orl.colocate_all_models,
            "colocate_actor_ref": bool(ref) and shared_ref, "actor": actor, "ref": ref, "vllm": vllm,
            "rollout_batch_size": plan.tickets_per_step, "n_samples_per_prompt": plan.group_size,
            "responses_per_step": plan.responses_per_step, "max_len": data_max_len(config, orl), "notes": notes,
            "global_batch": config.train.global_batch,
            "optimizer_steps": ("one optimizer step" if plan.responses_per_step == config.train.global_batch else
                                f"{plan.responses_per_step / config.train.global_batch:.2f} optimizer steps")}


# ----- the command ----------------------------------------------------------------------------------------


def _num(value) -> str:
    if isinstance(value, bool):
        raise TypeError(f"a number was expected, got {value!r}")
    return str(value) if isinstance(value, int) else repr(float(value))


def run_paths(run_dir) -> dict:
    """Where OpenRLHF writes inside the run folder."""
    root = Path(run_dir) / "openrlhf"
    return {"root": root, "ckpt": root / "ckpt", "final": root / "final", "tensorboard": root / "tensorboard",
            "script": root / "launch.sh", "tickets": Path(run_dir) / "tickets.jsonl"}


def openrlhf_command(config, run_dir, model_dir, corpus_path=None, orl: OpenRLHFConfig | None = None,
                     python: str = "python") -> list:
    """The exact ``train_ppo_ray`` argv (dotted flags of OpenRLHF 0.11.2). Pure: reads and writes nothing.
    The ticket dataset and run spec it points at are written by ``spade.rlhf.prepare_run``; the batch size
    and G are the ones ``prepare_run`` returns (both come from ``ticket_plan``)."""
    from spade.rlhf import AGENT_FUNC_PATH

    orl = orl or resolve_openrlhf(config)
    if config.corpus.enabled and not corpus_path:
        raise ConfigError("corpus.enabled is true but no corpus was given (corpus.path or --corpus); the "
                          "coordinator grounds every design prompt in it")
    place = placement(config, orl)
    plan = _ticket_plan(config)
    # absolute paths: Ray workers do not share the driver's working directory
    run_dir, model_dir = os.path.abspath(run_dir), os.path.abspath(model_dir)
    train, paths = config.train, run_paths(run_dir)
    cmd = [python, "-m", ENTRY_POINT,
           # placement
           "--actor.num_nodes", _num(place["actor"]["nodes"]),
           "--actor.num_gpus_per_node", _num(place["actor"]["gpus_per_node"])]
    if place["ref"]:
        cmd += ["--ref.num_nodes", _num(place["ref"]["nodes"]),
                "--ref.num_gpus_per_node", _num(place["ref"]["gpus_per_node"])]
    cmd += ["--vllm.num_engines", _num(orl.vllm_num_engines),
            "--vllm.tensor_parallel_size", _num(orl.vllm_tensor_parallel_size),
            "--vllm.gpu_memory_utilization", _num(orl.vllm_gpu_memory_utilization)]
    cmd += ["--vllm.enable_prefix_caching"] * orl.vllm_enable_prefix_caching
    cmd += ["--vllm.enforce_eager"] * orl.vllm_enforce_eager
    if orl.colocate_all_models:
        cmd += ["--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep"]
    elif place["colocate_actor_ref"]:
        cmd += ["--train.colocate_actor_ref"]
    # DeepSpeed
    cmd += ["--ds.zero_stage", _num(orl.zero_stage), "--ds.param_dtype", orl.param_dtype,
            "--ds.attn_implementation", orl.attn_implementation]
    cmd += ["--actor.gradient_checkpointing_enable"] * orl.gradient_checkpointing
    cmd += ["--ds.adam_offload"] * orl.adam_offload
    cmd += ["--ds.packing_samples"] * orl.packing_samples
    cmd += ["--ref.offload"] * (orl.ref_offload and bool(place["ref"]))
    # model, plugin and tickets
    cmd += ["--actor.model_name_or_path", str(model_dir),
            "--train.agent_func_path", str(AGENT_FUNC_PATH),
            "--data.prompt_dataset", str(paths["tickets"]),
            "--data.input_key", "prompt", "--data.label_key", "label",
            "--data.max_len", _num(place["max_len"])]
    # rollout: one SPADE step = one rollout batch of tickets, G responses each
    cmd += ["--rollout.batch_size", _num(plan.tickets_per_step),
            "--rollout.n_samples_per_prompt", _num(plan.group_size),
            "--rollout.micro_batch_size", _num(orl.rollout_micro_batch_size),
            "--rollout.temperature", _num(config.agent.temperature),
            "--rollout.top_p", _num(config.agent.top_p)]
    # the objective (spec 6, Table 5)
    cmd += ["--algo.advantage.estimator", "dr_grpo", "--reward.clip_range", "-1000", "1000"]
    if train.tis:
        cmd += ["--algo.advantage.is_correction_level", "token", "--algo.advantage.is_correction_mode", "clip",
                "--algo.advantage.is_correction_gating", "ratio",
                "--algo.advantage.is_correction_threshold", "0", _num(train.tis_cap)]
    else:
        cmd += ["--algo.advantage.is_correction_level", "off"]
    cmd += ["--actor.policy_loss_type", "ppo", "--actor.loss_agg_mode", "token-mean",
            "--actor.eps_clip_low_high", _num(train.eps_low), _num(train.eps_high),
            "--algo.kl.init_coef", _num(train.kl_coef)]
    if train.kl_coef > 0:
        cmd += ["--algo.kl.use_loss", "--algo.kl.estimator", "k3"]
    cmd += ["--actor.adam.lr", _num(train.learning_rate),
            "--actor.adam.betas", _num(train.adam_beta1), _num(train.adam_beta2),
            "--actor.adam.weight_decay", _num(train.weight_decay),
            "--actor.lr_scheduler", "constant", "--actor.lr_warmup_ratio", "0",
            "--actor.max_norm", _num(train.max_grad_norm),
            "--train.batch_size", _num(train.global_batch),
            "--train.micro_batch_size", _num(orl.train_micro_batch_size),
            "--train.max_epochs", "1", "--train.num_episodes", "1",
            "--train.seed", _num(config.seed)]
    # checkpoints (same steps as the coordinator's spade_state/) and logs, all under the run folder
    cmd += ["--ckpt.path", str(paths["ckpt"]), "--ckpt.save_steps", _num(config.selfplay.checkpoint_every),
            "--ckpt.save_hf", "--ckpt.max_num", _num(orl.ckpt_max_num), "--ckpt.load_enable",
            "--ckpt.output_dir", str(paths["final"]),
            "--logger.logging_steps", "1"]
    # OpenRLHF's own loggers (logging.tensorboard, logging.wandb); our SPADE metrics go beside them from the
    # coordinator (spade.train.live_metrics, <run_dir>/tensorboard/ and <run_dir>/wandb/)
    if config.logging.tensorboard:
        cmd += ["--logger.tensorboard_dir", str(paths["tensorboard"])]
    # the TensorBoard folder is <tensorboard_dir>/<run_name>; OpenRLHF's default name holds a timestamp
    cmd += ["--logger.wandb.run_name", config.run_name]
    if config.logging.wandb:  # offline (logger_env): same run name and group as the coordinator's W&B run
        cmd += ["--logger.wandb.key", WANDB_OFFLINE_KEY, "--logger.wandb.project", config.logging.wandb_project,
                "--logger.wandb.group", config.run_name]
    elif orl.wandb_project:
        cmd += ["--logger.wandb.key", WANDB_KEY, "--logger.wandb.project", orl.wandb_project]
    ours = {token for token in cmd if token.startswith("--")}
    for flag, values in split_extra_args(orl.extra_args):
        if flag in FORBIDDEN_FLAGS:
            raise ConfigError(f"config key 'openrlhf.extra_args' sets {flag}, which must stay off: "
                              f"{FORBIDDEN_FLAGS[flag]} (docs/OPENRLHF.md)")
        if flag in ours:
            source = FLAG_SOURCES.get(flag, "the launcher (from the typed config)")
            raise ConfigError(f"config key 'openrlhf.extra_args' repeats {flag}, which is set from {source}")
        cmd += [flag, *values]
    return cmd


def logger_env(config, run_dir) -> dict:
    """Environment of OpenRLHF's processes for its loggers: with ``logging.wandb``, W&B offline into the run folder
    (``<run_dir>/wandb/offline-run-*``, beside the coordinator's run)."""
    if not config.logging.wandb:
        return {}
    return {"WANDB_MODE": "offline", "WANDB_DIR": os.path.abspath(run_dir)}


def logger_modules(config) -> dict:
    """module -> config key, for the loggers the run switches on (``launch`` checks they import)."""
    return {name: key for name, key in (("tensorboard", "logging.tensorboard"), ("wandb", "logging.wandb"))
            if getattr(config.logging, key.split(".")[1])}


def check_logger_modules(config, python: list | None = None, where: str = "here") -> None:
    """Raise ``LaunchError`` naming the config key when a logger the run switches on cannot be imported here (or by
    the interpreter argv ``python``, an image's): before anything starts, not when OpenRLHF's trainer builds it."""
    from spade.train.live_metrics import WANDB_INSTALL, WANDB_VERSION

    loggers = logger_modules(config)
    hints = {"wandb": f"install it ({WANDB_INSTALL}; wandb=={WANDB_VERSION}) or set logging.wandb: false",
             "tensorboard": "install it (pip install tensorboard==2.21.0) or set logging.tensorboard: false"}
    missing = missing_gpu_modules(python, tuple(loggers))
    if missing:
        raise LaunchError("; ".join(f"config key '{loggers[name]}' is true, but the {name} package is missing {where}: "
                                    f"{hints[name]}" for name in missing))


def shell_command(argv: list) -> str:
    """The argv as one shell line; the wandb key stays a shell expansion."""
    return " ".join(f'"{token}"' if token == WANDB_KEY else shlex.quote(token) for token in argv)


# ----- launch script --------------------------------------------------------------------------------------


def _binds(run_dir, model_dir, corpus_path) -> list:
    """Host folders the image must see at the same path: the repository (our code and the agent function file),
    the run, the model and the corpus; a folder inside another one listed is left out."""
    from spade.rlhf import AGENT_FUNC_PATH

    folders = [Path(AGENT_FUNC_PATH).resolve().parents[3], Path(run_dir).resolve(), Path(model_dir).resolve()]
    if corpus_path:
        folders.append(Path(corpus_path).resolve().parent)
    kept = []
    for folder in sorted(set(folders), key=lambda f: len(f.parts)):
        if not any(folder.is_relative_to(other) for other in kept):
            kept.append(folder)
    return [str(folder) for folder in kept]


def image_prefix(image: str, apptainer_args: str, binds: list) -> list:
    """``apptainer exec`` argv that runs a command inside ``image`` with the repository's code first on the path
    (so the code inside the image is the commit that prepared the run)."""
    from spade.rlhf import AGENT_FUNC_PATH

    src = Path(AGENT_FUNC_PATH).resolve().parents[2]
    return ["apptainer", "exec", *shlex.split(apptainer_args), "--bind", ",".join(binds),
            "--env", f"PYTHONPATH={src}", str(Path(image).resolve())]


def launch_script(config, run_dir, model_dir, corpus_path=None, orl: OpenRLHFConfig | None = None,
                  python: str | None = None, image: str = "", apptainer_args: str = "--nv") -> str:
    """Bash text that runs the command: with ``openrlhf.ray_address`` it is sent to that cluster with
    ``ray job submit``; otherwise Ray is started on the allocation and the driver runs here.

    Inside a SLURM allocation every Ray node is one ``srun`` step on its node (the head on this node, one worker
    per further node), each bound explicitly to the node's GPUs, CPUs and memory; outside SLURM (a workstation,
    one node) Ray starts directly. With ``image`` (an Apptainer ``.sif``), ``srun`` and ``scontrol`` run on the
    host and every Ray process and the driver enter the image through ``apptainer exec`` (the usual way clusters
    run containers: the image needs no SLURM client)."""
    orl = orl or resolve_openrlhf(config)
    if image:
        python = "python"
    python = python or sys.executable
    command = shell_command(openrlhf_command(config, run_dir, model_dir, corpus_path, orl, python=python))
    place = placement(config, orl)
    if image:
        *apptainer, sif = image_prefix(image, apptainer_args, _binds(run_dir, model_dir, corpus_path))
        runtime = f"IMAGE={shlex.quote(sif)}\nAPPTAINER=({shlex.join(apptainer)})\n"
        enter = 'IN_IMAGE=("${{APPTAINER[@]}}" {bind}"$IMAGE")\nRAY=("${{IN_IMAGE[@]}}" ray)\nPY=("${{IN_IMAGE[@]}}" python)\n'
        where = f"the Apptainer image {sif} (apptainer exec {apptainer_args})"
    else:
        runtime = (f"RAY=({shlex.quote(str(Path(python).parent / 'ray'))})\n"
                   f"PY=({shlex.quote(python)})\n")
        enter = ""
        where = f"the Python environment of {python}"
    exports = "".join(f"export {name}={shlex.quote(str(value))}\n" for name, value in sorted(orl.env.items()))
    loggers = logger_env(config, run_dir)
    if loggers:  # before `ray start`: Ray's workers, OpenRLHF's trainer actor among them, inherit them
        exports += "# logging.wandb: W&B offline, into the run folder\n" + "".join(
            f"export {name}={shlex.quote(value)}\n" for name, value in sorted(loggers.items()))
    head = textwrap.dedent(f"""\
        #!/usr/bin/env bash
        # SPADE run {config.run_name!r} on OpenRLHF {OPENRLHF_VERSION}: written by spade.rlhf.launch; do not edit,
        # change the config (openrlhf.* keys, configs/openrlhf/{config.model_card}.yaml) instead.
        # Placement: {orl.num_nodes} node(s) x {orl.gpus_per_node} GPUs; actor {place['actor']['gpus']} GPUs; \
reference {place['ref']['gpus'] if place['ref'] else 'none (train.kl_coef = 0)'}; vLLM {orl.vllm_num_engines} \
engine(s) x TP {orl.vllm_tensor_parallel_size}; colocate_all {orl.colocate_all_models}.
        # Software: Ray, vLLM, DeepSpeed and OpenRLHF run in {where}.
        set -euo pipefail
        """) + runtime + textwrap.dedent("""\
        export TOKENIZERS_PARALLELISM=false
        # openrlhf.env: NCCL/InfiniBand and other settings, inherited by every Ray process (the job steps and the
        # image get this environment)
        """) + exports
    if orl.ray_address:
        submission = f"spade-{config.run_name}-$(date +%Y%m%d%H%M%S)"
        # the cluster's workers do not see this script's environment: the logger settings go in the job's runtime env
        runtime_env = (f"--runtime-env-json {shlex.quote(json.dumps({'env_vars': loggers}, sort_keys=True))} "
                       if loggers else "")
        body = textwrap.dedent(f"""\
            # An existing Ray cluster: its nodes must see this run folder and have the same Python environment.
            ADDRESS={shlex.quote(orl.ray_address)}
            ID="{submission}"
            "${{RAY[@]}}" job submit --address "$ADDRESS" --submission-id "$ID" {runtime_env}-- {command}
            STATUS=$("${{RAY[@]}}" job status --address "$ADDRESS" "$ID" | tail -n 1)
            echo "$STATUS"
            case "$STATUS" in *SUCCEEDED*) exit 0 ;; *) echo "ray job $ID did not succeed" >&2; exit 1 ;; esac
            """)
        return head + enter.format(bind="") + body
    driver = ('"${IN_IMAGE[@]}" ' if image else "") + command
    start = textwrap.dedent(f"""\
        NODES_WANTED={orl.num_nodes}
        GPUS_PER_NODE={orl.gpus_per_node}
        GPUS_WANTED={orl.num_nodes * orl.gpus_per_node}
        NET_IF={shlex.quote(orl.network_interface)}
        PORT=$((20000 + ${{SLURM_JOB_ID:-$$}} % 20000))
        TMP_RAY="${{TMPDIR:-/tmp}}/ray_${{SLURM_JOB_ID:-$$}}"
        # Ray's sockets live {RAY_SOCKET_SUFFIX} bytes below it ($TMP_RAY/session_<date>_<time>_<us>_<pid>/sockets/
        # plasma_store) and a Unix socket path holds at most 107 bytes: a longer $TMPDIR falls back to /tmp
        if [ "${{#TMP_RAY}}" -gt {107 - RAY_SOCKET_SUFFIX} ]; then TMP_RAY="/tmp/ray_${{SLURM_JOB_ID:-$$}}"; fi
        mkdir -p "$TMP_RAY"
        """) + enter.format(bind='--bind "$TMP_RAY" ') + textwrap.dedent(f"""\
        # this node's address for Ray and NCCL: the IPv4 address of openrlhf.network_interface, or else the first
        # IPv4 address of `hostname -I` that is not a loopback one (the first field of `hostname --ip-address` can
        # be 127.0.1.1 or an IPv6 address)
        node_ip() {{
          if [ -n "$NET_IF" ]; then
            ip -4 -o addr show dev "$NET_IF" | awk '{{split($4, a, "/"); print a[1]; exit}}'
          else
            for address in $(hostname -I); do
              case "$address" in 127.*|*:*) ;; *) echo "$address"; return ;; esac
            done
          fi
        }}
        HEAD_IP=$(node_ip)
        if [ -z "$HEAD_IP" ]; then
          echo "no IPv4 address found on $(hostname) (interface '${{NET_IF:-any}}', config key openrlhf.network_interface)" >&2
          exit 2
        fi
        if [ -n "$NET_IF" ]; then  # NCCL and gloo talk over the same interface as Ray unless the environment says otherwise
          export NCCL_SOCKET_IFNAME="${{NCCL_SOCKET_IFNAME:-$NET_IF}}" GLOO_SOCKET_IFNAME="${{GLOO_SOCKET_IFNAME:-$NET_IF}}"
        fi
        export RAY_ADDRESS="$HEAD_IP:$PORT"
        if [ -n "${{SLURM_JOB_ID:-}}" ]; then
          # one srun step per Ray node, bound to the node's GPUs, CPUs and memory (the job step this script runs in
          # has only what Snakemake's job step asked for); --overlap: steps share the job's resources
          mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
          if [ "${{#NODES[@]}}" -lt "$NODES_WANTED" ]; then
            echo "the allocation has ${{#NODES[@]}} node(s), openrlhf.num_nodes wants $NODES_WANTED" >&2
            exit 2
          fi
          HERE=${{SLURMD_NODENAME:-$(hostname -s)}}
          CPUS_PER_NODE=${{SLURM_JOB_CPUS_PER_NODE:-$(nproc)}}  # e.g. "64(x2)" or "64,32": this node's count first
          CPUS_PER_NODE=${{CPUS_PER_NODE%%[(,]*}}
          STEP=(srun --overlap --nodes=1 --ntasks=1 --cpus-per-task="$CPUS_PER_NODE" --gres=gpu:"$GPUS_PER_NODE" --mem=0)
          WORKERS=()
          for node in "${{NODES[@]}}"; do if [ "$node" != "$HERE" ]; then WORKERS+=("$node"); fi; done
          WORKERS=("${{WORKERS[@]:0:$((NODES_WANTED - 1))}}")
        elif [ "$NODES_WANTED" -gt 1 ]; then
          echo "openrlhf.num_nodes is $NODES_WANTED: run this script inside a SLURM allocation of that many nodes," \\
               "or set openrlhf.ray_address to an existing Ray cluster" >&2
          exit 2
        fi
        PIDS=()
        cleanup() {{ for pid in "${{PIDS[@]}}"; do kill "$pid" 2>/dev/null || true; done; }}
        trap cleanup EXIT
        RAY_START=(start --block --num-gpus "$GPUS_PER_NODE" --disable-usage-stats)
        HEAD_START=("${{RAY_START[@]}}" --head --node-ip-address="$HEAD_IP" --port="$PORT" --temp-dir="$TMP_RAY" \\
                    --include-dashboard=false)
        # GPUs of the Ray cluster at RAY_ADDRESS (-1 while it does not answer)
        cluster_gpus() {{
          "${{PY[@]}}" -c 'import ray; ray.init(logging_level="ERROR"); print(int(ray.cluster_resources().get("GPU", 0)))' \\
            2>/dev/null || echo -1
        }}
        # wait (up to 10 minutes) until the cluster has at least $1 GPUs
        wait_for_gpus() {{
          HAVE=-1
          for _ in $(seq 120); do
            HAVE=$(cluster_gpus)
            [ "$HAVE" -ge "$1" ] && return 0
            sleep 5
          done
          echo "Ray cluster at $RAY_ADDRESS has $HAVE of $1 GPUs after 10 minutes" >&2
          exit 1
        }}
        if [ -n "${{SLURM_JOB_ID:-}}" ]; then
          "${{STEP[@]}}" -w "$HERE" "${{RAY[@]}}" "${{HEAD_START[@]}}" &
          PIDS+=($!)
          wait_for_gpus 0  # the head answers: the workers can join
          for node in "${{WORKERS[@]}}"; do
            # each worker finds its own address (same interface) and joins the head; Ray's folder is node-local
            "${{STEP[@]}}" -w "$node" bash -c "$(declare -f node_ip); NET_IF=$NET_IF; mkdir -p $(printf %q "$TMP_RAY"); \\
              ip_here=\\$(node_ip); exec $(printf '%q ' "${{RAY[@]}}" "${{RAY_START[@]}}") --address=$RAY_ADDRESS \\
              --node-ip-address=\\$ip_here" &
            PIDS+=($!)
          done
        else
          "${{RAY[@]}}" "${{HEAD_START[@]}}" &
          PIDS+=($!)
        fi
        wait_for_gpus "$GPUS_WANTED"  # every GPU of the allocation has joined
        if [ "$NODES_WANTED" -gt 1 ] && [ -z "$("${{PY[@]}}" -c 'import os; print(*os.listdir("/sys/class/infiniband")) if os.path.isdir("/sys/class/infiniband") else None' 2>/dev/null)" ]; then
          echo "warning: no InfiniBand/RoCE device in /sys/class/infiniband: NCCL between the nodes will use TCP sockets" >&2
        fi
        # the driver runs here and connects to the cluster through RAY_ADDRESS
        {driver}
        """)
    return head + start


# ----- OpenRLHF's own parser ------------------------------------------------------------------------------

# Runs in a fresh interpreter: stub the modules train_ppo_ray.py needs only inside train() (ray, vLLM, the
# Ray actors, the DeepSpeed strategy), execute the script as __main__ so that its own code builds the parser,
# parse each argv with it, let the script's post-parse checks run, and stop at the first line of train().
_PROBE = r'''
import argparse, contextlib, importlib.metadata, importlib.util, io, json, runpy, sys, types
from pathlib import Path

class Reached(BaseException):
    pass

class Rejected(BaseException):
    pass

def stub(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__getattr__ = lambda attr: object
    sys.modules[name] = module
    return module

def is_initialized():
    raise Reached(sys._getframe(1).f_locals.get("args"))

spec = importlib.util.find_spec("openrlhf")
root = Path(spec.origin).parent
stub("ray", is_initialized=is_initialized)
stub("ray.util")
stub("ray.util.placement_group")
for name in ("openrlhf.trainer.ray", "openrlhf.trainer.ray.launcher", "openrlhf.trainer.ray.ppo_actor",
             "openrlhf.trainer.ray.ppo_critic"):
    stub(name)
stub("openrlhf.utils", __path__=[str(root / "utils")])  # keeps the real openrlhf.utils.config (hierarchize)

parsers = []
original = argparse.ArgumentParser.parse_args
def error(self, message):
    raise Rejected(message)
argparse.ArgumentParser.error = error

def plain(value):
    if isinstance(value, types.SimpleNamespace):
        return {k: plain(v) for k, v in vars(value).items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)

results = []
for argv in json.load(sys.stdin):
    def parse_args(self, args=None, namespace=None, _argv=argv):
        parsers.append(self)
        return original(self, _argv, namespace)
    argparse.ArgumentParser.parse_args = parse_args
    out = io.StringIO()
    result = {"parsed": None, "error": None}
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(root / "cli" / "train_ppo_ray.py"), run_name="__main__")
        result["error"] = "train_ppo_ray.py finished without reaching train()"
    except Reached as reached:
        result["parsed"] = plain(reached.args[0])
    except Rejected as exc:
        result["error"] = "argparse: " + str(exc)
    except AssertionError as exc:
        result["error"] = "assertion in train_ppo_ray.py: " + str(exc)
    result["printed"] = out.getvalue()
    results.append(result)

flags = {}
for action in parsers[-1]._actions if parsers else []:
    for option in action.option_strings:
        flags[option] = {"dest": action.dest, "nargs": action.nargs, "kind": type(action).__name__,
                         "type": getattr(action.type, "__name__", None),
                         "choices": list(action.choices) if action.choices is not None else None}
print(json.dumps({"version": importlib.metadata.version("openrlhf"), "source": str(root / "cli" / "train_ppo_ray.py"),
                  "flags": flags, "results": results}))
'''


def probe_parser(argvs: list, python: str | None = None, timeout: float = 120) -> dict:
    """OpenRLHF's parser table and the outcome of parsing each argv (flags after ``-m ENTRY_POINT`` or whole
    commands), from the installed package; ``{"version", "source", "flags": {flag: {...}}, "results": [...]}``."""
    python = python or sys.executable
    runner = list(python) if isinstance(python, (list, tuple)) else [python]
    tails = [_flags_of(argv) for argv in argvs]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "WANDB_"))}
    try:
        done = subprocess.run([*runner, "-c", _PROBE], input=json.dumps(tails), capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"reading OpenRLHF's parser took over {timeout} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LaunchError(f"could not read OpenRLHF's argument parser with {shlex.join(runner)}: {last} "
                          f"(install it: pip install --no-deps openrlhf=={OPENRLHF_VERSION})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _flags_of(argv: list) -> list:
    argv = list(argv)
    if "-m" in argv and ENTRY_POINT in argv:
        argv = argv[argv.index(ENTRY_POINT) + 1:]
    return ["wandb-key" if token == WANDB_KEY else token for token in argv]


def flag_groups(argv: list) -> list:
    """``[(flag, [values])]`` of an argv (a value is any token not starting with ``--``)."""
    groups = []
    for token in _flags_of(argv):
        if token.startswith("--"):
            groups.append((token, []))
        elif groups:
            groups[-1][1].append(token)
        else:
            raise ValueError(f"value {token!r} before any flag")
    return groups


def _arity_ok(entry: dict, count: int) -> bool:
    nargs = entry["nargs"]
    if entry["kind"] in ("_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction", "_CountAction"):
        return count == 0
    if nargs is None:
        return count == 1
    if isinstance(nargs, int):
        return count == nargs
    return {"?": count <= 1, "*": True, "+": count >= 1}.get(nargs, False)


def check_command(argv: list, table: dict, result: dict | None = None) -> list:
    """Problems of ``argv`` against a parser table from ``probe_parser`` (empty list = fine): unknown flags
    (exact names: argparse would also accept abbreviations), repeated flags, wrong number of values, values
    outside ``choices``, and the parse/validation outcome of the real script when ``result`` is given."""
    problems, seen = [], set()
    flags = table["flags"]
    for flag, values in flag_groups(argv):
        if flag in seen:
            problems.append(f"{flag} is given twice")
        seen.add(flag)
        entry = flags.get(flag)
        if entry is None:
            problems.append(f"{flag} is not a flag of OpenRLHF {table['version']} ({table['source']})")
            continue
        if not _arity_ok(entry, len(values)):
            problems.append(f"{flag} takes nargs={entry['nargs']!r} ({entry['kind']}) but gets {len(values)} "
                            f"value(s): {values}")
        if entry["choices"] and any(v not in entry["choices"] for v in values):
            problems.append(f"{flag} {values} is not among its choices {entry['choices']}")
    if result is not None and result.get("error"):
        problems.append(f"OpenRLHF's script rejects the command: {result['error']}")
    return problems


def verify_command(argv: list, python: str | None = None) -> dict:
    """Run ``argv`` through the installed OpenRLHF parser; raises ``LaunchError`` listing every problem."""
    table = probe_parser([argv], python)
    result = table["results"][0]
    problems = check_command(argv, table, result)
    if table["version"] != OPENRLHF_VERSION:
        problems.append(f"installed openrlhf is {table['version']}, the launcher targets {OPENRLHF_VERSION}")
    if problems:
        raise LaunchError("the OpenRLHF command does not match the installed parser:\n  " + "\n  ".join(problems))
    return result


# ----- dry run and launch ---------------------------------------------------------------------------------


def describe_placement(place: dict) -> list:
    ref = place["ref"]
    lines = [
        f"nodes {place['nodes']} x {place['gpus_per_node']} GPUs ({place['gpus_available']} available, "
        f"{place['gpus_used']} used)",
        f"actor (DeepSpeed)  {place['actor']['nodes']} node(s) x {place['actor']['gpus_per_node']} GPUs",
        f"reference          " + (f"{ref['nodes']} node(s) x {ref['gpus_per_node']} GPUs"
                                  + (" (colocated with the actor)" if place["colocate_actor_ref"] else "")
                                  if ref else "none (train.kl_coef = 0)"),
        f"vLLM               {place['vllm']['engines']} engine(s) x tensor parallel {place['vllm']['tensor_parallel_size']}"
        f" = {place['vllm']['gpus']} GPUs",
        "colocation         " + ("all models share the actor's GPUs (hybrid engine; vLLM and DeepSpeed sleep in turn)"
                                 if place["colocate_all_models"] else "separate GPUs per role"),
        f"rollout            {place['rollout_batch_size']} tickets x {place['n_samples_per_prompt']} = "
        f"{place['responses_per_step']} responses per step ({place['optimizer_steps']}, train.global_batch "
        f"{place['global_batch']}); --data.max_len {place['max_len']}",
    ]
    return lines + [f"note: {note}" for note in place["notes"]]


def dry_run(config, run_dir, model_dir, corpus_path=None, orl: OpenRLHFConfig | None = None, image: str = "",
            apptainer_args: str = "--nv") -> str:
    """Placement, command and launch script as text; reads OpenRLHF's parser when openrlhf is installed.
    Writes nothing."""
    orl = orl or resolve_openrlhf(config)
    argv = openrlhf_command(config, run_dir, model_dir, corpus_path, orl, python="python" if image else sys.executable)
    lines = [f"# SPADE -> OpenRLHF {OPENRLHF_VERSION}: run {config.run_name} ({config.model_card}), dry run: "
             "nothing started, nothing written", "# placement"]
    lines += [f"#   {line}" for line in describe_placement(placement(config, orl))]
    if importlib.util.find_spec("openrlhf") is None:
        lines.append(f"# parser check: skipped, openrlhf is not installed (pip install --no-deps "
                     f"openrlhf=={OPENRLHF_VERSION})")
    else:
        result = verify_command(argv)
        lines.append(f"# parser check: every flag exists in the installed openrlhf {OPENRLHF_VERSION} parser with "
                     "its number of values, and train_ppo_ray.py's own checks pass")
        lines += [f"#   openrlhf says: {line}" for line in result.get("printed", "").splitlines() if line.strip()]
    lines += ["# command", shell_command(argv), "# launch script (written to "
              f"{run_paths(run_dir)['script']} when not a dry run)", launch_script(config, run_dir, model_dir,
                                                                                    corpus_path, orl, image=image,
                                                                                    apptainer_args=apptainer_args)]
    return "\n".join(lines)


def missing_gpu_modules(python: list | None = None, names: tuple = GPU_MODULES) -> list:
    """The GPU-stack modules (or ``names``) that cannot be imported here, or by the interpreter argv ``python``
    (an image's)."""
    if python is None:
        return [name for name in names if importlib.util.find_spec(name) is None]
    code = ("import importlib.util, json; print(json.dumps([n for n in %r if importlib.util.find_spec(n) is None]))"
            % (tuple(names),))
    done = subprocess.run([*python, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LaunchError(f"could not run Python in the image ({shlex.join(python)}): {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _runtime(run_dir, model_dir, corpus_path, image: str, apptainer_args: str) -> list:
    """The interpreter argv of the GPU stack: this one, or the image's through ``apptainer exec``."""
    if not image:
        return [sys.executable]
    if not Path(image).is_file():
        raise LaunchError(f"--image {image}: no such file; build it (docs/CONTAINERS.md) or point SPADE_GPU_IMAGE "
                          "at it")
    if shutil.which("apptainer") is None:
        raise LaunchError(f"--image {image} needs `apptainer` on this host's PATH (module load apptainer?)")
    Path(run_dir).mkdir(parents=True, exist_ok=True)  # apptainer refuses to bind a folder that does not exist
    return image_prefix(image, apptainer_args, _binds(run_dir, model_dir, corpus_path)) + ["python"]


def link_checkpoints(config, run_dir) -> list:
    """``<run_dir>/checkpoints/step_NNNNNN`` -> OpenRLHF's Hugging Face checkpoint of that step (relative
    symlinks), the layout evaluation reads; the final step falls back to ``--ckpt.output_dir``."""
    run_dir = Path(run_dir)
    paths = run_paths(run_dir)
    folder = run_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    linked, missing = [], []
    for step in config.selfplay.checkpoint_steps():
        target = paths["ckpt"] / f"global_step{step}_hf"
        if not target.is_dir() and step == config.selfplay.total_steps:
            target = paths["final"]
        if not (target / "config.json").is_file():
            missing.append(str(target))
            continue
        link = folder / f"step_{step:06d}"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(target, folder))
        linked.append(link.name)
    if missing:
        raise LaunchError(f"OpenRLHF finished but these checkpoints are missing: {missing}")
    return linked


def launch(config, model_dir, corpus_path, run_dir, image: str = "", apptainer_args: str = "--nv") -> dict:
    """``spade train --backend openrlhf``: prepare the run (tickets, run spec), check the command against the
    installed parser (inside ``image`` when given), write and run the launch script, link the checkpoints and
    write ``summary.json``."""
    from spade.io import atomic_write_json, atomic_write_text
    from spade.provenance import stamp
    from spade.rlhf import prepare_run

    runtime = _runtime(run_dir, model_dir, corpus_path, image, apptainer_args)
    missing = missing_gpu_modules(runtime if image else None)
    if missing:
        where = f"in the image {image}" if image else "here"
        raise LaunchError(f"the OpenRLHF backend needs the GPU training environment; missing {where}: "
                          f"{', '.join(missing)}. Install the pinned stack ({' '.join(GPU_STACK)}) on a GPU "
                          f"machine (or use the project's GPU environment/container), or train with --backend local.")
    check_logger_modules(config, runtime if image else None, f"in the image {image}" if image else "here")
    orl = resolve_openrlhf(config)
    argv = openrlhf_command(config, run_dir, model_dir, corpus_path, orl, python=runtime[-1])
    verify_command(argv, runtime)
    prepared = prepare_run(config, run_dir, model_dir, corpus_path, engines=orl.vllm_num_engines)
    groups = dict(flag_groups(argv))
    expected = {"--rollout.batch_size": [str(prepared["rollout_batch_size"])],
                "--rollout.n_samples_per_prompt": [str(prepared["n_samples_per_prompt"])],
                "--train.agent_func_path": [prepared["agent_func_path"]],
                "--data.prompt_dataset": [prepared["prompt_dataset"]]}
    for flag, value in expected.items():
        if groups[flag] != value:
            raise LaunchError(f"{flag} {groups[flag]} differs from what prepare_run wrote ({value})")
    script = atomic_write_text(run_paths(run_dir)["script"],
                               launch_script(config, run_dir, model_dir, corpus_path, orl, image=image,
                                             apptainer_args=apptainer_args))
    done = subprocess.run(["bash", str(script)])
    if done.returncode != 0:
        raise LaunchError(f"the OpenRLHF run failed (exit status {done.returncode}); script: {script}")
    checkpoints = link_checkpoints(config, run_dir)
    summary = {"run": config.run_name, "model_card": config.model_card, "steps": config.selfplay.total_steps,
               "checkpoints": checkpoints,
               "backend": f"openrlhf {OPENRLHF_VERSION}", "provenance": stamp(config)}
    atomic_write_json(Path(run_dir) / "summary.json", summary)
    return summary


__all__ = ["OpenRLHFConfig", "LaunchError", "placement", "openrlhf_command", "launch_script", "probe_parser",
           "logger_env", "logger_modules", "check_logger_modules",
           "check_command", "verify_command", "dry_run", "launch", "resolve_openrlhf", "load_preset", "data_max_len"]
