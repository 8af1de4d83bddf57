"""Knowing when it does not know: calibrated prediction sets over a step's skills, and asking.

KnowNo (Ren et al., CoRL 2023, "Robots That Ask For Help") turns a planner's option scores into
a *prediction set*, the skills whose probability clears a threshold calibrated by conformal
prediction, so that the set holds a right next step with probability >= 1 - epsilon. When the
set holds more than one skill, the robot asks the person which one they mean.

Here a step's probability of each skill is SayCan's product, normalised over the skills:
``p(s) = p_LLM(s) * affordance(s) / sum``. Calibration steps come from generated plans with
their known right next skills (:mod:`saycan_ros.evaluation.calibrate`); a step scores
``1 - p(right next skill)``. For ``n`` calibration steps the threshold is

    q = the ceil((n + 1)(1 - epsilon))-th smallest score,   set = {s : p(s) >= 1 - q}

so each step's set holds the right next skill with probability >= 1 - epsilon. (KnowNo's
plan-level score, 1 - the least likely right step of a plan, asks for every step's set to be
right at once; on this model about one generated plan in six has a step where it is
confidently wrong, so below epsilon 0.2 that threshold takes every skill into the set.)

A set with one skill: act. More than one: ask which (:class:`Question`). None (no skill is that
likely, the model is less sure than on any covered calibration plan): ask among the likeliest.
Where the planner knows the world's state, skills that would change nothing (a ``find`` of what
is already here) leave the distribution first (:func:`without_no_ops`), in calibration and in
use alike; the robot then acts on the set's one skill, or asks among several.
Baselines, side by side in ``saycan eval``: never ask, and ask when the top probability is below
a fixed threshold.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

from saycan_ros.core.skills import NAVIGATIONS

#: Options offered when no skill clears the threshold (the likeliest ones).
FALLBACK_OPTIONS = 3
#: What the person may answer instead of an option.
NONE_OF_THEM = "something else"
#: Format of the calibration file.
CALIBRATION_FORMAT = 1


def step_probabilities(combined: np.ndarray) -> np.ndarray:
    """SayCan's products (language probability x affordance; 0 where pruned) normalised to a
    distribution over the skills; uniform where every product is 0."""
    p = np.nan_to_num(np.asarray(combined, dtype=np.float64), nan=0.0)
    p = np.clip(p, 0.0, None)
    total = p.sum()
    return p / total if total > 0 else np.full(len(p), 1.0 / max(len(p), 1))


def conformal_threshold(scores: Sequence[float], epsilon: float) -> float:
    """The split-conformal quantile ``q`` of nonconformity ``scores`` (each in [0, 1]) for
    miscoverage ``epsilon``: the ceil((n+1)(1-epsilon))-th smallest score, 1.0 (every skill in
    the set) when that rank exceeds n."""
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon!r}")
    s = np.sort(np.asarray(scores, dtype=np.float64))
    if s.size == 0:
        raise ValueError("no calibration scores")
    if np.any((s < 0.0) | (s > 1.0)) or not np.all(np.isfinite(s)):
        raise ValueError("calibration scores must lie in [0, 1]")
    rank = math.ceil((s.size + 1) * (1.0 - epsilon))
    return 1.0 if rank > s.size else float(s[rank - 1])


def prediction_set(p: np.ndarray, q: float) -> list[int]:
    """Indices of the skills with probability >= 1 - q, likeliest first."""
    p = np.asarray(p, dtype=np.float64)
    keep = np.flatnonzero(p >= 1.0 - q - 1e-12)
    return sorted(keep.tolist(), key=lambda i: -p[i])


def step_score(right_probability: float) -> float:
    """A calibration step's nonconformity: 1 - the probability of the right next skill."""
    if not 0.0 <= right_probability <= 1.0 + 1e-9:
        raise ValueError(f"a probability is in [0, 1], got {right_probability!r}")
    return float(min(1.0, max(0.0, 1.0 - right_probability)))


def coverage(scores: Sequence[float], q: float) -> float:
    """Fraction of steps whose set holds a right next skill (score <= q)."""
    s = np.asarray(scores, dtype=np.float64)
    return float(np.mean(s <= q + 1e-12)) if s.size else float("nan")


# -- policies -----------------------------------------------------------------------------------
class AskPolicy(Protocol):
    name: str

    def options(self, p: np.ndarray) -> list[int]:
        """Indices of the skills to offer, likeliest first; fewer than two: do not ask (one:
        the skill to run)."""


def _likeliest(p: np.ndarray, k: int = FALLBACK_OPTIONS) -> list[int]:
    order = np.argsort(-p, kind="stable")
    return [int(i) for i in order[:k] if p[i] > 0.0]


@dataclass(frozen=True)
class NeverAsk:
    """Today's behaviour: always act on the top skill."""
    name: str = "never"

    def options(self, p: np.ndarray) -> list[int]:
        return []


@dataclass(frozen=True)
class ThresholdAsk:
    """Ask when the top skill's probability is below ``threshold``, among the likeliest."""
    threshold: float
    name: str = "threshold"

    def __post_init__(self):
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold!r}")

    def options(self, p: np.ndarray) -> list[int]:
        return _likeliest(p) if float(np.max(p)) < self.threshold else []


@dataclass(frozen=True)
class ConformalAsk:
    """Ask when the conformal prediction set at threshold ``q`` is not a single skill."""
    q: float
    epsilon: float = float("nan")
    name: str = "conformal"

    def options(self, p: np.ndarray) -> list[int]:
        """The prediction set (one skill: act on it), or the likeliest when it is empty."""
        return prediction_set(p, self.q) or _likeliest(p)


# -- what the options would do ---------------------------------------------------------------
def changes_nothing(state, skill) -> bool:
    """Whether running ``skill`` from ``state`` (a world or its snapshot) leaves it as it is:
    a ``find`` of what stands where the robot is, a ``go to`` where it already is."""
    from saycan_ros.core.world import effect_holds
    return skill.kind in NAVIGATIONS and effect_holds(state, skill)


def without_no_ops(p: np.ndarray, skills: Sequence, state) -> np.ndarray:
    """``p`` with the skills that change nothing (:func:`changes_nothing`) at 0 and the rest
    renormalised: such a skill cannot be what the person meant (a habit of the model, which
    likes to ``find`` what it already stands at). Unchanged when no other skill has mass."""
    p = np.asarray(p, dtype=np.float64).copy()
    idle = np.array([changes_nothing(state, s) for s in skills], dtype=bool)
    rest = p[~idle].sum()
    if not idle.any() or rest <= 0.0:
        return p
    p[idle] = 0.0
    return p / rest


def distinct_outcomes(offered: Sequence[int], skills: Sequence, state) -> list[int]:
    """``offered`` (likeliest first) without the options that would end where a likelier one
    ends: "go to the close counter" and "find a sponge" with the sponge there are one outcome,
    no reading to ask about. Finds of different things stay apart (which thing is the
    question)."""
    from saycan_ros.core.world import target_location
    kept: list[int] = []
    ends: dict[str, set] = {}            # where a kept navigation ends -> the things it names
    for i in offered:
        skill = skills[i]
        end = target_location(state, skill) if skill.kind in NAVIGATIONS else None
        if end is not None:
            names = {skill.object} if skill.kind == "navigate_to_object" else set()
            if end in ends and len(ends[end] | names) <= 1:
                ends[end] |= names
                continue
            ends.setdefault(end, set()).update(names)
        kept.append(i)
    return kept


# -- the calibration artefact -------------------------------------------------------------------
@dataclass
class Calibration:
    """Nonconformity scores of calibration steps and of held-aside ones (from other plans),
    with how they were made; any epsilon's threshold follows from them (:meth:`threshold`)."""
    scores: list[float]
    heldout: list[float]
    model: str
    data: dict = field(default_factory=dict)     # generator, seed, kitchen, data version ...

    def threshold(self, epsilon: float) -> float:
        return conformal_threshold(self.scores, epsilon)

    def policy(self, epsilon: float) -> ConformalAsk:
        return ConformalAsk(self.threshold(epsilon), epsilon)

    def heldout_coverage(self, epsilon: float) -> float:
        return coverage(self.heldout, self.threshold(epsilon))

    def to_dict(self) -> dict:
        return {"format": CALIBRATION_FORMAT, "model": self.model, "data": self.data,
                "coverage": {f"{e:g}": {"q": round(self.threshold(e), 6),
                                        "heldout_coverage": round(self.heldout_coverage(e), 4)}
                             for e in (0.05, 0.1, 0.15, 0.2, 0.25)},
                "scores": [round(s, 6) for s in self.scores],
                "heldout": [round(s, 6) for s in self.heldout]}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "Calibration":
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a calibration file ({exc})") from None
        if not isinstance(d, dict):
            raise ValueError(f"{path}: a calibration file holds a JSON object, not "
                             f"{type(d).__name__} (rebuild it: saycan calibrate)")
        if d.get("format") != CALIBRATION_FORMAT:
            raise ValueError(f"{path}: calibration format {str(d.get('format'))[:40]!r}, "
                             f"expected {CALIBRATION_FORMAT} (rebuild it: saycan calibrate)")
        if not isinstance(d.get("data") or {}, dict):
            raise ValueError(f"{path}: data must be an object (how the calibration was made)")
        try:
            scores = [float(s) for s in d["scores"]]
            heldout = [float(s) for s in d["heldout"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: scores and heldout must be lists of numbers") from None
        if not scores or any(not 0.0 <= s <= 1.0 for s in scores + heldout):
            raise ValueError(f"{path}: scores must be a non-empty list of numbers in [0, 1]")
        return cls(scores, heldout, str(d.get("model", "")), dict(d.get("data") or {}))


# -- questions ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Question:
    """A multiple-choice question: ``options`` (skill texts, likeliest first) and "something
    else". :attr:`text` is what a person reads."""
    step: int
    options: tuple[str, ...]
    probabilities: tuple[float, ...]
    policy: str = ""

    @property
    def text(self) -> str:
        choices = [f"{i}) {o}" for i, o in enumerate(self.options, start=1)]
        choices.append(f"{len(self.options) + 1}) {NONE_OF_THEM}")
        return "Which do you mean? " + " ".join(choices)

    def to_dict(self) -> dict:
        return {"step": self.step, "options": list(self.options),
                "probabilities": [round(p, 4) for p in self.probabilities], "text": self.text,
                "policy": self.policy}


@dataclass(frozen=True)
class Answer:
    """The person's answer: ``choice`` an index into the question's options, or None for
    "something else"."""
    choice: int | None

    def to_dict(self) -> dict:
        return {"choice": self.choice}


class NoAnswer(Exception):
    """Nobody answered the question (in time); the plan ends without guessing."""


#: What the planner calls with a question: returns the answer or raises :class:`NoAnswer`.
Asker = Callable[[Question], Answer]


# -- from settings ------------------------------------------------------------------------------
#: The shipped calibration of each default planning model (models/, built by saycan calibrate).
CALIBRATION_FILES = {"smollm2-135m": "ask_calibration_smollm2.json",
                     "qwen2.5-coder-0.5b": "ask_calibration_qwen05.json"}


def default_calibration(model: str) -> Path | None:
    """The shipped calibration file for ``model``, or None when there is none."""
    from saycan_ros.core.paths import models_dir
    name = CALIBRATION_FILES.get(model)
    path = models_dir() / name if name else None
    return path if path is not None and path.is_file() else None


def calibration_params(model: str) -> dict:
    """The planner's ``ask_calibration_file`` for a scorer running ``model`` (the planner
    node cannot see the scorer's model; '' there means the default model's file): {} when
    ``model`` ships none."""
    path = default_calibration(model) if model else None
    return {"ask_calibration_file": str(path)} if path else {}


def make_ask_policy(spec: dict | None, scorer_name: str = "") -> AskPolicy | None:
    """The policy a setting names: None or ``{}`` (never ask), ``{"threshold": tau}``, or
    ``{"epsilon": eps, "calibration": file}``. A calibration made for another model than
    ``scorer_name`` (when both are known) is an error: its threshold would mean nothing."""
    if not spec:
        return None
    if "threshold" in spec:
        return ThresholdAsk(float(spec["threshold"]))
    epsilon = float(spec["epsilon"])
    path = spec.get("calibration") or ""
    if not path:
        raise ValueError("asking with a conformal set needs a calibration file "
                         "(saycan calibrate makes one)")
    calibration = Calibration.load(path)
    if scorer_name and calibration.model and calibration.model != scorer_name:
        raise ValueError(f"{path} calibrates {calibration.model!r}, but the planner scores with "
                         f"{scorer_name!r}: run saycan calibrate for it")
    return calibration.policy(epsilon)
