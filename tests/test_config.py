"""Configuration: bad keys and values fail with messages naming the key, the value and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from spade.config import SpadeConfig, load_config
from spade.configtools import ConfigError, describe

ROOT = Path(__file__).resolve().parents[1]


def test_default_config_loads():
    config = load_config(ROOT / "configs/default.yaml")
    assert config.sandbox.isolation == "auto" and config.validation.seeds == [0, 1]


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"sandbox": {"isolaton": "bwrap"}}, "unknown config key(s) ['isolaton'] in section 'sandbox'"),
        ({"sandbox": {"isolation": "docker"}}, "'sandbox.isolation' has value 'docker'; allowed values"),
        ({"sandbox": {"workers": 0}}, "'sandbox.workers' has value 0; it must be >= 1"),
        ({"sandbox": {"workers": "two"}}, "'sandbox.workers' must be of type int"),
        ({"sandbox": {"limits": {"call_timeout_s": True}}}, "'sandbox.limits.call_timeout_s' must be of type float"),
        ({"validation": {"seeds": [3, 3]}}, "'validation.seeds' must be two different integers"),
        ({"validation": {"seeds": 3}}, "'validation.seeds' must be a list"),
        ({"sandbox": "bwrap"}, "'sandbox' must be a mapping"),
        ({"unknown_section": {}}, "unknown config key(s) ['unknown_section'] in the top level"),
    ],
)
def test_bad_values_name_the_key(overrides, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(ROOT / "configs/default.yaml", overrides=overrides)
    assert fragment in str(info.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(bad)


def test_every_key_is_documented_and_in_the_schema():
    rows = describe(SpadeConfig)
    assert all(help_text for _, _, help_text in rows)
    keys = {key for key, _, _ in rows}
    assert {"sandbox.limits.call_timeout_s", "sandbox.min_isolation", "validation.reset_gate_seeds"} <= keys
