"""Build the learned models by name (registries, not if-chains).

    make_policy("bc_pick")                       # the shipped weights, models/bc_pick.pt
    make_policy("bc_pick", weights="/tmp/x.pt")
    make_value("value_pick")
"""
from __future__ import annotations

from typing import Any, Callable

from saycan_ros.learning import resolve_model


def _load_bc_pick(weights=None):
    from saycan_ros.learning.modeling_bc import PickPolicy
    return PickPolicy.load(resolve_model(weights, "bc_pick.pt"))


def _load_value_pick(weights=None):
    from saycan_ros.learning.modeling_value import PickValue
    return PickValue.load(resolve_model(weights, "value_pick.pt"))


def _train_bc(**kwargs):
    from saycan_ros.learning.train_bc import train_bc
    return train_bc(**kwargs)


def _train_value(**kwargs):
    from saycan_ros.learning.train_value import train_value
    return train_value(**kwargs)


#: name -> loader(weights=None) of a policy (PickPolicy: batched __call__ and act(obs)).
POLICIES: dict[str, Callable[..., Any]] = {"bc_pick": _load_bc_pick}
#: name -> loader(weights=None) of a value function (PickValue: raw / affordance).
VALUES: dict[str, Callable[..., Any]] = {"value_pick": _load_value_pick}
#: what `saycan train <name>` runs.
TRAINERS: dict[str, Callable[..., dict]] = {"bc": _train_bc, "value": _train_value}


def _make(registry: dict, what: str, name: str, **kwargs):
    try:
        factory = registry[name]
    except KeyError:
        raise KeyError(f"unknown {what} {name!r}; known: {', '.join(sorted(registry))}") from None
    return factory(**kwargs)


def make_policy(name: str = "bc_pick", weights=None):
    return _make(POLICIES, "policy", name, weights=weights)


def make_value(name: str = "value_pick", weights=None):
    return _make(VALUES, "value function", name, weights=weights)


def train(name: str, **kwargs) -> dict:
    return _make(TRAINERS, "trainer", name, **kwargs)
