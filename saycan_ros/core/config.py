"""Finding and reading the package's YAML configuration files.

The files live in ``config/`` at the repository root (a source checkout), or in
``share/saycan_ros/config`` of an install prefix (colcon, or pip into a venv).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from saycan_ros.core.paths import installed_candidates


class ConfigError(ValueError):
    """A configuration file that is missing or malformed."""


def config_dir() -> Path:
    """The directory holding the built-in configuration files.

    ``SAYCAN_CONFIG_DIR`` overrides; then the source checkout; then the install prefixes.
    """
    candidates = []
    if os.environ.get("SAYCAN_CONFIG_DIR"):
        candidates.append(Path(os.environ["SAYCAN_CONFIG_DIR"]))
    candidates += installed_candidates("config")
    for path in candidates:
        if (path / "kitchen.yaml").is_file():
            return path
    raise ConfigError("cannot find saycan_ros's config directory; tried "
                      + ", ".join(str(p) for p in candidates))


def resolve_config(path: str | Path | None, default_name: str) -> Path:
    """``path`` if given (absolute, relative to cwd, or a bare name in the config dir)."""
    if path is None or str(path) == "":
        return config_dir() / default_name
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_absolute() and (config_dir() / path).is_file():
        return config_dir() / path
    raise ConfigError(f"configuration file not found: {path}")


def read_text(path: str | Path) -> str:
    """A text file's contents; a file that is not UTF-8 is a ConfigError naming the byte."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                          f"offset {exc.start})") from None


def load_yaml(path: str | Path | None, default_name: str) -> tuple[Any, str]:
    """Read a YAML file; returns (data, source name). Errors name the file and position."""
    resolved = resolve_config(path, default_name)
    try:
        data = yaml.safe_load(read_text(resolved))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{resolved}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{resolved}: expected a mapping at the top level")
    return data, str(resolved)
