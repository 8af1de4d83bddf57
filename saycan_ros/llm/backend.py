"""The language-model interface used by the planners, and the back-end factory.

A back end scores a fixed set of candidate continuations (SayCan's "Say": summed log-probability
of each skill description given the few-shot prompt, the instruction and the steps so far) and
can also generate text freely (generative baselines, chain of thought).

This module is ROS-free and imports neither torch nor transformers; the concrete back ends are
imported lazily by :func:`make_backend`.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np


@dataclasses.dataclass
class BackendStats:
    """Work done by a back end since creation or the last :meth:`reset`.

    forward_passes: model forward calls (HTTP requests for remote back ends).
    scored_tokens: option tokens whose log-probability was returned.
    generated_tokens: tokens produced by :meth:`LanguageBackend.generate`.
    seconds: wall time spent inside ``option_logprobs`` / ``generate``.
    prompt_tokens: context tokens run through the model (prefix + query; shows the cache at work).
    calls: ``option_logprobs`` + ``generate`` calls.
    """

    forward_passes: int = 0
    scored_tokens: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    calls: int = 0

    def reset(self) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, type(getattr(self, f.name))(0))

    def snapshot(self) -> "BackendStats":
        """An independent copy (subtract two snapshots to get the work done in between)."""
        return dataclasses.replace(self)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __sub__(self, other: "BackendStats") -> "BackendStats":
        return BackendStats(**{f.name: getattr(self, f.name) - getattr(other, f.name)
                               for f in dataclasses.fields(self)})


@dataclasses.dataclass
class Generation:
    """One generated continuation.

    text: the continuation, cut before the first stop string.
    mean_logprob: mean log-probability (under the model, temperature 1) of the ``num_tokens``
        generated tokens (NaN when the back end cannot provide it).
    num_tokens: tokens generated up to and including the one that completed a stop string.
    """

    text: str
    mean_logprob: float
    num_tokens: int


class LanguageBackend(abc.ABC):
    """A language model that scores candidate continuations and generates text."""

    name: str
    stats: BackendStats

    def __init__(self, name: str) -> None:
        self.name = name
        self.stats = BackendStats()

    @abc.abstractmethod
    def option_logprobs(self, prefix: str, query: str, options: Sequence[str]) -> np.ndarray:
        """Summed log p(option tokens | prefix + query) for each option, float64 ``(len(options),)``.

        prefix: static few-shot text shared by many calls (its KV cache is computed once and
            reused where the back end can).
        query: per-step text after the prefix (instruction + steps so far), ending right before
            the option.
        options: candidate continuations, e.g. ``" find a sponge\\n"``.

        Raises ValueError on an empty option list or an empty option string, RuntimeError when
        the model produces non-finite scores or a server's reply lacks what is needed.
        """

    @abc.abstractmethod
    def generate(self, prefix: str, query: str, *, max_new_tokens: int = 24,
                 stop: Sequence[str] = ("\n",), num_samples: int = 1, temperature: float = 0.0,
                 seed: int | None = None) -> list[Generation]:
        """Free generation after ``prefix + query``: ``num_samples`` continuations, greedy when
        ``temperature == 0``, each cut at the first stop string (stop string excluded)."""

    def close(self) -> None:
        """Release resources (no-op by default)."""

    def __enter__(self) -> "LanguageBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # helpers for subclasses
    @contextmanager
    def _timed(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stats.seconds += time.perf_counter() - t0
            self.stats.calls += 1


def validate_options(options: Sequence[str]) -> list[str]:
    """Check an option list: non-empty, all non-empty strings. Returns it as a list."""
    if isinstance(options, str):
        raise ValueError("options must be a sequence of strings, not a single string")
    opts = list(options)
    if not opts:
        raise ValueError("options is empty: nothing to score")
    for i, o in enumerate(opts):
        if not isinstance(o, str):
            raise ValueError(f"option {i} is not a string: {o!r}")
        if o == "":
            raise ValueError(f"option {i} is an empty string")
    return opts


def validate_generate_args(max_new_tokens: int, num_samples: int, temperature: float) -> None:
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if not (temperature >= 0.0):
        raise ValueError(f"temperature must be >= 0, got {temperature}")


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` cut before the earliest stop string; also whether a stop string was found."""
    cut = len(text)
    found = False
    for s in stop:
        if s:
            i = text.find(s)
            if i != -1 and i < cut:
                cut, found = i, True
    return text[:cut], found


# ---------------------------------------------------------------------------------------------
# Registry / factory

BackendFactory = Callable[[Mapping[str, Any]], LanguageBackend]


def _lazy(module: str, attr: str) -> BackendFactory:
    def factory(config: Mapping[str, Any]) -> LanguageBackend:
        cls = getattr(importlib.import_module(module), attr)
        return cls.from_config(config)

    factory.__qualname__ = f"lazy({module}.{attr})"
    return factory


#: Back-end type name -> factory(config). Extend with :func:`register_backend`.
BACKENDS: dict[str, BackendFactory] = {
    "transformers": _lazy("saycan_ros.llm.transformers_backend", "TransformersBackend"),
    "openai": _lazy("saycan_ros.llm.openai_backend", "OpenAIBackend"),
}

DEFAULT_BACKEND_TYPE = "transformers"


def register_backend(type_name: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Make ``make_backend({"type": type_name, ...})`` call ``factory(config)``."""
    if type_name in BACKENDS and not replace:
        raise ValueError(f"back-end type {type_name!r} is already registered")
    BACKENDS[type_name] = factory


def make_backend(config: Mapping[str, Any]) -> LanguageBackend:
    """Build a back end from a config mapping, dispatching on ``config["type"]``
    (default ``"transformers"``). The remaining keys are the back end's options; unknown keys
    raise ValueError (typos should not be silently ignored)."""
    if not isinstance(config, Mapping):
        raise TypeError(f"backend config must be a mapping, got {type(config).__name__}")
    type_name = config.get("type", DEFAULT_BACKEND_TYPE)
    try:
        factory = BACKENDS[type_name]
    except KeyError:
        raise ValueError(
            f"unknown language back-end type {type_name!r}; known: {sorted(BACKENDS)}"
        ) from None
    return factory(config)


def check_config_keys(config: Mapping[str, Any], allowed: Sequence[str], backend: str) -> dict:
    """Config without ``type``; raises ValueError naming unknown keys."""
    cfg = {k: v for k, v in config.items() if k != "type"}
    unknown = sorted(set(cfg) - set(allowed))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for the {backend!r} language back end; "
                         f"allowed: {sorted(allowed)}")
    return cfg
