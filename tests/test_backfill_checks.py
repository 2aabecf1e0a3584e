"""``selfplay.backfill_checks``: backfill from learning-check environments (the OpenRLHF CPU integration run)."""

from __future__ import annotations

import pytest

from spade.configtools import ConfigError
from spade.core.selfplay import check_backfill_pool
from spade.envs.checks import CHECKS, check_source


def test_the_pool_holds_the_named_check_environments_in_the_library_entries_shape():
    name = sorted(CHECKS)[0]
    (entry,) = check_backfill_pool([name])
    assert (entry.name, entry.skill, entry.levels) == (name, CHECKS[name], ("standard",))
    assert entry.source() == check_source(name, "test")


def test_an_unknown_name_is_refused_with_the_config_key_and_the_allowed_names():
    with pytest.raises(ConfigError, match=r"'selfplay.backfill_checks' names 'chess'.*allowed"):
        check_backfill_pool(["chess"])
