"""Where things are: the package's configuration, the shipped weights, and the one cache root.

- ``SAYCAN_CONFIG_DIR``: the configuration files (default: the checkout's ``config/``, then
  ``share/saycan_ros/config`` of an install prefix or the ament index), see
  :func:`saycan_ros.core.config.config_dir`.
- ``SAYCAN_MODELS_DIR``: the shipped weights (default: the checkout's ``models/``, then
  ``share/saycan_ros/models``).
- ``SAYCAN_CACHE_DIR``: everything computed once and kept (converted language models under
  ``models/``, demonstrations, rollouts, text embeddings); default ``~/.cache/saycan_ros``.
  Never inside the repository.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

CACHE_ENV = "SAYCAN_CACHE_DIR"
MODELS_ENV = "SAYCAN_MODELS_DIR"


def repo_root() -> Path:
    """The source checkout (or the installed package's parent folder)."""
    return Path(__file__).resolve().parent.parent.parent


def cache_dir(*parts: str) -> Path:
    """``$SAYCAN_CACHE_DIR`` (default ``~/.cache/saycan_ros``), or a folder below it; created."""
    root = os.environ.get(CACHE_ENV)
    path = Path(root).expanduser() if root else Path.home() / ".cache" / "saycan_ros"
    path = path.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def installed_candidates(folder: str) -> list[Path]:
    """Where a data folder of the package (``config``, ``models``) may be, in order: the source
    checkout, ``share/saycan_ros/<folder>`` of this Python's prefix (pip), then of the ament
    index (a colcon install space, a ROS install)."""
    candidates = [repo_root() / folder, Path(sys.prefix) / "share" / "saycan_ros" / folder]
    try:
        from ament_index_python.packages import get_package_share_directory
        candidates.append(Path(get_package_share_directory("saycan_ros")) / folder)
    except Exception:  # noqa: BLE001 - ament index absent or package not installed there
        pass
    return candidates


def models_dir() -> Path:
    """The shipped weights: ``SAYCAN_MODELS_DIR``, the source checkout's ``models/``, or
    ``share/saycan_ros/models`` of an install prefix (:func:`installed_candidates`)."""
    candidates = []
    if os.environ.get(MODELS_ENV):
        candidates.append(Path(os.environ[MODELS_ENV]))
    candidates += installed_candidates("models")
    for path in candidates:
        if path.is_dir():
            return path
    return candidates[0] if os.environ.get(MODELS_ENV) else repo_root() / "models"
