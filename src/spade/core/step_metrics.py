"""The metrics of a self-play step (``metrics.jsonl``): of a new set's design, of a set whose window closed, and
of the step's no-hint plays.

A mixin of :class:`spade.core.selfplay.SelfPlay`: it reads the core's ``mode`` and calls its ``dropped`` and
``no_hint_plays``.
"""

from __future__ import annotations

from spade.core import env_source
from spade.core.failures import cause_counts, stage_counts


class StepMetrics:
    """The metrics ``begin_step``, ``flush`` and ``end_step`` add to a step's metrics."""

    def _design_metrics(self, slots: list) -> dict:
        attempts = [] if self.mode in env_source.POOL_MODES else [report for slot in slots for report in slot.reports]
        designed_valid = sum(s.valid and s.source == "designer" for s in slots)
        return {
            "regenerated": True,
            "slots": len(slots),
            "design_attempts": len(attempts),
            "designer_valid": designed_valid,
            "valid_env_rate": designed_valid / len(attempts) if attempts else 0.0,
            "design_generated_tokens": sum(r.get("generated_tokens", 0) for r in attempts),
            "backfilled_share": sum(s.source.startswith("backfill") for s in slots) / len(slots) if slots else 0.0,
            "empty_share": sum(not s.valid for s in slots) / len(slots) if slots else 0.0,
            "reject_reasons": count_values(r["reason"] for r in attempts if not r["valid"]),
            # where the rejected attempts broke (spade.core.failures.design_stage; 'cut' = hit designer.max_new_tokens)
            "design_fail_stages": stage_counts(attempts),
            "design_cut_share": sum(bool(r.get("cut")) for r in attempts) / len(attempts) if attempts else None,
            # the tool-use LLM screen's verdicts (validation.llm_screen): passes, rejects, and the empty or unparsable
            # ones, which pass or are rejected by validation.screen_unclear; {} when it did not run
            "screen_verdicts": count_values(r["screen_verdict"] for r in attempts if r.get("screen_verdict")),
        }

    def _closed_metrics(self, slots: list) -> dict:
        """Metrics of the set closed at this step (its window is complete)."""
        valid = [s for s in slots if s.valid]
        rates = [s.win_rate for s in valid if s.win_rate is not None]
        return {
            "closed_set_step": slots[0].step,
            "closed_mean_win_rate": mean_or_none(rates),
            "closed_mean_regret": mean_or_none([s.regret for s in valid if s.regret is not None]),
            "closed_mean_designer_reward": mean_or_none([s.designer_reward for s in valid if s.designer_reward is not None]),
            # learnable share (figure 6): slots whose window win rate is in [0.2, 0.8]; empty slots count 0
            "closed_learnable_share": sum(0.2 <= r <= 0.8 for r in rates) / len(slots) if slots else 0.0,
            "closed_distinct_rewards": mean_or_none([len(s.distinct_rewards) for s in valid]),
            "closed_partial_rewards": mean_or_none([sum(0 < r < 1 for r in s.distinct_rewards) for s in valid]),
        }

    def _play_metrics(self, slots: list, records: list, delayed: list) -> dict:
        dropped = sum(self.dropped(r) for r in records)
        failures = sum(r.outcome == "env_failure" for r in records)
        # why plays earn nothing: every no-hint play, dropped ones included (cause 'env_failure')
        causes, turns = cause_counts(records), sum(r.turns for r in records)
        unparsed, cut = sum(r.unparsed_turns for r in records), sum(r.cut_turns for r in records)
        zero_share = 1 - causes["earned"] / len(records) if records else None
        records = [r for r in records if not self.dropped(r)]
        groups: dict = {}  # env_id -> returns of this step's kept no-hint episodes (one GRPO group)
        for record in records:
            groups.setdefault(record.env_id, []).append(record.final_return)
        by_skill: dict = {}
        for slot in slots:
            if slot.episodes:
                by_skill.setdefault(slot.skill, []).append(slot.win_rate)
        return {
            "episodes": len(records),
            "agent_groups": len(groups),
            "useful_groups": sum(max(g) - min(g) > 0 for g in groups.values()),  # non-zero reward variance
            "agent_win_rate": mean_or_none([float(r.won) for r in records]),
            "agent_mean_return": mean_or_none([r.final_return for r in records]),
            "agent_return_sd": sample_sd([r.final_return for r in records]),  # sample sd: the interval of the mean return
            "agent_returns": [r.final_return for r in records],  # [episodes] for the bootstrap of the learning signal
            "mean_turns": mean_or_none([r.turns for r in records]),
            "mean_generated_tokens": mean_or_none([r.generated_tokens for r in records]),
            "env_failures": failures,
            "agent_causes": causes,
            "agent_unearned_share": zero_share,
            "agent_unparsed_turn_share": unparsed / turns if turns else None,
            "agent_cut_turn_share": cut / turns if turns else None,
            "win_rate_by_skill": {k: mean_or_none(v) for k, v in by_skill.items()},
            "env_win_rates": {s.env_id: s.win_rate for s in slots if s.episodes},
            "filled_slots": sum(s.valid for s in slots),
            "designer_samples": len(delayed),
            "designer_weight": delayed[0].weight if delayed else None,
            "dropped_plays": dropped,
            "no_hint_plays": self.no_hint_plays(slots),
        }


def mean_or_none(values: list):
    """The mean; None for no values."""
    return sum(values) / len(values) if values else None


def sample_sd(values: list):
    """Sample standard deviation (n - 1); None below two values."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def count_values(values) -> dict:
    """How often each value occurs."""
    counts: dict = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts
