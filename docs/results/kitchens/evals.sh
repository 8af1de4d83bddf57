#!/bin/bash
# Evaluations of a candidate planner adapter for issue 39 (any kitchen): the three development
# kitchens, then the built-in development set, then (SETS=all) the test sets, once, at the end.
# Usage: evals.sh ADAPTER RESULTS [SETS]   SETS: dev (default) | all
#   From-scratch run: evals.sh build/train_39/adapter build/train_39/results all
#   Another base model: MODEL=qwen2.5-coder-0.5b evals.sh ADAPTER RESULTS
set -u
A=$1
R=$2
SETS=${3:-dev}
mkdir -p "$R"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=75
E=".venv/bin/saycan eval --model ${MODEL:-smollm2-135m} --adapter $A --jobs 2 --threads 1"
run() { name=$1; shift; echo "== $name"; rm -f "$R/$name.jsonl"; "$@" --jsonl "$R/$name.jsonl" > "$R/$name.txt" 2>&1; tr '\r' '\n' < "$R/$name.txt" | grep -E "^plan success|rror" ; }
for k in workshop nursery cafe; do
  run "$k" $E --tasks "config/dev_kitchens/${k}_tasks.yaml"
done
run tasks_dev $E --tasks tasks_dev.yaml
if [ "$SETS" = all ]; then
  run tasks $E --tasks tasks.yaml
  run tasks_extra $E --tasks tasks_extra.yaml
fi
