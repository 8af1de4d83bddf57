"""Dataclass <-> dict helpers shared by the configurations (unknown keys are errors)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from typing import Any, Mapping, TypeVar

from saycan_ros.core.config import ConfigError, load_yaml

T = TypeVar("T")


def from_dict(cls: type[T], data: Mapping[str, Any] | None, where: str = "") -> T:
    data = dict(data or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ConfigError(f"{where or cls.__name__}: unknown keys {sorted(unknown)}; "
                          f"known: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
        key = f"{where}.{name}" if where else name
        sub = hints[name] if dataclasses.is_dataclass(hints[name]) else None
        if sub is not None and isinstance(value, Mapping):
            value = from_dict(sub, value, key)
        else:
            if isinstance(value, list):
                value = tuple(value)
            if not _fits(value, hints[name]):
                raise ConfigError(f"{key}: expected {_describe(hints[name])}, got {value!r}")
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except ValueError as error:      # a range check of the dataclass (__post_init__)
        raise ConfigError(f"{where or cls.__name__}: {error}") from None


def _fits(value, hint) -> bool:
    """Whether a config value has the field's type (an int is a float; a bool is no number)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is dict:
        return isinstance(value, Mapping)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True                      # a hint this checker does not know: the dataclass decides


_PLURAL = {int: "integers", float: "numbers", str: "texts"}


def _describe(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_PLURAL.get(args[0], _describe(args[0]))}"
        return f"a list of {len(args)}: [{', '.join(_describe(a) for a in args)}]"
    return {bool: "true or false", int: "an integer", float: "a number", str: "text",
            dict: "a mapping"}.get(hint, getattr(hint, "__name__", str(hint)))


def to_dict(obj) -> dict:
    def convert(value):
        if dataclasses.is_dataclass(value):
            return {f.name: convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, (tuple, list)):
            return [convert(v) for v in value]
        return value
    return convert(obj)


def fingerprint(data: Mapping) -> str:
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]


def with_overrides(cfg, overrides: Mapping[str, Any] | None):
    """``cfg`` (a SectionConfig) with ``{"part.key": value}`` overrides (``--set``) applied;
    an unknown part or key is a ConfigError, raised before any work is done."""
    if not overrides:
        return cfg
    merged = cfg.to_dict()
    parts = sorted(k for k, v in merged.items() if isinstance(v, dict))
    for key, value in overrides.items():
        part, _, name = key.partition(".")
        if part not in parts or not name:
            raise ConfigError(f"{cfg.SECTION}: cannot set {key!r}: expected PART.KEY with PART one "
                              f"of {parts}")
        merged[part][name] = value
    return type(cfg).from_dict(merged)


def load_section(path, section: str) -> tuple[dict, str]:
    data, source = load_yaml(path, default_name="learning.yaml")
    if section not in data or not isinstance(data[section], Mapping):
        raise ConfigError(f"{source}: missing section {section!r}")
    return dict(data[section]), source
