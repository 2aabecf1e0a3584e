"""Issue 31: the SPADE coordinator's step barriers wait as long as config key openrlhf.step_wait_s says, sized from the
phase's budget by default, and a timeout names the key."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from spade.config import load_config
from spade.rlhf.config import MIN_STEP_WAIT_S, step_wait_seconds
from spade.rlhf.coordinator import SpadeCoordinator


def test_the_wait_is_sized_from_the_phase_budget():
    toy = load_config("configs/default.yaml")  # a few short turns: the floor
    assert toy.agent.max_turns * (toy.agent.max_new_tokens / 5 + toy.sandbox.limits.call_timeout_s) < 3600
    assert step_wait_seconds(toy) == MIN_STEP_WAIT_S == 3600.0
    long = load_config(overrides={"agent": {"max_turns": 25, "max_new_tokens": 8192},
                                  "sandbox": {"limits": {"call_timeout_s": 5.0}}})
    assert step_wait_seconds(long) == pytest.approx(25 * (8192 / 5 + 5))  # 41,085 s, beyond the old fixed 3,600 s
    assert step_wait_seconds(load_config(overrides={"agent": {"max_turns": 25, "max_new_tokens": 8192},
                                                    "openrlhf": {"step_wait_s": 120.0}})) == 120.0
    with pytest.raises(Exception, match=r"openrlhf.step_wait_s"):
        load_config(overrides={"openrlhf": {"step_wait_s": -1.0}})


def test_a_timed_out_barrier_names_the_key():
    waiting = SimpleNamespace(barrier_timeout_s=0.01)
    with pytest.raises(RuntimeError, match=r"waited 0 s for step 3's bookkeeping; raise config key "
                                           r"'openrlhf.step_wait_s'"):
        asyncio.run(SpadeCoordinator._barrier(waiting, asyncio.Event().wait(), "step 3's bookkeeping"))
    done = asyncio.Event()
    done.set()
    asyncio.run(SpadeCoordinator._barrier(waiting, done.wait(), "x"))  # a barrier that opens in time returns
