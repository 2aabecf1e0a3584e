"""Where a training step's time goes (issue 17): wall time, tokens and tokens/s of each phase.

The self-play core opens a phase around each part of a step (``SelfPlay.clock``); the local trainer adds the
optimizer step and the checkpoint. Phases nest, and time is exclusive: while ``validation`` (or ``screen``, the
generate call of the tool-use LLM screen) runs inside ``design``, the clock charges that phase only, so the phases
of a step add up to its wall time (the remainder, loop overhead and metrics, is ``other``). Tokens come from the
generation backend's running totals (``HFBackend.totals``): the prompt tokens a phase sent, the prompt tokens
actually prefilled (the rest came from the prefix cache) and the tokens sampled; a backend without totals (vLLM)
leaves them out. Each thread nests its own phases: in the OpenRLHF path, where a step's design runs in a worker
thread while rewards are booked on the event loop, a step's phases can add up to more than its wall time, which is
then the time since the previous step finished.

Metric keys, per phase P (``metrics.jsonl``): ``phase_P_seconds``, ``phase_P_prompt_tokens``,
``phase_P_prefill_tokens``, ``phase_P_decode_tokens``, ``phase_P_tokens_per_s`` (prefilled + sampled tokens per
second); and ``step_seconds``. The optimizer's own token counts are the trainer's ``train_forward_tokens`` and
``train_padded_tokens``. Timing keys end in ``_seconds`` or ``_tokens_per_s``: they differ between identical runs, and the
resume check skips them; token counts do not.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from contextlib import contextmanager

PHASES = ("design", "validation", "screen", "hints", "hint_arm", "no_hint_arm", "rewards", "optimizer", "checkpoint")
TOKEN_KEYS = {"prompt_tokens": "prompt_tokens", "prefill_tokens": "prefill_tokens", "new_tokens": "decode_tokens"}


class PhaseClock:
    """Exclusive wall time and generation tokens per phase of the current step (module docstring)."""

    def __init__(self, backend=None):
        self.backend = backend
        self._lock = threading.Lock()
        self._local = threading.local()  # each thread nests its own phases (the OpenRLHF path runs some in a thread)
        self.start_step()

    def start_step(self) -> None:
        """Start a new step's accounts (a phase open across the call is booked to the step in which it ends)."""
        with self._lock:
            self.started = time.perf_counter()
            self.seconds: dict = defaultdict(float)
            self.tokens: dict = defaultdict(lambda: defaultdict(int))

    @property
    def _stack(self) -> list:
        """This thread's open phases: [phase, since (s), backend totals since]."""
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def _totals(self) -> dict:
        totals = getattr(self.backend, "totals", None)
        return dict(totals) if isinstance(totals, dict) else {}

    def _charge(self, now: float, totals: dict) -> None:
        """Book the time and tokens since the innermost phase last resumed to that phase."""
        if not self._stack:
            return
        name, since, before = self._stack[-1]
        with self._lock:
            self.seconds[name] += now - since
            for key in TOKEN_KEYS:
                if key in totals and key in before:
                    self.tokens[name][key] += totals[key] - before[key]

    @contextmanager
    def phase(self, name: str):
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; known: {', '.join(PHASES)}")
        now, totals = time.perf_counter(), self._totals()
        self._charge(now, totals)  # the enclosing phase pauses
        self._stack.append([name, now, totals])
        try:
            yield
        finally:
            now, totals = time.perf_counter(), self._totals()
            self._charge(now, totals)
            self._stack.pop()
            if self._stack:  # the enclosing phase resumes
                self._stack[-1][1:] = [now, totals]

    def metrics(self) -> dict:
        """The ``phase_*`` metrics of the step so far and ``step_seconds`` (module docstring)."""
        wall = time.perf_counter() - self.started
        out = {"step_seconds": wall}
        for name in PHASES:
            if name not in self.seconds:
                continue
            seconds = self.seconds[name]
            out[f"phase_{name}_seconds"] = seconds
            counts = self.tokens.get(name, {})
            for key, label in TOKEN_KEYS.items():
                if key in counts:
                    out[f"phase_{name}_{label}"] = counts[key]
            moved = counts.get("prefill_tokens", 0) + counts.get("new_tokens", 0)
            if moved:
                out[f"phase_{name}_tokens_per_s"] = moved / seconds if seconds > 0 else float("nan")
        out["phase_other_seconds"] = max(wall - sum(self.seconds.values()), 0.0)
        return out


def timed(phase: str):
    """Method decorator: the method runs inside ``self.clock.phase(phase)``."""

    def decorate(method):
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            with self.clock.phase(phase):
                return method(self, *args, **kwargs)

        return run

    return decorate
