"""The built-in library through the sandbox: coverage of skills, oracle replay, random policy."""

from __future__ import annotations

from collections import Counter

import pytest

from spade.envs.library.registry import GAME_SKILLS, LibraryEnv, library, register_env
from spade.envs.library_check import LibraryCheckConfig, check_library, to_markdown
from spade.envs.validate import Validator


def test_library_covers_every_skill():
    games = [e for e in library() if e.flavour != "tool_use"]
    per_skill = Counter(e.skill for e in games)
    assert all(per_skill[skill] >= 2 for skill in GAME_SKILLS), per_skill
    hidden = {e.skill for e in games if e.hidden_state and e.flavour in ("game", "interactive")}
    assert hidden == set(GAME_SKILLS)
    assert sum(e.flavour == "tool_use" for e in library()) >= 3
    assert all(e.path.is_file() for e in library())


def test_duplicate_registration_is_refused():
    existing = library()[0]
    with pytest.raises(ValueError, match="already registered"):
        register_env(existing)
    with pytest.raises(ValueError, match="skill 'juggling'"):
        register_env(LibraryEnv("new_env", "juggling", "game", False, "x"))


def test_every_library_env_passes_through_the_sandbox(pool):
    rows = check_library(Validator(pool), LibraryCheckConfig(oracle_seeds=3, random_seeds=10), progress=False)
    assert len(rows) == len(library())
    failures = [f"{r.name}: {r.reason} {r.message}" for r in rows if not r.passed]
    assert not failures, failures
    assert all(r.oracle_win_rate == 1.0 and r.random_win_rate <= 0.25 for r in rows)
    markdown = to_markdown({"isolation": pool.level, "environments": [r.to_dict() for r in rows]})
    assert f"{len(rows)} of {len(rows)} environments pass" in markdown
