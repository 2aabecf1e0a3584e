"""The gymnasium wrapper over a sandboxed environment passes gymnasium's own checker."""

from __future__ import annotations

import pytest
from gymnasium.utils.env_checker import check_env

from spade.envs.gym_env import SandboxTextEnv
from spade.envs.library.registry import get_env
from spade.envs.sandboxed import EpisodeFailed, SandboxedEnv


@pytest.mark.parametrize("name", ["hidden_linear_system", "retail_order_support"])
def test_check_env_passes(pool, name):
    env = SandboxTextEnv(SandboxedEnv.from_source(pool, get_env(name).source()))
    check_env(env, skip_render_check=True)
    observation, info = env.reset(seed=3)
    assert env.observation_space.contains(observation)
    step = env.step(env.action_space.sample())
    assert isinstance(step[1], float)
    env.close()


def test_failures_surface_as_exceptions(pool):
    env = SandboxedEnv.from_source(pool, get_env("hidden_linear_system").source())
    env.code = "raise RuntimeError('broken at import')\n" + env.code
    with pytest.raises(EpisodeFailed, match="broken at import") as info:
        env.reset(0)
    assert info.value.outcome.kind == "env_error"
