"""The language model's settings, declared once.

:class:`LLMConfig` is what the ``saycan`` flags (``--model``, ``--adapter``, ...), the
``llm_scorer`` node's parameters and an evaluation job's settings all are: each field says its
default, its help text, and which back end reads it under which option name. Nothing else
lists them.

    config = LLMConfig.from_params({"model": "gemma3-270m", "threads": 2})
    make_backend(config.backend_config())
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

#: The default planning model: Qwen2.5-Coder-0.5B with its planner adapter plans in kitchens it
#: was never trained on (docs/results/kitchens.md); SmolLM2-135M is 2.4 times faster a step.
DEFAULT_MODEL = "qwen2.5-coder-0.5b"
BACKEND_TYPES = ("transformers", "openai")
DTYPES = ("float32", "bfloat16")
#: How the transformers back end scores options (saycan_ros.llm.transformers_backend).
SCORING_MODES = ("fast", "packed", "naive")
QUANTIZATIONS = ("none", "int8")
#: Which kernels run the linear layers (saycan_ros.llm.cpu_kernels): auto = onednn where it can.
KERNELS = ("auto", "onednn", "aten")
#: More retrieved examples than this would not fit a small model's context with the scene lines.
MAX_RETRIEVED = 16
#: The shipped planner adapter of each base model (a folder of models/; saycan train planner).
ADAPTER_DIRS = {"smollm2-135m": "planner_smollm2", "qwen2.5-coder-0.5b": "planner_qwen05"}


def resolve_adapter(model: str, adapter: str = "none"):
    """The planner adapter folder for ``model``: ``auto`` = the shipped one
    (models/planner_smollm2 for smollm2-135m, models/planner_qwen05 for qwen2.5-coder-0.5b)
    when it is there, ``none`` = no adapter (the
    frozen model), else ``adapter`` itself, which must be an adapter folder."""
    from pathlib import Path

    from saycan_ros.core.paths import models_dir
    if adapter in ("none", ""):
        return None
    if adapter == "auto":
        name = ADAPTER_DIRS.get(model)
        path = models_dir() / name if name else None
        return path if path is not None and (path / "adapter_config.json").is_file() else None
    path = Path(adapter).expanduser()
    if not (path / "adapter_config.json").is_file():
        raise ValueError(f"adapter {adapter!r}: not a LoRA adapter folder (no adapter_config.json)")
    return path


class LLMConfigError(ValueError):
    """A bad setting: ``field`` (the parameter's name) and what is wrong with it."""

    def __init__(self, field_name: str, text: str):
        super().__init__(f"{field_name} {text}")
        self.field, self.text = field_name, text


def _known_model(model: str) -> bool:
    """A shorthand, a path that exists, or something shaped like a hub id (org/name)."""
    from pathlib import Path

    from saycan_ros.llm.models import SHORTHANDS
    if model in SHORTHANDS or Path(model).expanduser().exists():
        return True
    parts = model.split("/")
    return len(parts) == 2 and all(parts) and not model.endswith(".gguf")


def _setting(default, help: str, backend: str = "", option: str = "", flag: bool = True):
    """A field: ``backend`` "" = the scorer's own (any back end), else the one back end that
    reads it, as ``option`` (default: the field's name); ``flag``: a ``saycan`` flag too."""
    return field(default=default, metadata={"help": help, "backend": backend,
                                            "option": option, "flag": flag})


@dataclass(frozen=True)
class LLMConfig:
    backend: str = _setting("transformers", "language back end: transformers | openai")
    model: str = _setting(DEFAULT_MODEL, "gemma3-270m | smollm2-135m | qwen2.5-coder-0.5b | HF folder | "
                                         ".gguf file | server model (openai)", backend="*")
    threads: int = _setting(0, "torch threads for the model (0 = torch's default)",
                            backend="transformers")
    dtype: str = _setting("float32", "weights: float32 | bfloat16", backend="transformers",
                          flag=False)
    scoring: str = _setting("fast", "option scoring: fast (the context grows with the plan and "
                                    "runs in one pass with the options' token trie) | packed "
                                    "(the plain packed pass: the whole query each step) | naive "
                                    "(one pass per option)", backend="transformers")
    quantize: str = _setting("none", "linear layers: none (as dtype) | int8 (dynamic int8 "
                                     "arithmetic, CPU)", backend="transformers")
    kernels: str = _setting("auto", "linear-layer kernels: auto (onednn for float32 on the CPU "
                                    "where torch has it, else aten) | onednn (weights packed "
                                    "once, projections fused; same fp32 arithmetic) | aten "
                                    "(torch's default)", backend="transformers")
    adapter: str = _setting("auto", "planner adapter: auto (the shipped one for the model, e.g. "
                                    "models/planner_smollm2; none for a model without one), none "
                                    "(the frozen model with the few-shot prompt), or a folder",
                            backend="transformers")
    prior_weight: float = _setting(0.0, "divide out this much of each skill's probability under "
                                        "a content-free instruction (0 = plain SayCan scoring, "
                                        "1 = PMI)")
    retrieve: int = _setting(0, "add the K solved dialogues nearest the instruction (MiniLM, "
                                "from a synthetic pool) to the SayCan prompt's examples (0 = none)")
    base_url: str = _setting("", "openai back end: server URL, e.g. http://gpu-box:8000/v1",
                             backend="openai")
    api_key_env: str = _setting("OPENAI_API_KEY", "openai back end: environment variable with "
                                                  "the key", backend="openai", flag=False)
    request_timeout_s: float = _setting(30.0, "openai back end: seconds per request",
                                        backend="openai", option="timeout_s", flag=False)

    def __post_init__(self):
        problems = self.problems()
        if problems:
            raise LLMConfigError(*problems[0])

    # -- checks --------------------------------------------------------------------------------
    def problems(self, check_adapter: bool = False) -> list[tuple[str, str]]:
        """(field, what is wrong) for each bad value; ``check_adapter`` also looks for the
        adapter folder on disk."""
        out = []
        if self.backend not in BACKEND_TYPES:
            out.append(("backend", f"must be one of {', '.join(BACKEND_TYPES)}, got "
                                   f"{self.backend!r}"))
        if self.dtype not in DTYPES:
            out.append(("dtype", f"must be one of {', '.join(DTYPES)}, got {self.dtype!r}"))
        if self.scoring not in SCORING_MODES:
            out.append(("scoring", f"must be one of {', '.join(SCORING_MODES)}, got "
                                   f"{self.scoring!r}"))
        if self.quantize not in QUANTIZATIONS:
            out.append(("quantize", f"must be one of {', '.join(QUANTIZATIONS)}, got "
                                    f"{self.quantize!r}"))
        if self.kernels not in KERNELS:
            out.append(("kernels", f"must be one of {', '.join(KERNELS)}, got "
                                   f"{self.kernels!r}"))
        if not 0.0 <= self.prior_weight <= 1.0:
            out.append(("prior_weight", f"must be in [0, 1], got {self.prior_weight:g}"))
        if not 0 <= self.retrieve <= MAX_RETRIEVED:
            out.append(("retrieve", f"must be in [0, {MAX_RETRIEVED}] examples, got "
                                    f"{self.retrieve}"))
        if self.threads < 0:
            out.append(("threads", f"must be >= 0, got {self.threads}"))
        if not self.request_timeout_s > 0:
            out.append(("request_timeout_s", f"must be > 0, got {self.request_timeout_s:g}"))
        if self.backend == "transformers" and not _known_model(self.model):
            out.append(("model", f"{self.model!r} is not a shipped model (gemma3-270m, "
                                 f"smollm2-135m), a model folder, a .gguf file or a Hugging "
                                 f"Face hub id (org/name)"))
        if self.backend == "openai" and not self.base_url:
            out.append(("base_url", "is required by the openai back end "
                                    "(e.g. http://localhost:8000/v1)"))
        if check_adapter and self.backend == "transformers":
            try:
                self.adapter_path()
            except ValueError:
                out.append(("adapter", f"{self.adapter!r}: not a LoRA adapter folder "
                                       f"(no adapter_config.json)"))
        return out

    def adapter_path(self):
        """The planner adapter folder, or None (``none``; ``auto`` with no shipped adapter)."""
        return resolve_adapter(self.model, self.adapter)

    # -- conversions ---------------------------------------------------------------------------
    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "LLMConfig":
        """From flat parameters (node parameters, an evaluation job's dict): the fields among
        them, each coerced to its type; absent, None or "" ones keep their defaults."""
        values = {}
        for f in dataclasses.fields(cls):
            value = params.get(f.name)
            if value is None or value == "":
                continue
            kind = type(f.default)
            try:
                values[f.name] = kind(value) if kind is not str else str(value)
            except (TypeError, ValueError):
                raise LLMConfigError(f.name, f"must be {kind.__name__}, got {value!r}") from None
        return cls(**values)

    def params(self) -> dict[str, Any]:
        """Flat parameters (the node's defaults, an evaluation job's settings)."""
        return dataclasses.asdict(self)

    def backend_config(self) -> dict[str, Any]:
        """The ``make_backend`` config: the options this back end reads (the adapter resolved
        to its folder)."""
        config: dict[str, Any] = {"type": self.backend}
        for f in dataclasses.fields(self):
            reads = f.metadata["backend"]
            if reads not in ("*", self.backend):
                continue
            value = getattr(self, f.name)
            if f.name == "adapter":
                value = self.adapter_path()
                value = str(value) if value is not None else None
            if value is None or value == "" or (value == 0 and f.default == 0):
                continue          # unset: the back end's own default
            config[f.metadata["option"] or f.name] = value
        return config

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """The ``saycan`` flags: ``--model``, ``--backend``, ``--adapter``, ..."""
        for f in dataclasses.fields(cls):
            if not f.metadata["flag"]:
                continue
            choices = {"backend": BACKEND_TYPES, "scoring": SCORING_MODES,
                       "quantize": QUANTIZATIONS, "kernels": KERNELS}
            extra = {"choices": choices[f.name]} if f.name in choices else {}
            if f.name == "retrieve":
                extra["metavar"] = "K"
            parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default),
                                default=f.default, help=f.metadata["help"], **extra)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "LLMConfig":
        return cls.from_params(vars(args))

    @staticmethod
    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")
