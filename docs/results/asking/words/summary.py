"""Per family: plan success, tasks asked, questions, from the saycan eval --json files here.

    python docs/results/asking/words/summary.py docs/results/asking/words/*.json.gz
"""
import gzip
import json
import sys

for path in sys.argv[1:]:
    report = json.load(gzip.open(path))[0]
    families = {}
    for task in report["tasks_detail"]:
        row = families.setdefault(task["family"], [0, 0, 0, 0])
        questions = sum(1 for step in task["steps"] if step.get("question"))
        row[0] += 1
        row[1] += bool(task["plan_success"])
        row[2] += questions > 0
        row[3] += questions
    print(path, f"success {report['plan_success']}/{report['tasks']}, asked {report['asked']}")
    for family, (n, ok, asked, questions) in families.items():
        print(f"    {family}: success {ok}/{n}, asked {asked}, questions {questions}")
