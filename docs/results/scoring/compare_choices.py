"""Compare the skill chosen at every step of two `saycan eval --jsonl` runs of the same tasks.

    python docs/results/scoring/compare_choices.py dev110_fast.jsonl.gz dev110_plain.jsonl.gz
"""
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return {row["id"]: row for row in map(json.loads, handle)}


def main(a_path: str, b_path: str) -> int:
    a, b = load(a_path), load(b_path)
    common = [task for task in a if task in b]
    steps = same = 0
    differing = []
    for task in common:
        pa = [s["selected"] for s in a[task]["steps"]]
        pb = [s["selected"] for s in b[task]["steps"]]
        steps += max(len(pa), len(pb))
        same += sum(x == y for x, y in zip(pa, pb))
        if pa != pb:
            differing.append((task, a[task]["text"], pa, pb))
    success = [sum(bool(run[t]["plan_success"]) for t in common) for run in (a, b)]
    seconds = [sum(run[t]["seconds"] for t in common) for run in (a, b)]
    print(f"{len(common)} tasks, {steps} steps: the same skill at {same}; "
          f"{len(differing)} tasks differ")
    print(f"plan success {success[0]} vs {success[1]}; planning seconds {seconds[0]:.0f} vs "
          f"{seconds[1]:.0f} ({seconds[1] / seconds[0]:.2f}x)")
    for task, text, pa, pb in differing:
        print(f"  {task} {text!r}\n    {pa}\n    {pb}")
    return 0 if not differing else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
