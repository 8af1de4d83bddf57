"""Pictures of a plan: per step, the top skills' language, affordance and combined scores
(like Figure 6 of the SayCan paper)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np


def plot_plan(steps: Sequence[dict], instruction: str, path: str | Path, top_k: int = 6) -> Path:
    """``steps``: dicts with ``skills``, ``llm``, ``affordance``, ``combined``, ``selected``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(len(steps), 1)
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.0 + 1.9 * n), squeeze=False)
    for ax, step in zip(axes[:, 0], steps):
        combined = np.nan_to_num(np.asarray(step["combined"], dtype=float), nan=0.0)
        order = np.argsort(-combined, kind="stable")[:top_k][::-1]
        names = [step["skills"][i] for i in order]
        y = np.arange(len(order))
        llm = np.asarray(step["llm"], dtype=float)[order]
        aff = np.nan_to_num(np.asarray(step["affordance"], dtype=float)[order], nan=0.0)
        ax.barh(y + 0.27, llm, height=0.27, color="#4C72B0", label="LLM")
        ax.barh(y, aff, height=0.27, color="#55A868", label="affordance")
        ax.barh(y - 0.27, combined[order], height=0.27, color="#C44E52", label="combined")
        ax.set_yticks(y, [f"{'▶ ' if s == step['selected'] else ''}{s}" for s in names],
                      fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_title(f"step {step.get('step', '?')}: {step['selected']}", fontsize=9, loc="left")
    axes[0, 0].legend(loc="lower right", fontsize=7)
    fig.suptitle(instruction, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
