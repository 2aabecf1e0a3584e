"""Where an OpenRLHF run puts its models: GPUs per role, colocation and tensor parallelism.

``placement`` validates the ``openrlhf`` section against the run (batch sizes, the ticket plan, the sequence
length) before anything starts, raising ``ConfigError`` naming the key; ``describe_placement`` is its text
for the dry run.
"""

from __future__ import annotations

from spade.configtools import ConfigError
from spade.core.env_source import baseline_of
from spade.core.rlve import describe_rlve
from spade.rlhf.config import OpenRLHFConfig, resolve_openrlhf
from spade.rlhf.plan import ticket_plan


def data_max_len(config, orl: OpenRLHFConfig) -> int:
    """``--data.max_len``: holds an agent episode and a design prompt plus its completion."""
    if orl.max_len:
        if orl.max_len < config.agent.max_context_tokens:
            raise ConfigError(f"config key 'openrlhf.max_len' ({orl.max_len}) is below agent.max_context_tokens "
                              f"({config.agent.max_context_tokens}); episodes would not fit (0 = derive it)")
        return orl.max_len
    return max(config.agent.max_context_tokens, orl.design_prompt_tokens + config.designer.max_new_tokens)


def checked_ticket_plan(config):
    """``ticket_plan`` of the run, its ``ValueError`` raised as a ``ConfigError``."""
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
    plan = checked_ticket_plan(config)
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
            "environments": describe_rlve(config) if baseline_of(config).mode == "rlve" else None,
            "optimizer_steps": ("one optimizer step" if plan.responses_per_step == config.train.global_batch else
                                f"{plan.responses_per_step / config.train.global_batch:.2f} optimizer steps")}


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
    if place.get("environments"):
        lines.append(f"environments       {place['environments']}")
    return lines + [f"note: {note}" for note in place["notes"]]
