"""The ``openrlhf`` config section: GPU placement and engine settings of the OpenRLHF backend.

Every training hyperparameter comes from the recipe/run sections, so the local and GPU trainers share them;
this section only says how OpenRLHF lays the run out on GPUs. Per-backbone presets live in
``configs/openrlhf/<model_card>.yaml`` (``load_preset``); ``resolve_openrlhf`` is the run's section.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from spade.configtools import ConfigError, deep_merge, from_dict, load_yaml, option

PRESET_DIR = Path(__file__).resolve().parents[3] / "configs" / "openrlhf"


@dataclass(frozen=True)
class OpenRLHFConfig:
    enabled: bool = option(False, "Train with OpenRLHF on GPUs (true) or with the local trainer (false); "
                           "`spade train --backend` overrides it.")
    cpu: bool = option(False, "Rehearsal only (configs/rehearsal.yaml): run this OpenRLHF path on this machine's CPU "
                       "with the CPU integration run's adaptations (spade.rlhf.cpu: the vLLM CPU build, gloo, one "
                       "fake GPU) and its records, for the rehearsal's checks. Every paper run file leaves it false.")
    cpu_resume_at: int = option(0, "Rehearsal only (with openrlhf.cpu): kill the training once this step's "
                                "generation has ended and start it again in the same folder, so that it resumes "
                                "from its last checkpoint; 0 = one launch, no kill. Choose a step after the first "
                                "checkpoint and before the last step.", min=0)
    ray_address: str = option("", "Ray dashboard address of an existing cluster (e.g. http://head:8265): the run "
                              "is sent with `ray job submit`. Empty: start Ray on the SLURM allocation itself.")
    step_wait_s: float = option(
        0.0, "Longest wait, in s, of one step's barriers in the SPADE coordinator (an executor waiting for its group's "
        "other episodes, or for the step's bookkeeping). 0 = sized from the phase's budget (step_wait_seconds: "
        "agent.max_turns x (agent.max_new_tokens at 5 tokens/s + the sandbox's call timeout), at least 3,600 s). "
        "Raise it if the coordinator's error names this key on a run whose episodes are slower.", min=0.0)
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
                                       "examples + instructions) when max_len is derived; the launcher refuses a run "
                                       "whose longest design prompt can exceed it (spade.rlhf.prompt_budget).", min=1)
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
        if self.cpu_resume_at and not self.cpu:
            raise ConfigError(f"config key 'openrlhf.cpu_resume_at' is {self.cpu_resume_at}, but openrlhf.cpu is "
                              "false: the kill and resume is the CPU rehearsal's; set it to 0 or openrlhf.cpu: true")
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
    base = asdict(section) if section is not None else load_preset(config.model_card)
    return from_dict(OpenRLHFConfig, deep_merge(base, overrides or {}), "openrlhf")


SLOWEST_DECODE_TOKENS_PER_S = 5.0  # one sequence's decode rate that the coordinator's automatic wait still allows
MIN_STEP_WAIT_S = 3600.0


def step_wait_seconds(config) -> float:
    """``openrlhf.step_wait_s``, or when it is 0 the phase's budget: every turn of an episode generating its full
    ``agent.max_new_tokens`` at SLOWEST_DECODE_TOKENS_PER_S and spending the sandbox's whole call timeout, at least
    MIN_STEP_WAIT_S. (25 turns of 8,192 tokens with a 5 s call timeout, the paper's 30B tool-use phase: 41,085 s.)"""
    if config.openrlhf.step_wait_s > 0:
        return config.openrlhf.step_wait_s
    turn = config.agent.max_new_tokens / SLOWEST_DECODE_TOKENS_PER_S + config.sandbox.limits.call_timeout_s
    return max(MIN_STEP_WAIT_S, config.agent.max_turns * turn)
