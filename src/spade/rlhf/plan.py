"""Slot tickets, designer packs and OpenRLHF response dicts: the pure pieces of the plugin.

OpenRLHF pulls ``--rollout.batch_size`` prompts per training step from a *shuffled* prompt dataset and
asks the agent executor for ``--rollout.n_samples_per_prompt`` (= n) responses per prompt. SPADE's step
does not fit a static dataset, so the dataset holds interchangeable **tickets**: every ticket carries a
unique label (``spade-ticket:<i>``) and the run folder, nothing else. The coordinator gives a ticket
its meaning when the ticket is first seen, in arrival order, so shuffling does not matter.

``selfplay.batch_structure`` 'global_batch' (the reference code's structure, the default): B tickets of
n = m = global_batch / B responses, so one rollout is exactly one global batch (192 = 24 x 8) and one
optimizer step. A step with d designer samples gives its first P = ceil(d / (m - 1)) roles to designer
packs; the remaining roles are environment slots in slot order (valid ones first), the m responses of
a slot role being its m no-hint episodes; the last P slots are the surplus cut from the batch: the
coordinator plays their episodes itself (their statistics count, as in the reference, which trims them
after play) and they never reach OpenRLHF.

'groups' (before issue 14): roles ``0 .. B-1`` are the slots, with G responses each, and roles
``B .. B+D-1`` are designer packs; ``(B + D) x G`` responses per rollout, about 2.2 optimizer steps.

In a designer pack, response ``g`` replays one matured designer sample (stored token ids and rollout
log-probs) or is padding; an empty slot answers with padding responses.

Advantages reach OpenRLHF as the response ``reward`` under ``--algo.advantage.estimator dr_grpo``,
which subtracts each prompt group's mean and does nothing else (no std, no batch whitening). Agent
groups are z-scores of m returns, so their mean is already 0. A designer pack holds the samples of one
(set, skill) advantage group, whose advantages sum to 0 by construction, so its mean is 0 as well and
every real response keeps exactly the reward we computed (``pack_designer_samples``). Padding responses
carry one token the engine sampled (OpenRLHF divides its metrics by the action-token count, so a response
without one crashes it) and reward 0, hence advantage 0: they add nothing to the gradient, only one token
each to the token-mean denominator, or one response to the sequence mean's (``train.loss_aggregation``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from spade.core.env_source import pool_slots

TICKET_PREFIX = "spade-ticket:"
# every response carries the same numeric extra_logs keys (OpenRLHF turns each into a tensor and
# concatenates them across samples)
LOG_KEYS = ("spade_step", "spade_agent", "spade_designer", "spade_pad", "spade_return", "spade_won")


@dataclass(frozen=True)
class TicketPlan:
    """How many tickets one SPADE step needs and how many responses each ticket returns."""

    slots: int  # B: environment slots per set
    designer_packs: int  # 'groups': D extra tickets per step; 'global_batch': most slot roles a step's packs take
    group_size: int  # n: --rollout.n_samples_per_prompt (G for 'groups', m = global_batch / B for 'global_batch')
    structure: str = "groups"  # selfplay.batch_structure

    @property
    def tickets_per_step(self) -> int:  # --rollout.batch_size
        return self.slots if self.structure == "global_batch" else self.slots + self.designer_packs

    def packs_for(self, group_sizes: list) -> int:
        """Designer packs a step whose designer samples form advantage groups of ``group_sizes`` uses: a fixed D
        ('groups'), or as few as ``pack_designer_samples`` fills ('global_batch')."""
        if self.structure != "global_batch":
            return self.designer_packs
        return len(_bins([size for size in group_sizes for size in _chunk_sizes(size, self.group_size)],
                         self.group_size))

    @property
    def responses_per_step(self) -> int:
        return self.tickets_per_step * self.group_size


def _designer_bounds(config) -> tuple:
    """(sets closed in one step, skills, most designer samples of one skill in one set): one per slot (paper:
    invalid candidates are discarded), or one per generation when invalid candidates are trained with a penalty
    (every design attempt and each of its ``designer_feedback.revisions``); a last step that is also a
    regeneration step closes two sets (the previous one and, by the flush, its own)."""
    from spade.core.rewards import invalid_candidate_reward

    sp = config.selfplay
    penalised = invalid_candidate_reward(config.designer) is not None
    tries = sp.design_attempts * (1 + config.designer_feedback.revisions)
    sets = 2 if sp.total_steps > 1 and (sp.total_steps - 1) % sp.regen_interval == 0 else 1
    return sets, sp.active_skills, sp.envs_per_skill * (tries if penalised else 1)


def max_designer_samples(config) -> int:
    """Most designer samples that can train in one step (see ``_designer_bounds``)."""
    if not config.selfplay.train_designer:
        return 0
    sets, skills, per_skill = _designer_bounds(config)
    return sets * skills * per_skill


def max_designer_packs(config, group_size: int) -> int:
    """Most designer packs of ``group_size`` responses one step needs: every (set, skill) advantage group
    takes ceil(its size / group_size) packs."""
    if not config.selfplay.train_designer:
        return 0
    sets, skills, per_skill = _designer_bounds(config)
    return sets * skills * math.ceil(per_skill / group_size)


def ticket_plan(config) -> TicketPlan:
    """The ticket layout of ``config``; a ticket needs at least 2 responses (dr_grpo). 'global_batch' needs
    train.global_batch to be a multiple of the slot count."""
    slots = pool_slots(config)  # active_skills x envs_per_skill; baseline.rlve_slots in 'rlve' (16 x 16 = 256)
    structure = config.selfplay.batch_structure
    if structure == "global_batch":
        batch = config.train.global_batch
        group, key = batch // slots, "train.global_batch"
        if batch % slots:
            raise ValueError(f"train.global_batch ({batch}) must be a multiple of the {slots} environment slots "
                             "(selfplay.active_skills x selfplay.envs_per_skill; baseline.rlve_slots in baseline.mode "
                             "'rlve') for the OpenRLHF backend with "
                             "selfplay.batch_structure 'global_batch': each slot plays global_batch / slots episodes")
    else:
        group, key = config.selfplay.group_size, "selfplay.group_size"
    if group < 2:
        raise ValueError(f"{key} gives {group} response(s) per ticket; the OpenRLHF backend needs >= 2 (dr_grpo "
                         f"needs n_samples_per_prompt > 1), selfplay.batch_structure {structure!r}")
    most, packs = max_designer_samples(config), max_designer_packs(config, group)
    if structure == "global_batch" and packs > slots:
        raise ValueError(f"up to {most} designer samples need {packs} packs of {group}, "
                         f"more than the {slots} tickets of one global batch (train.global_batch {config.train.global_batch});"
                         " raise train.global_batch or use selfplay.batch_structure 'groups'")
    return TicketPlan(slots, packs, group, structure)


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
                         "spade.rlhf.plan.write_tickets and passed without "
                         "--data.apply_chat_template/--data.input_template?") from None


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
def _chunk_sizes(size: int, n: int) -> list:
    """Sizes of the round-robin chunks of a group of ``size`` (ceil(size / n) chunks, none above n)."""
    count = math.ceil(size / n)
    return [len(range(c, size, count)) for c in range(count)]


def _bins(sizes: list, n: int) -> list:
    """First-fit decreasing: chunk indices per pack of capacity ``n`` (deterministic: ties keep their order)."""
    bins, room = [], []
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        for b, free in enumerate(room):
            if sizes[i] <= free:
                bins[b].append(i)
                room[b] -= sizes[i]
                break
        else:
            bins.append([i])
            room.append(n - sizes[i])
    return bins


def pack_designer_samples(samples: list, plan: TicketPlan, packs: int | None = None) -> tuple:
    """Distribute matured designer ``Sample``s over ``packs`` packs of n responses (default: as many as
    ``plan.packs_for`` gives for their groups); returns (packs, largest advantage shift).

    dr_grpo subtracts each pack's mean reward, and every response carries at least one action token (a
    response without one makes OpenRLHF's metric step divide 0 by 0), so a pack is exact only if its real
    rewards sum to 0: then the mean is 0, every sample keeps its reward and every padding response (reward 0)
    has advantage 0. The designer advantages of one (set, skill) group sum to 0 (spec 6: the skill mean is
    subtracted), so packs are filled with whole groups (first-fit decreasing). A group larger than n is sorted
    by advantage and dealt round robin into ceil(size / n) chunks, each re-centred on its own mean: the only
    change to an advantage, returned as the largest shift (0 at paper scale, where a skill has 8 designs and
    n = 8). An entry is ``{"sample": Sample, "reward": advantage * weight}`` or a padding
    ``{"sample": None, "reward": 0.0}``. The up-weighting of designer samples (spec 6) is folded into the
    reward: for a weight w > 0, -min(ratio*A*w, clip(ratio)*A*w) = w * -min(ratio*A, clip(ratio)*A).
    """
    n = plan.group_size
    groups: dict = {}
    for sample in samples:
        groups.setdefault(sample.group, []).append(sample)
    chunks, shift = [], 0.0
    for members in groups.values():
        count = math.ceil(len(members) / n)
        ordered = sorted(members, key=lambda s: float(s.advantage))
        for c in range(count):
            chunk = ordered[c::count]
            rewards = [float(s.advantage) * float(s.weight) for s in chunk]
            centre = math.fsum(rewards) / len(rewards) if count > 1 else 0.0
            shift = max(shift, abs(centre))
            chunks.append([{"sample": s, "reward": r - centre} for s, r in zip(chunk, rewards)])
    filled = [[entry for i in b for entry in chunks[i]] for b in _bins([len(c) for c in chunks], n)]
    wanted = len(filled) if packs is None else packs
    if len(filled) > wanted:
        raise ValueError(f"{len(samples)} designer samples in {len(groups)} advantage groups need {len(filled)} "
                         f"packs of {n}; the step planned {wanted}")
    filled += [[] for _ in range(wanted - len(filled))]
    return [pack + [{"sample": None, "reward": 0.0} for _ in range(n - len(pack))] for pack in filled], shift


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


def pad_response(prompt, label, step: int, prompt_ids: list, token_id: int, logprob: float,
                 reward: float = 0.0) -> dict:
    """A response that keeps OpenRLHF's arithmetic defined: one token sampled by the engine after ``prompt_ids``
    (with its rollout log-prob). With reward 0 in a zero-mean group its advantage is 0 and it trains nothing.
    An episode that failed before its first turn under ``agent.failed_plays: zero`` passes its advantage as
    ``reward``, so its group keeps summing to 0 (that one token then carries it)."""
    ids = list(prompt_ids) + [int(token_id)]
    mask = [0] * len(prompt_ids) + [1]
    return response(prompt, label, ids, mask, [0.0] * len(prompt_ids) + [float(logprob)], reward, 0.0,
                    _logs(step, "pad"))


def agent_response(prompt, label, step: int, record, advantage: float, max_length: int) -> dict:
    """One no-hint episode: the whole multi-turn token sequence, trained on the agent's own tokens."""
    if len(record.token_ids) > max_length:
        raise ValueError(f"episode of {len(record.token_ids)} tokens exceeds --data.max_len {max_length}; "
                         "set agent.max_context_tokens <= --data.max_len")
    if not record.token_ids or not any(record.loss_mask):
        raise ValueError("an episode without sampled tokens is answered with a pad by the executor")
    return response(prompt, label, record.token_ids, record.loss_mask, record.rollout_logprobs, advantage,
                    record.final_return, _logs(step, "agent", record.final_return, record.won),
                    truncated=record.outcome in ("context_limit", "cut_turn"))


def designer_response(prompt, label, step: int, entry: dict, max_length: int) -> dict:
    """A matured designer sample, replayed with the token ids and log-probs stored when it was sampled."""
    sample = entry["sample"]
    if len(sample.token_ids) > max_length:
        raise ValueError(f"designer sample of {len(sample.token_ids)} tokens exceeds --data.max_len {max_length}; "
                         "raise --data.max_len above the design prompt plus designer.max_new_tokens")
    return response(prompt, label, sample.token_ids, sample.loss_mask, sample.rollout_logprobs, entry["reward"],
                    sample.advantage, _logs(step, "designer"))
