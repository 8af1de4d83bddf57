"""Contract checks that every affordance model and skill executor must pass (like gymnasium's
``env_checker``): run them in a test when adding one.

- :func:`check_affordance_model`: ``evaluate(skills, context)`` returns two 1-D float arrays of
  one entry per skill; probabilities finite and in [0, 1]; raw values not NaN; the same
  answer twice (deterministic); a batch equals the skills scored one by one (and in reverse
  order); an empty batch gives empty arrays; the context is not modified; terminate skills
  score the same in every context.
- :func:`check_skill_executor`: ``execute(skill, timeout_s)`` returns an
  :class:`~saycan_ros.planning.planner.ExecutionResult` with the right types; unknown skills are refused
  (success False, a message naming the problem) without raising; a negative or non-finite
  timeout is refused; a skill that outlasts its timeout returns a failure in about that time.

Both raise :class:`ContractError` listing every violation found.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from saycan_ros.planning.planner import ExecutionResult
from saycan_ros.core.skills import Skill

UNKNOWN_SKILLS = ("fly to the moon", "", "pick up the", "GO TO THE TABLE", "done done")


class ContractError(AssertionError):
    """The object breaks the contract; ``problems`` lists each violation."""

    def __init__(self, what: str, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__(f"{what} breaks the contract:\n  - " + "\n  - ".join(self.problems))


# -- affordance models -----------------------------------------------------------------------------
def _as_arrays(out, n: int, label: str, problems: list[str]):
    if not (isinstance(out, tuple) and len(out) == 2):
        problems.append(f"{label}: evaluate must return (probabilities, raw), got "
                        f"{type(out).__name__}")
        return None, None
    probs, raw = out
    if not isinstance(probs, np.ndarray) or not isinstance(raw, np.ndarray):
        problems.append(f"{label}: probabilities and raw values must be numpy arrays, got "
                        f"{type(probs).__name__}, {type(raw).__name__}")
        probs, raw = np.asarray(probs), np.asarray(raw)
    for name, arr in (("probabilities", probs), ("raw values", raw)):
        if arr.shape != (n,):
            problems.append(f"{label}: {name} have shape {arr.shape}, expected ({n},)")
            return None, None
        if arr.dtype.kind not in "fiub":
            problems.append(f"{label}: {name} have dtype {arr.dtype}, expected a number")
            return None, None
    probs = probs.astype(np.float64)
    raw = raw.astype(np.float64)
    if not np.all(np.isfinite(probs)):
        problems.append(f"{label}: non-finite probabilities {probs[~np.isfinite(probs)][:3]}")
    elif probs.size and (probs.min() < 0.0 or probs.max() > 1.0):
        problems.append(f"{label}: probabilities outside [0, 1]: min {probs.min()}, "
                        f"max {probs.max()}")
    if np.any(np.isnan(raw)):
        problems.append(f"{label}: NaN raw values")
    return probs, raw


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))
                                              | np.isclose(a, b, rtol=1e-9, atol=1e-12)))


def check_affordance_model(model, skills: Sequence[Skill], contexts: Iterable,
                           name: str | None = None) -> None:
    """Raise ContractError unless ``model`` honours the affordance contract on every context."""
    label = name or type(model).__name__
    skills = list(skills)
    contexts = list(contexts)
    problems: list[str] = []
    if not skills or not contexts:
        raise ValueError("check_affordance_model needs at least one skill and one context")
    if not callable(getattr(model, "evaluate", None)):
        raise ContractError(label, ["has no evaluate(skills, context) method"])
    terminate_scores: dict[str, float] = {}
    for i, context in enumerate(contexts):
        where = f"{label} (context {i})"
        before = copy.deepcopy(context.state)
        try:
            probs, raw = _as_arrays(model.evaluate(skills, context), len(skills), where, problems)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{where}: evaluate raised {type(exc).__name__}: {exc}")
            continue
        if probs is None:
            continue
        if context.state != before:
            problems.append(f"{where}: evaluate modified the context's state")
        again_p, again_r = _as_arrays(model.evaluate(skills, context), len(skills), where, problems)
        if again_p is not None and not (_same(probs, again_p) and _same(raw, again_r)):
            problems.append(f"{where}: not deterministic (two calls on the same state differ)")
        single_p, single_r = [], []
        for skill in skills:
            p1, r1 = _as_arrays(model.evaluate([skill], context), 1, where, problems)
            if p1 is None:
                break
            single_p.append(p1[0])
            single_r.append(r1[0])
        else:
            if not (_same(probs, np.array(single_p)) and _same(raw, np.array(single_r))):
                bad = [s.text for s, a, b in zip(skills, probs, single_p) if not np.isclose(a, b)]
                problems.append(f"{where}: a batch differs from one-by-one scoring "
                                f"(e.g. {bad[:3]})")
        rev_p, rev_r = _as_arrays(model.evaluate(skills[::-1], context), len(skills), where,
                                  problems)
        if rev_p is not None and not (_same(probs, rev_p[::-1]) and _same(raw, rev_r[::-1])):
            problems.append(f"{where}: scores depend on the order of the batch")
        try:
            empty = model.evaluate([], context)
            if not (isinstance(empty, tuple) and len(empty) == 2
                    and np.asarray(empty[0]).shape == (0,) and np.asarray(empty[1]).shape == (0,)):
                problems.append(f"{where}: an empty batch must give two empty arrays")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{where}: an empty batch raised {type(exc).__name__}: {exc}")
        for skill, p in zip(skills, probs):
            if skill.kind == "terminate":
                if skill.text in terminate_scores and not math.isclose(
                        terminate_scores[skill.text], float(p), abs_tol=1e-12):
                    problems.append(f"{label}: terminate skill {skill.text!r} scores "
                                    f"{terminate_scores[skill.text]} and {p} in different states")
                terminate_scores.setdefault(skill.text, float(p))
    if problems:
        raise ContractError(label, _unique(problems))


# -- skill executors -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeoutProbe:
    """A skill that takes longer than ``timeout_s`` from the executor's current state."""
    skill: str
    timeout_s: float
    slack_s: float = 5.0          # allowed beyond the timeout (stopping, transport)


def _check_result(result, label: str, problems: list[str]) -> bool:
    if not isinstance(result, ExecutionResult):
        problems.append(f"{label}: execute must return an ExecutionResult, got "
                        f"{type(result).__name__}")
        return False
    ok = True
    if not isinstance(result.success, bool):
        problems.append(f"{label}: success must be a bool, got {type(result.success).__name__}")
        ok = False
    if not isinstance(result.message, str):
        problems.append(f"{label}: message must be a str, got {type(result.message).__name__}")
        ok = False
    if not (isinstance(result.duration_s, (int, float)) and math.isfinite(result.duration_s)
            and result.duration_s >= 0):
        problems.append(f"{label}: duration_s must be a finite number >= 0, got "
                        f"{result.duration_s!r}")
        ok = False
    if not (isinstance(result.state_revision, int) and not isinstance(result.state_revision, bool)
            and result.state_revision >= 0):
        problems.append(f"{label}: state_revision must be an int >= 0, got "
                        f"{result.state_revision!r}")
        ok = False
    return ok


def check_skill_executor(executor, skills: Sequence[str] = (),
                         unknown: Sequence[str] = UNKNOWN_SKILLS,
                         timeout_probe: TimeoutProbe | None = None, name: str | None = None,
                         max_refusal_s: float = 10.0) -> list[ExecutionResult]:
    """Raise ContractError unless ``executor`` honours the executor contract.

    ``skills`` are executed once each (they must exist; whether they succeed depends on the
    state, only the result's form is checked); ``unknown`` must all be refused; with
    ``timeout_probe`` the executor must give up in about its timeout. Returns the results of
    ``skills`` in order.
    """
    label = name or type(executor).__name__
    problems: list[str] = []
    if not callable(getattr(executor, "execute", None)):
        raise ContractError(label, ["has no execute(skill, timeout_s) method"])
    for text in unknown:
        where = f"{label}.execute({text!r})"
        started = time.monotonic()
        try:
            result = executor.execute(text, 0.0)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{where} raised {type(exc).__name__}: {exc} (must return a failure)")
            continue
        if _check_result(result, where, problems):
            if result.success:
                problems.append(f"{where}: an unknown skill must be refused, it succeeded")
            elif not result.message.strip():
                problems.append(f"{where}: a refusal must say why (empty message)")
        if time.monotonic() - started > max_refusal_s:
            problems.append(f"{where}: took {time.monotonic() - started:.1f} s to refuse")
    if skills:
        for bad_timeout in (-1.0, math.nan):
            where = f"{label}.execute({skills[0]!r}, timeout_s={bad_timeout})"
            try:
                result = executor.execute(skills[0], bad_timeout)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{where} raised {type(exc).__name__}: {exc}")
                continue
            if _check_result(result, where, problems) and result.success:
                problems.append(f"{where}: an invalid timeout must be refused")
    results = []
    for text in skills:
        where = f"{label}.execute({text!r})"
        try:
            result = executor.execute(text, 0.0)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{where} raised {type(exc).__name__}: {exc}")
            continue
        _check_result(result, where, problems)
        results.append(result)
    if timeout_probe is not None:
        where = f"{label}.execute({timeout_probe.skill!r}, timeout_s={timeout_probe.timeout_s:g})"
        started = time.monotonic()
        try:
            result = executor.execute(timeout_probe.skill, timeout_probe.timeout_s)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{where} raised {type(exc).__name__}: {exc}")
        else:
            took = time.monotonic() - started
            if _check_result(result, where, problems):
                if result.success:
                    problems.append(f"{where}: the probe must outlast its timeout, it succeeded "
                                    f"in {took:.1f} s")
                elif took > timeout_probe.timeout_s + timeout_probe.slack_s:
                    problems.append(f"{where}: returned after {took:.1f} s, more than the "
                                    f"timeout plus {timeout_probe.slack_s:g} s")
                elif took < 0.5 * timeout_probe.timeout_s:
                    problems.append(f"{where}: gave up after {took:.1f} s, well before the "
                                    f"timeout ({result.message})")
    if problems:
        raise ContractError(label, _unique(problems))
    return results


def _unique(items: list[str]) -> list[str]:
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out
