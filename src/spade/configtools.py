"""Typed, validated configuration sections built from plain dicts (YAML).

Each section is a frozen dataclass whose fields carry ``metadata={"help": ..., "choices": ...,
"min": ...}``. ``from_dict`` rejects unknown keys, wrong types and bad values with a ``ConfigError``
that names the full key, the bad value and what is allowed; ``describe`` lists every key with its
default and description (the config schema shown by ``spade config schema``). ``parse_override`` turns a
command-line ``section.key=value`` into the nested mapping a YAML file would hold, so that it meets the same checks.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path

import yaml


class ConfigError(ValueError):
    """A configuration key or value is invalid; the message names the key, the value and what is allowed."""


def option(default, help: str, choices: tuple | None = None, min: float | None = None):
    """A dataclass field with a description, optional allowed values and an optional lower bound."""
    meta = {"help": help, "choices": choices, "min": min}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _check_type(key: str, value, annotation):
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        annotation = next(a for a in options if a is not type(None))
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            raise ConfigError(f"config key '{key}' must be a mapping, got {value!r}")
        return from_dict(annotation, value, key)
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation in (list, dict) and not isinstance(value, annotation):
        raise ConfigError(f"config key '{key}' must be a {annotation.__name__}, got {value!r}")
    if annotation in (int, float, str, bool):
        if not isinstance(value, annotation) or (annotation is int and isinstance(value, bool)):
            raise ConfigError(f"config key '{key}' must be of type {annotation.__name__}, got {value!r}")
    return value


def from_dict(cls, data: dict | None, prefix: str = ""):
    """Build dataclass ``cls`` from ``data``; unknown keys and bad values raise ``ConfigError``."""
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        where = f"section '{prefix}'" if prefix else "the top level"
        raise ConfigError(f"unknown config key(s) {unknown} in {where}; allowed: {sorted(fields)}")
    values = {}
    for name, value in data.items():
        key = f"{prefix}.{name}" if prefix else name
        meta = fields[name].metadata
        if meta.get("choices") and value not in meta["choices"]:  # before the type: a bool for a str key names them too
            raise ConfigError(f"config key '{key}' has value {value!r}; allowed values: {list(meta['choices'])}")
        value = _check_type(key, value, hints[name])
        if meta.get("min") is not None and value is not None and value < meta["min"]:
            raise ConfigError(f"config key '{key}' has value {value!r}; it must be >= {meta['min']}")
        values[name] = value
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:  # a section's own cross-field checks
        where = f"section '{prefix}'" if prefix else "the top level"
        raise ConfigError(f"invalid {where}: {exc}") from None


def describe(cls, prefix: str = "") -> list[tuple[str, object, str]]:
    """``(key, default, description)`` for every key of ``cls``, nested sections flattened."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        if dataclasses.is_dataclass(hints[f.name]):
            rows += describe(hints[f.name], key)
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        help_text = f.metadata.get("help", "")
        if f.metadata.get("choices"):
            help_text += f" One of {list(f.metadata['choices'])}."
        rows.append((key, default, help_text))
    return rows


def load_yaml(path: str | Path) -> dict:
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {str(path)!r} is a directory, not a YAML file")
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level")
    return data


def deep_merge(base: dict, override: dict) -> dict:
    """``base`` with ``override`` laid over it: nested mappings merge key by key, any other value replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


OVERRIDE_KEY = re.compile(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*")


def parse_override(text: str) -> dict:
    """``section.key=value`` as the nested mapping ``{section: {key: value}}``; the value is read as YAML (as it
    would be in a file: ``2`` an int, ``1.0e-5`` a float, ``true`` a bool, ``[a, b]`` a list, empty = null).
    The key's names and the value are checked later, with the file's, by ``from_dict``."""
    key, sep, value = text.partition("=")
    if not sep or not OVERRIDE_KEY.fullmatch(key):
        raise ConfigError(f"--config {text!r} is neither an existing config file nor a key=value override "
                          "(the key: config names joined by dots, e.g. train.learning_rate=1.0e-5)")
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {text!r}: the value of config key '{key}' is not valid YAML: {exc}") from None
    for name in reversed(key.split(".")):
        parsed = {name: parsed}
    return parsed


def _yaml_scalar(value):
    if isinstance(value, dict):
        return {key: _yaml_scalar(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_yaml_scalar(item) for item in value]
    if isinstance(value, str) and value:  # '' stays '' (YAML would read it as null): a quoted "" in a config file
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        return parsed if parsed is None or isinstance(parsed, (bool, int, float)) else value
    return value


def retype_workflow_overrides(config: dict, overrides: dict) -> dict:
    """Snakemake's ``--config key=value`` reads a mapping or list value (``'selfplay={total_steps: 2}'``) with
    YAML's BaseLoader, so every scalar inside it arrives as a string ('2', 'true', '1.0e-5'). Read those strings
    again as a config file would (numbers, booleans, null; any other text stays a string), in ``config`` at the
    places ``overrides`` (Snakemake's parsed ``--config`` entries) set, so that such an override meets the same
    checks and messages as the same YAML in a file. Top-level scalars Snakemake already types. Returns ``config``."""

    def walk(target: dict, given: dict, nested: bool):
        for key, value in given.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                walk(target[key], value, True)
            elif nested or isinstance(value, list):
                target[key] = _yaml_scalar(value)

    walk(config, overrides, False)
    return config
