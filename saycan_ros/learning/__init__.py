"""Learned skills and affordances for the simulated kitchen (the paper's BC-Z / MT-Opt parts,
scaled to a CPU).

- ``modeling_bc``: a language-conditioned pick policy (FiLM-conditioned ResNet-style CNN over
  the head camera image, plus the arm state) trained by behaviour cloning (``train_bc``) from
  noise-injected (DART) demonstrations of the scripted expert (``data``).
- ``modeling_value``: a language-conditioned value network V(s, skill) with a sigmoid output,
  trained by n-step TD learning with sparse 0/1 rewards and a log loss on rollouts of that policy
  (``train_value``), calibrated with the paper's clamp((v - v_min) / (v_max - v_min), 0, 1).
- ``evaluate``: ``saycan eval-skill pick`` and ``saycan eval-value``.
- ``factory``: ``make_policy`` / ``make_value`` from the shipped weights in ``models/``.

torch is imported by the submodules only; importing this package is cheap.
"""
from __future__ import annotations

import os
from pathlib import Path

# Where things are: one module for the whole package (re-exported for the learning code).
from saycan_ros.core.paths import cache_dir, models_dir, repo_root  # noqa: F401

#: The skill text of every pick skill, as the gym env and config/skills.yaml write it.
PICK_TEMPLATE = "pick up the {object}"


def resolve_model(path: str | os.PathLike | None, default_name: str) -> Path:
    """``path`` as given if it exists, else a bare name inside :func:`models_dir`."""
    if path is None or str(path) == "":
        return models_dir() / default_name
    path = Path(path)
    if path.exists() or path.is_absolute():
        return path
    return models_dir() / path


def resolve_output(path: str | os.PathLike | None, default_name: str) -> Path:
    """Where a training run writes: a bare file name inside :func:`models_dir`, a path with a
    folder in it as given (``--out build/run1/bc_pick.pt`` lands in ``./build/run1``)."""
    if path is None or str(path) == "":
        return models_dir() / default_name
    path = Path(path)
    return path if path.is_absolute() or path.parent != Path(".") else models_dir() / path
