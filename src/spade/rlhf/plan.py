"""Slot tickets, designer packs and OpenRLHF response dicts: the pure pieces of the plugin.

OpenRLHF pulls ``--rollout.batch_size`` prompts per training step from a *shuffled* prompt dataset and
asks the agent executor for ``--rollout.n_samples_per_prompt`` (= G) responses per prompt. SPADE's step
does not fit a static dataset, so the dataset holds interchangeable **tickets**: every ticket carries a
unique label (``spade-ticket:<i>``) and the run folder, nothing else. The coordinator gives a ticket
its meaning when the ticket is first seen, in arrival order, so shuffling does not matter:

- roles ``0 .. B-1``: environment slot ``j`` of the current set; its G responses are the G no-hint
  episodes of slot ``j`` (an empty slot answers with G padding responses);
- roles ``B .. B+D-1``: designer packs; response ``g`` of pack ``p`` replays one matured designer
  sample (stored token ids and rollout log-probs) or is padding.

Advantages reach OpenRLHF as the response ``reward`` under ``--algo.advantage.estimator dr_grpo``,
which subtracts each prompt group's mean and does nothing else (no std, no batch whitening). Agent
groups are z-scores of G returns, so their mean is already 0. A designer pack holds at most G-1 real
samples; one padding response carries minus their sum, so the pack's mean is 0 as well, and every real
response keeps exactly the reward we computed. Padding responses have no action tokens, so they never
enter the loss.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

TICKET_PREFIX = "spade-ticket:"
# every response carries the same numeric extra_logs keys (OpenRLHF turns each into a tensor and
# concatenates them across samples)
LOG_KEYS = ("spade_step", "spade_agent", "spade_designer", "spade_pad", "spade_return", "spade_won")


@dataclass(frozen=True)
class TicketPlan:
    """How many tickets one SPADE step needs and how many responses each ticket returns."""

    slots: int  # B: environment slots per set (agent tickets)
    designer_packs: int  # D: tickets that replay matured designer samples
    group_size: int  # G: --rollout.n_samples_per_prompt

    @property
    def tickets_per_step(self) -> int:  # --rollout.batch_size
        return self.slots + self.designer_packs

    @property
    def responses_per_step(self) -> int:
        return self.tickets_per_step * self.group_size


def max_designer_samples(config) -> int:
    """Most designer samples that can mature at once: one per slot (paper: invalid candidates are
    discarded), or one per generation when invalid candidates are trained with a penalty (every design attempt
    and each of its ``designer_feedback.revisions``)."""
    from spade.rewards import invalid_penalty

    if not config.selfplay.train_designer:
        return 0
    slots = config.selfplay.active_skills * config.selfplay.envs_per_skill
    penalised = (config.designer.reward == "calibration"
                 or invalid_penalty(config.designer.invalid, config.designer.invalid_penalty) is not None)
    tries = config.selfplay.design_attempts * (1 + config.designer_feedback.revisions)
    return slots * (tries if penalised else 1)


def ticket_plan(config) -> TicketPlan:
    """The ticket layout of ``config``; G must be at least 2 (a pack needs room for one balancing pad)."""
    group = config.selfplay.group_size
    if group < 2:
        raise ValueError(f"selfplay.group_size must be >= 2 for the OpenRLHF backend (dr_grpo groups), got {group}")
    slots = config.selfplay.active_skills * config.selfplay.envs_per_skill
    packs = math.ceil(max_designer_samples(config) / (group - 1))
    return TicketPlan(slots, packs, group)


def ticket_label(index: int) -> str:
    return f"{TICKET_PREFIX}{index}"


def parse_ticket(label) -> int:
    """The ticket number of a label written by ``write_tickets``; anything else is refused by name."""
    if not isinstance(label, str) or not label.startswith(TICKET_PREFIX) or not label[len(TICKET_PREFIX):].isdigit():
        raise ValueError(f"not a SPADE ticket label: {label!r} (expected '{TICKET_PREFIX}<n>'; evaluation "
                         "datasets must not be routed through the SPADE agent executor)")
    return int(label[len(TICKET_PREFIX):])


def ticket_prompt(run_dir) -> str:
    """The prompt text of every ticket: the run folder, where the executor finds the run spec."""
    return json.dumps({"spade_run": str(run_dir)})


def run_dir_of(prompt: str) -> Path:
    try:
        return Path(json.loads(prompt)["spade_run"])
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"ticket prompt {prompt[:80]!r} does not name a SPADE run; was the dataset written by "
                         "spade.rlhf.write_tickets and passed without --data.apply_chat_template/--data.input_template?"
                         ) from None


def write_tickets(path, plan: TicketPlan, total_steps: int, run_dir) -> int:
    """Write ``total_steps * plan.tickets_per_step`` tickets as JSONL (keys ``prompt`` and ``label``);
    returns the number written. One pass over it (``--train.num_episodes 1``) is the whole run."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prompt = ticket_prompt(run_dir)
    count = total_steps * plan.tickets_per_step
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            handle.write(json.dumps({"prompt": prompt, "label": ticket_label(i)}) + "\n")
    return count


# ----- designer packs ----------------------------------------------------------------------------------
def pack_designer_samples(samples: list, plan: TicketPlan) -> list:
    """Distribute matured designer ``Sample``s over the D packs of G responses each.

    Returns D lists of G entries; an entry is ``{"sample": Sample, "reward": advantage * weight}`` or a
    padding ``{"sample": None, "reward": r}``. Each pack holds at most G-1 samples and its first padding
    entry carries minus their rewards' sum, so every pack's rewards sum to 0 (see the module doc).
    The up-weighting of designer samples (spec 6) is folded into the reward: for a weight w > 0,
    -min(ratio*A*w, clip(ratio)*A*w) = w * -min(ratio*A, clip(ratio)*A).
    """
    room = plan.group_size - 1
    if len(samples) > plan.designer_packs * room:
        raise ValueError(f"{len(samples)} designer samples do not fit {plan.designer_packs} packs of {room}")
    packs = []
    for p in range(plan.designer_packs):
        chunk = samples[p * room:(p + 1) * room]
        entries = [{"sample": s, "reward": float(s.advantage) * float(s.weight)} for s in chunk]
        balance = -sum(e["reward"] for e in entries)
        entries.append({"sample": None, "reward": balance})
        entries += [{"sample": None, "reward": 0.0} for _ in range(plan.group_size - len(entries))]
        packs.append(entries)
    return packs


# ----- OpenRLHF response dicts ----------------------------------------------------------------------------
def action_ranges(loss_mask: list) -> list:
    """[(start, end)] of every run of 1s in ``loss_mask`` (end exclusive): the tokens that train."""
    ranges, start = [], None
    for i, m in enumerate(list(loss_mask) + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            ranges.append((start, i))
            start = None
    return ranges


def _logs(step: int, kind: str, ret: float = 0.0, won: bool = False) -> dict:
    return {"spade_step": float(step), "spade_agent": float(kind == "agent"), "spade_designer": float(kind == "designer"),
            "spade_pad": float(kind == "pad"), "spade_return": float(ret), "spade_won": float(won)}


def response(prompt, label, token_ids: list, loss_mask: list, rollout_logprobs: list, reward: float, score: float,
             logs: dict, truncated: bool = False) -> dict:
    """The dict an OpenRLHF agent executor returns (``observation_tokens`` [T], ``action_ranges``,
    ``rollout_log_probs`` [T] aligned with the tokens, 0 off the actions)."""
    if not (len(token_ids) == len(loss_mask) == len(rollout_logprobs)):
        raise ValueError(f"token_ids ({len(token_ids)}), loss_mask ({len(loss_mask)}) and rollout_logprobs "
                         f"({len(rollout_logprobs)}) must have equal length")
    return {
        "prompt": prompt, "label": label, "images": None, "mm_train_inputs": None,
        "observation_tokens": list(token_ids), "action_ranges": action_ranges(loss_mask),
        "rollout_log_probs": [float(x) for x in rollout_logprobs], "truncated": bool(truncated),
        "reward": float(reward), "scores": float(score), "extra_logs": logs,
    }


def pad_response(prompt, label, step: int, reward: float, token_id: int) -> dict:
    """A response that trains nothing (two tokens, no action range) but counts in its group's mean."""
    return response(prompt, label, [token_id, token_id], [0, 0], [0.0, 0.0], reward, 0.0, _logs(step, "pad"))


def agent_response(prompt, label, step: int, record, advantage: float, max_length: int) -> dict:
    """One no-hint episode: the whole multi-turn token sequence, trained on the agent's own tokens."""
    if len(record.token_ids) > max_length:
        raise ValueError(f"episode of {len(record.token_ids)} tokens exceeds --data.max_len {max_length}; "
                         "set agent.max_context_tokens <= --data.max_len")
    if not record.token_ids or not any(record.loss_mask):
        return pad_response(prompt, label, step, advantage, 0 if not record.token_ids else record.token_ids[0])
    return response(prompt, label, record.token_ids, record.loss_mask, record.rollout_logprobs, advantage,
                    record.final_return, _logs(step, "agent", record.final_return, record.won),
                    truncated=record.outcome == "context_limit")


def designer_response(prompt, label, step: int, entry: dict, max_length: int) -> dict:
    """A matured designer sample, replayed with the token ids and log-probs stored when it was sampled."""
    sample = entry["sample"]
    if len(sample.token_ids) > max_length:
        raise ValueError(f"designer sample of {len(sample.token_ids)} tokens exceeds --data.max_len {max_length}; "
                         "raise --data.max_len above the design prompt plus designer.max_new_tokens")
    return response(prompt, label, sample.token_ids, sample.loss_mask, sample.rollout_logprobs, entry["reward"],
                    sample.advantage, _logs(step, "designer"))
