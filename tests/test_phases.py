"""spade.core.phases: exclusive phase times that add up to the step, and token deltas from the backend's totals."""

from __future__ import annotations

import pytest

from spade.core import phases
from spade.core.phases import PhaseClock, timed


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class CountingBackend:
    totals = {"prompts": 0, "prompt_tokens": 0, "prefill_tokens": 0, "new_tokens": 0, "seconds": 0.0}

    def generate(self, prompt_tokens, prefilled, sampled):
        self.totals = {**self.totals, "prompt_tokens": self.totals["prompt_tokens"] + prompt_tokens,
                       "prefill_tokens": self.totals["prefill_tokens"] + prefilled,
                       "new_tokens": self.totals["new_tokens"] + sampled}


def test_nested_phases_are_exclusive_and_add_up_to_the_step(monkeypatch):
    """design 0-10 s with validation 4-7 s inside it, then hints 10-12 s, 1 s of loop overhead: design 7 s,
    validation 3 s, hints 2 s, other 1 s; tokens go to the phase whose generation made them."""
    now = FakeClock()
    monkeypatch.setattr(phases.time, "perf_counter", now)
    backend = CountingBackend()
    clock = PhaseClock(backend)
    with clock.phase("design"):
        backend.generate(100, 60, 20)
        now.now = 4.0
        with clock.phase("validation"):
            now.now = 7.0
        backend.generate(50, 50, 5)
        now.now = 10.0
    with clock.phase("hints"):
        backend.generate(30, 10, 8)
        now.now = 12.0
    now.now = 13.0
    got = clock.metrics()
    assert got["step_seconds"] == 13.0
    assert (got["phase_design_seconds"], got["phase_validation_seconds"], got["phase_hints_seconds"]) == (7.0, 3.0, 2.0)
    assert got["phase_other_seconds"] == 1.0
    assert (got["phase_design_prompt_tokens"], got["phase_design_prefill_tokens"],
            got["phase_design_decode_tokens"]) == (150, 110, 25)
    assert got["phase_design_tokens_per_s"] == pytest.approx(135 / 7.0)
    assert got["phase_validation_prefill_tokens"] == 0 and "phase_validation_tokens_per_s" not in got
    assert got["phase_hints_decode_tokens"] == 8
    clock.start_step()
    assert clock.metrics() == {"step_seconds": 0.0, "phase_other_seconds": 0.0}


def test_timed_methods_and_unknown_phases():
    class Core:
        def __init__(self):
            self.clock = PhaseClock()

        @timed("rewards")
        def close(self, value):
            return value * 2

    core = Core()
    assert core.close(4) == 8 and "phase_rewards_seconds" in core.clock.metrics()
    assert "phase_rewards_prefill_tokens" not in core.clock.metrics()  # no backend, no token counts
    with pytest.raises(ValueError, match="unknown phase 'sleep'.*design"):
        with core.clock.phase("sleep"):
            pass
