"""Plan success per family of `saycan eval --jsonl` files, as the rows of kitchens.md's table.
Usage: python docs/results/kitchens/families.py LABEL FILE.jsonl[.gz] ..."""
import gzip
import json
import sys
from collections import defaultdict

FAMILIES = ["nl_single", "nl_nouns", "nl_verbs", "structured", "embodiment", "crowd",
            "long_horizon", "negation", "counting", "multilingual"]


def rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


label = sys.argv[1]
for path in sys.argv[2:]:
    tasks = rows(path)
    per = defaultdict(lambda: [0, 0])
    for t in tasks:
        per[t["family"]][0] += bool(t["plan_success"])
        per[t["family"]][1] += 1
    won = sum(bool(t["plan_success"]) for t in tasks)
    cells = [f"{per[f][0]}/{per[f][1]}" if f in per else "" for f in FAMILIES]
    name = path.rsplit("/", 1)[-1].split(".")[0]
    print(f"| {name} | {label} | **{won}/{len(tasks)} ({100 * won / len(tasks):.0f}%)** | "
          + " | ".join(cells) + " |")
