"""One environment slot of the self-play core's current set, with its bookkeeping window.

A set is ``selfplay.active_skills x selfplay.envs_per_skill`` slots (paper: 3 x 8 = 24). Each ``EnvSlot`` holds
its environment (code, source, validation reports, hint, the designer sample that made it) and the statistics
of its window of ``selfplay.regen_interval`` = k steps: no-hint wins and returns (win rate, mean return R_A),
the hint arm's returns and the paired no-hint returns of the regeneration step (regret, Eq. 3), and the
designer reward computed when the set closes. ``SelfPlayState.envs`` stores the current set as these slots.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace


@dataclass
class EnvSlot:
    """One environment of the current set, with everything the archive and the rewards need."""

    env_id: str
    skill: str
    step: int  # regeneration step that produced it (fixed modes: start of the current bookkeeping window)
    source: str  # "designer", "backfill:<library name>", or a fixed pool's "library:<name>" / "rlve:<identifier>"
    code: str = ""
    class_name: str = ""
    kind: str = "game"
    valid: bool = False
    attempts: int = 0
    reports: list = field(default_factory=list)  # validation report of every attempt (no code)
    hint: str = ""
    hint_failed: bool = False  # every hint request timed out (designer.hint_timeout_s): no hint arm, no regret
    hint_returns: list = field(default_factory=list)  # [G] returns with hint at the regeneration step
    paired_returns: list = field(default_factory=list)  # [m] no-hint returns of the regeneration step (kept plays)
    wins: int = 0  # no-hint wins over the window
    episodes: int = 0  # no-hint episodes over the window
    return_sum: float = 0.0  # sum of the no-hint returns R_A over the window (plateau input, ema_lp)
    dropped: int = 0  # no-hint plays over the window left out for an environment failure (agent.failed_plays)
    regen_positive: int = 0  # regeneration-step no-hint plays with a return > 0 (memory.win_rate 'regen_positive')
    regen_episodes: int = 0  # regeneration-step no-hint plays booked (memory.win_rate 'regen_positive')
    hint_seeds: list = field(default_factory=list)  # [G] episode seed of each entry of hint_returns
    paired_seeds: list = field(default_factory=list)  # episode seed of each entry of paired_returns
    distinct_rewards: list = field(default_factory=list)  # reward values observed (figure 16)
    causes: dict = field(default_factory=dict)  # no-hint plays over the window by cause (spade.core.failures)
    hint_causes: dict = field(default_factory=dict)  # the hint arm's plays by cause
    designer_sample: dict | None = None  # token ids / mask / log-probs of the generation that made it
    env_kwargs: dict = field(default_factory=dict)  # constructor arguments besides max_turns (a backfilled level)
    regret: float | None = None
    designer_reward: float | None = None
    filled_step: int | None = None  # the later step of the window whose top-up filled it (selfplay.top_up); None: filled
    # at ``step`` or empty. Its window statistics start there; it has no regeneration-step plays, hint or regret

    @property
    def win_rate(self) -> float | None:
        return self.wins / self.episodes if self.episodes else None

    @property
    def mean_return(self) -> float | None:
        return self.return_sum / self.episodes if self.episodes else None


def slot_dict(slot: EnvSlot) -> dict:
    """``asdict(slot)``, with the designer sample's token lists copied whole: ``asdict`` copies a list element by
    element, which for a design prompt of thousands of tokens cost a third of a second per step (the state is stored
    after every step)."""
    sample = slot.designer_sample
    data = asdict(replace(slot, designer_sample=None))
    data["designer_sample"] = None if sample is None else {
        key: list(value) if isinstance(value, list) else value for key, value in sample.items()}
    return data
