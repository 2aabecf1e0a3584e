"""A ``gymnasium.Env`` over a sandboxed environment, with text observation and action spaces.

The generated code still runs only in the sandbox; this wrapper forwards ``reset``/``step`` and
exposes ``gymnasium.spaces.Text`` spaces whose charset covers every Unicode code point a string can
carry (surrogates excluded), so any observation the environment produces is inside the space.
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium import spaces

from spade.envs.sandboxed import SandboxedEnv

TEXT_CHARSET = "\t\n\r" + "".join(chr(c) for c in range(32, 0xD800))
SAMPLE_CHARSET = "".join(chr(c) for c in range(32, 127))


class SandboxTextEnv(gym.Env):
    """Gymnasium view of one sandboxed environment. ``render_mode='ansi'`` returns the last observation."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, env: SandboxedEnv, max_observation_chars: int = 1 << 20, max_action_chars: int = 64,
                 render_mode: str | None = None):
        self.env = env
        self.observation_space = spaces.Text(max_length=max_observation_chars, min_length=0, charset=TEXT_CHARSET)
        # Actions sampled by the space are printable ASCII, short, as a model's answers would be.
        self.action_space = spaces.Text(max_length=max_action_chars, min_length=0, charset=SAMPLE_CHARSET)
        self.render_mode = render_mode
        self._last = ""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        # Without a seed, draw the episode seed from the wrapper's RNG so runs stay reproducible.
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        observation, info = self.env.reset(episode_seed)
        self._last = observation
        return observation, info

    def step(self, action: str):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._last = observation
        return observation, float(reward), terminated, truncated, info

    def render(self):
        return self._last if self.render_mode == "ansi" else None

    def close(self):
        self.env.close()
